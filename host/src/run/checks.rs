//! The host invariants, checked against what a policy component returned.
//! Each is a pure function of the request, the spec, the launch or the
//! stamped facts (canonicalisation also reads the file system), so each is
//! unit-tested here without spawning anything or loading a component.
//!
//! 1. **Ceiling.** A request above the deployment's ceiling is refused
//!    before the component sees it; a spec the component resolved above it
//!    is a policy failure ([`request_within_ceiling`], [`spec_within_ceiling`]).
//! 2. **Bounds.** A spec and an argv are bounded whatever the component
//!    returned ([`spec_size`], [`launch`]).
//! 3. **Canonical paths.** The workdir is absolute and the workspace root
//!    canonical before anything is confined ([`canonicalise`]).
//! 4. **Wrap identity.** A confined mode is spawned only from a wrap the
//!    host issued for exactly the spec's policy; a bare argv only under
//!    `danger-full-access` ([`launch`]).
//! 5. **Honest facts.** What settle stamps describes this run: its mode,
//!    and enforcement exactly when (and as) a runner confined it ([`stamp`]).
//! 6. **The handed policy.** A component may narrow the mode it was handed
//!    (the request's, else the deployment's), never widen it past the
//!    default mode it declared at load, and never move the workspace root
//!    ([`spec_keeps_handed_policy`]).
//! 7. **Safe writable roots.** A root a run may write to is never `/`, a
//!    pseudo or system filesystem, or an ancestor of one, after resolving
//!    symlinks, and lies inside the operator's `allowed_roots` when there
//!    are any ([`writable_root`]).
//! 8. **The grant's ceiling.** Every field of the grant — extra writable
//!    roots, lifted protections, deny-read paths, network, sockets — is
//!    within what the operator allows ([`grant`]).

use std::path::{Path, PathBuf};

use crate::error::RunError;
use crate::model::{
    Deployment, ExecRequest, ExecSpec, GrantFacts, LaunchFacts, MAX_TIMEOUT_MS, PROTECTED_DEFAULTS,
    RunLimits, SandboxFacts, SandboxMode, SandboxPolicy, WrapFacts,
};
use crate::places::expand_home;
use crate::policy::{Launch, Phase};
use crate::sandbox::{EnvHandover, StatusReport, Supervision};

/// Arguments a launch may have.
pub(super) const MAX_ARGS: usize = 4_096;
/// Bytes a command, an argv or an environment from a component may have
/// (the kernel's own limit for a whole exec is in this range).
pub(super) const MAX_TEXT_BYTES: usize = 2 << 20;

fn policy_failed(phase: Phase, reason: String) -> RunError {
    RunError::PolicyFailed { phase, reason }
}

/// A request's own policy must be within the ceiling.
pub(super) fn request_within_ceiling(
    request: &ExecRequest,
    ceiling: SandboxMode,
) -> Result<(), RunError> {
    match &request.policy {
        Some(policy) if policy.mode > ceiling => Err(RunError::AboveCeiling {
            mode: policy.mode,
            ceiling,
        }),
        _ => Ok(()),
    }
}

/// The mode a component resolved must be within the ceiling.
pub(super) fn spec_within_ceiling(spec: &ExecSpec, ceiling: SandboxMode) -> Result<(), RunError> {
    if spec.policy.mode > ceiling {
        return Err(policy_failed(
            Phase::Resolve,
            format!(
                "resolved mode \"{}\" is wider than the deployment ceiling \"{ceiling}\"",
                spec.policy.mode
            ),
        ));
    }
    Ok(())
}

fn total_len(texts: &[String]) -> usize {
    texts.iter().map(String::len).sum()
}

/// Bytes of an environment's names and values.
fn env_len(env: &[(String, String)]) -> usize {
    env.iter().map(|(k, v)| k.len() + v.len()).sum()
}

/// A request is bounded before a component sees it: a command or an
/// environment too large for any run is the caller's error, not the
/// component's.
pub(super) fn request_size(request: &ExecRequest) -> Result<(), RunError> {
    let env_bytes = env_len(&request.env);
    if request.command.len() > MAX_TEXT_BYTES {
        return Err(RunError::InvalidRequest(format!(
            "command is {} bytes; the limit is {MAX_TEXT_BYTES}",
            request.command.len()
        )));
    }
    if request.env.len() > MAX_ARGS || env_bytes > MAX_TEXT_BYTES {
        return Err(RunError::InvalidRequest(format!(
            "env has {} entries ({env_bytes} bytes); the limits are {MAX_ARGS} entries and \
             {MAX_TEXT_BYTES} bytes",
            request.env.len()
        )));
    }
    if request.approved_requests.len() > MAX_APPROVED_REQUESTS {
        return Err(RunError::InvalidRequest(format!(
            "approvedRequests has {} entries; the limit is {MAX_APPROVED_REQUESTS}",
            request.approved_requests.len()
        )));
    }
    Ok(())
}

/// The most requests one run may come with approved.
const MAX_APPROVED_REQUESTS: usize = 64;

/// A run's limits: the deployment's, tightened by the request's (**host
/// invariant**: a request may ask for less, never more, and never for
/// zero).
pub(super) fn limits(
    requested: Option<&RunLimits>,
    host: &RunLimits,
) -> Result<RunLimits, RunError> {
    let Some(requested) = requested else {
        return Ok(*host);
    };
    let pick = |name: &str, asked: Option<u64>, most: Option<u64>| match (asked, most) {
        (Some(0), _) => Err(RunError::InvalidRequest(format!(
            "limits.{name} must be positive"
        ))),
        (Some(asked), Some(most)) if asked > most => Err(RunError::InvalidRequest(format!(
            "limits.{name} {asked} is above this host's {most}; ask for {most} or less"
        ))),
        (Some(asked), _) => Ok(Some(asked)),
        (None, most) => Ok(most),
    };
    let limits = RunLimits {
        pids: pick("pids", requested.pids, host.pids)?,
        memory_bytes: pick("memoryBytes", requested.memory_bytes, host.memory_bytes)?,
        cpu_weight: pick("cpuWeight", requested.cpu_weight, host.cpu_weight)?,
    };
    if limits.cpu_weight.is_some_and(|w| w > 10_000) {
        return Err(RunError::InvalidRequest(
            "limits.cpuWeight must be 1..=10000".into(),
        ));
    }
    Ok(limits)
}

/// A resolved spec is bounded whatever the component returned, and its
/// timeout is one a run can have (`1..=MAX_TIMEOUT_MS`).
pub(super) fn spec_size(spec: &ExecSpec) -> Result<(), RunError> {
    if !(1..=MAX_TIMEOUT_MS).contains(&spec.timeout_ms) {
        return Err(policy_failed(
            Phase::Resolve,
            format!(
                "returned timeout-ms {} outside 1..={MAX_TIMEOUT_MS}",
                spec.timeout_ms
            ),
        ));
    }
    let env_bytes = env_len(&spec.env);
    if spec.command.len() > MAX_TEXT_BYTES
        || spec.env.len() > MAX_ARGS
        || env_bytes > MAX_TEXT_BYTES
    {
        return Err(policy_failed(
            Phase::Resolve,
            format!(
                "returned a spec of {} command bytes and {} environment entries ({env_bytes} \
                 bytes); the limits are {MAX_TEXT_BYTES} bytes and {MAX_ARGS} entries",
                spec.command.len(),
                spec.env.len()
            ),
        ));
    }
    Ok(())
}

