//! cordon's own namespace runner: the host side of `cordon __ns`
//! ([`super::launcher::namespaces`]) — its probe, its wrap and its
//! dialect.
//!
//! It builds the sandbox bwrap builds, from the same profile
//! ([`bwrap::profile`] and [`bwrap::network`]), with cordon's launcher as the
//! sandbox's first process: one exec of cordon instead of bwrap's exec,
//! bwrap's setup and a second exec of cordon's init inside it. The
//! launcher supervises the command as the Landlock launcher does (exact
//! wait status, `SIGTERM` with the grace, the tree ends with it) and
//! reports on the status pipe; every failure of its own comes before the
//! command's `exec`, so a run it could not start is safe to plan again on
//! the next rung ([`super::StatusReport::never_started`]).
//!
//! As root it needs no user namespace (mount, PID, IPC, UTS and, for a
//! closed network, network namespaces are the root's to make); as any
//! other user it maps the user to itself in a user namespace of its own,
//! which the kernel may forbid (`cordon probe` says which setting).

use std::path::{Path, PathBuf};

use crate::model::{Backend, Enforcement, SandboxPolicy, Signatures, WrapFacts};

use super::bwrap;
use super::grant::Layout;
use super::launcher::{FAILURE_EXIT, NS_PREFIX, NS_SUBCOMMAND};
use super::probe::{Look, Probed, Usable, must_pass};
use super::{EnvHandover, StatusReport, Supervision, Wrap};

/// cordon's namespace runner at the launcher executable `launcher`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Namespaces {
    launcher: PathBuf,
}

impl Namespaces {
    /// The runner of the executable at `launcher` (unprobed).
    pub fn at(launcher: impl Into<PathBuf>) -> Self {
        Namespaces {
            launcher: launcher.into(),
        }
    }

    /// The full argv: `launcher __ns --status-fd 3 --env-fd 4 --parent PID
    /// PROFILE [NETWORK] -- argv`.
    pub fn wrap(&self, argv: &[String], policy: &SandboxPolicy, layout: &Layout) -> Wrap {
        let mut full = super::supervised_launch(&self.launcher, NS_SUBCOMMAND);
        full.extend(super::writable_roots(layout));
        full.extend(bwrap::profile(layout));
        let mut grant = layout.facts.clone();
        let network = bwrap::network(layout, &mut grant, true);
        full.extend(network.profile);
        full.extend(network.init);
        full.push("--".into());
        full.extend(argv.iter().cloned());
        grant.partial.extend(bwrap::symlinked_protected(layout));
        let wrap = Wrap::new(full, policy.clone(), facts());
        let wrap = match network.proxy {
            Some(at) => wrap.proxied(at),
            None => wrap,
        };
        wrap.granting(grant)
            .holding(layout.absent())
            .reporting(StatusReport::Launcher)
            .handing_over(EnvHandover::LauncherFd)
            .supervised(Supervision::Launcher)
    }
}

/// The probe's profile: bwrap's (SPEC.md §5), with a network namespace,
/// running `true`.
pub fn probe_args() -> Vec<String> {
    let mut args = vec![NS_SUBCOMMAND.to_owned()];
    args.extend(bwrap::probe_args());
    let at = args
        .iter()
        .position(|a| a == "--")
        .expect("the probe runs a command");
    args.insert(at, "--unshare-net".into());
    args
}

/// Whether the kernel lets this user make the namespaces, as far as its
/// settings show without trying: root always may (unless a seccomp filter
/// or a missing capability says otherwise when it tries); any other user
/// needs unprivileged user namespaces.
pub fn kernel_allows(euid: u32) -> Result<(), String> {
    if euid == 0 {
        return Ok(());
    }
    let read = |path: &str| {
        std::fs::read_to_string(path)
            .ok()
            .map(|text| text.trim().to_owned())
    };
    if read("/proc/sys/kernel/unprivileged_userns_clone").as_deref() == Some("0") {
        return Err("unprivileged user namespaces are disabled \
                    (kernel.unprivileged_userns_clone = 0)"
            .into());
    }
    if read("/proc/sys/user/max_user_namespaces").as_deref() == Some("0") {
        return Err("user namespaces are disabled (user.max_user_namespaces = 0)".into());
    }
    if read("/proc/sys/kernel/apparmor_restrict_unprivileged_userns").as_deref() == Some("1") {
        return Err("AppArmor restricts unprivileged user namespaces \
                    (kernel.apparmor_restrict_unprivileged_userns = 1)"
            .into());
    }
    Ok(())
}

