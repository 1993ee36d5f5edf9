//! The Landlock backend, host side: its probe (the launcher's `--probe`),
//! the grants per mode (SPEC.md §6), the wrap that starts cordon's own
//! launcher ([`super::launcher`], the code that runs inside the sandbox)
//! and its message dialect.

use std::path::{Path, PathBuf};

use crate::model::{Backend, Enforcement, SandboxPolicy, Signatures, WrapFacts};

use super::grant::{Hidden, Layout};
use super::launcher::{
    self, FAILURE_EXIT, PARTIAL_NOTICE, PREFIX, PROBE_FULL, PROBE_IPC_ISOLATED, PROBE_METADATA,
    PROBE_PARTIAL, PROBE_SCOPES, PROBE_WRITES_SUPERVISED, PROBE_WRITES_UNSUPERVISED,
};
use super::probe::{Probed, Usable, must_pass, run_bounded, trusted};
use super::{EnvHandover, SandboxConfig, StatusReport, Supervision, Wrap};

pub use super::launcher::landlock::{kernel_abi, kernel_scopes};

/// How a usable Landlock rung's reason begins its writes part when the
/// file supervisor cannot keep the protected paths (`cordon doctor` warns).
pub const WRITES_UNSUPERVISED: &str = "writes: not supervised ";

/// Whether the launcher's file supervisor can carry out the writes in a
/// root that holds protected paths (what its probe said).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Writes {
    /// It can: such a root is granted read-only to Landlock and its
    /// protected paths hold.
    Supervised,
    /// It cannot, for this reason: the root is granted whole, its
    /// protected paths writable (partial).
    Unsupervised(String),
}

/// The grants of `layout` (SPEC.md §6), and what Landlock enforces of the
/// grant only in part: read-only `/`, writable `/dev/null` and `/dev/tty`
/// (the files, not `/dev`), plus `/tmp` (the host's: writes persist) and every writable
/// root under `workspace-write`.
///
/// A deny-read path is hidden by granting the siblings along its path
/// instead of `/` ([`read_grants`]). Landlock only ever adds rights beneath
/// a path, so it cannot keep a protected path read-only inside a writable
/// root by itself: where `writes` are supervised, each writable place that
/// holds a protected path (or a place that does) is granted
/// `--rw-supervised` and its protected paths named (`--protected`), so the
/// launcher's file supervisor carries out its writes; otherwise the run
/// says so as partial. A path hidden inside a writable root is partial.
pub fn grants(layout: &Layout, writes: &Writes) -> (Vec<String>, Vec<String>) {
    let mut partial = vec![];
    let (outside, inside): (Vec<&Hidden>, Vec<&Hidden>) = layout
        .hidden
        .iter()
        .partition(|h| writable_root_of(layout, &h.path).is_none());
    let inside: Vec<&Hidden> = inside.into_iter().filter(|h| !h.host).collect();
    if !inside.is_empty() {
        partial.push(format!(
            "deny-read: Landlock cannot hide a path inside a writable root ({})",
            list(inside.iter().map(|h| h.path.as_path()))
        ));
    }
    let hidden: Vec<&Path> = outside.iter().map(|h| h.path.as_path()).collect();
    let mut args = read_grants(&hidden);
    if outside.iter().any(|h| h.dir && !h.host) {
        partial.push(
            "deny-read: under Landlock a hidden directory's entries can still be listed \
             (not read)"
                .to_owned(),
        );
    }
    // `/dev/tty` as the mount rungs bind it: a run has no controlling
    // terminal, so opening it gives ENXIO — not a denial bash meets at
    // every start.
    args.extend(["--rw".into(), "/dev/null".into()]);
    args.extend(["--rw".into(), "/dev/tty".into()]);
    let places = writable_places(layout);
    let supervised = match writes {
        Writes::Supervised => supervised_places(&places, layout),
        Writes::Unsupervised(_) => vec![],
    };
    for place in &places {
        let flag = match supervised.contains(place) {
            true => "--rw-supervised",
            false => "--rw",
        };
        args.extend([flag.into(), place.to_string_lossy().into_owned()]);
    }
    for protected in &layout.protected {
        if supervised
            .iter()
            .any(|place| protected.path.starts_with(place))
        {
            args.extend([
                "--protected".into(),
                protected.path.to_string_lossy().into_owned(),
            ]);
        }
    }
    if let (false, Writes::Unsupervised(reason)) = (layout.protected.is_empty(), writes) {
        // By name: the same defaults repeat in every writable root.
        let mut names: Vec<String> = vec![];
        for protected in &layout.protected {
            let name = layout
                .writable
                .iter()
                .find_map(|root| protected.path.strip_prefix(root).ok())
                .unwrap_or(&protected.path)
                .display()
                .to_string();
            if !names.contains(&name) {
                names.push(name);
            }
        }
        partial.push(format!(
            "protected: Landlock cannot keep a path inside a writable root read-only and \
             cordon's file supervisor cannot here ({reason}): {} stay writable",
            names.join(", ")
        ));
    }
    (args, partial)
}

