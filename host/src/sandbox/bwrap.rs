//! The bubblewrap backend: its probe, its profiles per mode (SPEC.md §6),
//! how it wraps an argv, and its message dialect.
//!
//! Every confined mode gets a read-only view of `/`, a fresh minimal `/dev`
//! (so `/dev/null` is writable and nothing else is) and a fresh `/proc`
//! whose kernel interfaces are read-only even for root ([`PROC_READ_ONLY`]),
//! plus cordon's hardening: new PID, IPC and UTS namespaces (the command
//! sees only its own processes and SysV IPC objects, and everything it
//! leaves behind dies with it), a new session (no terminal injection
//! through `TIOCSTI`) and no capabilities, even when the host runs as root.
//! `workspace-write` adds an ephemeral `/tmp` and a writable bind of the
//! workspace root.

use std::path::{Path, PathBuf};
use std::time::Duration;

use crate::model::{
    Backend, Enforcement, GrantFacts, SandboxMode, SandboxPolicy, Signatures, WrapFacts,
};
use crate::process::{HANDOVER_FD, INIT_ENV_FD, INIT_FD, STATUS_FD};

use super::grant::Layout;
use super::launcher::{INIT_PROBE, INIT_SUBCOMMAND};
use super::probe::{
    Look, Probed, SYSTEM_BIN_DIRS, Usable, find_in_system_dirs, must_pass, run_bounded, trusted,
};
use super::{EnvHandover, StatusReport, Supervision, Wrap};

/// The runner's program name.
pub const PROGRAM: &str = "bwrap";

/// Kernel interfaces in procfs that root could write (sysctls, the magic
/// SysRq trigger, IRQ affinities, bus, filesystem and driver knobs, MTRRs):
/// each is bound read-only over the sandbox's fresh `/proc`, because bwrap
/// covers `/proc/sys` only when `access(W_OK)` succeeds, which procfs
/// denies to root. The list follows what container runtimes mark
/// read-only; an entry this kernel lacks is skipped (`--ro-bind-try`).
pub const PROC_READ_ONLY: &[&str] = &[
    "/proc/sys",
    "/proc/sysrq-trigger",
    "/proc/irq",
    "/proc/bus",
    "/proc/fs",
    "/proc/mtrr",
    "/proc/scsi",
    "/proc/acpi",
    "/proc/asound",
    "/proc/driver",
];

/// The mount profile of `layout` (a policy laid out on this host), without
/// the runner, the hardening or the argv. Writable binds come first; the
/// mounts that shape the sandbox — `--dev`, `--proc`, `--tmpfs /tmp` and
/// the read-only covers — come after every writable bind, so no workspace
/// can cover them. (The one exception keeps a workspace inside `/tmp`
/// reachable: then the tmpfs is laid first and the workspace bound onto
/// it; such a workspace lies inside `/tmp` and cannot cover it.) The
/// grant's own mounts come last: each protected path bound read-only over
/// itself (an absent one over its placeholder), each directory above one
/// pinned ([`Layout::pinned`]), each deny-read directory
/// under an empty read-only tmpfs and each deny-read file under `/dev/null`.
pub fn profile(layout: &Layout) -> Vec<String> {
    let mut args: Vec<String> = ["--ro-bind", "/", "/"].map(String::from).to_vec();
    let tmp = ["--tmpfs".to_owned(), "/tmp".to_owned()];
    let mut tmp_last = false;
    if !layout.writable.is_empty() {
        if layout.writable.iter().any(|root| root.starts_with("/tmp")) {
            args.extend(tmp.clone());
        } else {
            tmp_last = true;
        }
        for root in &layout.writable {
            let root = root.to_string_lossy().into_owned();
            args.extend(["--bind".into(), root.clone(), root]);
        }
    }
    args.extend(["--dev", "/dev", "--proc", "/proc"].map(String::from));
    if tmp_last {
        args.extend(tmp);
    }
    for path in PROC_READ_ONLY {
        args.extend(["--ro-bind-try".into(), (*path).into(), (*path).into()]);
    }
    // A directory above a protected path is pinned (bound writable onto
    // itself) before it, so that it cannot be moved away with it. A
    // symlink cannot be mounted over (bwrap would follow it from the new
    // root); its target is protected in its own right where writable.
    let mut grant: Vec<(&Path, &str)> = layout
        .protected
        .iter()
        .filter(|p| !p.link)
        .map(|p| (p.path.as_path(), "--ro-bind"))
        .collect();
    let pinned = layout.pinned();
    grant.extend(pinned.iter().map(|dir| (dir.as_path(), "--bind")));
    grant.sort_by_cached_key(|(path, _)| super::launcher::prefix::depth(path));
    for (path, bind) in grant {
        let path = path.to_string_lossy().into_owned();
        args.extend([bind.into(), path.clone(), path]);
    }
    for hidden in &layout.hidden {
        let path = hidden.path.to_string_lossy().into_owned();
        match hidden.dir {
            true => args.extend(["--tmpfs".into(), path.clone(), "--remount-ro".into(), path]),
            false => args.extend(["--ro-bind".into(), "/dev/null".into(), path]),
        }
    }
    args.push("--die-with-parent".into());
    args
}