/// Check that the runner can work here: the kernel's settings, and — for
/// [`Look::Probe`], or when `launcher` is not `known` to have the runner
/// mode — a real run of `true` in the probe's sandbox, within `timeout`.
pub(super) fn probe(
    launcher: &Path,
    known: bool,
    timeout: std::time::Duration,
    look: Look,
) -> Probed<Namespaces> {
    // SAFETY: geteuid cannot fail.
    let euid = unsafe { nix::libc::geteuid() };
    kernel_allows(euid)?;
    let how = match euid {
        0 => "as root, without a user namespace",
        _ => "in a user namespace mapping this user to itself",
    };
    let ran = match (look, known) {
        (Look::Trial, true) => "not probed up front (the first run is its probe)",
        (Look::Probe, _) | (Look::Trial, false) => {
            must_pass(launcher, probe_args(), timeout)?;
            "ran the probe"
        }
    };
    Ok(Usable {
        reason: format!(
            "cordon's namespace runner ({}) {ran}; {how}",
            launcher.display()
        ),
        runner: Namespaces::at(launcher),
    })
}

/// The runner's facts: full enforcement; its failures are `cordon-ns: …`
/// lines at exit 125, a denied write is `Read-only file system`.
pub fn facts() -> WrapFacts {
    WrapFacts {
        backend: Backend::Namespaces,
        enforcement: Enforcement::Full,
        signatures: Signatures {
            runner_failure: vec![NS_PREFIX.into()],
            runner_failure_exit: Some(FAILURE_EXIT),
            runner_notices: vec![],
            denial: vec!["read-only file system".into()],
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::SandboxMode;
    use crate::sandbox::grant::lay_out;

    #[test]
    fn the_runner_gets_bwraps_profile_and_supervises() {
        let policy = SandboxPolicy::new(SandboxMode::WorkspaceWrite, "/home/me/ws");
        let mut layout = lay_out(&policy, &[], &[]);
        layout.protected.clear();
        let wrap = Namespaces::at("/usr/bin/cordon").wrap(&["true".into()], &policy, &layout);
        let argv = wrap.argv().join(" ");
        let profile = bwrap::profile(&layout).join(" ");
        let head = format!(
            "/usr/bin/cordon __ns --status-fd 3 --env-fd 4 --parent {} \
             --writable-root 0:0:/home/me/ws {profile} --unshare-net \
             --socket-families inet,inet6,netlink -- true",
            std::process::id()
        );
        assert_eq!(argv, head);
        assert_eq!(wrap.supervision(), Supervision::Launcher);
        assert_eq!(wrap.report(), StatusReport::Launcher);
        assert_eq!(wrap.handover(), EnvHandover::LauncherFd);
        assert_eq!(wrap.facts().backend, Backend::Namespaces);
        assert_eq!(wrap.facts().enforcement, Enforcement::Full);
    }

    #[test]
    fn the_probe_closes_the_network_too() {
        assert_eq!(
            probe_args().join(" "),
            "__ns --ro-bind / / --dev /dev --proc /proc --die-with-parent --unshare-net -- true"
        );
    }

    #[test]
    fn root_needs_no_user_namespace() {
        assert_eq!(kernel_allows(0), Ok(()));
    }

    #[test]
    #[cfg(target_os = "linux")]
    fn the_runner_reads_bwraps_profile_as_its_mount_program() {
        use super::super::launcher::namespaces::{Plan, Step};
        let policy = crate::model::SandboxPolicy::new(
            crate::model::SandboxMode::WorkspaceWrite,
            "/tmp/proj",
        );
        let layout = crate::sandbox::grant::lay_out(&policy, &[], &[]);
        let profile = crate::sandbox::bwrap::profile(&layout);
        let args: Vec<&str> = profile.iter().map(String::as_str).collect();
        let plan = Plan::read(&args).unwrap();
        assert_eq!(
            plan.steps[..3],
            [
                Step::Bind {
                    source: "/".into(),
                    dest: "/".into(),
                    writable: false,
                    optional: false
                },
                Step::Tmpfs("/tmp".into()),
                Step::Bind {
                    source: "/tmp/proj".into(),
                    dest: "/tmp/proj".into(),
                    writable: true,
                    optional: false
                },
            ]
        );
        assert!(plan.steps.contains(&Step::Dev("/dev".into())));
        assert!(plan.steps.contains(&Step::Proc("/proc".into())));
        assert!(!plan.unshare_net);
    }
}
