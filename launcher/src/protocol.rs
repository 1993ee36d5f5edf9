//! The host↔runner protocol, in one file (youki's `process/message.rs` is
//! the model): the subcommands, the fd slots the host hands a runner, the
//! variables of the launcher's own environment, the lines its probes and
//! failures print, and the status lines a launcher writes on its status fd
//! — one type with one [`Status::parse`] and one `Display`, used by the
//! writers (this crate) and the readers (the host's `sandbox/mod.rs`)
//! alike. The crate root re-exports the constants.
//!
//! A report is the status fd's whole text: `confined PID` once the
//! process that becomes the command has restricted itself with its
//! denials logged (`--log-denials`: PID names its Landlock domain in the
//! kernel's audit records), `exec` just before the command's exec,
//! `failed: DETAIL` when the launcher failed first, and `exit N` or
//! `signal N` once the command's leader ended.

use std::fmt;

/// The hidden subcommand of the `cordon` binary that is the Landlock launcher.
pub const SUBCOMMAND: &str = "__landlock";
/// The hidden subcommand that is cordon's init inside bubblewrap.
pub const INIT_SUBCOMMAND: &str = "__init";
/// The hidden subcommand that is cordon's namespace runner.
pub const NS_SUBCOMMAND: &str = "__ns";
/// The hidden subcommand that takes on a client's identity (uid, gid,
/// groups) and executes its runner: a root server's runs for a socket
/// client run as that client.
pub const AS_SUBCOMMAND: &str = "__as";
/// The name of the launcher's own small executable (`src/bin`), which a
/// host uses when it is installed beside it with the same [`BUILD`].
pub const EXECUTABLE: &str = "cordon-launcher";
/// The ELF section of the launcher's own executable that holds
/// [`BUILD`], exactly: a host reads it alone, not the whole executable.
pub const BUILD_SECTION: &str = ".cordon_build";
/// This crate's build identity (a hash of its sources, `build.rs`): the
/// launcher's own executable carries these bytes (its [`BUILD_SECTION`]),
/// and a host starts one beside it only when it does — the two speak this
/// file's protocol.
pub const BUILD: &str = concat!(
    "cordon-launcher build ",
    env!("CORDON_LAUNCHER_BUILD"),
    " (protocol of this source)"
);
/// The prefix of every line `__as` writes about itself.
pub const AS_PREFIX: &str = "cordon-as: ";
/// The prefix of every line the namespace runner writes about itself.
pub const NS_PREFIX: &str = "cordon-ns: ";
/// The prefix of every line the launcher writes about itself.
pub const PREFIX: &str = "cordon-landlock: ";
/// The prefix of every line the init writes about itself.
pub const INIT_PREFIX: &str = "cordon-init: ";
/// The launcher's exit code for any failure of its own.
pub const FAILURE_EXIT: i32 = 125;
/// The exit code of a command the launcher could not find to execute
/// (after its sandbox was built), as `env`'s.
pub const COMMAND_NOT_FOUND: i32 = 127;
/// The exit code of a command the launcher found but could not execute
/// (after its sandbox was built), as `env`'s.
pub const COMMAND_NOT_RUNNABLE: i32 = 126;
/// The informational notice on a kernel with an older ABI.
pub const PARTIAL_NOTICE: &str = "partially enforced (older ABI)";
/// Probe output for a fully enforcing kernel.
pub const PROBE_FULL: &str = "landlock: fully enforced";
/// Probe output for a partially enforcing kernel.
pub const PROBE_PARTIAL: &str = "landlock: partially enforced (older ABI)";
/// The probe's line when the launcher can give runs their own SysV IPC
/// and UTS namespaces (it needs `CAP_SYS_ADMIN`: root).
pub const PROBE_IPC_ISOLATED: &str = "ipc: isolated";
/// The probe's line when it cannot (IPC stays the host's: partial).
pub const PROBE_IPC_SHARED: &str = "ipc: shared (unsharing needs CAP_SYS_ADMIN)";
/// The probe's line prefix listing the Landlock scopes in force.
pub const PROBE_SCOPES: &str = "scopes: ";
/// The probe's line prefix saying how `chmod` and `utimensat` fare: carried
/// out by the file supervisor inside the writable roots, or refused.
pub const PROBE_METADATA: &str = "metadata: ";
/// The probe's line when writes in a writable root that holds protected
/// paths can be carried out by the file supervisor (protected paths hold).
pub const PROBE_WRITES_SUPERVISED: &str = "writes: supervised";
/// The probe's line prefix when they cannot (the reason follows): such a
/// root is granted to Landlock whole, its protected paths writable.
pub const PROBE_WRITES_UNSUPERVISED: &str = "writes: unsupervised: ";
/// What `cordon __init --probe` prints: the binary has the init mode.
pub const INIT_PROBE: &str = "cordon-init: ready";
/// In the launcher's own environment (never the command's): the
/// `RLIMIT_NPROC` to set for the command, where no cgroup bounds the run.
pub const LIMIT_NPROC_VAR: &str = "CORDON_LIMIT_NPROC";
/// Likewise, the `RLIMIT_AS` (bytes of address space per process).
pub const LIMIT_AS_VAR: &str = "CORDON_LIMIT_AS";

