//! `cordon policy check FILE`: validate a component exactly as a host
//! loading it would.

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Args, Subcommand};
use cordon::policy::{Limits, Policy, PolicyEngine, SUPPORTED_WORLDS};

use super::deploy::CacheArgs;
use super::exit;

/// `cordon policy …`
#[derive(Debug, Args)]
pub struct PolicyArgs {
    #[command(subcommand)]
    command: PolicyCommand,
}

#[derive(Debug, Subcommand)]
enum PolicyCommand {
    /// Check a component against the world this host supports (imports,
    /// exports, types) and show what it says about itself.
    Check {
        /// The component (.wasm).
        file: PathBuf,
        /// Print the result as JSON.
        #[arg(long)]
        json: bool,
        #[command(flatten)]
        cache: CacheArgs,
    },
}

/// Run the subcommand: exit 0 when the component loads, 70 when not.
pub fn main(args: PolicyArgs) -> ExitCode {
    let PolicyCommand::Check { file, json, cache } = args.command;
    let loaded = std::fs::read(&file)
        .map_err(|err| format!("cannot read {}: {err}", file.display()))
        .and_then(|bytes| {
            let mut engine = PolicyEngine::new().map_err(|e| e.to_string())?;
            if let Some(cache) = cache.open() {
                engine = engine.with_cache(cache);
            }
            Policy::load(&engine, &bytes, Limits::default()).map_err(|e| e.to_string())
        });
    match (loaded, json) {
        (Ok(policy), false) => {
            let info = policy.info();
            println!(
                "ok: {} {} (shell {}, default mode {}) implements {} ({})",
                info.name,
                info.version,
                info.shell,
                info.default_mode,
                SUPPORTED_WORLDS[0],
                if policy.compiled() {
                    "compiled"
                } else {
                    "from the compiled-component cache"
                }
            );
            ExitCode::SUCCESS
        }
        (Ok(policy), true) => {
            let body = serde_json::json!({
                "ok": true,
                "world": SUPPORTED_WORLDS[0],
                "info": policy.info(),
                "compiled": policy.compiled(),
            });
            println!("{body}");
            ExitCode::SUCCESS
        }
        (Err(message), false) => {
            eprintln!("cordon: POLICY_FAILED: {}: {message}", file.display());
            ExitCode::from(exit::POLICY_FAILED)
        }
        (Err(message), true) => {
            println!("{}", serde_json::json!({"ok": false, "error": message}));
            ExitCode::from(exit::POLICY_FAILED)
        }
    }
}