/// Where a run of `layout` may write under Landlock: the host's `/tmp`
/// and every writable root (none for a run that writes nothing).
fn writable_places(layout: &Layout) -> Vec<&Path> {
    if layout.writable.is_empty() {
        return vec![];
    }
    let mut places = vec![Path::new("/tmp")];
    for root in &layout.writable {
        if !places.contains(&root.as_path()) {
            places.push(root);
        }
    }
    places
}

/// The places whose writes the file supervisor carries out: each one that
/// holds a protected path, and each one that holds such a place (Landlock's
/// rights on it would reach inside, past the supervisor).
fn supervised_places<'a>(places: &[&'a Path], layout: &Layout) -> Vec<&'a Path> {
    let holding: Vec<&Path> = places
        .iter()
        .copied()
        .filter(|place| layout.protected.iter().any(|p| p.path.starts_with(place)))
        .collect();
    places
        .iter()
        .copied()
        .filter(|place| holding.iter().any(|held| held.starts_with(place)))
        .collect()
}

/// Where a run of `layout` may write `path` under Landlock: the writable
/// root it lies in, or the host's `/tmp`, which every writable run gets.
fn writable_root_of<'a>(layout: &'a Layout, path: &Path) -> Option<&'a Path> {
    let tmp = !layout.writable.is_empty() && path.starts_with("/tmp");
    layout
        .writable
        .iter()
        .map(PathBuf::as_path)
        .find(|root| path.starts_with(root))
        .or_else(|| tmp.then_some(Path::new("/tmp")))
}

/// Why Landlock cannot confine `layout` at all: one of the host's own
/// directories (its component cache, its verdicts, the spill root) lies
/// where the run may write — inside a writable root, or in the host's
/// `/tmp`, which a writable run shares — and Landlock only ever adds rights
/// beneath a path, so it can neither hide nor protect it. A command could
/// then rewrite the host's state (a compiled blob and the MAC key beside
/// it: native code the next host runs), so the run fails closed instead
/// of running with the host exposed. None when every such path is out of
/// reach.
pub fn exposed_host_state(layout: &Layout) -> Option<String> {
    let exposed: Vec<String> = layout
        .hidden
        .iter()
        .filter(|h| h.host)
        .filter_map(|h| {
            let root = writable_root_of(layout, &h.path)?;
            Some(format!(
                "{} lies inside the writable {}",
                h.path.display(),
                root.display()
            ))
        })
        .collect();
    (!exposed.is_empty()).then(|| {
        format!(
            "the host's own state cannot be hidden from this run under Landlock ({}): move it \
             out of the writable roots (the component cache with --component-cache DIR or \
             XDG_CACHE_HOME, the verdicts with XDG_CACHE_HOME, the spill root with \
             XDG_RUNTIME_DIR, else XDG_CACHE_HOME) or confine this run with bwrap",
            exposed.join("; ")
        )
    })
}

/// A few paths for a message.
fn list<'a>(paths: impl Iterator<Item = &'a Path>) -> String {
    let paths: Vec<String> = paths.map(|p| p.display().to_string()).collect();
    match paths.len() {
        0..=4 => paths.join(", "),
        n => format!("{}, … ({n} in all)", paths[..4].join(", ")),
    }
}