/// The probe's arguments (SPEC.md §5): `/` read-only with a fresh `/dev`
/// and `/proc`, running `true`; bwrap works here when it exits 0.
pub fn probe_args() -> Vec<String> {
    [
        "--ro-bind",
        "/",
        "/",
        "--dev",
        "/dev",
        "--proc",
        "/proc",
        "--die-with-parent",
        "--",
        "true",
    ]
    .map(String::from)
    .to_vec()
}

/// cordon's hardening, added to every confined mode: its own PID, IPC and
/// UTS namespaces (the command sees only its own processes, SysV IPC
/// objects and hostname), a new session, no capabilities.
pub const HARDENING: &[&str] = &[
    "--unshare-pid",
    "--unshare-ipc",
    "--unshare-uts",
    "--new-session",
    "--cap-drop",
    "ALL",
];

/// bwrap's flag that makes the command — cordon's init — the sandbox's
/// pid 1, with no reaper of bwrap's own inside.
pub const AS_PID_1: &str = "--as-pid-1";

/// bubblewrap at a trusted absolute path, ready to wrap argvs.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Bwrap {
    runner: PathBuf,
    /// The executable with cordon's init mode, run as the command's parent
    /// inside the sandbox; none runs the command directly (then a signal
    /// death reads as 128+N and a timeout gets no grace).
    init: Option<PathBuf>,
}

impl Bwrap {
    /// The runner at `runner` (unprobed: the ladder probes it), without
    /// cordon's init.
    pub fn at(runner: impl Into<PathBuf>) -> Self {
        Bwrap {
            runner: runner.into(),
            init: None,
        }
    }

    /// The same runner, starting every command under cordon's init from
    /// the executable at `init`.
    pub fn with_init(mut self, init: impl Into<PathBuf>) -> Self {
        self.init = Some(init.into());
        self
    }

