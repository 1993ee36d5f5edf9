//! `cordon doctor`: everything an operator needs to answer "why did my run
//! fail" — the sandbox ladder and each rung's reason, Landlock's ABI and
//! scopes, user namespaces, containment and limits, the policy component in
//! force (its digest, world and whether it accepts its settings), the
//! component cache and the audit log — each with a fix when it is not
//! fine.
//!
//! A finding never stops the others: a policy that does not load is a
//! failed check, and the sandbox is then examined with the embedded
//! default so the rest of the report still stands.

use std::path::{Path, PathBuf};

use serde::Serialize;

use crate::config::Config;
use crate::host::{Host, PolicySource};
use crate::model::Backend;
use crate::policy::cache::ComponentCache;
use crate::sandbox::{BackendChoice, Probe, Rung};

/// How a check came out.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Status {
    /// Fine.
    Ok,
    /// Works, but weaker or slower than it could be.
    Warn,
    /// Runs will fail (or fail closed) until it is fixed.
    Fail,
}

/// One finding.
#[derive(Clone, Debug, Serialize)]
pub struct Check {
    /// What was looked at (`sandbox`, `rung namespaces`, `policy`, …).
    pub name: String,
    /// How it came out.
    pub status: Status,
    /// What was found.
    pub detail: String,
    /// What to do about it, when it is not fine.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub fix: Option<String>,
}

impl Check {
    fn new(name: impl Into<String>, status: Status, detail: impl Into<String>) -> Self {
        Check {
            name: name.into(),
            status,
            detail: detail.into(),
            fix: None,
        }
    }

    fn fix(mut self, fix: impl Into<String>) -> Self {
        self.fix = Some(fix.into());
        self
    }
}

/// The whole report.
#[derive(Clone, Debug, Serialize)]
pub struct Diagnosis {
    /// Every check, in the order an operator reads them.
    pub checks: Vec<Check>,
}

impl Diagnosis {
    /// Whether any check failed.
    pub fn failed(&self) -> bool {
        self.checks.iter().any(|c| c.status == Status::Fail)
    }
}

/// Examine this machine for `config` in `cwd` with `policy` and the
/// component cache at `cache` (none: no cache).
pub fn diagnose(
    config: &Config,
    cwd: &Path,
    policy: PolicySource,
    cache: Option<&Path>,
) -> Diagnosis {
    let mut checks = vec![component_cache(cache)];
    checks.extend(config.audit_log.as_deref().map(audit_log));
    checks.extend(tenants(config, nix::unistd::geteuid().is_root()));
    let builder = |source: PolicySource| {
        let mut builder = config.host_builder(cwd).policy(source);
        // The audit log is checked above; a doctor's own runs are none.
        builder = builder.without_audit_log();
        if let Some(path) = cache
            && let Ok(cache) = ComponentCache::open(path)
        {
            builder = builder.component_cache(cache);
        }
        builder
    };
    let (check, host) = match builder(policy).build() {
        Ok(host) => (loaded_policy(&host), Some(host)),
        Err(err) => (
            Check::new("policy", Status::Fail, format!("{}: {err}", err.code()))
                .fix("`cordon policy check FILE --settings F` shows why a component does not load; a registry reference needs the registry and, with [registry] public_key, a signature"),
            builder(PolicySource::Embedded).build().ok(),
        ),
    };
    checks.push(check);
    let Some(host) = host else {
        return Diagnosis { checks };
    };
    if let Some(probe) = host.probe() {
        checks.extend(sandbox(config, cwd, &probe));
    }
    checks.extend(user_namespaces());
    checks.extend(containment(&host));
    Diagnosis { checks }
}

/// The component cache: private and usable, or why every start compiles.
fn component_cache(cache: Option<&Path>) -> Check {
    match (cache.map(ComponentCache::open), cache) {
        (Some(Ok(_)), Some(path)) => Check::new(
            "component cache",
            Status::Ok,
            format!("{} (private, MAC'd entries)", path.display()),
        ),
        (Some(Err(err)), Some(path)) => Check::new(
            "component cache",
            Status::Warn,
            format!(
                "{} is unusable: {err}; every start compiles the policy",
                path.display()
            ),
        )
        .fix(format!(
            "make {} a directory owned by you with mode 0700, or pass --component-cache DIR",
            path.display()
        )),
        _ => Check::new(
            "component cache",
            Status::Warn,
            "none: every start compiles the policy",
        )
        .fix("set XDG_CACHE_HOME or HOME, or pass --component-cache DIR"),
    }
}

