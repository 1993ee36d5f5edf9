//! The settings that shape the code a policy component compiles to, in
//! one place for the two engines that must agree on them: the host's
//! ([`super::engine`]) and the build script's, which precompiles the
//! embedded default component. wasmtime refuses a precompiled component
//! whose settings differ from the engine loading it (and the host then
//! compiles the embedded bytes instead), so a setting added here reaches
//! both. This file is included by `build.rs`: it names nothing but
//! wasmtime's `Config`.

/// Apply the code-shaping settings to `config`.
pub fn apply(config: &mut wasmtime::Config) {
    // Call deadlines: every loop of a component checks the epoch.
    config.epoch_interruption(true);
}