/// Read grants that leave `hidden` out: `--ro /` when nothing is hidden;
/// else `--ls` on each ancestor of a hidden path and `--ro` on each of its
/// other entries, so the hidden path itself gets no read right at all. A
/// symlink among them that leads into (or above) a hidden path is left
/// out too: the kernel grants what a rule's path resolves to.
///
/// Asked twice a one-shot run (the runner started ahead, then the run's
/// own wrap) of directories as full as a host's `/tmp`, so an entry costs
/// no system call of its own: whether it is a symlink comes with the
/// listing (`d_type`), entries sort by name, and paths are looked up as
/// bytes, spelled as [`Path::components`] spells them.
pub fn read_grants(hidden: &[&Path]) -> Vec<String> {
    use std::collections::HashSet;
    use std::os::unix::ffi::OsStrExt;
    if hidden.is_empty() {
        return vec!["--ro".into(), "/".into()];
    }
    let spelled = |path: &Path| path.components().collect::<PathBuf>().into_os_string();
    let left_out: HashSet<_> = hidden.iter().map(|path| spelled(path)).collect();
    let ancestors: HashSet<_> = hidden
        .iter()
        .flat_map(|path| path.ancestors().skip(1))
        .map(spelled)
        .collect();
    let mut args = vec![];
    let mut dirs = vec![PathBuf::from("/")];
    while let Some(dir) = dirs.pop() {
        args.extend(["--ls".into(), dir.to_string_lossy().into_owned()]);
        let Ok(entries) = std::fs::read_dir(&dir) else {
            continue;
        };
        // Unknown: taken for a symlink, and looked at.
        let mut entries: Vec<(std::ffi::OsString, bool)> = entries
            .filter_map(|entry| {
                let entry = entry.ok()?;
                let link = entry.file_type().map_or(true, |kind| kind.is_symlink());
                Some((entry.file_name(), link))
            })
            .collect();
        entries.sort_by(|a, b| a.0.as_bytes().cmp(b.0.as_bytes()));
        for (name, link) in entries {
            let entry = dir.join(name);
            if left_out.contains(entry.as_os_str()) {
                continue;
            }
            if ancestors.contains(entry.as_os_str()) {
                dirs.push(entry);
                continue;
            }
            let leads_to_hidden = link
                && std::fs::canonicalize(&entry).is_ok_and(|target| {
                    hidden
                        .iter()
                        .any(|h| target.starts_with(h) || h.starts_with(&target))
                });
            if !leads_to_hidden {
                args.extend(["--ro".into(), entry.to_string_lossy().into_owned()]);
            }
        }
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
    /// Whether its file supervisor keeps the protected paths.
    writes: Writes,
    /// Whether runs have the kernel log their denials (`--log-denials`):
    /// Landlock ABI 7 and a host that reads the records.
    log_denials: bool,
    /// What the launcher's probe printed (the ladder keeps it for the
    /// boot); empty for a launcher that was not probed.
    said: String,
}

impl Landlock {
    /// The launcher at `launcher` (unprobed: the ladder probes it), giving
    /// runs their own IPC namespaces and supervising the writes in roots
    /// that hold protected paths.
    pub fn at(launcher: impl Into<PathBuf>, enforcement: Enforcement) -> Self {
        Landlock {
            launcher: launcher.into(),
            enforcement,
            isolate_ipc: true,
            writes: Writes::Supervised,
            log_denials: false,
            said: String::new(),
        }
    }

    /// What the launcher's probe printed, when it was probed.
    pub fn said(&self) -> &str {
        &self.said
    }

    /// This runner for a run whose launcher is another, unprivileged user
    /// (a root server's client): it cannot unshare IPC (that needs
    /// `CAP_SYS_ADMIN`), so SysV IPC and message queues are refused
    /// instead, as for any unprivileged host.
    pub fn for_unprivileged_user(&self) -> Landlock {
        Landlock {
            isolate_ipc: false,
            ..self.clone()
        }
    }

    /// Its enforcement on this kernel.
    pub fn enforcement(&self) -> Enforcement {
        self.enforcement
    }

    /// `launcher __landlock --status-fd 3 --env-fd 4 --parent HOST [--unshare-ipc] GRANTS -- argv`.
    pub fn wrap(&self, argv: &[String], policy: &SandboxPolicy, layout: &Layout) -> Wrap {
        let mut full = super::supervised_launch(&self.launcher, launcher::SUBCOMMAND);
        if self.isolate_ipc {
            full.push("--unshare-ipc".into());
        }
        if self.log_denials {
            full.push("--log-denials".into());
        }
        let (grants, mut partial) = grants(layout, &self.writes);
        let mut grant = layout.facts.clone();
        // An allow-list goes through the host's proxy on a loopback port
        // of its own: the command may make TCP stream sockets and connect
        // to that port only (Landlock's TCP rules, ABI 4).
        let proxy = match &layout.allow_list {
            Some(endpoints) if kernel_abi() >= 4 => match crate::proxy::ProxyAt::reserve_loopback()
                .and_then(|at| at.inspecting_marked(endpoints))
            {
                Ok(at) => {
                    let port = at.client_port();
                    grant.network = crate::model::Network::Allow(endpoints.clone());
                    grant.narrowed.clear();
                    partial.push(format!(
                        "network: Landlock's TCP rules bound the port, not the address: the \
                         command can reach any host on port {port} (the proxy's) directly"
                    ));
                    Some(at)
                }
                Err(err) => {
                    grant
                        .narrowed
                        .push(format!("network: no proxy port ({err}): closed"));
                    None
                }
            },
            Some(_) => {
                grant.narrowed = vec![
                    "network: the allow-list needs Landlock's TCP rules (ABI 4) to keep the \
                     command to the host's proxy; the run has no network at all"
                        .into(),
                ];
                None
            }
            None => None,
        };
        if layout.network_closed() {
            // The host's network namespace is shared: the command may make
            // no socket but a unix one, and that only to reach an exposed
            // socket (abstract ones stay scoped out by Landlock); with the
            // proxy, TCP stream sockets too, to its port alone.
            let mut families = vec![];
            if !layout.facts.sockets.is_empty() {
                families.push("unix");
            }
            if let Some(at) = &proxy {
                families.extend(["inet:stream", "inet6:stream"]);
                full.extend(["--connect-port".into(), at.client_port().to_string()]);
            }
            full.extend(["--socket-families".into(), families.join(",")]);
            partial.extend(layout.exposed_sockets_reason());
        }
        full.extend(super::writable_roots(layout));
        full.extend(grants);
        // The inspected run's bundle, made after the read grants were
        // listed: readable even where a hidden path's siblings are granted
        // one by one in place of `/`.
        if let Some(dir) = proxy.as_ref().and_then(|at| at.bundle()?.parent()) {
            full.extend(["--ro".into(), dir.to_string_lossy().into_owned()]);
        }
        full.push("--".into());
        full.extend(argv.iter().cloned());
        grant.partial.extend(partial);
        let wrap = Wrap::new(full, policy.clone(), facts(self.enforcement));
        let wrap = match proxy {
            Some(at) => wrap.proxied(at),
            None => wrap,
        };
        wrap.granting(grant)
            .reporting(StatusReport::Launcher)
            .handing_over(EnvHandover::LauncherFd)
            .supervised(Supervision::Launcher)
    }
}

/// The executable with cordon's launcher modes — `config.launcher`, which
/// must be trustworthy, else the launcher's own executable installed beside
/// this one ([`installed_launcher`]), else this executable (cordon itself,
/// as trusted as the host running it) when its `main` dispatches the modes
/// — and what its trust check said.
pub(super) fn launcher_path(config: &SandboxConfig) -> Result<(PathBuf, String), String> {
    match &config.launcher {
        Some(path) => Ok((path.clone(), format!("; {}", trusted(path)?))),
        None => match installed_launcher() {
            Some(path) => Ok((path, String::new())),
            None if !launcher::dispatches() => Err(NO_LAUNCHER.into()),
            None => Ok((
                std::env::current_exe()
                    .map_err(|err| format!("cannot locate the launcher: {err}"))?,
                String::new(),
            )),
        },
    }
}

/// Whether the default launcher ([`launcher_path`] with none configured)
/// is known to dispatch the modes without a probe: this executable's
/// `main` does, or the launcher installed beside it is of this build.
pub(super) fn default_launcher_known() -> bool {
    installed_launcher().is_some() || launcher::dispatches()
}

/// Whether the executable at `path` holds exactly [`launcher::BUILD`] in
/// its [`launcher::BUILD_SECTION`] (read alone: the ELF headers, the
/// section names and that section): a `cordon-launcher` of this build.
pub fn of_this_build(path: &Path) -> bool {
    use object::{Object, ObjectSection};
    let Ok(file) = std::fs::File::open(path) else {
        return false;
    };
    let cache = object::ReadCache::new(file);
    let Ok(elf) = object::File::parse(&cache) else {
        return false;
    };
    elf.section_by_name(launcher::BUILD_SECTION)
        .and_then(|section| section.data().ok())
        .is_some_and(|data| data == launcher::BUILD.as_bytes())
}

/// `cordon-launcher` installed beside this executable (the same
/// directory, as `/proc/self/exe` names it), when it is trustworthy
/// ([`trusted`]) and carries this build's identity
/// ([`of_this_build`]: built from the same launcher source, so it speaks
/// the host's protocol). Every confined run starts a launcher mode, and
/// this small executable starts and ends faster than cordon itself. Looked
/// for once a process; none when absent, stale or untrusted (cordon itself
/// is used then).
pub(crate) fn installed_launcher() -> Option<PathBuf> {
    static FOUND: std::sync::OnceLock<Option<PathBuf>> = std::sync::OnceLock::new();
    FOUND
        .get_or_init(|| {
            let this = std::env::current_exe().ok()?;
            let path = this.parent()?.join(launcher::EXECUTABLE);
            if path == this {
                return None;
            }
            trusted(&path).ok()?;
            of_this_build(&path).then_some(path)
        })
        .clone()
}

/// Why a host in a program that is not `cordon` has no launcher: started
/// with a launcher's argv, its `main` would run itself again (a benchmark
/// started copies of itself this way).
pub(super) const NO_LAUNCHER: &str = "no launcher: this program does not dispatch cordon's \
     launcher modes (its main does not call cordon_launcher::invoked); set the sandbox's \
     launcher to an installed cordon (SandboxConfig.launcher; `landlock_launcher` in \
     cordon.toml)";

/// Ask the launcher (`config.launcher`, else this executable) to probe the
/// kernel, within the probe timeout. Enforcement is `partial` when the
/// kernel lacks a file right or scope cordon asks for. Runs that cannot get
/// their own IPC namespace (the launcher needs `CAP_SYS_ADMIN`) get no IPC.
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
    // Without an IPC namespace of its own a run gets no IPC at all (the
    // launcher's IPC filter), so either way nothing of the host's is shared.
    confined_run(&launcher, report.ipc_isolated, config)?;
    let how = format!(
        "{} ran itself (--version) confined and answered",
        launcher.display()
    );
    Ok(usable(launcher, &out.stdout, report, config, &how, &trust))
}