/// A socket server that admits users besides its own: whether each
/// admitted uid's ceiling is narrower than the permissive defaults (any
/// non-system directory as a workspace, the network the host allows, the
/// host's mode) and, on a root server, whose its runs are. None when the
/// server admits only its own user.
fn tenants(config: &Config, root: bool) -> Option<Check> {
    let serve = &config.serve;
    if serve.allowed_uids.is_none() && serve.allowed_gids.is_empty() && serve.socket_group.is_none()
    {
        return None;
    }
    let mut admitted: Vec<String> = serve
        .allowed_uids
        .iter()
        .flatten()
        .map(|uid| format!("uid {uid}"))
        .collect();
    admitted.extend(
        serve
            .allowed_gids
            .iter()
            .chain(&serve.socket_group)
            .map(|g| format!("gid {g}")),
    );
    let mut wide = vec![];
    let every = |ceiling: Option<&crate::model::Ceiling>,
                 field: fn(&crate::model::Ceiling) -> bool| {
        ceiling.is_some_and(field)
    };
    let listed: Vec<u32> = serve.allowed_uids.clone().unwrap_or_default();
    let grouped = !serve.allowed_gids.is_empty() || serve.socket_group.is_some();
    let uncovered = |field: fn(&crate::model::Ceiling) -> bool| {
        grouped
            || listed
                .iter()
                .any(|uid| !every(serve.ceilings.get(uid), field))
    };
    if config.allowed_roots.is_empty() && uncovered(|c| c.allowed_roots.is_some()) {
        wide.push(
            "any non-system directory may be a client's workspace (no allowed_roots)".to_owned(),
        );
    }
    let network_open = config.max_network.as_ref().is_some_and(|n| !n.is_none());
    if network_open && uncovered(|c| c.max_network.is_some()) {
        wide.push("clients reach the network the host allows (max_network)".to_owned());
    }
    if root
        && serve
            .run_as
            .values()
            .any(|r| *r == crate::serve::listen::RunAs::Server)
    {
        wide.push("some clients' runs are root's (run_as = \"server\")".to_owned());
    }
    // A client's runner makes its user namespace as the client.
    if root && let Err(why) = crate::sandbox::namespaces::kernel_allows(65534) {
        wide.push(format!(
            "clients' runs fail on the namespaces and bwrap rungs: {why} (allow them, or set \
             backend = \"landlock\")"
        ));
    }
    let whose = match root {
        true => "each client's runs are its own uid's",
        false => "every client's runs are this server's user's",
    };
    let detail = format!("admits {}; {whose}", admitted.join(", "));
    Some(match wide.is_empty() {
        true => Check::new(
            "serve tenants",
            Status::Ok,
            format!("{detail}; each has a ceiling"),
        ),
        false => Check::new(
            "serve tenants",
            Status::Warn,
            format!("{detail}; the defaults are permissive: {}", wide.join("; ")),
        )
        .fix(
            "give each admitted uid a ceiling ([serve.uid.N] allowed_roots, max_network, \
             max_mode), or set allowed_roots for the host",
        ),
    })
}

/// The operator's audit log, opened as a run would open it.
fn audit_log(log: &Path) -> Check {
    match crate::audit::AuditLog::open(log) {
        Ok(_) => Check::new(
            "audit log",
            Status::Ok,
            format!("{} (0600, appended)", log.display()),
        ),
        Err(err) => Check::new("audit log", Status::Fail, err.to_string())
            .fix("fix the file's owner and mode (chmod 600), or point audit_log elsewhere"),
    }
}

/// The policy component a host loaded.
fn loaded_policy(host: &Host) -> Check {
    let identity = host.policy_identity();
    let mut detail = format!(
        "{} {} ({}, {})",
        identity.name, identity.version, identity.world, identity.digest
    );
    if let Some(reference) = &identity.reference {
        detail.push_str(&format!(", pulled as {reference}"));
    }
    match &identity.settings {
        Some(settings) => detail.push_str(&format!(
            "; it runs with the settings its artifact carries ({settings}) and accepts them"
        )),
        None => detail.push_str("; it accepts its settings"),
    }
    Check::new("policy", Status::Ok, detail)
}

