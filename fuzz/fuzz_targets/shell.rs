//! The shell reader rules match on (`cordon-policy`'s `shell`): any line
//! reads or is refused, never a panic (in a component a panic is a trap:
//! the run fails closed, but a panic is still a bug).
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|line: &str| {
    if let Ok(commands) = cordon_policy::shell::commands(line) {
        for command in commands {
            let _ = format!("{command:?}");
        }
    }
});
