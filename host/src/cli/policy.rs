//! `cordon policy check FILE`: validate a component exactly as a host
//! loading it would. `cordon policy test FILE CASES`: run table-driven
//! cases against it with the test kit (nothing is spawned).

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use clap::{Args, Subcommand};
use cordon::policy::{Limits, Policy, PolicyEngine};
use cordon::testkit::{self, Kit};

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
    /// Run a case file (request in; expected spec, launch, facts or error
    /// out) against a component with a fake sandbox; prints a diff for each
    /// failing case and exits 1 when any fails.
    Test {
        /// The component (.wasm).
        file: PathBuf,
        /// The case file (.toml); see components/cases/ for the shipped contract.
        cases: PathBuf,
        /// Print one JSON report per case instead.
        #[arg(long)]
        json: bool,
        #[command(flatten)]
        cache: CacheArgs,
    },
}

/// Run the subcommand.
pub fn main(args: PolicyArgs) -> ExitCode {
    match args.command {
        PolicyCommand::Check { file, json, cache } => check(file, json, cache),
        PolicyCommand::Test {
            file,
            cases,
            json,
            cache,
        } => test(file, cases, json, cache),
    }
}

/// A policy engine with the compiled-component cache the flags ask for.
fn engine(cache: &CacheArgs) -> Result<PolicyEngine, String> {
    let mut engine = PolicyEngine::new().map_err(|e| e.to_string())?;
    if let Some(cache) = cache.open() {
        engine = engine.with_cache(cache);
    }
    Ok(engine)
}

fn read(file: &Path) -> Result<Vec<u8>, String> {
    std::fs::read(file).map_err(|err| format!("cannot read {}: {err}", file.display()))
}

/// Exit 0 when the cases all pass, 1 when one fails, 70 when the component
/// does not load, 78 when the case file is unusable.
fn test(file: PathBuf, cases: PathBuf, json: bool, cache: CacheArgs) -> ExitCode {
    let cases = match testkit::cases::load(&cases) {
        Ok(cases) => cases,
        Err(err) => {
            eprintln!("cordon: {err}");
            return ExitCode::from(exit::CONFIG);
        }
    };
    let kit = match read(&file)
        .and_then(|bytes| Kit::load_with(engine(&cache)?, &bytes).map_err(|e| e.to_string()))
    {
        Ok(kit) => kit,
        Err(message) => {
            eprintln!("cordon: POLICY_FAILED: {}: {message}", file.display());
            return ExitCode::from(exit::POLICY_FAILED);
        }
    };
    let reports: Vec<_> = cases
        .iter()
        .map(|case| testkit::cases::run(&kit, case))
        .collect();
    for report in &reports {
        if json {
            println!("{}", testkit::cases::report_json(report));
        } else if report.passed() {
            println!("ok   {}", report.name);
        } else {
            println!("FAIL {}  ({})", report.name, report.file.display());
            for failure in &report.failures {
                println!("       {failure}");
            }
        }
    }
    if !json {
        println!("{}: {}", kit.info().name, testkit::cases::summary(&reports));
    }
    if reports.iter().all(|r| r.passed()) {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    }
}

/// Exit 0 when the component loads, 70 when not.
fn check(file: PathBuf, json: bool, cache: CacheArgs) -> ExitCode {
    let loaded = read(&file).and_then(|bytes| {
        Policy::load(&engine(&cache)?, &bytes, Limits::default()).map_err(|e| e.to_string())
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
                policy.world(),
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
                "world": policy.world(),
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
