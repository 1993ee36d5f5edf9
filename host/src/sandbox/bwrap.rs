//! The bubblewrap backend: its probe, its profiles per mode (SPEC.md §6),
//! how it wraps an argv, and its message dialect.
//!
//! Every confined mode gets a read-only view of `/`, a fresh minimal `/dev`
//! (so `/dev/null` is writable and nothing else is) and a fresh `/proc`,
//! plus cordon's hardening: a new PID namespace (the command sees only its
//! own processes, and everything it leaves behind dies with it), a new
//! session (no terminal injection through `TIOCSTI`) and no capabilities,
//! even when the host runs as root. `workspace-write` adds an ephemeral
//! `/tmp` and a writable bind of the workspace root.

use std::path::PathBuf;
use std::time::Duration;

use crate::model::{Backend, Enforcement, SandboxMode, SandboxPolicy, Signatures, WrapFacts};
use crate::process::STATUS_FD;

use super::probe::{Probed, Usable, find_on_path, run_bounded};
use super::{StatusReport, Wrap};

/// The runner's program name.
pub const PROGRAM: &str = "bwrap";

/// The mount profile of `mode`, without the runner, the hardening or the argv.
pub fn profile(policy: &SandboxPolicy) -> Vec<String> {
    let mut args: Vec<String> = [
        "--ro-bind",
        "/",
        "/",
        "--dev",
        "/dev",
        "--proc",
        "/proc",
        "--die-with-parent",
    ]
    .map(String::from)
    .to_vec();
    if policy.mode == SandboxMode::WorkspaceWrite {
        let root = policy.workspace_root.to_string_lossy().into_owned();
        args.extend(["--tmpfs".into(), "/tmp".into()]);
        args.extend(["--bind".into(), root.clone(), root]);
    }
    args
}

/// The probe's arguments (SPEC.md §5): the read-only profile running
/// `true`; bwrap works here when it exits 0.
pub fn probe_args() -> Vec<String> {
    let mut args = profile(&SandboxPolicy::new(SandboxMode::ReadOnly, "/"));
    args.extend(["--".into(), "true".into()]);
    args
}

/// cordon's hardening, added to every confined mode.
pub const HARDENING: &[&str] = &["--unshare-pid", "--new-session", "--cap-drop", "ALL"];

/// bubblewrap at a trusted absolute path, ready to wrap argvs.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Bwrap {
    runner: PathBuf,
}

impl Bwrap {
    /// The runner at `runner` (unprobed: the ladder probes it).
    pub fn at(runner: impl Into<PathBuf>) -> Self {
        Bwrap {
            runner: runner.into(),
        }
    }

    /// The full argv: `runner --json-status-fd 3 PROFILE HARDENING -- argv`.
    /// The status fd is cordon's out-of-band evidence that bwrap really
    /// started the command (see [`StatusReport::BwrapJson`]).
    pub fn wrap(&self, argv: &[String], policy: &SandboxPolicy) -> Wrap {
        let mut full = vec![
            self.runner.to_string_lossy().into_owned(),
            "--json-status-fd".into(),
            STATUS_FD.to_string(),
        ];
        full.extend(profile(policy));
        full.extend(HARDENING.iter().map(|s| (*s).to_owned()));
        full.push("--".into());
        full.extend(argv.iter().cloned());
        Wrap::new(full, policy.clone(), facts()).reporting(StatusReport::BwrapJson)
    }
}

/// Find `bwrap` on `PATH` and run the probe (SPEC.md §5) within `timeout`.
pub(super) fn probe(timeout: Duration) -> Probed<Bwrap> {
    let runner = find_on_path(PROGRAM)
        .ok_or_else(|| "bwrap is not installed (not found on PATH)".to_owned())?;
    let mut argv = vec![runner.to_string_lossy().into_owned()];
    argv.extend(probe_args());
    let out = run_bounded(&argv, timeout)?;
    if !out.success {
        return Err(format!(
            "{} failed the probe: {}",
            runner.display(),
            out.first_line()
        ));
    }
    Ok(Usable {
        reason: format!("{} ran the probe", runner.display()),
        runner: Bwrap::at(runner),
    })
}

/// bubblewrap's facts: full enforcement; it reports its own failures as
/// `bwrap: …` lines, and a denied write as `Read-only file system`.
pub fn facts() -> WrapFacts {
    WrapFacts {
        backend: Backend::Bwrap,
        enforcement: Enforcement::Full,
        signatures: Signatures {
            runner_failure: vec!["bwrap: ".into()],
            runner_failure_exit: None,
            runner_notices: vec![],
            denial: vec!["read-only file system".into()],
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn argv_of(mode: SandboxMode) -> Vec<String> {
        let policy = SandboxPolicy::new(mode, "/home/me/ws");
        let wrap = Bwrap::at("/usr/bin/bwrap").wrap(&["true".into()], &policy);
        wrap.argv().to_vec()
    }

    #[test]
    fn read_only_profile_is_exact() {
        assert_eq!(
            argv_of(SandboxMode::ReadOnly).join(" "),
            "/usr/bin/bwrap --json-status-fd 3 --ro-bind / / --dev /dev --proc /proc --die-with-parent \
             --unshare-pid --new-session --cap-drop ALL -- true"
        );
    }

    #[test]
    fn workspace_write_profile_adds_ephemeral_tmp_and_the_workspace() {
        assert_eq!(
            argv_of(SandboxMode::WorkspaceWrite).join(" "),
            "/usr/bin/bwrap --json-status-fd 3 --ro-bind / / --dev /dev --proc /proc --die-with-parent \
             --tmpfs /tmp --bind /home/me/ws /home/me/ws \
             --unshare-pid --new-session --cap-drop ALL -- true"
        );
    }

    #[test]
    fn the_probe_is_the_read_only_profile_running_true() {
        assert_eq!(
            probe_args().join(" "),
            "--ro-bind / / --dev /dev --proc /proc --die-with-parent -- true"
        );
    }

    #[test]
    fn argv_after_the_separator_is_untouched() {
        let policy = SandboxPolicy::new(SandboxMode::ReadOnly, "/ws");
        let odd = vec!["bash".into(), "-c".into(), "echo \"$x\" \\\n --".into()];
        let wrap = Bwrap::at("bwrap").wrap(&odd, &policy);
        let at = wrap.argv().iter().position(|a| a == "--").unwrap();
        assert_eq!(&wrap.argv()[at + 1..], &odd[..]);
    }
}
