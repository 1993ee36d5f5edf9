//! The Landlock backend: cordon's own launcher mode, built into the `cordon`
//! binary (one binary to ship), and the host side that wraps argvs with it.
//!
//! ```text
//! cordon __landlock [--status-fd N] (--ro PATH | --rw PATH)... -- ARGV...
//! cordon __landlock --probe
//! ```
//!
//! The launcher creates a ruleset that handles every file right up to
//! Landlock ABI 5 (truncate arrived in ABI 3, ioctl on devices in ABI 5),
//! grants read rights beneath each `--ro` path and all rights beneath each
//! `--rw` path, sets no-new-privs, restricts itself, and execs the argv;
//! nested children inherit the restriction. On a kernel with an older ABI
//! the ruleset is *partially* enforced: the launcher says so on stderr
//! (informational, never a failure) and the host reports `partial`.
//!
//! Every failure of the launcher itself — usage, a kernel without Landlock,
//! an unopenable grant path, a ruleset error, a failed exec — exits
//! [`FAILURE_EXIT`] with a line starting with [`PREFIX`], and is written to
//! the status fd (`failed: …`). Just before exec it writes `exec`; the fd
//! is close-on-exec, so the command never sees it. The command's own exit
//! status, including its own 125, passes through unchanged.

use std::ffi::OsString;
use std::fs::File;
use std::io::Write;
use std::os::fd::{FromRawFd, RawFd};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};

use ::landlock::{
    ABI, Access, AccessFs, PathBeneath, PathFd, Ruleset, RulesetAttr, RulesetCreatedAttr,
    RulesetStatus,
};

use crate::model::{Backend, Enforcement, SandboxMode, SandboxPolicy, Signatures, WrapFacts};
use crate::process::STATUS_FD;

use super::{StatusReport, Wrap};

/// The hidden subcommand of the `cordon` binary that is the launcher.
pub const SUBCOMMAND: &str = "__landlock";
/// The prefix of every line the launcher writes about itself.
pub const PREFIX: &str = "cordon-landlock: ";
/// The launcher's exit code for any failure of its own.
pub const FAILURE_EXIT: i32 = 125;
/// The informational notice on a kernel with an older ABI.
pub const PARTIAL_NOTICE: &str = "partially enforced (older ABI)";
/// The ABI whose file rights cordon's modes need.
const TARGET_ABI: ABI = ABI::V5;

/// Probe output for a fully enforcing kernel.
pub const PROBE_FULL: &str = "landlock: fully enforced";
/// Probe output for a partially enforcing kernel.
pub const PROBE_PARTIAL: &str = "landlock: partially enforced (older ABI)";

/// The grants of `policy` (SPEC.md §6): read-only `/`, writable
/// `/dev/null` (the file, not `/dev`), plus `/tmp` (the host's: writes
/// persist) and the workspace under `workspace-write`.
pub fn grants(policy: &SandboxPolicy) -> Vec<String> {
    let mut args: Vec<String> = ["--ro", "/", "--rw", "/dev/null"]
        .map(String::from)
        .to_vec();
    if policy.mode == SandboxMode::WorkspaceWrite {
        args.extend(["--rw".into(), "/tmp".into()]);
        args.extend([
            "--rw".into(),
            policy.workspace_root.to_string_lossy().into_owned(),
        ]);
    }
    args
}

/// `launcher __landlock --status-fd 3 GRANTS -- argv`.
pub fn wrap(
    launcher: &Path,
    enforcement: Enforcement,
    argv: &[String],
    policy: &SandboxPolicy,
) -> Wrap {
    let mut full = vec![
        launcher.to_string_lossy().into_owned(),
        SUBCOMMAND.into(),
        "--status-fd".into(),
        STATUS_FD.to_string(),
    ];
    full.extend(grants(policy));
    full.push("--".into());
    full.extend(argv.iter().cloned());
    Wrap::new(full, policy.clone(), facts(enforcement)).reporting(StatusReport::Launcher)
}

/// The launcher's facts: its failures are `cordon-landlock: …` lines at exit
/// 125 (the partial notice excluded), a denied write is `Permission denied`.
pub fn facts(enforcement: Enforcement) -> WrapFacts {
    WrapFacts {
        backend: Backend::Landlock,
        enforcement,
        signatures: Signatures {
            runner_failure: vec![PREFIX.into()],
            runner_failure_exit: Some(FAILURE_EXIT),
            runner_notices: vec![PARTIAL_NOTICE.into()],
            denial: vec!["permission denied".into()],
        },
    }
}

/// Parse the probe's stdout: the enforcement it reported, if any.
pub fn parse_probe(stdout: &str) -> Option<Enforcement> {
    match stdout.lines().next()?.trim() {
        PROBE_FULL => Some(Enforcement::Full),
        PROBE_PARTIAL => Some(Enforcement::Partial),
        _ => None,
    }
}