/// The launcher as its probe found it earlier this boot (`said`: what the
/// probe printed, kept by the ladder), without starting it; none when that
/// cannot be read as a probe's answer. The ladder takes it on trial.
pub(super) fn remembered(config: &SandboxConfig, said: &str) -> Probed<Landlock> {
    let (launcher, trust) = launcher_path(config)?;
    let report = parse_report(said).ok_or("the remembered probe cannot be read")?;
    let how = format!(
        "{} passed its probe earlier this boot (remembered, so no probe per run; a run it \
         does not start probes it again, and `cordon probe` checks afresh), which answered",
        launcher.display()
    );
    Ok(usable(launcher, said, report, config, &how, &trust))
}

/// The usable rung its probe's answer (`said`, read as `report`) describes,
/// and why, beginning with `how` it was found.
fn usable(
    launcher: PathBuf,
    said: &str,
    report: ProbeReport,
    config: &SandboxConfig,
    how: &str,
    trust: &str,
) -> Usable<Landlock> {
    let (log_denials, denials) = denial_evidence(config);
    Usable {
        reason: format!(
            "{how}: {}; scopes: {}; ipc: {}; metadata: {}; {}; denials: {denials}{trust}",
            said.lines().next().unwrap_or(""),
            if report.scopes.is_empty() {
                "none (kernel ABI below 6)".to_owned()
            } else {
                report.scopes.join(", ")
            },
            if report.ipc_isolated {
                "own namespace per run"
            } else {
                "none (SysV IPC and message queues refused: an own namespace needs \
                 CAP_SYS_ADMIN)"
            },
            said.lines()
                .find_map(|line| line.strip_prefix(PROBE_METADATA))
                .unwrap_or("refused everywhere"),
            match &report.writes {
                Writes::Supervised => "writes: supervised in the roots that hold protected \
                                       paths (they hold)"
                    .to_owned(),
                Writes::Unsupervised(reason) => {
                    format!("{WRITES_UNSUPERVISED}({reason}): protected paths stay writable")
                }
            }
        ),
        runner: Landlock {
            launcher,
            enforcement: report.enforcement,
            isolate_ipc: report.ipc_isolated,
            writes: report.writes,
            log_denials,
            said: said.to_owned(),
        },
    }
}

