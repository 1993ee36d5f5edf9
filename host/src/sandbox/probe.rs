//! What every backend's probe needs: running a probe program within a
//! bound, and finding a runner on `PATH`. The probes themselves live in
//! the backend files (`bwrap.rs`, `landlock.rs`, `seatbelt.rs`); the ladder
//! only orders them.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// A backend its probe found usable: the runner to wrap with, and why.
#[derive(Debug)]
pub(super) struct Usable<T> {
    /// The backend, ready to wrap argvs.
    pub runner: T,
    /// What the probe saw (shown by `cordon probe`).
    pub reason: String,
}

/// A probe's answer: usable, or why not.
pub(super) type Probed<T> = Result<Usable<T>, String>;

/// How closely a rung is looked at before runs use it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Look {
    /// Found and trusted is enough: the first real run is the probe (the
    /// runner's out-of-band report tells whether it started the command,
    /// and a run it did not start is safe to try on the next rung).
    Trial,
    /// Run the probe program (SPEC.md §5) now.
    Probe,
}

/// Run `program` with `args` as a probe within `timeout`; it must exit 0,
/// else the error names it and the first line it printed.
pub(super) fn must_pass(
    program: &Path,
    args: Vec<String>,
    timeout: Duration,
) -> Result<(), String> {
    let mut argv = vec![program.to_string_lossy().into_owned()];
    argv.extend(args);
    let out = run_bounded(&argv, timeout)?;
    match out.success {
        true => Ok(()),
        false => Err(format!(
            "{} failed the probe: {}",
            program.display(),
            out.first_line()
        )),
    }
}

/// What a probe printed, and whether it exited 0.
pub(super) struct ProbeOutput {
    pub success: bool,
    pub stdout: String,
    pub stderr: String,
}

impl ProbeOutput {
    /// The first non-empty line, stderr first: what to tell the operator.
    pub fn first_line(&self) -> String {
        self.stderr
            .lines()
            .chain(self.stdout.lines())
            .find(|l| !l.trim().is_empty())
            .unwrap_or("exited nonzero with no output")
            .trim()
            .to_owned()
    }
}

/// Run a probe in its own process group; kill the group at `timeout`.
pub(super) fn run_bounded(argv: &[String], timeout: Duration) -> Result<ProbeOutput, String> {
    use std::io::Read;
    use std::os::unix::process::CommandExt;
    let mut child = Command::new(&argv[0])
        .args(&argv[1..])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .process_group(0)
        .spawn()
        .map_err(|err| format!("cannot run {}: {err}", argv[0]))?;
    let deadline = Instant::now() + timeout;
    let exited = ExitWaiter::new(child.id());
    let status = loop {
        match child.try_wait() {
            Ok(Some(status)) => break status,
            Ok(None) if Instant::now() >= deadline => {
                let group = nix::unistd::Pid::from_raw(child.id() as i32);
                let _ = nix::sys::signal::killpg(group, nix::sys::signal::Signal::SIGKILL);
                let _ = child.wait();
                return Err(format!(
                    "{} did not answer the probe within {} ms",
                    argv[0],
                    timeout.as_millis()
                ));
            }
            Ok(None) => exited.wait_until(deadline),
            Err(err) => return Err(format!("waiting for {}: {err}", argv[0])),
        }
    };
    let mut stdout = String::new();
    let mut stderr = String::new();
    if let Some(mut out) = child.stdout.take() {
        let _ = out.read_to_string(&mut stdout);
    }
    if let Some(mut err) = child.stderr.take() {
        let _ = err.read_to_string(&mut stderr);
    }
    Ok(ProbeOutput {
        success: status.success(),
        stdout,
        stderr,
    })
}

/// Sleeps until a child exits or a deadline passes: on a pidfd where the
/// kernel has them (so a probe costs what the probed program costs), else
/// in short naps.
struct ExitWaiter(Option<std::os::fd::OwnedFd>);

impl ExitWaiter {
    fn new(pid: u32) -> Self {
        ExitWaiter(crate::process::spawn::pidfd::open(
            nix::unistd::Pid::from_raw(pid as i32),
        ))
    }

    fn wait_until(&self, deadline: Instant) {
        let nap = Duration::from_millis(2);
        match &self.0 {
            Some(pidfd) => {
                use std::os::fd::AsFd;
                let left = deadline.saturating_duration_since(Instant::now());
                let ms = u16::try_from(left.as_millis().max(1)).unwrap_or(u16::MAX);
                let mut fds = [nix::poll::PollFd::new(
                    pidfd.as_fd(),
                    nix::poll::PollFlags::POLLIN,
                )];
                if nix::poll::poll(&mut fds, ms).is_err() {
                    std::thread::sleep(nap);
                }
            }
            None => std::thread::sleep(nap),
        }
    }
}