/// The sandbox: the chosen backend, every rung (each probed by pinning it,
/// so an operator knows what a run would fall back to), and Landlock's ABI.
fn sandbox(config: &Config, cwd: &Path, probe: &Probe) -> Vec<Check> {
    let mut checks = vec![match (probe.backend, probe.enforcement) {
        (Some(backend), Some(enforcement)) => Check::new(
            "sandbox",
            if enforcement == crate::model::Enforcement::Full {
                Status::Ok
            } else {
                Status::Warn
            },
            format!("{} ({} enforcement)", name(backend), name(enforcement)),
        ),
        _ => Check::new(
            "sandbox",
            Status::Fail,
            "no usable backend: every confined run fails closed with SANDBOX_UNAVAILABLE",
        )
        .fix("install bubblewrap (apt-get install bubblewrap), or run a kernel with Landlock enabled; see each rung below"),
    }];
    for rung in &probe.rungs {
        let rung = looked_at(config, cwd, rung);
        let status = if rung.usable {
            Status::Ok
        } else {
            Status::Warn
        };
        let mut check = Check::new(
            format!("rung {}", name(rung.backend)),
            status,
            rung.reason.clone(),
        );
        if !rung.usable {
            check = check.fix(rung_fix(rung.backend, &rung.reason));
        }
        checks.push(check);
        checks.extend(unsupervised_writes(&rung));
    }
    if let Some(abi) = probe.landlock_abi {
        let scopes = probe.landlock_scopes.clone().unwrap_or_default();
        let detail = format!(
            "ABI {abi}, scopes: {}",
            if scopes.is_empty() {
                "none".to_owned()
            } else {
                scopes.join(", ")
            }
        );
        checks.push(if abi >= 5 {
            Check::new("landlock", Status::Ok, detail)
        } else {
            Check::new("landlock", Status::Warn, detail).fix(
                "a kernel with Landlock ABI 5 or later (6.10+) enforces every right a mode needs",
            )
        });
    }
    checks
}

/// A usable Landlock rung whose file supervisor cannot keep the protected
/// paths (the launcher said so in its probe): its `workspace-write` runs
/// are partial, and what would fix it.
fn unsupervised_writes(rung: &Rung) -> Option<Check> {
    let at = rung
        .reason
        .find(crate::sandbox::landlock::WRITES_UNSUPERVISED)
        .filter(|_| rung.usable)?;
    let why = rung.reason[at..].split(';').next().unwrap_or_default();
    Some(
        Check::new(
            "landlock writes",
            Status::Warn,
            format!(
                "under Landlock, workspace-write runs are partial: {why} (git's config and \
                 hooks, the rc files)"
            ),
        )
        .fix(
            "a kernel with seccomp descriptor injection (Linux 5.14+) lets cordon's file \
             supervisor keep them; or allow user namespaces for the namespace runner \
             (docs/containers.md)",
        ),
    )
}

/// `rung` as a probe pinned to it sees it: the ladder stops at the first
/// usable rung, the doctor looks at every one.
fn looked_at(config: &Config, cwd: &Path, rung: &Rung) -> Rung {
    match pinned(rung.backend) {
        Some(choice)
            if rung.reason.starts_with("not probed") && config.sandbox.runner.is_none() =>
        {
            let mut sandbox = config.sandbox.clone();
            sandbox.backend = choice;
            config
                .host_builder(cwd)
                .sandbox(sandbox)
                .without_audit_log()
                .build()
                .ok()
                .and_then(|host| host.probe())
                .and_then(|probe| probe.rungs.into_iter().find(|r| r.backend == rung.backend))
                .unwrap_or_else(|| rung.clone())
        }
        _ => rung.clone(),
    }
}

/// How runs are contained (a cgroup each, or the supervisor and rlimits),
/// and their limits.
fn containment(host: &Host) -> Vec<Check> {
    let containment = host.containment();
    let mechanism = if containment.mechanism == "supervisor" {
        Check::new(
            "containment",
            Status::Warn,
            format!("no cgroup per run: {}; cordon's launcher supervises the tree and RLIMIT_* bound it", containment.detail),
        )
        .fix("run as root on cgroup v1, or give cordon a delegated cgroup v2 directory ([limits] cgroup_parent)")
    } else {
        Check::new(
            "containment",
            Status::Ok,
            format!("{}: {}", containment.mechanism, containment.detail),
        )
    };
    let limits = &containment.limits.limits;
    let or_unlimited = |value: Option<u64>| value.map_or("unlimited".into(), |v| v.to_string());
    let limits = Check::new(
        "limits",
        Status::Ok,
        format!(
            "pids {}, memory bytes {}, cpu weight {}",
            or_unlimited(limits.pids),
            or_unlimited(limits.memory_bytes),
            limits
                .cpu_weight
                .map_or("the kernel's default".into(), |v| v.to_string()),
        ),
    );
    vec![mechanism, limits]
}