    /// The full argv: `runner --args 4 --json-status-fd 3 PROFILE HARDENING
    /// -- argv`. The status fd is cordon's out-of-band evidence that bwrap
    /// really started the command (see [`StatusReport::BwrapJson`]); the
    /// handover fd carries the command's environment
    /// ([`EnvHandover::BwrapArgs`]), so bwrap itself runs without it.
    pub fn wrap(&self, argv: &[String], policy: &SandboxPolicy, layout: &Layout) -> Wrap {
        let mut full = vec![
            self.runner.to_string_lossy().into_owned(),
            "--args".into(),
            HANDOVER_FD.to_string(),
            "--json-status-fd".into(),
            STATUS_FD.to_string(),
        ];
        full.extend(profile(layout));
        if let Some(init) = &self.init {
            // The fresh /tmp of workspace-write would hide an init that
            // lives there (a build tree, a test run): bind it back.
            if policy.mode == SandboxMode::WorkspaceWrite && init.starts_with("/tmp") {
                let at = init.to_string_lossy().into_owned();
                full.extend(["--ro-bind".into(), at.clone(), at]);
            }
        }
        let mut grant = layout.facts.clone();
        let network = network(layout, &mut grant, self.init.is_some());
        full.extend(network.profile);
        full.extend(HARDENING.iter().map(|s| (*s).to_owned()));
        if self.init.is_some() {
            // cordon's init is the sandbox's pid 1, not bwrap's reaper:
            // the reaper runs with the command's uid, dumpable and without
            // the filters, so a command could ptrace it and act through it
            // (a host unix socket, with the network closed). The init is
            // not dumpable, and the kernel spares a namespace's pid 1 the
            // SIGSTOP and SIGKILL its own processes send.
            full.push(AS_PID_1.into());
        }
        full.push("--".into());
        let (supervision, handover) = match &self.init {
            Some(init) => {
                full.extend([
                    init.to_string_lossy().into_owned(),
                    INIT_SUBCOMMAND.into(),
                    "--status-fd".into(),
                    INIT_FD.to_string(),
                    "--env-fd".into(),
                    INIT_ENV_FD.to_string(),
                ]);
                // The host's namespaces that bwrap replaces: the init
                // refuses to run the command in any of them.
                let mut replaced = vec!["mnt", "pid", "ipc", "uts"];
                if layout.network_closed() {
                    replaced.push("net");
                }
                full.extend([
                    "--outside".into(),
                    super::launcher::verify::outside(&replaced),
                ]);
                full.extend(super::writable_roots(layout));
                full.extend(network.init);
                full.push("--".into());
                (Supervision::BwrapInit, EnvHandover::BwrapInit)
            }
            None => (Supervision::None, EnvHandover::BwrapArgs),
        };
        full.extend(argv.iter().cloned());
        grant.partial.extend(symlinked_protected(layout));
        if self.init.is_none() {
            grant.partial.push(
                "hardening: without cordon's init the command may make setuid files and use \
                 the kernel keyring, and bwrap's reaper (pid 1, the command's uid) can be \
                 traced"
                    .into(),
            );
        }
        let wrap = Wrap::new(full, policy.clone(), facts());
        let wrap = match network.proxy {
            Some(at) => wrap.proxied(at),
            None => wrap,
        };
        wrap.granting(grant)
            .holding(layout.absent())
            .reporting(StatusReport::BwrapJson)
            .handing_over(handover)
            .supervised(supervision)
    }
}

/// What the network grant adds to a namespace sandbox, bwrap's and
/// cordon's namespace runner's alike.
pub(super) struct NetworkArgs {
    /// Profile arguments: `--unshare-net` and the sockets bound back in.
    pub profile: Vec<String>,
    /// The init's arguments: `--socket-families`, `--proxy-socket`.
    pub init: Vec<String>,
    /// The host proxy's socket, when an allow-list reaches it.
    pub proxy: Option<crate::proxy::ProxyAt>,
}

