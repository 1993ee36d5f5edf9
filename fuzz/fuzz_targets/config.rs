//! Any `cordon.toml`: it loads or is refused with an error naming the
//! file; a loaded one keeps a written ceiling over its default mode and its
//! default network within its widest.
#![no_main]

use std::path::Path;

use libfuzzer_sys::fuzz_target;

fuzz_target!(|text: &str| {
    match cordon::config::Config::parse(text, Path::new("/fuzz/cordon.toml")) {
        Ok(config) => {
            let deployment = config.deployment(Path::new("/srv/ws"));
            if config.max_mode.is_some() {
                assert!(deployment.policy.mode <= deployment.max_mode);
            }
            if let Some(max) = &config.max_network {
                assert!(config.default_network.within(max));
            }
        }
        Err(err) => assert!(err.to_string().contains("/fuzz/cordon.toml")),
    }
});