/// The choice that pins `backend`.
fn pinned(backend: Backend) -> Option<BackendChoice> {
    match backend {
        Backend::Namespaces => Some(BackendChoice::Namespaces),
        Backend::Bwrap => Some(BackendChoice::Bwrap),
        Backend::Landlock => Some(BackendChoice::Landlock),
        Backend::Seatbelt => Some(BackendChoice::Seatbelt),
        Backend::RunnerCommand => None,
    }
}

/// What to do about an unusable rung, by what its probe said: a runner
/// that is there but cannot make namespaces needs them allowed, not
/// installed.
fn rung_fix(backend: Backend, reason: &str) -> &'static str {
    let namespaces = reason.contains("namespace");
    match backend {
        Backend::Namespaces => USER_NAMESPACES_FIX,
        Backend::Bwrap if namespaces => USER_NAMESPACES_FIX,
        Backend::Bwrap => {
            "install bubblewrap in /usr/bin (owned by root, writable by no one else) or set bwrap_path"
        }
        // The kernel has Landlock; what it confined did not run: the reason says why.
        Backend::Landlock if reason.contains("could not run a command confined") => {
            "the kernel enforces Landlock but the probe's confined command failed: see the \
             reason (a seccomp profile refusing a call the launcher makes, an unreadable \
             launcher); `cordon probe` re-probes every rung"
        }
        Backend::Landlock => "boot a kernel with Landlock in its LSM list (lsm=…,landlock)",
        _ => "see the reason; `cordon probe` re-probes every rung",
    }
}

/// Whether this user may make a user namespace (what the namespace runner
/// and bwrap need when not root) — tried, not read off the sysctls: a
/// container's seccomp profile or an LSM refuses it with every sysctl
/// allowing it. The sysctls that forbid it are named beside the result.
fn user_namespaces() -> Vec<Check> {
    if !cfg!(target_os = "linux") {
        return vec![];
    }
    let read = |path: &str| -> Option<String> {
        std::fs::read_to_string(PathBuf::from(path))
            .ok()
            .map(|s| s.trim().to_owned())
    };
    let mut problems = vec![];
    if read("/proc/sys/kernel/unprivileged_userns_clone").as_deref() == Some("0") {
        problems.push("kernel.unprivileged_userns_clone = 0");
    }
    if read("/proc/sys/user/max_user_namespaces").as_deref() == Some("0") {
        problems.push("user.max_user_namespaces = 0");
    }
    if read("/proc/sys/kernel/apparmor_restrict_unprivileged_userns").as_deref() == Some("1") {
        problems.push("kernel.apparmor_restrict_unprivileged_userns = 1");
    }
    let why = match problems.is_empty() {
        true => "the kernel's settings allow it, so a seccomp filter (a container runtime's \
                 default profile) or an LSM refused it"
            .to_owned(),
        false => problems.join(", "),
    };
    let root = nix::unistd::geteuid().is_root();
    vec![match (try_user_namespace(), root) {
        (Ok(()), true) => Check::new("user namespaces", Status::Ok, "root made one (tried)"),
        (Ok(()), false) => Check::new("user namespaces", Status::Ok, "this user made one (tried)"),
        (Err(err), true) => Check::new(
            "user namespaces",
            Status::Ok,
            format!("making one failed ({err}; {why}); cordon runs as root and needs none"),
        ),
        (Err(err), false) => Check::new(
            "user namespaces",
            Status::Warn,
            format!(
                "this user cannot make one ({err}; {why}): the namespace runner and bwrap \
                 cannot start as this user"
            ),
        )
        .fix(USER_NAMESPACES_FIX),
    }]
}

/// How an operator lets a non-root user make user namespaces.
const USER_NAMESPACES_FIX: &str = "allow user namespaces (sysctl \
     kernel.unprivileged_userns_clone=1, user.max_user_namespaces > 0, \
     kernel.apparmor_restrict_unprivileged_userns=0); in a container, a seccomp profile that \
     permits unshare and clone with CLONE_NEWUSER (docs/containers.md); or run as root";