/// Whether runs can have their denials named by the kernel (Landlock ABI
/// 7 logs them after an exec; the host must read the audit records), and
/// the probe's words for it.
fn denial_evidence(config: &SandboxConfig) -> (bool, String) {
    if !config.kernel_denials {
        return (false, "inferred from text (kernel_denials = false)".into());
    }
    if kernel_abi() < 7 {
        return (
            false,
            "inferred from text (the kernel's Landlock ABI is below 7: it logs no denials)".into(),
        );
    }
    match crate::denials::KernelDenials::shared() {
        Ok(_) => (
            true,
            "named by the kernel (Landlock's audit records)".into(),
        ),
        Err(why) => (false, format!("inferred from text ({why})")),
    }
}

/// Run a command the way a run is launched — every step a read-only run
/// takes (the ruleset, the metadata, socket and hardening filters, the
/// capabilities, the confinement check) — so "usable" means a command ran
/// confined here, not only that the kernel knows Landlock. The command is
/// the launcher itself (`--version`): the one executable every host has —
/// a minimal container image need hold no `true`.
fn confined_run(launcher: &Path, ipc_isolated: bool, config: &SandboxConfig) -> Result<(), String> {
    let argv = confined_run_argv(launcher, ipc_isolated);
    must_pass(launcher, argv[1..].to_vec(), config.probe_timeout)
        .map_err(|err| format!("it could not run a command confined: {err}"))
}

