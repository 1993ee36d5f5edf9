//! `cordon doctor`: the library's diagnosis ([`cordon::doctor`]) rendered,
//! one line per check, with the fix under each that is not fine.

use std::process::ExitCode;

use clap::Args;
use cordon::PolicySource;
use cordon::doctor::Status;

use super::deploy::DeployArgs;

/// Flags of `cordon doctor`.
#[derive(Debug, Args)]
pub struct DoctorArgs {
    /// The policy component to examine instead of the embedded bash-sandbox.
    #[arg(long, value_name = "FILE|builtin:NAME|oci://REF", value_parser = super::deploy::parse_policy)]
    policy: Option<PolicySource>,

    /// Print the report as JSON.
    #[arg(long)]
    json: bool,

    #[command(flatten)]
    deploy: DeployArgs,
}

/// Exit 0 when nothing failed, 1 when a check failed (78 for an unusable
/// config file).
pub fn main(args: DoctorArgs) -> anyhow::Result<ExitCode> {
    let config = args.deploy.config()?;
    let cwd = std::env::current_dir()?;
    let diagnosis = cordon::doctor::diagnose(
        &config,
        &cwd,
        args.policy
            .or(config.policy.clone())
            .unwrap_or(PolicySource::Embedded),
        args.deploy.cache().path().as_deref(),
    );
    if args.json {
        println!("{}", serde_json::to_string_pretty(&diagnosis)?);
    } else {
        for check in &diagnosis.checks {
            let mark = match check.status {
                Status::Ok => "ok  ",
                Status::Warn => "WARN",
                Status::Fail => "FAIL",
            };
            println!("{mark} {:<16} {}", check.name, check.detail);
            if let Some(fix) = &check.fix {
                println!("     {:<16} fix: {fix}", "");
            }
        }
    }
    Ok(if diagnosis.failed() {
        ExitCode::FAILURE
    } else {
        ExitCode::SUCCESS
    })
}