/// A workspace root as the host compares and binds it: absolute, and
/// canonical (symlinks and `..` resolved physically) when it exists; a
/// path that does not exist is kept as spelled.
fn canonical_root(root: &Path) -> Result<PathBuf, RunError> {
    canonical_root_dir(root).map(|(root, _)| root)
}

/// [`canonical_root`], and whether it is an existing directory (asked of
/// the resolution itself: no second walk of a deep root's path).
fn canonical_root_dir(root: &Path) -> Result<(PathBuf, bool), RunError> {
    let root = absolute(root, "workspace root")?;
    Ok(crate::places::canonical_entry(&root).unwrap_or((root, false)))
}

/// Every environment entry of a spec can be set: a name that is not empty
/// and has no `=` or NUL, a value without NUL.
pub(super) fn spec_env(spec: &ExecSpec) -> Result<(), RunError> {
    for (name, value) in &spec.env {
        if name.is_empty() || name.contains(['=', '\0']) || value.contains('\0') {
            return Err(RunError::InvalidRequest(format!(
                "environment entry {name:?} cannot be set: a name must be non-empty without \
                 '=' or NUL, a value without NUL"
            )));
        }
    }
    Ok(())
}

/// Make the spec's paths absolute and the workspace root canonical, and
/// refuse a `workspace-write` root that does not exist (binding it would
/// fail inside the runner, which is not the sandbox's fault).
pub(super) fn canonicalise(spec: &mut ExecSpec) -> Result<(), RunError> {
    spec.workdir = absolute(&spec.workdir, "workdir")?;
    let (workspace_root, workspace_is_dir) = canonical_root_dir(&spec.policy.workspace_root)?;
    spec.policy.workspace_root = workspace_root;
    for root in &mut spec.policy.writable_roots {
        *root = expand_home(root);
        if !root.is_absolute() {
            return Err(RunError::InvalidRequest(format!(
                "policy.writableRoots: {} is not an absolute path (or ~/…)",
                root.display()
            )));
        }
        let (canonical, is_dir) = canonical_root_dir(root)?;
        *root = canonical;
        if spec.policy.mode == SandboxMode::WorkspaceWrite && !is_dir {
            return Err(RunError::InvalidRequest(format!(
                "policy.writableRoots: {} is not an existing directory; create it or drop it",
                root.display()
            )));
        }
    }
    if spec.policy.mode == SandboxMode::WorkspaceWrite && !workspace_is_dir {
        return Err(RunError::InvalidRequest(format!(
            "workspace root {} is not an existing directory; create it or choose another",
            spec.policy.workspace_root.display()
        )));
    }
    Ok(())
}

fn absolute(path: &Path, field: &str) -> Result<PathBuf, RunError> {
    std::path::absolute(path)
        .map_err(|err| RunError::InvalidRequest(format!("{field} {}: {err}", path.display())))
}

/// A relative workdir of a request is relative to the deployment's working
/// directory (a server's workspace), never to the host process's own.
pub(super) fn workdir_from_deployment(request: &mut ExecRequest, deployment: &Deployment) {
    if let Some(workdir) = &request.workdir
        && workdir.is_relative()
    {
        request.workdir = Some(deployment.workdir.join(workdir));
    }
}

/// The policy a run was handed: the request's own, else the deployment's.
pub(super) fn handed_policy<'a>(
    request: &'a ExecRequest,
    deployment: &'a Deployment,
) -> &'a SandboxPolicy {
    request.policy.as_ref().unwrap_or(&deployment.policy)
}

/// The resolved (canonical) spec keeps the policy it was handed: its
/// workspace root the same directory, and its mode no wider — except up to
/// the mode the component *declared* as its default when it was loaded
/// (`describe`), which the operator accepted by loading it under the
/// ceiling: `bash-local` declares `danger-full-access` and runs every
/// command so; a component that declares `read-only` widens nothing.
///
/// `returned_root` is the root as the component spelled it, before
/// [`canonicalise`] (when known): spelled as it was handed, it is the
/// handed root, and the handed one is not resolved a second time (a
/// resolution of a path 400 directories deep is a walk of 400 names).
pub(super) fn spec_keeps_handed_policy(
    spec: &ExecSpec,
    handed: &SandboxPolicy,
    returned_root: Option<&Path>,
    declared: SandboxMode,
) -> Result<(), RunError> {
    if spec.policy.mode > handed.mode.max(declared) {
        return Err(policy_failed(
            Phase::Resolve,
            format!(
                "widened the mode from \"{}\" to \"{}\"; a component may only narrow it \
                 (or widen it to the default mode it declares, here \"{declared}\")",
                handed.mode, spec.policy.mode
            ),
        ));
    }
    if returned_root == Some(handed.workspace_root.as_path()) {
        return Ok(());
    }
    let root = canonical_root(&handed.workspace_root)?;
    if spec.policy.workspace_root != root {
        return Err(policy_failed(
            Phase::Resolve,
            format!(
                "moved the workspace root from {} to {}; a component may not move it",
                root.display(),
                spec.policy.workspace_root.display()
            ),
        ));
    }
    Ok(())
}

/// Directories a writable root may be neither, nor an ancestor of: the
/// pseudo filesystems (a writable bind over them would expose the host's
/// `/proc`, `/sys` or `/dev`) and the system directories where a write is
/// a write to the host's software or configuration.
const SYSTEM_DIRS: &[&str] = &[
    "/proc", "/sys", "/dev", "/run", "/etc", "/boot", "/usr", "/bin", "/sbin", "/lib", "/lib32",
    "/lib64", "/libx32", "/var",
];

/// Of [`SYSTEM_DIRS`], those whose every subdirectory is refused too
/// (`/var` is not among them: `/var/tmp`, `/var/lib/…`, `/var/www` hold
/// ordinary workspaces).
const SYSTEM_TREES_EXCEPT: &[&str] = &["/var"];

/// Whether `root` lies inside one of the operator's `allowed` roots (any
/// root, when there are none).
fn within_allowed(root: &Path, allowed: &[PathBuf]) -> bool {
    allowed.is_empty()
        || allowed
            .iter()
            .any(|a| root.starts_with(canonical_root(a).unwrap_or_else(|_| a.clone())))
}

/// Why `root` cannot be a writable workspace here (missing, a system
/// directory or inside one, outside the operator's allowed roots), if it
/// cannot: the words a run there would be refused with.
pub fn workspace_problem(root: &Path, allowed_roots: &[PathBuf]) -> Option<String> {
    let root = match canonical_root(root) {
        Ok(root) => root,
        Err(error) => return Some(error.to_string()),
    };
    if !root.is_dir() {
        return Some(format!("{} is not an existing directory", root.display()));
    }
    writable_root(&root, allowed_roots)
        .err()
        .map(|error| error.to_string())
}

/// A root a run may write to must not make the host writable.
pub(super) fn writable_root(root: &Path, allowed_roots: &[PathBuf]) -> Result<(), RunError> {
    writable_root_as("workspace root", root, allowed_roots)
}