/// The network of `layout` in a sandbox of its own network namespace,
/// with `supervised` saying whether cordon's init runs inside (it bridges
/// the proxy and closes host unix sockets; without it neither can be, and
/// `grant` says so).
pub(super) fn network(layout: &Layout, grant: &mut GrantFacts, supervised: bool) -> NetworkArgs {
    // An allow-list goes through the host's proxy: its socket bound in,
    // bridged to the sandbox's loopback by the init (which it needs).
    let proxy = match (&layout.allow_list, supervised) {
        (Some(endpoints), true) => match crate::proxy::ProxyAt::fresh_socket()
            .and_then(|at| at.inspecting_marked(endpoints))
        {
            Ok(at) => {
                grant.network = crate::model::Network::Allow(endpoints.clone());
                grant.narrowed.clear();
                Some(at)
            }
            Err(err) => {
                grant
                    .narrowed
                    .push(format!("network: no proxy socket ({err}): closed"));
                None
            }
        },
        (Some(_), false) => {
            grant.narrowed = vec![
                "network: the allow-list needs cordon's init inside bwrap to reach the \
                 host's proxy; the run has no network at all"
                    .into(),
            ];
            None
        }
        (None, _) => None,
    };
    // The socket's path, bound in and handed to the init.
    let socket = proxy.as_ref().and_then(|at| match at.place() {
        crate::proxy::Place::Socket(path) => Some(path.to_string_lossy().into_owned()),
        crate::proxy::Place::Loopback(_) => None,
    });
    let mut args = NetworkArgs {
        profile: vec![],
        init: vec![],
        proxy,
    };
    if layout.network_closed() {
        // Its own network namespace: no route out, no host loopback, no
        // host abstract socket, no host port to listen on.
        args.profile.push("--unshare-net".into());
        // A granted socket stays reachable where the fresh /tmp would
        // hide it.
        for socket in &layout.facts.sockets {
            let at = socket.to_string_lossy().into_owned();
            args.profile
                .extend(["--ro-bind-try".into(), at.clone(), at]);
        }
        if let Some(at) = &socket {
            args.profile
                .extend(["--ro-bind".into(), at.clone(), at.clone()]);
        }
        // The certificates an inspected run trusts, beside the socket.
        if let Some(bundle) = args.proxy.as_ref().and_then(|at| at.bundle()) {
            let at = bundle.to_string_lossy().into_owned();
            args.profile.extend(["--ro-bind".into(), at.clone(), at]);
        }
        if supervised {
            // Host pathname sockets are files a mount cannot close: the
            // init refuses the unix family (unless a socket is exposed);
            // inet sockets reach only the private loopback.
            let mut families = vec!["inet", "inet6", "netlink"];
            if !layout.facts.sockets.is_empty() {
                families.push("unix");
            }
            args.init
                .extend(["--socket-families".into(), families.join(",")]);
        } else {
            grant.partial.push(
                "sockets: without cordon's init, bwrap cannot close host unix sockets \
                 (pathname sockets stay reachable)"
                    .into(),
            );
        }
    }
    if let Some(at) = socket {
        args.init.extend(["--proxy-socket".into(), at]);
    }
    grant.partial.extend(layout.exposed_sockets_reason());
    args
}

/// What a symlinked protected path leaves open (a mount cannot cover the
/// link itself).
pub(super) fn symlinked_protected(layout: &Layout) -> Option<String> {
    let links: Vec<String> = layout
        .protected
        .iter()
        .filter(|p| p.link)
        .map(|p| p.path.display().to_string())
        .collect();
    (!links.is_empty()).then(|| {
        format!(
            "protected: {} is a symlink; its target is read-only where a run may write \
             it, but the link itself can be replaced in its writable directory",
            links.join(", ")
        )
    })
}

/// The `child-pid` bwrap reports on its status fd: the sandbox's first
/// process, seen from the host, whose process group holds cordon's init.
pub fn child_pid(report: &[u8]) -> Option<i32> {
    let text = std::str::from_utf8(report).ok()?;
    let (_, rest) = text.split_once("\"child-pid\"")?;
    let digits: String = rest
        .trim_start_matches([':', ' '])
        .chars()
        .take_while(char::is_ascii_digit)
        .collect();
    digits.parse().ok().filter(|pid| *pid > 1)
}

/// Whether `init` has cordon's init mode: it answers `__init --probe`
/// within `timeout`. Said in the rung's reason either way.
fn probe_init(init: &Path, timeout: Duration) -> Result<(), String> {
    let argv = [
        init.to_string_lossy().into_owned(),
        INIT_SUBCOMMAND.into(),
        "--probe".into(),
    ];
    let out = run_bounded(&argv, timeout)?;
    match out.success && out.stdout.lines().next() == Some(INIT_PROBE) {
        true => Ok(()),
        false => Err(format!(
            "{} has no init mode: {}",
            init.display(),
            out.first_line()
        )),
    }
}

/// Find bwrap: `configured` (`bwrap_path`), else the first in the fixed
/// system directories, never on the caller's `PATH`.
pub(super) fn locate(configured: Option<&Path>) -> Result<PathBuf, String> {
    match configured {
        Some(path) => Ok(path.to_path_buf()),
        None => find_in_system_dirs(PROGRAM).ok_or_else(|| {
            format!(
                "bwrap is not installed (not found in {}; set bwrap_path to use another)",
                SYSTEM_BIN_DIRS.join(", ")
            )
        }),
    }
}

