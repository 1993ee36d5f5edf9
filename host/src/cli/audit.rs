//! `cordon audit verify`: the audit log's chain checked
//! ([`cordon::audit::verify`]), the first broken record named.

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Args, Subcommand};

/// Flags of `cordon audit`.
#[derive(Debug, Args)]
pub struct AuditArgs {
    #[command(subcommand)]
    command: AuditCommand,
}

#[derive(Debug, Subcommand)]
enum AuditCommand {
    /// Check an audit log's hash chain: every record whole, numbered in
    /// order, each naming the hash of the one before; exit 0 when it holds,
    /// 1 naming the first broken record.
    Verify(VerifyArgs),
}

#[derive(Debug, Args)]
struct VerifyArgs {
    /// The live log (its rotated files in FILE.d/ are read first, in
    /// order) — or several files, oldest first.
    #[arg(required = true, value_name = "FILE")]
    files: Vec<PathBuf>,

    /// Require every rotated file to end in a seal whose signature
    /// verifies under this public key (PEM, P-256).
    #[arg(long, value_name = "PEM")]
    public_key: Option<PathBuf>,

    /// Print the outcome as JSON.
    #[arg(long)]
    json: bool,
}

/// Run `cordon audit …`.
pub fn main(args: AuditArgs) -> anyhow::Result<ExitCode> {
    let AuditCommand::Verify(args) = args.command;
    let key = args
        .public_key
        .as_deref()
        .map(cordon::registry::PublicKey::read)
        .transpose()?;
    let files = match args.files.as_slice() {
        [live] => cordon::audit::log_files(live),
        several => several.to_vec(),
    };
    let verified = cordon::audit::verify(&files, key.as_ref());
    match (&verified, args.json) {
        (Ok(ok), true) => println!(
            "{}",
            serde_json::json!({"intact": true, "records": ok.records, "files": ok.files,
                "origin": ok.origin, "head": ok.head, "seals": ok.seals,
                "unchained": ok.unchained})
        ),
        (Err(broken), true) => println!(
            "{}",
            serde_json::json!({"intact": false, "file": broken.file, "line": broken.line,
                "record": broken.seq, "reason": broken.reason})
        ),
        (Ok(ok), false) => println!(
            "intact: {} records in {} file(s), from genesis after {} to head {}{}{}",
            ok.records,
            ok.files,
            ok.origin,
            ok.head,
            match key {
                Some(_) => format!("; {} seal(s) verified", ok.seals),
                None => String::new(),
            },
            match ok.unchained {
                0 => String::new(),
                n => format!("; {n} older record(s) before the chain are not covered by it"),
            }
        ),
        (Err(broken), false) => println!("BROKEN: {broken}"),
    }
    Ok(match verified {
        Ok(_) => ExitCode::SUCCESS,
        Err(_) => ExitCode::from(1),
    })
}