/// [`writable_root`] for a root named `label` in messages.
fn writable_root_as(label: &str, root: &Path, allowed_roots: &[PathBuf]) -> Result<(), RunError> {
    let refuse = |why: String| {
        Err(RunError::InvalidRequest(format!(
            "{label} {} {why}; choose a project directory",
            root.display()
        )))
    };
    if root == Path::new("/") {
        return refuse("is / (it would make the whole host writable)".into());
    }
    for dir in SYSTEM_DIRS.iter().map(Path::new) {
        if dir.starts_with(root) {
            return refuse(if dir == root {
                "is a system directory".into()
            } else {
                format!("contains the system directory {}", dir.display())
            });
        }
        if root.starts_with(dir) && !SYSTEM_TREES_EXCEPT.contains(&dir.to_str().unwrap_or("")) {
            return refuse(format!("is inside the system directory {}", dir.display()));
        }
    }
    if !within_allowed(root, allowed_roots) {
        return Err(RunError::InvalidRequest(format!(
            "{label} {} is outside the allowed roots ({}); choose a directory inside one",
            root.display(),
            allowed_roots
                .iter()
                .map(|r| r.display().to_string())
                .collect::<Vec<_>>()
                .join(", ")
        )));
    }
    Ok(())
}

/// A (canonical) policy a run may have: its workspace root one the host
/// lets be written ([`writable_root`], under `workspace-write`) and its
/// grant within the operator's ceiling ([`grant`]).
pub(super) fn policy_within(
    policy: &SandboxPolicy,
    deployment: &Deployment,
) -> Result<(), RunError> {
    if policy.mode == SandboxMode::WorkspaceWrite {
        writable_root(&policy.workspace_root, &deployment.allowed_roots)?;
    }
    grant(policy, deployment)
}

/// The grant of `policy` (canonical) is within the operator's ceiling:
/// every writable root passes the workspace-root checks and lies inside
/// the workspace or one of the operator's `allowed_roots` (never another
/// user's or root's home by default), a lifted default is one the operator lets be lifted,
/// a deny-read path hides no writable root, the network is no wider than
/// `max_network`, and every socket is one the operator lets be exposed
/// (**host invariant**). The error names the field and the ceiling.
pub(super) fn grant(policy: &SandboxPolicy, deployment: &Deployment) -> Result<(), RunError> {
    let list = |items: Vec<String>| match items.is_empty() {
        true => "none".to_owned(),
        false => items.join(", "),
    };
    if policy.mode == SandboxMode::WorkspaceWrite {
        let allowed = &deployment.allowed_roots;
        for root in &policy.writable_roots {
            writable_root_as("writable root", root, &[])?;
            let listed = !allowed.is_empty() && within_allowed(root, allowed);
            if !root.starts_with(&policy.workspace_root) && !listed {
                return Err(RunError::GrantAboveCeiling {
                    field: "policy.writableRoots",
                    granted: format!("the writable root {}", root.display()),
                    ceiling: format!(
                        "inside the workspace {} or allowed_roots: {}",
                        policy.workspace_root.display(),
                        list(allowed.iter().map(|a| a.display().to_string()).collect())
                    ),
                });
            }
        }
    }
    for name in &policy.unprotected {
        if !PROTECTED_DEFAULTS.contains(&name.as_str()) {
            return Err(RunError::InvalidRequest(format!(
                "policy.unprotected: {name:?} is not a protected default (those are {})",
                PROTECTED_DEFAULTS.join(", ")
            )));
        }
        if !deployment.liftable.contains(name) {
            return Err(RunError::GrantAboveCeiling {
                field: "policy.unprotected",
                granted: format!("lifting {name}"),
                ceiling: format!("liftable: {}", list(deployment.liftable.clone())),
            });
        }
    }
    for path in &policy.protected {
        if path
            .components()
            .any(|c| c == std::path::Component::ParentDir)
        {
            return Err(RunError::InvalidRequest(format!(
                "policy.protected: {} has a `..`; name the path itself",
                path.display()
            )));
        }
    }
    deny_read(policy)?;
    if !policy.network.within(&deployment.max_network) {
        return Err(RunError::GrantAboveCeiling {
            field: "policy.network",
            granted: policy.network.to_string(),
            ceiling: format!("max_network: {}", deployment.max_network),
        });
    }
    let exposable: Vec<PathBuf> = deployment.sockets.iter().map(|s| expand_home(s)).collect();
    for socket in &policy.sockets {
        if !exposable.contains(&expand_home(socket)) {
            return Err(RunError::GrantAboveCeiling {
                field: "policy.sockets",
                granted: format!("the socket {}", socket.display()),
                ceiling: format!(
                    "sockets: {}",
                    list(exposable.iter().map(|s| s.display().to_string()).collect())
                ),
            });
        }
    }
    Ok(())
}

/// For a run as another user (a root server's client): every directory the
/// run is rooted in — its working directory, workspace and writable roots —
/// is one that user may reach. The host (root) could; it must not build a
/// sandbox, or hold placeholders, in a directory its client may not enter.
pub(super) fn reachable_by(
    spec: &ExecSpec,
    who: &crate::process::identity::Identity,
) -> Result<(), RunError> {
    let inside = |dir: &Path| who.may_enter(dir);
    if !inside(&spec.workdir) {
        return Err(RunError::Workdir {
            path: spec.workdir.clone(),
            reason: format!("uid {} may not enter it (its directories' modes)", who.uid),
        });
    }
    let roots = std::iter::once(&spec.policy.workspace_root).chain(&spec.policy.writable_roots);
    for root in roots {
        if !inside(root) {
            return Err(RunError::InvalidRequest(format!(
                "uid {} may not enter {} (its directories' modes): choose a directory that user \
                 may use",
                who.uid,
                root.display()
            )));
        }
    }
    Ok(())
}

/// Directories of credentials in a user's home, protected where they fall
/// inside a writable root (a run writing `~/.ssh/authorized_keys` or
/// `~/.aws/credentials` would own the user's next login or cloud call).
pub const CREDENTIAL_DIRS: &[&str] = &[
    ".ssh",
    ".gnupg",
    ".aws",
    ".config/gcloud",
    ".kube",
    ".docker",
];

/// What the host adds to an accepted grant whatever the component said:
/// the deployment's hidden paths (an operator's `deny_read`, which must not
/// hide a writable root), and the credential directories of `homes` (the
/// run's user's) where a writable root holds them, as protected paths.
pub(super) fn host_additions(
    policy: &mut SandboxPolicy,
    deployment: &Deployment,
    homes: &[PathBuf],
) -> Result<(), RunError> {
    for path in &deployment.deny_read {
        if let Some(root) = policy.writable().into_iter().find(|r| r.starts_with(path)) {
            return Err(RunError::InvalidRequest(format!(
                "the operator hides {} from these runs ([serve.uid.N] deny_read), and it holds                  the writable root {}; choose a workspace outside it",
                path.display(),
                root.display()
            )));
        }
        if !policy.deny_read.contains(path) {
            policy.deny_read.push(path.clone());
        }
    }
    let writable: Vec<PathBuf> = policy
        .writable()
        .into_iter()
        .map(Path::to_path_buf)
        .collect();
    for home in homes {
        for name in CREDENTIAL_DIRS {
            let dir = home.join(name);
            let held = writable.iter().any(|root| dir.starts_with(root));
            if held && !policy.protected.contains(&dir) {
                policy.protected.push(dir);
            }
        }
    }
    Ok(())
}