/// The loopback port inside a bwrap sandbox where cordon's init bridges
/// the command's proxy clients (HTTP and SOCKS5 alike) to the host's
/// allow-list proxy.
pub const PROXY_PORT: u16 = 3128;

/// The fd number a runner's status pipe has in the child.
pub const STATUS_FD: i32 = 3;

/// The fd number of the handover a runner reads (a sealed-in-practice
/// memfd: written whole before the spawn, so no reader can stall the host).
pub const HANDOVER_FD: i32 = 4;

/// The fd number of the pipe a supervisor inside the runner reports on.
pub const INIT_FD: i32 = 5;

/// The fd number of the command's environment for the supervisor inside
/// the runner.
pub const INIT_ENV_FD: i32 = 6;

/// How the command's leader ended, as the supervisor reports it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Ended {
    /// It exited with this code.
    Exited(i32),
    /// It was killed by this signal.
    Signaled(i32),
}

/// One line of a report.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Status {
    /// `exec`: the command is about to be exec'd.
    Exec,
    /// `failed: DETAIL`: the launcher failed before the command ran.
    Failed(String),
    /// `exit N` / `signal N`: the command's leader ended so.
    Ended(Ended),
    /// `confined PID`: this process restricted itself, denials logged.
    Confined(i32),
}

impl Status {
    /// The status a line says, if any.
    pub fn parse(line: &str) -> Option<Status> {
        if line == "exec" {
            return Some(Status::Exec);
        }
        if let Some(detail) = line.strip_prefix("failed: ") {
            return Some(Status::Failed(detail.to_owned()));
        }
        let (word, number) = line.split_once(' ')?;
        let number = number.trim().parse().ok()?;
        match word {
            "exit" => Some(Status::Ended(Ended::Exited(number))),
            "signal" => Some(Status::Ended(Ended::Signaled(number))),
            "confined" => Some(Status::Confined(number)),
            _ => None,
        }
    }
}

impl fmt::Display for Status {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Status::Exec => f.write_str("exec"),
            Status::Failed(detail) => write!(f, "failed: {detail}"),
            Status::Ended(Ended::Exited(code)) => write!(f, "exit {code}"),
            Status::Ended(Ended::Signaled(signal)) => write!(f, "signal {signal}"),
            Status::Confined(pid) => write!(f, "confined {pid}"),
        }
    }
}

/// What a whole report says.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Report {
    /// It wrote `exec`.
    pub exec: bool,
    /// Its first failure.
    pub failed: Option<String>,
    /// How the command's leader ended (the last such line).
    pub ended: Option<Ended>,
    /// The process whose Landlock domain logs the run's denials.
    pub confined: Option<i32>,
}

impl Report {
    /// Read a report's text.
    pub fn read(text: &str) -> Report {
        let mut report = Report::default();
        for status in text.lines().filter_map(Status::parse) {
            match status {
                Status::Exec => report.exec = true,
                Status::Failed(detail) => {
                    report.failed.get_or_insert(detail);
                }
                Status::Ended(ended) => report.ended = Some(ended),
                Status::Confined(pid) => {
                    report.confined.get_or_insert(pid);
                }
            }
        }
        report
    }
}

impl Ended {
    /// The report line: `exit N` or `signal N`.
    pub fn line(self) -> String {
        Status::Ended(self).to_string()
    }

    /// The last `exit N` / `signal N` line of a report, if any.
    pub fn parse(report: &str) -> Option<Ended> {
        Report::read(report).ended
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_status_line_round_trips() {
        for status in [
            Status::Exec,
            Status::Failed("cannot execute x: No such file".into()),
            Status::Ended(Ended::Exited(3)),
            Status::Ended(Ended::Signaled(9)),
            Status::Confined(4242),
        ] {
            assert_eq!(Status::parse(&status.to_string()), Some(status));
        }
        assert_eq!(Status::parse("exit soon"), None);
        assert_eq!(Status::parse("bogus"), None);
    }

    #[test]
    fn a_report_is_read_whole() {
        assert_eq!(
            Report::read("confined 77\nexec\nexit 3\nsignal 15\n"),
            Report {
                exec: true,
                failed: None,
                ended: Some(Ended::Signaled(15)),
                confined: Some(77),
            }
        );
        let failed = Report::read("failed: no\nfailed: later\n");
        assert_eq!(failed.failed.as_deref(), Some("no"));
        assert!(!failed.exec && failed.ended.is_none());
    }
}
