//! The Landlock backend, host side: its probe (the launcher's `--probe`),
//! the grants per mode (SPEC.md §6), the wrap that starts cordon's own
//! launcher ([`super::launcher`], the code that runs inside the sandbox)
//! and its message dialect.

use std::path::PathBuf;

use crate::model::{Backend, Enforcement, SandboxMode, SandboxPolicy, Signatures, WrapFacts};
use crate::process::{HANDOVER_FD, STATUS_FD};

use super::launcher::{
    self, FAILURE_EXIT, PARTIAL_NOTICE, PREFIX, PROBE_FULL, PROBE_IPC_ISOLATED, PROBE_PARTIAL,
    PROBE_SCOPES,
};
use super::probe::{Probed, Usable, run_bounded, trusted};
use super::{EnvHandover, SandboxConfig, StatusReport, Supervision, Wrap};

pub use super::launcher::landlock::{kernel_abi, kernel_scopes};

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

/// cordon's launcher at `launcher`, on a kernel that enforces Landlock as
/// `enforcement` says.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Landlock {
    launcher: PathBuf,
    enforcement: Enforcement,
    /// Whether runs get their own SysV IPC (and UTS) namespaces.
    isolate_ipc: bool,
}

impl Landlock {
    /// The launcher at `launcher` (unprobed: the ladder probes it), giving
    /// runs their own IPC namespaces.
    pub fn at(launcher: impl Into<PathBuf>, enforcement: Enforcement) -> Self {
        Landlock {
            launcher: launcher.into(),
            enforcement,
            isolate_ipc: true,
        }
    }

    /// Its enforcement on this kernel.
    pub fn enforcement(&self) -> Enforcement {
        self.enforcement
    }

    /// `launcher __landlock --status-fd 3 --env-fd 4 --parent HOST [--unshare-ipc] GRANTS -- argv`.
    pub fn wrap(&self, argv: &[String], policy: &SandboxPolicy) -> Wrap {
        let mut full = vec![
            self.launcher.to_string_lossy().into_owned(),
            launcher::SUBCOMMAND.into(),
            "--status-fd".into(),
            STATUS_FD.to_string(),
            "--env-fd".into(),
            HANDOVER_FD.to_string(),
            // The launcher supervises the command and dies with this host.
            "--parent".into(),
            std::process::id().to_string(),
        ];
        if self.isolate_ipc {
            full.push("--unshare-ipc".into());
        }
        full.extend(grants(policy));
        full.push("--".into());
        full.extend(argv.iter().cloned());
        Wrap::new(full, policy.clone(), facts(self.enforcement))
            .reporting(StatusReport::Launcher)
            .handing_over(EnvHandover::LauncherFd)
            .supervised(Supervision::Launcher)
    }
}

/// The executable with cordon's launcher modes — `config.launcher`, which
/// must be trustworthy, else this executable (cordon itself, as trusted as
/// the host running it) — and what its trust check said.
pub(super) fn launcher_path(config: &SandboxConfig) -> Result<(PathBuf, String), String> {
    match &config.launcher {
        Some(path) => Ok((path.clone(), format!("; {}", trusted(path)?))),
        None => Ok((
            std::env::current_exe().map_err(|err| format!("cannot locate the launcher: {err}"))?,
            String::new(),
        )),
    }
}

/// Ask the launcher (`config.launcher`, else this executable) to probe the
/// kernel, within the probe timeout. Enforcement is `partial` when the
/// kernel lacks a file right or scope cordon asks for, or when runs cannot
/// get their own IPC namespace (the launcher needs `CAP_SYS_ADMIN`).
pub(super) fn probe(config: &SandboxConfig) -> Probed<Landlock> {
    let (launcher, trust) = launcher_path(config)?;
    let argv = vec![
        launcher.to_string_lossy().into_owned(),
        launcher::SUBCOMMAND.into(),
        "--probe".into(),
    ];
    let out = run_bounded(&argv, config.probe_timeout)?;
    let Some(report) = parse_report(&out.stdout).filter(|_| out.success) else {
        return Err(format!(
            "{} failed the probe: {}",
            launcher.display(),
            out.first_line()
        ));
    };
    let enforcement = if report.ipc_isolated {
        report.enforcement
    } else {
        Enforcement::Partial
    };
    Ok(Usable {
        reason: format!(
            "{} answered: {}; scopes: {}; ipc: {}{trust}",
            launcher.display(),
            out.stdout.lines().next().unwrap_or(""),
            if report.scopes.is_empty() {
                "none (kernel ABI below 6)".to_owned()
            } else {
                report.scopes.join(", ")
            },
            if report.ipc_isolated {
                "own namespace per run"
            } else {
                "the host's (unsharing needs CAP_SYS_ADMIN)"
            }
        ),
        runner: Landlock {
            launcher,
            enforcement,
            isolate_ipc: report.ipc_isolated,
        },
    })
}

/// What the launcher's probe said.
#[derive(Debug, PartialEq, Eq)]
pub struct ProbeReport {
    /// How the kernel enforces the ruleset.
    pub enforcement: Enforcement,
    /// The scopes in force (`signal`, `abstract-unix-socket`).
    pub scopes: Vec<String>,
    /// Whether runs can get their own IPC namespace.
    pub ipc_isolated: bool,
}

/// Parse the whole probe output.
pub fn parse_report(stdout: &str) -> Option<ProbeReport> {
    let enforcement = parse_probe(stdout)?;
    let scopes = stdout
        .lines()
        .find_map(|line| line.strip_prefix(PROBE_SCOPES))
        .map(|list| {
            list.split(", ")
                .filter(|s| !s.is_empty())
                .map(str::to_owned)
                .collect()
        })
        .unwrap_or_default();
    Some(ProbeReport {
        enforcement,
        scopes,
        ipc_isolated: stdout.lines().any(|line| line == PROBE_IPC_ISOLATED),
    })
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

#[cfg(test)]
mod tests {
    use super::*;

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
        let wrap =
            Landlock::at("/usr/bin/cordon", Enforcement::Partial).wrap(&["true".into()], &policy);
        assert_eq!(
            wrap.argv().join(" "),
            format!(
                "/usr/bin/cordon __landlock --status-fd 3 --env-fd 4 --parent {} --unshare-ipc \
                 --ro / --rw /dev/null -- true",
                std::process::id()
            )
        );
        assert_eq!(wrap.facts().enforcement, Enforcement::Partial);
        assert_eq!(wrap.report(), StatusReport::Launcher);
        assert_eq!(wrap.supervision(), Supervision::Launcher);
    }

    #[test]
    fn the_whole_probe_report_parses() {
        let report = parse_report(
            "landlock: fully enforced\nabi: 7\nscopes: signal, abstract-unix-socket\nipc: isolated\n",
        )
        .unwrap();
        assert_eq!(report.enforcement, Enforcement::Full);
        assert_eq!(report.scopes, ["signal", "abstract-unix-socket"]);
        assert!(report.ipc_isolated);
        let shared = parse_report(
            "landlock: fully enforced\nabi: 5\nscopes: \nipc: shared (unsharing needs CAP_SYS_ADMIN)\n",
        )
        .unwrap();
        assert!(shared.scopes.is_empty());
        assert!(!shared.ipc_isolated);
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
