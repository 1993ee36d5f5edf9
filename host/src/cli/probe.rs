//! `cordon probe`: which backend confines runs here, and why; what
//! contains and bounds them.

use std::process::ExitCode;

use clap::Args;

use super::deploy::DeployArgs;

/// Flags of `cordon probe`.
#[derive(Debug, Args)]
pub struct ProbeArgs {
    #[command(flatten)]
    deploy: DeployArgs,

    /// Print the verdict as JSON.
    #[arg(long)]
    json: bool,
}

/// Probe the ladder and render the verdict. Exits 0 when a backend is
/// usable, 69 (SANDBOX_UNAVAILABLE) when none is.
pub fn main(args: ProbeArgs) -> anyhow::Result<ExitCode> {
    let (builder, _) = args.deploy.host_builder()?;
    let host = builder.build()?;
    let probe = host
        .probe()
        .expect("the platform ladder always has a verdict");
    let containment = host.containment();
    if args.json {
        let mut verdict = serde_json::to_value(&probe)?;
        verdict["containment"] = serde_json::to_value(&containment)?;
        println!("{}", serde_json::to_string_pretty(&verdict)?);
    } else {
        match (probe.backend, probe.enforcement) {
            (Some(backend), Some(enforcement)) => {
                println!(
                    "backend: {} ({} enforcement)",
                    name(backend),
                    name(enforcement)
                )
            }
            _ => println!("backend: none — confined modes fail closed (SANDBOX_UNAVAILABLE)"),
        }
        if let Some(abi) = probe.landlock_abi {
            let scopes = probe.landlock_scopes.as_deref().unwrap_or_default();
            println!(
                "landlock ABI: {abi} (scopes: {})",
                if scopes.is_empty() {
                    "none".to_owned()
                } else {
                    scopes.join(", ")
                }
            );
        }
        for rung in &probe.rungs {
            let verdict = if rung.usable { "usable" } else { "unusable" };
            println!("  {:<15} {verdict:<9} {}", name(rung.backend), rung.reason);
        }
        println!(
            "containment: {} — {}",
            containment.mechanism, containment.detail
        );
        let limits = &containment.limits.limits;
        let or_unlimited = |value: Option<u64>| value.map_or("unlimited".into(), |v| v.to_string());
        println!(
            "limits: pids {}, memory bytes {}, cpu weight {} (enforced by {})",
            or_unlimited(limits.pids),
            or_unlimited(limits.memory_bytes),
            limits
                .cpu_weight
                .map_or("the kernel's default".into(), |v| v.to_string()),
            name(containment.limits.enforced_by)
        );
    }
    Ok(if probe.backend.is_some() {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(super::exit::SANDBOX_UNAVAILABLE)
    })
}

fn name(value: impl serde::Serialize) -> String {
    serde_json::to_value(value)
        .ok()
        .and_then(|v| v.as_str().map(str::to_owned))
        .unwrap_or_default()
}