/// Every `denyRead` path is absolute, not `/`, `/proc` or `/dev`, holds no
/// writable root and hides nothing every confined command needs.
fn deny_read(policy: &SandboxPolicy) -> Result<(), RunError> {
    for path in &policy.deny_read {
        let path = expand_home(path);
        if !path.is_absolute() {
            return Err(RunError::InvalidRequest(format!(
                "policy.denyRead: {} is not an absolute path (or ~/…)",
                path.display()
            )));
        }
        let hides = policy
            .writable()
            .into_iter()
            .find(|root| root.starts_with(&path));
        if path == Path::new("/") || ["/proc", "/dev"].iter().any(|d| path.starts_with(d)) {
            return Err(RunError::InvalidRequest(format!(
                "policy.denyRead: {} cannot be hidden (it is / or the sandbox's own /proc or /dev)",
                path.display()
            )));
        }
        if let Some(root) = hides {
            return Err(RunError::InvalidRequest(format!(
                "policy.denyRead: {} contains the writable root {}; hide something inside it",
                path.display(),
                root.display()
            )));
        }
        if let Some(essential) = super::essentials::hidden_by(&path) {
            return Err(RunError::InvalidRequest(format!(
                "policy.denyRead: {} contains {}, {}, which every confined command needs; \
                 hide something inside it",
                path.display(),
                essential.path.display(),
                essential.what
            )));
        }
    }
    Ok(())
}

/// A launch the host accepted: the argv to spawn and, when confined, the
/// facts of its wrap and how its runner reports.
#[derive(Debug, PartialEq, Eq)]
pub(super) struct Accepted {
    pub argv: Vec<String>,
    pub wrap: Option<WrapFacts>,
    pub report: StatusReport,
    pub handover: EnvHandover,
    pub supervision: Supervision,
    /// The grant the wrap enforces (confined launches only).
    pub grant: Option<GrantFacts>,
    /// The placeholders the run must hold.
    pub placeholders: Vec<PathBuf>,
    /// Where the run's allow-list proxy must listen.
    pub proxy: Option<crate::proxy::ProxyAt>,
}

/// Accept `launch` for `spec`, or say which invariant it breaks.
pub(super) fn launch(launch: Launch, spec: &ExecSpec) -> Result<Accepted, RunError> {
    let accepted = match launch {
        Launch::Confined(wrap) if *wrap.policy() == spec.policy => Accepted {
            argv: wrap.argv().to_vec(),
            wrap: Some(wrap.facts().clone()),
            report: wrap.report(),
            handover: wrap.handover(),
            supervision: wrap.supervision(),
            grant: Some(wrap.grant().clone()),
            placeholders: wrap.placeholders().to_vec(),
            proxy: wrap.proxy().cloned(),
        },
        Launch::Confined(wrap) => {
            return Err(policy_failed(
                Phase::Plan,
                format!(
                    "confined for mode \"{}\" at {} but the spec is mode \"{}\" at {}",
                    wrap.policy().mode,
                    wrap.policy().workspace_root.display(),
                    spec.policy.mode,
                    spec.policy.workspace_root.display()
                ),
            ));
        }
        Launch::Unconfined(argv) if spec.policy.mode == SandboxMode::DangerFullAccess => Accepted {
            argv,
            wrap: None,
            report: StatusReport::None,
            handover: EnvHandover::Inherit,
            supervision: Supervision::None,
            grant: None,
            placeholders: vec![],
            proxy: None,
        },
        Launch::Unconfined(_) => {
            return Err(policy_failed(
                Phase::Plan,
                format!(
                    "returned an unconfined launch for a \"{}\" run; refusing to run it unconfined",
                    spec.policy.mode
                ),
            ));
        }
    };
    let argv = &accepted.argv;
    if argv.is_empty() || argv.len() > MAX_ARGS || total_len(argv) > MAX_TEXT_BYTES {
        return Err(policy_failed(
            Phase::Plan,
            format!(
                "returned an argv of {} arguments and {} bytes (must be 1..={MAX_ARGS} \
                 arguments and at most {MAX_TEXT_BYTES} bytes)",
                argv.len(),
                total_len(argv)
            ),
        ));
    }
    Ok(accepted)
}