/// The kernel's Landlock ABI version (0 when unsupported).
pub fn kernel_abi() -> i64 {
    const LANDLOCK_CREATE_RULESET_VERSION: nix::libc::c_uint = 1;
    // SAFETY: the version query takes no attribute pointer and size 0.
    let abi = unsafe {
        nix::libc::syscall(
            nix::libc::SYS_landlock_create_ruleset,
            std::ptr::null::<u8>(),
            0usize,
            LANDLOCK_CREATE_RULESET_VERSION,
        )
    };
    abi.max(0)
}

// ---- the launcher itself ---------------------------------------------------

/// What the launcher was asked to do.
#[derive(Debug, PartialEq, Eq)]
enum Invocation {
    Probe,
    Launch {
        status_fd: Option<RawFd>,
        read_only: Vec<PathBuf>,
        writable: Vec<PathBuf>,
        argv: Vec<OsString>,
    },
}

/// Run the launcher with `args` (everything after the subcommand). Never
/// returns: it execs the command or exits.
pub fn launcher_main(args: Vec<OsString>) -> ! {
    let invocation = match parse(args) {
        Ok(invocation) => invocation,
        Err(message) => fail(None, &format!("usage: {message}")),
    };
    match invocation {
        Invocation::Probe => probe(),
        Invocation::Launch {
            status_fd,
            read_only,
            writable,
            argv,
        } => launch(status_fd, &read_only, &writable, &argv),
    }
}

fn parse(args: Vec<OsString>) -> Result<Invocation, String> {
    let mut args = args.into_iter();
    let mut status_fd = None;
    let mut read_only = vec![];
    let mut writable = vec![];
    while let Some(arg) = args.next() {
        let flag = arg.to_str().unwrap_or_default().to_owned();
        match flag.as_str() {
            "--probe" if status_fd.is_none() && read_only.is_empty() && writable.is_empty() => {
                return match args.next() {
                    None => Ok(Invocation::Probe),
                    Some(extra) => Err(format!("--probe takes no arguments, got {extra:?}")),
                };
            }
            "--status-fd" => {
                let value = args.next().ok_or("--status-fd needs a file descriptor")?;
                let fd = value
                    .to_str()
                    .and_then(|v| v.parse::<RawFd>().ok())
                    .filter(|fd| *fd > 2)
                    .ok_or_else(|| format!("--status-fd needs a number above 2, got {value:?}"))?;
                status_fd = Some(fd);
            }
            "--ro" | "--rw" => {
                let path = args.next().ok_or_else(|| format!("{flag} needs a path"))?;
                let list = if flag == "--ro" {
                    &mut read_only
                } else {
                    &mut writable
                };
                list.push(PathBuf::from(path));
            }
            "--" => {
                let argv: Vec<OsString> = args.collect();
                if argv.is_empty() {
                    return Err("no command after --".into());
                }
                return Ok(Invocation::Launch {
                    status_fd,
                    read_only,
                    writable,
                    argv,
                });
            }
            other => return Err(format!("unknown argument {other:?}")),
        }
    }
    Err("missing -- and the command to run".into())
}

/// Write `detail` to the status fd and stderr, then exit 125.
fn fail(status: Option<&mut File>, detail: &str) -> ! {
    if let Some(status) = status {
        let _ = writeln!(status, "failed: {detail}");
    }
    eprintln!("{PREFIX}{detail}");
    std::process::exit(FAILURE_EXIT)
}

fn probe() -> ! {
    let ruleset = Ruleset::default()
        .handle_access(AccessFs::from_all(TARGET_ABI))
        .and_then(|r| r.create())
        .and_then(|r| r.restrict_self());
    match ruleset.map(|status| status.ruleset) {
        Ok(RulesetStatus::FullyEnforced) => println!("{PROBE_FULL}"),
        Ok(RulesetStatus::PartiallyEnforced) => println!("{PROBE_PARTIAL}"),
        Ok(RulesetStatus::NotEnforced) => fail(None, "this kernel does not enforce Landlock"),
        Err(err) => fail(None, &format!("ruleset error: {err}")),
    }
    println!("abi: {}", kernel_abi());
    std::process::exit(0)
}