/// The probe's launch: a read-only run of `LAUNCHER --version` with no network.
fn confined_run_argv(launcher: &Path, ipc_isolated: bool) -> Vec<String> {
    let mut argv = vec![
        launcher.to_string_lossy().into_owned(),
        launcher::SUBCOMMAND.into(),
        "--parent".into(),
        std::process::id().to_string(),
    ];
    if ipc_isolated {
        argv.push("--unshare-ipc".into());
    }
    argv.extend(
        [
            "--socket-families",
            "",
            "--ro",
            "/",
            "--rw",
            "/dev/null",
            "--rw",
            "/dev/tty",
            "--",
        ]
        .map(String::from),
    );
    argv.extend([launcher.to_string_lossy().into_owned(), "--version".into()]);
    argv
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
    /// Whether the file supervisor keeps protected paths.
    pub writes: Writes,
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
    let writes = stdout
        .lines()
        .find_map(|line| match line {
            PROBE_WRITES_SUPERVISED => Some(Writes::Supervised),
            _ => line
                .strip_prefix(PROBE_WRITES_UNSUPERVISED)
                .map(|reason| Writes::Unsupervised(reason.to_owned())),
        })
        .unwrap_or_else(|| Writes::Unsupervised("the launcher does not say".into()));
    Some(ProbeReport {
        enforcement,
        scopes,
        ipc_isolated: stdout.lines().any(|line| line == PROBE_IPC_ISOLATED),
        writes,
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

    use crate::model::SandboxMode;
    use crate::sandbox::grant::lay_out;

    fn layout(policy: &SandboxPolicy) -> Layout {
        lay_out(policy, &[], &[])
    }

    #[test]
    fn the_probe_launches_itself_as_a_read_only_run_is_launched() {
        let argv = confined_run_argv(Path::new("/usr/bin/cordon"), true).join(" ");
        assert_eq!(
            argv,
            format!(
                "/usr/bin/cordon __landlock --parent {} --unshare-ipc --socket-families  \
                 --ro / --rw /dev/null --rw /dev/tty -- /usr/bin/cordon --version",
                std::process::id()
            )
        );
    }

    #[test]
    fn grants_are_exact_per_mode() {
        let supervised = Writes::Supervised;
        let ro = SandboxPolicy::new(SandboxMode::ReadOnly, "/ws");
        assert_eq!(
            grants(&layout(&ro), &supervised).0.join(" "),
            "--ro / --rw /dev/null --rw /dev/tty"
        );
        let ww = SandboxPolicy::new(SandboxMode::WorkspaceWrite, "/ws");
        let mut bare = layout(&ww);
        bare.protected.clear();
        assert_eq!(
            grants(&bare, &supervised),
            (
                "--ro / --rw /dev/null --rw /dev/tty --rw /tmp --rw /ws"
                    .split(' ')
                    .map(String::from)
                    .collect(),
                vec![]
            )
        );
        // The protected defaults: /ws is supervised, each path named, and
        // nothing is partial.
        let (args, partial) = grants(&layout(&ww), &supervised);
        let args = args.join(" ");
        assert!(
            args.starts_with(
                "--ro / --rw /dev/null --rw /dev/tty --rw /tmp --rw-supervised /ws --protected "
            ),
            "{args}"
        );
        for name in [".git", ".bashrc", ".cordon"] {
            assert!(args.contains(&format!("--protected /ws/{name}")), "{args}");
        }
        assert!(partial.is_empty(), "{partial:?}");
        // Without the supervisor the root is granted whole, and it says so.
        let (args, partial) = grants(&layout(&ww), &Writes::Unsupervised("old kernel".into()));
        assert!(args.join(" ").ends_with("--rw /tmp --rw /ws"), "{args:?}");
        assert!(
            partial[0].starts_with("protected: Landlock cannot keep")
                && partial[0].contains("(old kernel)"),
            "{partial:?}"
        );
    }

    #[test]
    fn a_place_holding_a_supervised_root_is_supervised_too() {
        // Landlock's rights on /tmp would reach a workspace inside it,
        // past the supervisor.
        // A workspace that is absent on this host (the layout reads the
        // host: a `/tmp/ws` someone left there once changed its grants).
        let ws = format!("/tmp/cordon-unit-absent-{}", std::process::id());
        assert!(!std::path::Path::new(&ws).exists(), "{ws} exists");
        let ww = SandboxPolicy::new(SandboxMode::WorkspaceWrite, &ws);
        let args = grants(&layout(&ww), &Writes::Supervised).0.join(" ");
        assert!(
            args.contains(&format!(
                "--rw-supervised /tmp --rw-supervised {ws} --protected "
            )) && args.contains(&format!("--protected {ws}/.git ")),
            "{args}"
        );
        assert!(!args.contains("--rw /tmp"), "{args}");
        // A root beside the workspace that holds nothing protected (all
        // lifted) stays granted whole.
        let mut two = SandboxPolicy::new(SandboxMode::WorkspaceWrite, "/ws");
        two.writable_roots.push("/data".into());
        let mut laid = layout(&two);
        laid.protected.retain(|p| !p.path.starts_with("/data"));
        let args = grants(&laid, &Writes::Supervised).0.join(" ");
        assert!(
            args.contains("--rw /tmp --rw-supervised /ws --rw /data"),
            "{args}"
        );
    }

    #[test]
    fn host_state_inside_a_writable_root_or_tmp_cannot_be_confined() {
        // Outside /tmp, which a writable run shares under Landlock.
        let dir = tempfile::tempdir_in("/var/tmp").unwrap();
        let (ws, outside) = (dir.path().join("ws"), dir.path().join("state"));
        let inside = ws.join("cache");
        for path in [&inside, &outside] {
            std::fs::create_dir_all(path).unwrap();
        }
        let write = SandboxPolicy::new(SandboxMode::WorkspaceWrite, &ws);
        let read = SandboxPolicy::new(SandboxMode::ReadOnly, &ws);
        let detail =
            exposed_host_state(&lay_out(&write, &[], std::slice::from_ref(&inside))).unwrap();
        assert!(
            detail.contains(&format!(
                "{} lies inside the writable {}",
                inside.display(),
                ws.display()
            )),
            "{detail}"
        );
        assert_eq!(
            exposed_host_state(&lay_out(&write, &[], std::slice::from_ref(&outside))),
            None
        );
        assert_eq!(
            exposed_host_state(&lay_out(&read, &[], &[inside])),
            None,
            "nothing writable"
        );
        let tmp = tempfile::Builder::new().tempdir_in("/tmp").unwrap();
        let detail = exposed_host_state(&lay_out(&write, &[], &[tmp.path().to_path_buf()]));
        assert!(detail.unwrap().contains("inside the writable /tmp"));
    }

    #[test]
    fn a_hidden_path_is_left_out_however_it_is_spelled_and_entries_come_in_name_order() {
        let root = tempfile::tempdir().unwrap();
        let r = root.path();
        for dir in ["a/secret", "a/b", "a/B", "a/a-z", "a/a"] {
            std::fs::create_dir_all(r.join(dir)).unwrap();
        }
        for spelled in ["a/secret/", "a/./secret", "a//secret"] {
            let hidden = PathBuf::from(format!("{}/{spelled}", r.display()));
            let args = read_grants(&[&hidden]);
            let listed: Vec<&str> = args
                .iter()
                .filter_map(|arg| arg.strip_prefix(&format!("{}/a/", r.display())))
                .collect();
            assert_eq!(listed, ["B", "a", "a-z", "b"], "{spelled}: {args:?}");
        }
    }

    #[test]
    fn a_hidden_path_gets_no_read_right_while_its_siblings_do() {
        let root = tempfile::tempdir().unwrap();
        let r = root.path();
        for dir in ["a/secret", "a/open", "b"] {
            std::fs::create_dir_all(r.join(dir)).unwrap();
        }
        std::os::unix::fs::symlink(r.join("a/secret"), r.join("b/link")).unwrap();
        let hidden = r.join("a/secret");
        let args = read_grants(&[&hidden]).join(" ");
        let (a, s) = (r.join("a").display().to_string(), hidden.display());
        assert!(args.starts_with("--ls / "), "{args}");
        assert!(args.contains(&format!("--ls {a} ")), "{args}");
        assert!(args.contains(&format!("--ro {a}/open")), "{args}");
        assert!(args.contains(&format!("--ro {}/b", r.display())), "{args}");
        assert!(!args.contains(&format!("--ro {s}")), "{args}");
        assert!(!args.contains(&format!("--ro {a} ")), "{args}");
        assert!(
            !args.contains("b/link"),
            "a symlink into it is left out: {args}"
        );
        assert!(!args.contains("--ro / "), "{args}");
    }

    #[test]
    fn wrap_runs_the_launcher_with_a_status_fd() {
        let policy = SandboxPolicy::new(SandboxMode::ReadOnly, "/ws");
        let launcher = Landlock::at("/usr/bin/cordon", Enforcement::Full);
        let closed = launcher.wrap(&["true".into()], &policy, &layout(&policy));
        assert!(
            closed
                .argv()
                .join(" ")
                .contains("--socket-families  --ro /"),
            "no socket family at all under a closed network"
        );
        let mut exposing = policy.clone();
        exposing.sockets.push("/run/agent.sock".into());
        let wrap = launcher.wrap(&["true".into()], &exposing, &layout(&exposing));
        assert!(
            wrap.argv()
                .join(" ")
                .contains("--socket-families unix --ro /")
        );
        assert_eq!(wrap.facts().enforcement, Enforcement::Partial);
        let policy = SandboxPolicy {
            network: crate::model::Network::Full,
            ..policy
        };
        let wrap = Landlock::at("/usr/bin/cordon", Enforcement::Partial).wrap(
            &["true".into()],
            &policy,
            &layout(&policy),
        );
        assert_eq!(
            wrap.argv().join(" "),
            format!(
                "/usr/bin/cordon __landlock --status-fd 3 --env-fd 4 --parent {} --unshare-ipc \
                 --ro / --rw /dev/null --rw /dev/tty -- true",
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
        // What the launcher says of its file supervisor; an older one that
        // says nothing has none.
        assert_eq!(
            parse_report("landlock: fully enforced\nwrites: supervised\n")
                .unwrap()
                .writes,
            Writes::Supervised
        );
        let old_kernel = "landlock: fully enforced\nwrites: unsupervised: no ADDFD (Linux 5.14)\n";
        assert_eq!(
            parse_report(old_kernel).unwrap().writes,
            Writes::Unsupervised("no ADDFD (Linux 5.14)".into())
        );
        assert!(matches!(
            report.writes,
            Writes::Unsupervised(reason) if reason.contains("does not say")
        ));
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