/// The facts a component stamped must describe this run: its mode, and
/// enforcement exactly when (and as) a runner confined it. A foreground
/// run always gets facts; a confined run never loses them.
pub(super) fn stamp(
    spec: &ExecSpec,
    facts: &LaunchFacts,
    stamped: Option<&SandboxFacts>,
) -> Result<(), RunError> {
    let wrong = |reason: String| Err(policy_failed(Phase::Settle, reason));
    let Some(stamped) = stamped else {
        if facts.wrap.is_some() || !facts.background {
            return wrong("returned no sandbox facts for a run that must carry them".into());
        }
        return Ok(());
    };
    if stamped.mode != spec.policy.mode {
        return wrong(format!(
            "stamped mode \"{}\" on a \"{}\" run",
            stamped.mode, spec.policy.mode
        ));
    }
    let expected = facts.wrap.as_ref().map(|wrap| wrap.enforcement);
    if stamped.enforcement != expected {
        return wrong(format!(
            "stamped enforcement {:?} but the run's confinement was {:?}",
            stamped.enforcement, expected
        ));
    }
    if facts.wrap.is_none() && (stamped.denied || stamped.runner_failed) {
        return wrong("claimed a sandbox denial or runner failure for an unconfined run".into());
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_request_may_tighten_the_hosts_limits_never_loosen_them() {
        let host = RunLimits {
            pids: Some(100),
            memory_bytes: None,
            cpu_weight: Some(100),
        };
        assert_eq!(limits(None, &host).unwrap(), host);
        let tighter = RunLimits {
            pids: Some(10),
            memory_bytes: Some(1 << 20),
            cpu_weight: None,
        };
        assert_eq!(
            limits(Some(&tighter), &host).unwrap(),
            RunLimits {
                pids: Some(10),
                memory_bytes: Some(1 << 20),
                cpu_weight: Some(100),
            },
            "a limit the host has none of may be asked for; an absent one is the host's"
        );
        let looser = RunLimits {
            pids: Some(101),
            ..RunLimits::NONE
        };
        let err = limits(Some(&looser), &host).unwrap_err().to_string();
        assert!(
            err.contains("limits.pids 101 is above this host's 100"),
            "{err}"
        );
        let zero = RunLimits {
            pids: Some(0),
            ..RunLimits::NONE
        };
        assert!(limits(Some(&zero), &host).is_err());
        let heavy = RunLimits {
            cpu_weight: Some(20_000),
            ..RunLimits::NONE
        };
        assert!(limits(Some(&heavy), &RunLimits::NONE).is_err());
    }
    use crate::model::{Backend, Enforcement, SandboxPolicy, Signatures};
    use crate::sandbox::Wrap;

    fn spec(mode: SandboxMode, root: &str) -> ExecSpec {
        ExecSpec {
            command: "true".into(),
            workdir: "/".into(),
            timeout_ms: 1_000,
            env: vec![],
            policy: SandboxPolicy::new(mode, root),
        }
    }

    fn wrap_facts(enforcement: Enforcement) -> WrapFacts {
        WrapFacts {
            backend: Backend::Bwrap,
            enforcement,
            signatures: Signatures::default(),
        }
    }

    fn issued(policy: SandboxPolicy) -> Launch {
        let argv = vec!["runner".into(), "--".into(), "true".into()];
        Launch::Confined(Box::new(Wrap::new(
            argv,
            policy,
            wrap_facts(Enforcement::Full),
        )))
    }

    fn is_policy_failure(result: Result<impl std::fmt::Debug, RunError>, phase: Phase, says: &str) {
        match result {
            Err(RunError::PolicyFailed { phase: p, reason }) => {
                assert_eq!(p, phase, "{reason}");
                assert!(reason.contains(says), "{reason}");
            }
            other => panic!("expected a policy failure in {phase}, got {other:?}"),
        }
    }

    #[test]
    fn a_request_above_the_ceiling_is_refused_before_the_component_sees_it() {
        let request = ExecRequest::new("true")
            .with_policy(SandboxPolicy::new(SandboxMode::DangerFullAccess, "/w"));
        assert!(matches!(
            request_within_ceiling(&request, SandboxMode::WorkspaceWrite),
            Err(RunError::AboveCeiling {
                mode: SandboxMode::DangerFullAccess,
                ceiling: SandboxMode::WorkspaceWrite
            })
        ));
        assert!(request_within_ceiling(&request, SandboxMode::DangerFullAccess).is_ok());
        assert!(request_within_ceiling(&ExecRequest::new("x"), SandboxMode::ReadOnly).is_ok());
    }

    #[test]
    fn a_spec_resolved_above_the_ceiling_is_a_policy_failure() {
        let wide = spec(SandboxMode::DangerFullAccess, "/w");
        is_policy_failure(
            spec_within_ceiling(&wide, SandboxMode::WorkspaceWrite),
            Phase::Resolve,
            "wider than the deployment ceiling",
        );
        assert!(spec_within_ceiling(&wide, SandboxMode::DangerFullAccess).is_ok());
    }

    #[test]
    fn a_spec_past_its_bounds_is_a_policy_failure() {
        let mut big = spec(SandboxMode::ReadOnly, "/w");
        big.command = "x".repeat(MAX_TEXT_BYTES + 1);
        is_policy_failure(spec_size(&big), Phase::Resolve, "the limits are");
        let mut many = spec(SandboxMode::ReadOnly, "/w");
        many.env = vec![("A".into(), "1".into()); MAX_ARGS + 1];
        is_policy_failure(spec_size(&many), Phase::Resolve, "environment entries");
        assert!(spec_size(&spec(SandboxMode::ReadOnly, "/w")).is_ok());
    }

    #[test]
    fn a_request_too_large_for_any_run_is_the_callers_error() {
        let big = ExecRequest::new("x".repeat(MAX_TEXT_BYTES + 1));
        let err = request_size(&big).unwrap_err();
        assert!(matches!(err, RunError::InvalidRequest(_)), "{err}");
        assert!(err.to_string().contains("command is"), "{err}");
        let mut many = ExecRequest::new("x");
        many.env = vec![("A".into(), "1".into()); MAX_ARGS + 1];
        assert!(
            request_size(&many)
                .unwrap_err()
                .to_string()
                .contains("env has")
        );
        let mut approving = ExecRequest::new("x");
        let approved: crate::model::ApprovedRequest = "GET a.test:80/".parse().unwrap();
        approving.approved_requests = vec![approved; MAX_APPROVED_REQUESTS + 1];
        let err = request_size(&approving).unwrap_err();
        assert!(matches!(err, RunError::InvalidRequest(_)), "{err}");
        assert!(err.to_string().contains("approvedRequests has"), "{err}");
        assert!(request_size(&ExecRequest::new("true")).is_ok());
    }

    #[test]
    fn a_returned_timeout_outside_its_range_is_a_policy_failure() {
        for timeout in [0, MAX_TIMEOUT_MS + 1, u64::MAX] {
            let mut wrong = spec(SandboxMode::ReadOnly, "/w");
            wrong.timeout_ms = timeout;
            is_policy_failure(spec_size(&wrong), Phase::Resolve, "outside 1..=600000");
        }
        let mut longest = spec(SandboxMode::ReadOnly, "/w");
        longest.timeout_ms = MAX_TIMEOUT_MS;
        assert!(spec_size(&longest).is_ok());
    }

    #[test]
    fn an_environment_entry_that_cannot_be_set_is_refused() {
        for (name, value) in [("", "x"), ("A=B", "x"), ("A\0", "x"), ("A", "x\0y")] {
            let mut bad = spec(SandboxMode::ReadOnly, "/w");
            bad.env = vec![(name.into(), value.into())];
            let err = spec_env(&bad).unwrap_err().to_string();
            assert!(err.contains("cannot be set"), "{name:?}: {err}");
        }
        let mut good = spec(SandboxMode::ReadOnly, "/w");
        good.env = vec![("A".into(), "x=y".into())];
        assert!(spec_env(&good).is_ok());
    }

    #[test]
    fn canonicalising_resolves_the_root_physically_and_refuses_a_missing_writable_one() {
        let dir = tempfile::tempdir().unwrap();
        let real = dir.path().join("real");
        std::fs::create_dir(&real).unwrap();
        std::os::unix::fs::symlink(&real, dir.path().join("link")).unwrap();
        let canonical = std::fs::canonicalize(&real).unwrap();

        let mut via_link = spec(
            SandboxMode::WorkspaceWrite,
            dir.path().join("link").to_str().unwrap(),
        );
        canonicalise(&mut via_link).unwrap();
        assert_eq!(via_link.policy.workspace_root, canonical);

        // `link/..` is the parent of the link's target, not of the link.
        let mut dotdot = spec(
            SandboxMode::ReadOnly,
            dir.path().join("link/real/..").to_str().unwrap(),
        );
        std::fs::create_dir(real.join("real")).unwrap();
        canonicalise(&mut dotdot).unwrap();
        assert_eq!(dotdot.policy.workspace_root, canonical);

        let mut missing = spec(
            SandboxMode::WorkspaceWrite,
            dir.path().join("nope").to_str().unwrap(),
        );
        let err = canonicalise(&mut missing).unwrap_err().to_string();
        assert!(err.contains("is not an existing directory"), "{err}");

        // Read-only keeps a missing root as spelled.
        let mut read_only = spec(
            SandboxMode::ReadOnly,
            dir.path().join("nope").to_str().unwrap(),
        );
        canonicalise(&mut read_only).unwrap();
        assert_eq!(read_only.policy.workspace_root, dir.path().join("nope"));
    }

    #[test]
    fn canonicalising_makes_a_relative_workdir_absolute() {
        let mut relative = spec(SandboxMode::ReadOnly, "/");
        relative.workdir = "sub".into();
        canonicalise(&mut relative).unwrap();
        assert!(relative.workdir.is_absolute());
        assert!(relative.workdir.ends_with("sub"));
    }

    #[test]
    fn a_component_may_narrow_the_handed_mode_but_not_widen_it_or_move_the_root() {
        let dir = tempfile::tempdir().unwrap();
        let root = std::fs::canonicalize(dir.path()).unwrap();
        let handed = SandboxPolicy::new(SandboxMode::WorkspaceWrite, &root);
        let declared = SandboxMode::ReadOnly;
        let mut narrower = spec(SandboxMode::ReadOnly, root.to_str().unwrap());
        assert!(spec_keeps_handed_policy(&narrower, &handed, None, declared).is_ok());
        narrower.policy.mode = SandboxMode::WorkspaceWrite;
        assert!(spec_keeps_handed_policy(&narrower, &handed, None, declared).is_ok());

        let read_only = SandboxPolicy::new(SandboxMode::ReadOnly, &root);
        is_policy_failure(
            spec_keeps_handed_policy(&narrower, &read_only, None, declared),
            Phase::Resolve,
            "widened the mode from \"read-only\" to \"workspace-write\"",
        );
        let moved = spec(SandboxMode::WorkspaceWrite, "/");
        is_policy_failure(
            spec_keeps_handed_policy(&moved, &handed, None, declared),
            Phase::Resolve,
            "moved the workspace root",
        );
        // The handed root is compared canonically: a symlink to it is it.
        std::os::unix::fs::symlink(&root, root.join("link")).unwrap();
        let via_link = SandboxPolicy::new(SandboxMode::WorkspaceWrite, root.join("link"));
        let same = spec(SandboxMode::WorkspaceWrite, root.to_str().unwrap());
        assert!(spec_keeps_handed_policy(&same, &via_link, None, declared).is_ok());
        // Returned as it was spelled when handed: the same root, not resolved
        // again; returned spelled otherwise, the canonical roots decide.
        let link = root.join("link");
        assert!(spec_keeps_handed_policy(&same, &via_link, Some(&link), declared).is_ok());
        is_policy_failure(
            spec_keeps_handed_policy(&moved, &handed, Some(Path::new("/")), declared),
            Phase::Resolve,
            "moved the workspace root",
        );
        // The mode is checked whatever the root's spelling.
        is_policy_failure(
            spec_keeps_handed_policy(&narrower, &read_only, Some(&root), declared),
            Phase::Resolve,
            "widened the mode",
        );
    }

    #[test]
    fn a_component_may_widen_only_to_the_default_mode_it_declared() {
        let handed = SandboxPolicy::new(SandboxMode::ReadOnly, "/");
        let danger = spec(SandboxMode::DangerFullAccess, "/");
        assert!(
            spec_keeps_handed_policy(&danger, &handed, None, SandboxMode::DangerFullAccess).is_ok()
        );
        is_policy_failure(
            spec_keeps_handed_policy(&danger, &handed, None, SandboxMode::WorkspaceWrite),
            Phase::Resolve,
            "here \"workspace-write\"",
        );
    }

    #[test]
    fn the_handed_policy_is_the_requests_else_the_deployments() {
        let deployment = Deployment::in_dir("/d");
        let plain = ExecRequest::new("x");
        assert_eq!(handed_policy(&plain, &deployment), &deployment.policy);
        let own = plain.with_policy(SandboxPolicy::new(SandboxMode::WorkspaceWrite, "/r"));
        assert_eq!(
            handed_policy(&own, &deployment).workspace_root,
            Path::new("/r")
        );
    }

    #[test]
    fn a_writable_root_that_would_expose_the_host_is_refused_naming_it() {
        for bad in [
            "/",
            "/proc",
            "/proc/self",
            "/sys",
            "/dev",
            "/run",
            "/etc",
            "/etc/ssh",
            "/usr",
            "/usr/lib",
            "/bin",
            "/lib64",
            "/boot",
            "/var",
        ] {
            let err = writable_root(Path::new(bad), &[]).unwrap_err().to_string();
            assert!(
                err.contains(&format!("workspace root {bad} ")),
                "{bad}: {err}"
            );
            assert!(err.starts_with("invalid request:"), "{err}");
        }
        for good in [
            "/home/me/project",
            "/srv/ws",
            "/var/tmp/ws",
            "/var/lib/ci/job",
            "/tmp/x",
        ] {
            assert!(writable_root(Path::new(good), &[]).is_ok(), "{good}");
        }
    }

    #[test]
    fn with_allowed_roots_a_writable_root_must_lie_inside_one() {
        let allowed = vec![PathBuf::from("/srv"), PathBuf::from("/home/ci")];
        assert!(writable_root(Path::new("/srv/ws"), &allowed).is_ok());
        assert!(writable_root(Path::new("/home/ci"), &allowed).is_ok());
        let err = writable_root(Path::new("/home/other"), &allowed)
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("outside the allowed roots (/srv, /home/ci)"),
            "{err}"
        );
    }

    #[test]
    fn a_wrap_issued_for_exactly_the_spec_policy_is_accepted() {
        let spec = spec(SandboxMode::ReadOnly, "/w");
        let accepted = launch(issued(spec.policy.clone()), &spec).unwrap();
        assert_eq!(accepted.argv, ["runner", "--", "true"]);
        assert_eq!(accepted.wrap, Some(wrap_facts(Enforcement::Full)));
    }

    #[test]
    fn a_wrap_for_another_mode_or_root_is_refused() {
        let spec = spec(SandboxMode::ReadOnly, "/w");
        let wider = SandboxPolicy::new(SandboxMode::WorkspaceWrite, "/w");
        is_policy_failure(launch(issued(wider), &spec), Phase::Plan, "but the spec is");
        let moved = SandboxPolicy::new(SandboxMode::ReadOnly, "/elsewhere");
        is_policy_failure(launch(issued(moved), &spec), Phase::Plan, "at /elsewhere");
    }

    #[test]
    fn a_bare_argv_is_accepted_only_for_danger_full_access() {
        for mode in [SandboxMode::ReadOnly, SandboxMode::WorkspaceWrite] {
            is_policy_failure(
                launch(Launch::Unconfined(vec!["true".into()]), &spec(mode, "/w")),
                Phase::Plan,
                "refusing to run it unconfined",
            );
        }
        let danger = spec(SandboxMode::DangerFullAccess, "/w");
        let accepted = launch(Launch::Unconfined(vec!["true".into()]), &danger).unwrap();
        assert_eq!((accepted.wrap, accepted.report), (None, StatusReport::None));
    }

    #[test]
    fn an_empty_or_oversized_argv_is_refused() {
        let danger = spec(SandboxMode::DangerFullAccess, "/w");
        is_policy_failure(
            launch(Launch::Unconfined(vec![]), &danger),
            Phase::Plan,
            "0 arguments",
        );
        is_policy_failure(
            launch(Launch::Unconfined(vec!["a".into(); MAX_ARGS + 1]), &danger),
            Phase::Plan,
            "must be 1..=",
        );
        is_policy_failure(
            launch(
                Launch::Unconfined(vec!["a".repeat(MAX_TEXT_BYTES + 1)]),
                &danger,
            ),
            Phase::Plan,
            "at most",
        );
    }

    #[test]
    fn stamped_facts_must_describe_the_run() {
        let spec = spec(SandboxMode::ReadOnly, "/w");
        let confined = LaunchFacts {
            background: false,
            wrap: Some(wrap_facts(Enforcement::Partial)),
        };
        let honest = SandboxFacts {
            mode: SandboxMode::ReadOnly,
            denied: true,
            enforcement: Some(Enforcement::Partial),
            runner_failed: false,
            evidence: None,
            denials: vec![],
        };
        assert!(stamp(&spec, &confined, Some(&honest)).is_ok());
        is_policy_failure(
            stamp(&spec, &confined, None),
            Phase::Settle,
            "no sandbox facts",
        );
        let wrong_mode = SandboxFacts {
            mode: SandboxMode::WorkspaceWrite,
            ..honest.clone()
        };
        is_policy_failure(
            stamp(&spec, &confined, Some(&wrong_mode)),
            Phase::Settle,
            "stamped mode",
        );
        let wrong_enforcement = SandboxFacts {
            enforcement: Some(Enforcement::Full),
            ..honest.clone()
        };
        is_policy_failure(
            stamp(&spec, &confined, Some(&wrong_enforcement)),
            Phase::Settle,
            "stamped enforcement",
        );
    }

    #[test]
    fn an_unconfined_run_has_no_enforcement_denial_or_runner_failure() {
        let spec = spec(SandboxMode::DangerFullAccess, "/w");
        let foreground = LaunchFacts {
            background: false,
            wrap: None,
        };
        let plain = SandboxFacts {
            mode: SandboxMode::DangerFullAccess,
            denied: false,
            enforcement: None,
            runner_failed: false,
            evidence: None,
            denials: vec![],
        };
        assert!(stamp(&spec, &foreground, Some(&plain)).is_ok());
        is_policy_failure(stamp(&spec, &foreground, None), Phase::Settle, "must carry");
        let background = LaunchFacts {
            background: true,
            wrap: None,
        };
        assert!(stamp(&spec, &background, None).is_ok());
        let denied = SandboxFacts {
            denied: true,
            ..plain
        };
        is_policy_failure(
            stamp(&spec, &foreground, Some(&denied)),
            Phase::Settle,
            "unconfined run",
        );
    }

    #[test]
    fn every_field_of_the_grant_is_held_to_its_ceiling() {
        use crate::model::{Endpoint, Network};
        let dir = tempfile::tempdir().unwrap();
        let ws = canonical_root(dir.path()).unwrap();
        let mut deployment = Deployment::in_dir(&ws);
        let base = SandboxPolicy::new(SandboxMode::WorkspaceWrite, &ws);
        assert!(grant(&base, &deployment).is_ok());
        let field_of = |err: RunError| match err {
            RunError::GrantAboveCeiling { field, ceiling, .. } => (field, ceiling),
            other => panic!("expected a ceiling error, got {other}"),
        };

        let github = Network::Allow(vec![Endpoint::at("github.com", 22)]);
        let wants_github = SandboxPolicy {
            network: github.clone(),
            ..base.clone()
        };
        deployment.max_network = Network::None;
        let (field, ceiling) = field_of(grant(&wants_github, &deployment).unwrap_err());
        assert_eq!(
            (field, ceiling.as_str()),
            ("policy.network", "max_network: none")
        );
        deployment.max_network = github;
        assert!(grant(&wants_github, &deployment).is_ok());
        let wants_full = SandboxPolicy {
            network: Network::Full,
            ..base.clone()
        };
        assert!(
            grant(&wants_full, &deployment).is_err(),
            "full is wider than an allow-list"
        );
        deployment.max_network = Network::Full;

        let wants_socket = SandboxPolicy {
            sockets: vec!["~/.ssh/agent.sock".into()],
            ..base.clone()
        };
        let (field, ceiling) = field_of(grant(&wants_socket, &deployment).unwrap_err());
        assert_eq!(
            (field, ceiling.as_str()),
            ("policy.sockets", "sockets: none")
        );
        deployment.sockets = vec!["~/.ssh/agent.sock".into()];
        assert!(
            grant(&wants_socket, &deployment).is_ok(),
            "matched after ~ expansion"
        );

        let lifts_git = SandboxPolicy {
            unprotected: vec![".git".into()],
            ..base.clone()
        };
        let (field, _) = field_of(grant(&lifts_git, &deployment).unwrap_err());
        assert_eq!(field, "policy.unprotected");
        deployment.liftable = vec![".git".into()];
        assert!(grant(&lifts_git, &deployment).is_ok());
        let lifts_other = SandboxPolicy {
            unprotected: vec!["src".into()],
            ..base.clone()
        };
        assert!(matches!(
            grant(&lifts_other, &deployment),
            Err(RunError::InvalidRequest(m)) if m.contains("not a protected default")
        ));

        for (deny, says) in [
            ("/", "cannot be hidden"),
            ("/proc/self", "cannot be hidden"),
            (
                ws.parent().unwrap().to_str().unwrap(),
                "contains the writable root",
            ),
            ("relative/path", "not an absolute path"),
        ] {
            let hides = SandboxPolicy {
                deny_read: vec![deny.into()],
                ..base.clone()
            };
            assert!(
                matches!(grant(&hides, &deployment), Err(RunError::InvalidRequest(m)) if m.contains(says)),
                "{deny}"
            );
        }

        let system = SandboxPolicy {
            writable_roots: vec!["/etc".into()],
            ..base
        };
        assert!(matches!(
            grant(&system, &deployment),
            Err(RunError::InvalidRequest(m)) if m.contains("system directory")
        ));
    }

    #[test]
    fn an_extra_writable_root_lies_in_the_workspace_or_an_allowed_root() {
        let dir = tempfile::tempdir().unwrap();
        let ws = canonical_root(dir.path()).unwrap();
        let base = SandboxPolicy::new(SandboxMode::WorkspaceWrite, &ws);
        let mut deployment = Deployment::in_dir(&ws);
        let field_of = |err: RunError| match err {
            RunError::GrantAboveCeiling { field, ceiling, .. } => (field, ceiling),
            other => panic!("{other:?}"),
        };
        let other = tempfile::tempdir().unwrap();
        let extra = SandboxPolicy {
            writable_roots: vec![canonical_root(other.path()).unwrap()],
            ..base.clone()
        };
        // No allowed_roots: an extra root lies inside the workspace, or
        // is above the ceiling (another user's home, root's, …).
        let (field, ceiling) = field_of(grant(&extra, &deployment).unwrap_err());
        assert_eq!(field, "policy.writableRoots");
        assert!(ceiling.starts_with("inside the workspace "), "{ceiling}");
        assert!(ceiling.ends_with("allowed_roots: none"), "{ceiling}");
        let inside = SandboxPolicy {
            writable_roots: vec![ws.join("build")],
            ..base.clone()
        };
        assert!(grant(&inside, &deployment).is_ok());
        deployment.allowed_roots = vec![ws.clone()];
        let (field, ceiling) = field_of(grant(&extra, &deployment).unwrap_err());
        assert_eq!(field, "policy.writableRoots");
        assert!(ceiling.contains("allowed_roots: "), "{ceiling}");
        deployment.allowed_roots = vec![canonical_root(other.path()).unwrap()];
        assert!(grant(&extra, &deployment).is_ok(), "a listed allowed root");
        deployment.allowed_roots = vec![ws.clone()];
    }

    mod properties {
        use proptest::prelude::*;

        use super::*;
        use crate::model::{Endpoint, Network};

        fn pick<T: Clone + std::fmt::Debug + 'static>(
            items: Vec<T>,
        ) -> impl Strategy<Value = Vec<T>> {
            prop::sample::subsequence(items.clone(), 0..=items.len())
        }

        fn network() -> impl Strategy<Value = Network> {
            prop_oneof![
                Just(Network::None),
                Just(Network::Full),
                pick(vec![
                    Endpoint::at("github.com", 22),
                    Endpoint::at("*.npmjs.org", 443),
                    Endpoint {
                        port: None,
                        ..Endpoint::at("example.com", 0)
                    },
                ])
                .prop_map(Network::Allow),
            ]
        }

        proptest! {
            #![proptest_config(ProptestConfig { cases: 1024, failure_persistence: None, ..ProptestConfig::default() })]

            /// A grant the checker accepts is within every ceiling: roots
            /// inside the allowed roots and never the host's own, lifted
            /// defaults the operator lets be lifted, hidden paths that hide
            /// no writable root, a network no wider, exposable sockets only.
            #[test]
            fn an_accepted_grant_is_within_every_ceiling(
                write in any::<bool>(),
                root in 0usize..4,
                roots in pick((0usize..7).collect()),
                allowed in pick((0usize..3).collect()),
                unprotected in pick(vec![".git".to_owned(), ".cordon".to_owned(), "x".to_owned()]),
                liftable in pick(vec![".git".to_owned(), ".cordon".to_owned()]),
                deny_read in pick((0usize..6).collect()),
                network in network(),
                max_network in network(),
                sockets in pick(vec!["/run/a.sock", "~/.ssh/agent.sock", "/run/b.sock"]),
                exposable in pick(vec!["/run/a.sock", "~/.ssh/agent.sock"]),
            ) {
                let dir = tempfile::tempdir().unwrap();
                let base = std::fs::canonicalize(dir.path()).unwrap();
                for sub in ["a/b", "c"] {
                    std::fs::create_dir_all(base.join(sub)).unwrap();
                }
                let candidates: Vec<PathBuf> = vec![
                    base.join("a"), base.join("a/b"), base.join("c"), base.join("d"),
                    "/".into(), "/etc".into(), "/proc/self".into(),
                ];
                let allowed_pool = [base.join("a"), base.join("c"), base.clone()];
                let hidden_pool: Vec<PathBuf> = vec![
                    base.join("a"), base.join("a/b/x"), "/".into(), "/proc/x".into(),
                    "~/.ssh".into(), "relative".into(),
                ];
                let mut policy = SandboxPolicy::new(
                    if write { SandboxMode::WorkspaceWrite } else { SandboxMode::ReadOnly },
                    candidates[root].clone(),
                );
                policy.writable_roots = roots.iter().map(|&i| candidates[i].clone()).collect();
                policy.unprotected = unprotected;
                policy.deny_read = deny_read.iter().map(|&i| hidden_pool[i].clone()).collect();
                policy.network = network;
                policy.sockets = sockets.iter().map(PathBuf::from).collect();
                let mut deployment = Deployment::in_dir(&base);
                deployment.allowed_roots = allowed.iter().map(|&i| allowed_pool[i].clone()).collect();
                deployment.liftable = liftable;
                deployment.max_network = max_network.clone();
                deployment.sockets = exposable.iter().map(PathBuf::from).collect();

                if policy_within(&policy, &deployment).is_err() {
                    return Ok(());
                }
                let inside_allowed = |path: &Path| {
                    deployment.allowed_roots.is_empty()
                        || deployment.allowed_roots.iter().any(|a| path.starts_with(a))
                };
                let host_own = |path: &Path| {
                    path == Path::new("/") || ["/proc", "/etc", "/sys", "/dev"].iter().any(|d| path.starts_with(d))
                };
                if policy.mode == SandboxMode::WorkspaceWrite {
                    for root in policy.writable() {
                        prop_assert!(inside_allowed(root), "{} outside {:?}", root.display(), deployment.allowed_roots);
                        prop_assert!(!host_own(root), "{} is the host's own", root.display());
                    }
                }
                for name in &policy.unprotected {
                    prop_assert!(deployment.liftable.contains(name));
                }
                for hidden in &policy.deny_read {
                    let hidden = expand_home(hidden);
                    prop_assert!(hidden.is_absolute());
                    prop_assert!(!host_own(&hidden) || hidden.starts_with("/etc"));
                    for root in policy.writable() {
                        prop_assert!(!root.starts_with(&hidden), "{} hides {}", hidden.display(), root.display());
                    }
                }
                match &max_network {
                    Network::None => prop_assert_eq!(&policy.network, &Network::None),
                    Network::Allow(_) => prop_assert!(policy.network != Network::Full),
                    Network::Full => {}
                }
                let exposable: Vec<PathBuf> = deployment.sockets.iter().map(|s| expand_home(s)).collect();
                for socket in &policy.sockets {
                    prop_assert!(exposable.contains(&expand_home(socket)));
                }
            }
        }

        /// How a workspace is laid out on disk for the layout property.
        fn make_tree(root: &Path, links: &[usize], dot_git: usize) {
            std::fs::create_dir_all(root.join("a/b")).unwrap();
            let targets = ["/etc", "a", "..", "a/b/../..", "/"];
            for (i, &target) in links.iter().enumerate() {
                let _ = std::os::unix::fs::symlink(targets[target], root.join(format!("l{i}")));
            }
            match dot_git {
                0 => {}
                1 => std::fs::create_dir_all(root.join(".git/hooks")).unwrap(),
                2 => std::os::unix::fs::symlink("/etc", root.join(".git")).unwrap(),
                _ => std::fs::write(
                    root.join(".git"),
                    "gitdir: ../../outside/.git/worktrees/w\n",
                )
                .unwrap(),
            }
        }

        proptest! {
            #![proptest_config(ProptestConfig { cases: 512, failure_persistence: None, ..ProptestConfig::default() })]

            /// Every path the layout protects (and so mounts over) lies
            /// physically inside a writable root and is never the root
            /// itself, whatever links and `..` the workspace and the grant
            /// hold: a grant the checker accepts never reaches outside.
            #[test]
            fn a_protected_path_never_escapes_its_root(
                links in prop::collection::vec(0usize..5, 0..4),
                dot_git in 0usize..4,
                names in pick(vec![
                    "a/b", "l0/passwd", "l1/b", "l2/x", "../x", "a/../../x", ".git/hooks",
                    "x", "l3", "a/./b/../../../y",
                ]),
                absolute in pick(vec![0usize, 1, 2]),
            ) {
                let dir = tempfile::tempdir().unwrap();
                let base = std::fs::canonicalize(dir.path()).unwrap();
                let root = base.join("ws");
                make_tree(&root, &links, dot_git);
                let mut policy = SandboxPolicy::new(SandboxMode::WorkspaceWrite, root.clone());
                policy.protected = names.iter().map(PathBuf::from).collect();
                policy.protected.extend(absolute.iter().map(|&i| match i {
                    0 => root.join("a"),
                    1 => PathBuf::from("/etc/passwd"),
                    _ => root.join("l0/x"),
                }));
                let deployment = Deployment::in_dir(&base);
                if grant(&policy, &deployment).is_err() {
                    return Ok(());
                }
                let layout = crate::sandbox::grant::lay_out(&policy, &[], &[]);
                for protected in &layout.protected {
                    let path = &protected.path;
                    prop_assert!(path.starts_with(&root) && path != &root, "{}", path.display());
                    prop_assert!(
                        !path.components().any(|c| c == std::path::Component::ParentDir),
                        "{}", path.display()
                    );
                    // Physically inside: its parent resolves inside the root.
                    if let Some(parent) = path.parent()
                        && let Ok(real) = std::fs::canonicalize(parent)
                    {
                        prop_assert!(real.starts_with(&root), "{} resolves to {}", path.display(), real.display());
                    }
                }
            }
        }
    }
}