fn launch(
    status_fd: Option<RawFd>,
    read_only: &[PathBuf],
    writable: &[PathBuf],
    argv: &[OsString],
) -> ! {
    // SAFETY: the host handed us this fd for our exclusive use.
    let mut status = status_fd.map(|fd| unsafe { File::from_raw_fd(fd) });
    if let Some(fd) = status_fd {
        // Never let the command inherit the status pipe.
        // SAFETY: fcntl on an fd we own.
        if unsafe { nix::libc::fcntl(fd, nix::libc::F_SETFD, nix::libc::FD_CLOEXEC) } != 0 {
            fail(
                None,
                &format!("--status-fd {fd} is not an open file descriptor"),
            );
        }
    }
    let all = AccessFs::from_all(TARGET_ABI);
    let mut ruleset = match Ruleset::default()
        .handle_access(all)
        .and_then(|r| r.create())
    {
        Ok(ruleset) => ruleset,
        Err(err) => fail(status.as_mut(), &format!("ruleset error: {err}")),
    };
    let grants = read_only
        .iter()
        .map(|path| (path, AccessFs::from_read(TARGET_ABI)))
        .chain(writable.iter().map(|path| (path, all)));
    for (path, access) in grants {
        let fd = match PathFd::new(path) {
            Ok(fd) => fd,
            Err(err) => fail(
                status.as_mut(),
                &format!("cannot open {}: {err}", path.display()),
            ),
        };
        // Directory-only rights cannot be granted on a file.
        let access = if path.is_dir() {
            access
        } else {
            access & AccessFs::from_file(TARGET_ABI)
        };
        ruleset = match ruleset.add_rule(PathBeneath::new(fd, access)) {
            Ok(ruleset) => ruleset,
            Err(err) => fail(
                status.as_mut(),
                &format!("cannot grant {}: {err}", path.display()),
            ),
        };
    }
    match ruleset.restrict_self() {
        Ok(restricted) => match restricted.ruleset {
            RulesetStatus::FullyEnforced => {}
            RulesetStatus::PartiallyEnforced => eprintln!("{PREFIX}{PARTIAL_NOTICE}"),
            RulesetStatus::NotEnforced => {
                fail(status.as_mut(), "this kernel does not enforce Landlock")
            }
        },
        Err(err) => fail(status.as_mut(), &format!("cannot restrict: {err}")),
    }
    if let Some(status) = status.as_mut() {
        let _ = writeln!(status, "exec");
    }
    let err = std::process::Command::new(&argv[0]).args(&argv[1..]).exec();
    fail(
        status.as_mut(),
        &format!("cannot execute {}: {err}", argv[0].to_string_lossy()),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn os(args: &[&str]) -> Vec<OsString> {
        args.iter().map(OsString::from).collect()
    }

    #[test]
    fn grants_are_exact_per_mode() {
        let ro = SandboxPolicy::new(SandboxMode::ReadOnly, "/ws");
        assert_eq!(grants(&ro).join(" "), "--ro / --rw /dev/null");
        let ww = SandboxPolicy::new(SandboxMode::WorkspaceWrite, "/ws");
        assert_eq!(
            grants(&ww).join(" "),
            "--ro / --rw /dev/null --rw /tmp --rw /ws"
        );
    }

    #[test]
    fn wrap_runs_the_launcher_with_a_status_fd() {
        let policy = SandboxPolicy::new(SandboxMode::ReadOnly, "/ws");
        let wrap = wrap(
            Path::new("/usr/bin/cordon"),
            Enforcement::Partial,
            &["true".into()],
            &policy,
        );
        assert_eq!(
            wrap.argv().join(" "),
            "/usr/bin/cordon __landlock --status-fd 3 --ro / --rw /dev/null -- true"
        );
        assert_eq!(wrap.facts().enforcement, Enforcement::Partial);
        assert_eq!(wrap.report(), StatusReport::Launcher);
    }

    #[test]
    fn the_launcher_parses_its_contract() {
        assert_eq!(parse(os(&["--probe"])), Ok(Invocation::Probe));
        assert_eq!(
            parse(os(&[
                "--status-fd",
                "3",
                "--ro",
                "/",
                "--rw",
                "/w",
                "--",
                "a",
                "--ro"
            ])),
            Ok(Invocation::Launch {
                status_fd: Some(3),
                read_only: vec!["/".into()],
                writable: vec!["/w".into()],
                argv: os(&["a", "--ro"]),
            })
        );
        for bad in [
            &["--ro"][..],
            &["--"][..],
            &["--bogus"][..],
            &["--status-fd", "1", "--", "x"][..],
            &["--ro", "/"][..],
            &["--probe", "x"][..],
        ] {
            assert!(parse(os(bad)).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn probe_output_parses() {
        assert_eq!(
            parse_probe("landlock: fully enforced\nabi: 6\n"),
            Some(Enforcement::Full)
        );
        assert_eq!(
            parse_probe("landlock: partially enforced (older ABI)\n"),
            Some(Enforcement::Partial)
        );
        assert_eq!(parse_probe("something else"), None);
        assert_eq!(parse_probe(""), None);
    }
}