/// Make a user namespace in a child that then execs `true`: the spawn
/// fails with the `unshare` error when this user may not.
#[cfg(not(target_os = "linux"))]
fn try_user_namespace() -> std::io::Result<()> {
    Err(std::io::ErrorKind::Unsupported.into())
}

/// Make a user namespace in a child that then execs `true`: the spawn
/// fails with the `unshare` error when this user may not.
#[cfg(target_os = "linux")]
fn try_user_namespace() -> std::io::Result<()> {
    use std::os::unix::process::CommandExt;
    let mut command = std::process::Command::new("true");
    command
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null());
    // SAFETY: the closure runs in the forked child before exec and makes
    // one system call (unshare), which is async-signal-safe; it allocates
    // nothing.
    unsafe {
        command.pre_exec(|| match nix::libc::unshare(nix::libc::CLONE_NEWUSER) {
            0 => Ok(()),
            _ => Err(std::io::Error::last_os_error()),
        });
    }
    let status = command.status()?;
    match status.success() {
        true => Ok(()),
        false => Err(std::io::Error::other(format!("true exited {status}"))),
    }
}

fn name(value: impl Serialize) -> String {
    serde_json::to_value(value)
        .ok()
        .and_then(|v| v.as_str().map(str::to_owned))
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_landlock_rung_whose_confined_command_failed_is_not_told_to_boot_another_kernel() {
        let failed = "it could not run a command confined: /usr/local/bin/cordon failed the \
                      probe: cordon-landlock: cannot execute x: No such file or directory";
        assert!(!rung_fix(Backend::Landlock, failed).contains("boot a kernel"));
        let absent = "/usr/local/bin/cordon failed the probe: landlock: not enabled";
        assert!(rung_fix(Backend::Landlock, absent).contains("boot a kernel"));
    }

    fn landlock(usable: bool, reason: &str) -> Rung {
        Rung {
            backend: Backend::Landlock,
            usable,
            enforcement: None,
            reason: reason.into(),
        }
    }

    #[test]
    fn a_server_admitting_others_under_the_permissive_defaults_is_warned_about() {
        let parse = |text: &str| Config::parse(text, Path::new("cordon.toml")).unwrap();
        assert!(tenants(&parse(""), true).is_none(), "only its own user");
        let open = tenants(&parse("[serve]\nallowed_uids = [1000]\n"), true).unwrap();
        assert_eq!(open.status, Status::Warn, "{open:?}");
        assert!(open.detail.contains("no allowed_roots"), "{open:?}");
        assert!(open.detail.contains("its own uid"), "{open:?}");
        let network = parse(
            "max_network = \"full\"\nallowed_roots = [\"/srv\"]\n[serve]\nallowed_uids = [1000]\n",
        );
        let network = tenants(&network, false).unwrap();
        assert!(network.detail.contains("max_network"), "{network:?}");
        assert!(network.detail.contains("this server's user"), "{network:?}");
        let bounded = parse(
            "max_network = \"full\"\n[serve]\nallowed_uids = [1000]\n[serve.uid.1000]\n\
             allowed_roots = [\"/home/a\"]\nmax_network = \"none\"\n",
        );
        let bounded = tenants(&bounded, true).unwrap();
        assert_eq!(bounded.status, Status::Ok, "{bounded:?}");
        let as_root = parse(
            "[serve]\nallowed_uids = [1000]\n[serve.uid.1000]\nallowed_roots = [\"/a\"]\nrun_as = \"server\"\n",
        );
        assert_eq!(tenants(&as_root, true).unwrap().status, Status::Warn);
    }

    #[test]
    fn a_landlock_rung_that_cannot_supervise_writes_is_warned_about() {
        let reason = "cordon ran itself (--version) confined; metadata: supervised inside the writable roots; \
                      writes: not supervised (this kernel cannot answer a call with a \
                      descriptor): protected paths stay writable; launcher trusted";
        let check = unsupervised_writes(&landlock(true, reason)).expect("a warning");
        let text = serde_json::to_string(&check).unwrap();
        assert!(text.contains("\"warn\""), "{text}");
        assert!(
            text.contains("writes: not supervised (this kernel cannot answer"),
            "{text}"
        );
        assert!(!text.contains("launcher trusted"), "{text}");
        assert!(!text.contains("danger-full-access"), "{text}");
        let held = "…; writes: supervised in the roots that hold protected paths (they hold)";
        assert!(unsupervised_writes(&landlock(true, held)).is_none());
        assert!(unsupervised_writes(&landlock(false, reason)).is_none());
    }
}