/// Where runners are looked for when the operator names none: fixed
/// system directories, never the caller's `PATH` (a substitute earlier on
/// it would run every command unconfined).
pub const SYSTEM_BIN_DIRS: &[&str] = &["/usr/bin", "/bin", "/usr/local/bin", "/usr/sbin", "/sbin"];

/// The first executable file called `program` in [`SYSTEM_BIN_DIRS`].
pub(super) fn find_in_system_dirs(program: &str) -> Option<PathBuf> {
    SYSTEM_BIN_DIRS
        .iter()
        .map(|dir| Path::new(dir).join(program))
        .find(|candidate| is_executable(candidate))
}

/// A runner the host may trust: after resolving symlinks, the file and its
/// directory are owned by root or by this host's user, and writable by
/// neither group nor others (whoever could replace it could run every
/// command unconfined). Says what it checked, or why it refuses.
pub(super) fn trusted(runner: &Path) -> Result<String, String> {
    use std::os::unix::fs::MetadataExt;
    let real =
        std::fs::canonicalize(runner).map_err(|err| format!("{}: {err}", runner.display()))?;
    // SAFETY: geteuid cannot fail and touches no memory.
    let me = unsafe { nix::libc::geteuid() };
    let dir = real.parent().unwrap_or(Path::new("/"));
    for path in [real.as_path(), dir] {
        let meta = std::fs::metadata(path).map_err(|err| format!("{}: {err}", path.display()))?;
        if meta.uid() != 0 && meta.uid() != me {
            return Err(format!(
                "{} is not trusted: owned by uid {}, not root or this user",
                path.display(),
                meta.uid()
            ));
        }
        if meta.mode() & 0o022 != 0 {
            return Err(format!(
                "{} is not trusted: writable by {} (mode {:o})",
                path.display(),
                if meta.mode() & 0o002 != 0 {
                    "others"
                } else {
                    "its group"
                },
                meta.mode() & 0o7777
            ));
        }
    }
    Ok(format!(
        "{} trusted (it and its directory owned by uid {} or root, not writable by group or others)",
        real.display(),
        me
    ))
}

fn is_executable(path: &Path) -> bool {
    use std::os::unix::fs::PermissionsExt;
    path.metadata()
        .is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_hanging_probe_is_cut_at_the_bound() {
        let started = Instant::now();
        let err = run_bounded(&["sleep".into(), "30".into()], Duration::from_millis(100))
            .err()
            .expect("times out");
        assert!(
            err.contains("did not answer the probe within 100 ms"),
            "{err}"
        );
        assert!(started.elapsed() < Duration::from_secs(5));
    }

    #[test]
    fn a_runner_writable_by_others_or_in_such_a_directory_is_not_trusted() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let bin = dir.path().join("bin");
        std::fs::create_dir(&bin).unwrap();
        std::fs::set_permissions(&bin, std::fs::Permissions::from_mode(0o755)).unwrap();
        let runner = bin.join("runner");
        std::fs::write(&runner, "#!/bin/sh\n").unwrap();
        std::fs::set_permissions(&runner, std::fs::Permissions::from_mode(0o755)).unwrap();
        assert!(trusted(&runner).unwrap().contains("trusted"));
        std::fs::set_permissions(&runner, std::fs::Permissions::from_mode(0o777)).unwrap();
        assert!(trusted(&runner).unwrap_err().contains("writable by others"));
        std::fs::set_permissions(&runner, std::fs::Permissions::from_mode(0o755)).unwrap();
        std::fs::set_permissions(&bin, std::fs::Permissions::from_mode(0o775)).unwrap();
        let err = trusted(&runner).unwrap_err();
        assert!(
            err.contains("bin is not trusted: writable by its group"),
            "{err}"
        );
        assert!(trusted(Path::new("/nonexistent/runner")).is_err());
    }

    #[test]
    fn runners_are_looked_for_in_system_directories_only() {
        assert!(
            SYSTEM_BIN_DIRS
                .iter()
                .all(|dir| Path::new(dir).is_absolute())
        );
        assert_eq!(find_in_system_dirs("no-such-runner-anywhere"), None);
        assert!(find_in_system_dirs("sh").is_some());
    }

    #[test]
    fn a_probe_reports_its_first_line_and_status() {
        let out = run_bounded(
            &[
                "sh".into(),
                "-c".into(),
                "echo out; echo '  err  ' >&2; exit 3".into(),
            ],
            Duration::from_secs(5),
        )
        .unwrap();
        assert!(!out.success);
        assert_eq!(out.first_line(), "err");
    }
}