/// Find bwrap ([`locate`]), check that it can be trusted and, for
/// [`Look::Probe`], run the probe (SPEC.md §5) within `timeout`; then check
/// that `init` (the launcher executable) has cordon's init mode, unless it
/// is `known` to (this very executable, which dispatches the modes).
pub(super) fn probe(
    configured: Option<&Path>,
    init: Option<(&Path, bool)>,
    timeout: Duration,
    look: Look,
) -> Probed<Bwrap> {
    let runner = locate(configured)?;
    let trust = trusted(&runner)?;
    let ran = match look {
        Look::Probe => {
            must_pass(&runner, probe_args(), timeout)?;
            "ran the probe"
        }
        Look::Trial => "not probed up front (the first run is its probe)",
    };
    let mut bwrap = Bwrap::at(&runner);
    let checked = init.map(|(init, known)| match known {
        true => (init, Ok(())),
        false => (init, probe_init(init, timeout)),
    });
    let init = match checked {
        Some((init, Ok(()))) => {
            bwrap = bwrap.with_init(init);
            format!("commands run under cordon's init ({})", init.display())
        }
        Some((_, Err(why))) => format!(
            "no init ({why}): a signal death reads as exit code 128+N and a timeout kills at once"
        ),
        None => "no init: a signal death reads as exit code 128+N and a timeout kills at once"
            .to_owned(),
    };
    Ok(Usable {
        reason: format!("{} {ran}; {trust}; {init}", runner.display()),
        runner: bwrap,
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
    use crate::sandbox::grant::lay_out;

    /// `policy` laid out with nothing protected (the shape tests).
    fn bare(policy: &SandboxPolicy) -> Layout {
        let mut layout = lay_out(policy, &[], &[]);
        layout.protected.clear();
        layout
    }

    /// A policy of `mode` with today's network (the shape tests).
    fn open(mode: SandboxMode, root: &str) -> SandboxPolicy {
        SandboxPolicy {
            network: crate::model::Network::Full,
            ..SandboxPolicy::new(mode, root)
        }
    }

    fn argv_of(mode: SandboxMode) -> Vec<String> {
        let policy = open(mode, "/home/me/ws");
        let wrap = Bwrap::at("/usr/bin/bwrap").wrap(&["true".into()], &policy, &bare(&policy));
        wrap.argv().to_vec()
    }

    fn covers() -> String {
        PROC_READ_ONLY
            .iter()
            .map(|p| format!("--ro-bind-try {p} {p}"))
            .collect::<Vec<_>>()
            .join(" ")
    }

    const HARDENED: &str = "--unshare-pid --unshare-ipc --unshare-uts --new-session --cap-drop ALL";

    #[test]
    fn read_only_profile_is_exact() {
        assert_eq!(
            argv_of(SandboxMode::ReadOnly).join(" "),
            format!(
                "/usr/bin/bwrap --args 4 --json-status-fd 3 --ro-bind / / --dev /dev --proc /proc {} \
                 --die-with-parent {HARDENED} -- true",
                covers()
            )
        );
    }

    #[test]
    fn workspace_write_binds_the_workspace_before_what_shapes_the_sandbox() {
        assert_eq!(
            argv_of(SandboxMode::WorkspaceWrite).join(" "),
            format!(
                "/usr/bin/bwrap --args 4 --json-status-fd 3 --ro-bind / / --bind /home/me/ws /home/me/ws \
                 --dev /dev --proc /proc --tmpfs /tmp {} --die-with-parent {HARDENED} -- true",
                covers()
            )
        );
    }

    #[test]
    fn a_workspace_inside_tmp_is_bound_onto_the_fresh_tmp() {
        let policy = SandboxPolicy::new(SandboxMode::WorkspaceWrite, "/tmp/proj");
        let args = profile(&bare(&policy)).join(" ");
        assert!(
            args.starts_with("--ro-bind / / --tmpfs /tmp --bind /tmp/proj /tmp/proj --dev /dev"),
            "{args}"
        );
        assert_eq!(args.matches("--tmpfs").count(), 1);
    }

    #[test]
    fn every_kernel_interface_is_covered_after_proc() {
        for mode in [SandboxMode::ReadOnly, SandboxMode::WorkspaceWrite] {
            let args = profile(&bare(&SandboxPolicy::new(mode, "/w")));
            let proc_at = args.iter().position(|a| a == "--proc").unwrap();
            let last_writable = args.iter().rposition(|a| a == "--bind").unwrap_or(0);
            assert!(last_writable < proc_at, "{args:?}");
            for path in PROC_READ_ONLY {
                let at = args.iter().position(|a| a == path).unwrap();
                assert!(at > proc_at && args[at - 1] == "--ro-bind-try", "{path}");
            }
            assert!(PROC_READ_ONLY.contains(&"/proc/sys"));
        }
    }

    #[test]
    fn the_probe_is_the_spec_profile_running_true() {
        assert_eq!(
            probe_args().join(" "),
            "--ro-bind / / --dev /dev --proc /proc --die-with-parent -- true"
        );
    }

    #[test]
    fn with_the_init_the_command_runs_under_it_and_the_init_stays_visible() {
        let init = Bwrap::at("/usr/bin/bwrap").with_init("/tmp/build/cordon");
        let policy = open(SandboxMode::WorkspaceWrite, "/home/me/ws");
        let wrap = init.wrap(&["true".into()], &policy, &bare(&policy));
        let argv = wrap.argv().join(" ");
        // cordon's init is pid 1; it is told the host's namespaces (which it
        // must not be in) and the writable root's identity.
        let outside = super::super::launcher::verify::outside(&["mnt", "pid", "ipc", "uts"]);
        assert!(
            argv.ends_with(&format!(
                "--ro-bind /tmp/build/cordon /tmp/build/cordon {HARDENED} --as-pid-1 -- \
                 /tmp/build/cordon __init --status-fd 5 --env-fd 6 --outside {outside} \
                 --writable-root 0:0:/home/me/ws -- true"
            )),
            "{argv}"
        );
        assert_eq!(wrap.supervision(), Supervision::BwrapInit);
        assert_eq!(wrap.handover(), EnvHandover::BwrapInit);
        // Read-only keeps the host's /tmp: nothing to bind back.
        let ro = open(SandboxMode::ReadOnly, "/home/me/ws");
        assert_eq!(
            init.wrap(&["true".into()], &ro, &bare(&ro))
                .argv()
                .iter()
                .filter(|a| *a == "/tmp/build/cordon")
                .count(),
            1
        );
    }

    #[test]
    fn the_child_pid_is_read_from_the_status_report() {
        assert_eq!(
            child_pid(br#"{ "child-pid": 4242, "mnt-namespace": 1 }"#),
            Some(4242)
        );
        assert_eq!(child_pid(br#"{ "child-pid": 1 }"#), None, "never pid 1");
        assert_eq!(child_pid(b"{ \"exit-code\": 0 }"), None);
        assert_eq!(child_pid(b""), None);
    }

    #[test]
    fn argv_after_the_separator_is_untouched() {
        let policy = SandboxPolicy::new(SandboxMode::ReadOnly, "/ws");
        let odd = vec!["bash".into(), "-c".into(), "echo \"$x\" \\\n --".into()];
        let wrap = Bwrap::at("bwrap").wrap(&odd, &policy, &bare(&policy));
        let at = wrap.argv().iter().position(|a| a == "--").unwrap();
        assert_eq!(&wrap.argv()[at + 1..], &odd[..]);
    }

    #[test]
    fn a_closed_network_is_a_network_namespace_and_the_init_closes_unix_sockets() {
        let init = Bwrap::at("/usr/bin/bwrap").with_init("/usr/bin/cordon");
        let mut policy = SandboxPolicy::new(SandboxMode::ReadOnly, "/ws");
        let wrap = init.wrap(&["true".into()], &policy, &bare(&policy));
        let argv = wrap.argv().join(" ");
        assert!(
            argv.contains(&format!("--unshare-net {HARDENED} --")),
            "{argv}"
        );
        assert!(
            argv.ends_with("--socket-families inet,inet6,netlink -- true"),
            "{argv}"
        );
        assert!(wrap.grant().partial.is_empty());
        // An exposed socket: bound in, the unix family allowed, and said.
        policy.sockets.push("/tmp/agent.sock".into());
        let wrap = init.wrap(&["true".into()], &policy, &bare(&policy));
        let argv = wrap.argv().join(" ");
        assert!(
            argv.contains("--ro-bind-try /tmp/agent.sock /tmp/agent.sock"),
            "{argv}"
        );
        assert!(
            argv.contains("--socket-families inet,inet6,netlink,unix --"),
            "{argv}"
        );
        assert!(wrap.grant().partial[0].starts_with("sockets: exposing /tmp/agent.sock"));
        // Without the init nothing closes the pathname sockets: partial.
        let bare_bwrap = Bwrap::at("/usr/bin/bwrap");
        let plain = SandboxPolicy::new(SandboxMode::ReadOnly, "/ws");
        let wrap = bare_bwrap.wrap(&["true".into()], &plain, &bare(&plain));
        assert!(wrap.grant().partial[0].contains("without cordon's init"));
        assert_eq!(wrap.facts().enforcement, Enforcement::Partial);
        // Full keeps today's profile.
        let full = open(SandboxMode::ReadOnly, "/ws");
        let wrap = init.wrap(&["true".into()], &full, &bare(&full));
        assert!(
            !wrap
                .argv()
                .iter()
                .any(|a| a == "--unshare-net" || a == "--socket-families")
        );
    }

    #[test]
    fn the_grant_mounts_come_after_everything_that_shapes_the_sandbox() {
        let ws = tempfile::tempdir().unwrap();
        let extra = tempfile::tempdir().unwrap();
        let root = ws.path().to_path_buf();
        std::fs::create_dir(root.join(".git")).unwrap();
        std::fs::create_dir(root.join("secrets")).unwrap();
        std::fs::write(root.join("token"), "t").unwrap();
        let mut policy = SandboxPolicy::new(SandboxMode::WorkspaceWrite, &root);
        policy.writable_roots.push(extra.path().to_path_buf());
        policy.deny_read = vec![root.join("secrets"), root.join("token")];
        let layout = lay_out(&policy, &[], &[]);
        let wrap = Bwrap::at("bwrap").wrap(&["true".into()], &policy, &layout);
        let args = wrap.argv().join(" ");
        let at = |needle: &str| {
            args.find(needle)
                .unwrap_or_else(|| panic!("{needle} in {args}"))
        };
        let (r, e) = (root.display(), extra.path().display());
        assert!(at(&format!("--bind {e} {e}")) < at("--proc /proc"));
        assert!(at(&format!("--bind {r}/.git {r}/.git")) > at("--ro-bind-try /proc/driver"));
        assert!(
            at(&format!("--ro-bind {r}/.git/hooks {r}/.git/hooks"))
                > at(&format!("--bind {r}/.git "))
        );
        assert!(args.contains(&format!("--tmpfs {r}/secrets --remount-ro {r}/secrets")));
        assert!(args.contains(&format!("--ro-bind /dev/null {r}/token")));
        // The absent defaults are held by placeholders, in both roots.
        assert!(wrap.placeholders().contains(&root.join(".bashrc")));
        assert!(wrap.placeholders().contains(&extra.path().join(".git")));
        assert!(!wrap.placeholders().contains(&root.join(".git")));
        assert!(wrap.placeholders().contains(&root.join(".git/commondir")));
        assert!(args.contains(&format!("--ro-bind {r}/.bashrc {r}/.bashrc")));
        assert_eq!(
            wrap.grant().writable_roots,
            [root.clone(), extra.path().to_path_buf()]
        );
    }
}
