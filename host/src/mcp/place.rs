//! Where one MCP session's commands run, and as what: the workspace and
//! the mode, told to the model in the `shell` tool's description.
//!
//! * The workspace is the operator's when they named one (`--workspace`,
//!   `workspace_root`): nothing a client says moves it. Otherwise it is the
//!   client's first MCP root (a `file://` directory the host lets be
//!   written), else the server's working directory — when that can be a
//!   workspace at all. Clients start servers where they like (Claude
//!   Desktop in `/`): a server with no usable workspace says so once, to
//!   the operator and in `initialize`'s instructions, and runs read-only
//!   rather than refusing every call to a model that cannot fix it.
//! * The mode is the deployment's until a person switches it (`shell_mode`,
//!   approved by elicitation; narrowing needs no approval). The ceiling
//!   holds whatever is switched.
//! * Relative and default workdirs are the workspace's, never the server's
//!   own working directory.

use std::path::{Path, PathBuf};
use std::sync::Mutex;

use crate::model::{Deployment, ExecRequest, SandboxMode, SandboxPolicy};

/// Where a session's workspace came from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Source {
    /// The operator named it.
    Operator,
    /// The client's first root.
    Root,
    /// The server's working directory.
    WorkingDirectory,
}

#[derive(Debug)]
struct State {
    workspace: Option<PathBuf>,
    source: Source,
    mode: Option<SandboxMode>,
}

/// One session's place.
#[derive(Debug)]
pub struct Place {
    deployment: Deployment,
    pinned: bool,
    state: Mutex<State>,
}

impl Place {
    /// The place of a session of `deployment`; `pinned` when the operator
    /// named its workspace.
    pub fn new(deployment: &Deployment, pinned: bool) -> Place {
        let root = &deployment.policy.workspace_root;
        let usable = problem(deployment).is_none();
        Place {
            deployment: deployment.clone(),
            pinned,
            state: Mutex::new(State {
                workspace: usable.then(|| root.clone()),
                source: match pinned {
                    true => Source::Operator,
                    false => Source::WorkingDirectory,
                },
                mode: None,
            }),
        }
    }

    fn state(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Whether client roots may choose the workspace.
    pub fn follows_roots(&self) -> bool {
        !self.pinned
    }

    /// The workspace, when there is a usable one.
    pub fn workspace(&self) -> Option<PathBuf> {
        self.state().workspace.clone()
    }

    /// The mode runs get now.
    pub fn mode(&self) -> SandboxMode {
        self.policy().mode
    }

    /// The grant runs get now (before the policy component's say).
    pub fn policy(&self) -> SandboxPolicy {
        let state = self.state();
        let mut policy = self.deployment.policy.clone();
        if let Some(mode) = state.mode {
            policy.mode = mode;
        }
        match &state.workspace {
            Some(workspace) => policy.workspace_root = workspace.clone(),
            // Without a workspace nothing is written; a wider mode the
            // operator allowed (danger-full-access) is theirs.
            None if policy.mode == SandboxMode::WorkspaceWrite => {
                policy.mode = SandboxMode::ReadOnly;
            }
            None => {}
        }
        policy
    }

    /// A request for `command` here: the grant is set only where it
    /// differs from the deployment's, and a relative or absent `workdir`
    /// is the workspace's.
    pub fn request(&self, command: String, workdir: Option<PathBuf>) -> ExecRequest {
        let mut request = ExecRequest::new(command);
        let policy = self.policy();
        let base = self
            .workspace()
            .unwrap_or_else(|| self.deployment.workdir.clone());
        request.workdir = Some(match workdir {
            Some(dir) if dir.is_absolute() => dir,
            Some(dir) => base.join(dir),
            None => base,
        });
        if policy != self.deployment.policy {
            request.policy = Some(policy);
        }
        request
    }

    /// Take `uri` (a client root) as the workspace, unless the operator
    /// pinned one: whether it changed, or why the root cannot be one.
    pub fn adopt_root(&self, uri: &str) -> Result<bool, String> {
        if self.pinned {
            return Ok(false);
        }
        let path = file_path(uri).ok_or_else(|| format!("root {uri} is not a file:// path"))?;
        if let Some(why) = crate::run::workspace_problem(&path, &self.deployment.allowed_roots) {
            return Err(format!("root {uri}: {why}"));
        }
        let path = std::fs::canonicalize(&path).unwrap_or(path);
        let mut state = self.state();
        let changed = state.workspace.as_ref() != Some(&path);
        state.workspace = Some(path);
        state.source = Source::Root;
        Ok(changed)
    }

    /// Switch the session's mode (checked by the caller).
    pub fn set_mode(&self, mode: SandboxMode) {
        self.state().mode = Some(mode);
    }

    /// The widest mode the deployment allows.
    pub fn ceiling(&self) -> SandboxMode {
        self.deployment.max_mode
    }

    /// One line for the model: where and as what its commands run now.
    pub fn describe(&self) -> String {
        let policy = self.policy();
        let source = self.state().source;
        let workspace = self.workspace();
        let network = match &policy.network {
            crate::model::Network::None => "no network".to_owned(),
            crate::model::Network::Full => "full network".to_owned(),
            crate::model::Network::Allow(endpoints) => format!(
                "network only to {}",
                endpoints
                    .iter()
                    .map(ToString::to_string)
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
        };
        let where_ = match (&workspace, source) {
            (None, _) => "no workspace (the server has none: it runs read-only)".to_owned(),
            (Some(dir), Source::Root) => format!("workspace {} (the client's root)", dir.display()),
            (Some(dir), _) => format!("workspace {}", dir.display()),
        };
        let writes = match policy.mode {
            SandboxMode::ReadOnly => "nothing is writable",
            SandboxMode::WorkspaceWrite => "only the workspace (and temp) is writable",
            SandboxMode::DangerFullAccess => "unconfined",
        };
        crate::text::inert(&format!(
            "Sandbox now: {} in {where_}; {writes}; {network}.",
            policy.mode
        ))
        .into_owned()
    }
}

/// Why `deployment`'s workspace cannot be written (only matters when its
/// mode writes), if it cannot.
pub fn problem(deployment: &Deployment) -> Option<String> {
    let root = &deployment.policy.workspace_root;
    crate::run::workspace_problem(root, &deployment.allowed_roots)
}

/// The path of a `file://` URI (percent-escapes decoded), if it is one.
fn file_path(uri: &str) -> Option<PathBuf> {
    let rest = uri.strip_prefix("file://")?;
    // `file://localhost/x` and `file:///x`.
    let rest = rest.strip_prefix("localhost").unwrap_or(rest);
    if !rest.starts_with('/') {
        return None;
    }
    let bytes = rest.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%'
            && let Some(hex) = rest.get(i + 1..i + 3)
            && let Ok(byte) = u8::from_str_radix(hex, 16)
        {
            out.push(byte);
            i += 3;
            continue;
        }
        out.push(bytes[i]);
        i += 1;
    }
    use std::os::unix::ffi::OsStringExt;
    let path = PathBuf::from(std::ffi::OsString::from_vec(out));
    (path.is_absolute() && !path.as_os_str().is_empty()).then_some(path)
}

/// `path` shown to an operator.
pub fn shown(path: &Path) -> String {
    crate::text::inert(&path.display().to_string()).into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn file_uris_are_paths() {
        assert_eq!(file_path("file:///srv/my%20ws"), Some("/srv/my ws".into()));
        assert_eq!(file_path("file://localhost/srv/x"), Some("/srv/x".into()));
        assert_eq!(file_path("https://example.com/x"), None);
        assert_eq!(file_path("file://host/x"), None);
    }

    #[test]
    fn without_a_workspace_a_writing_mode_runs_read_only() {
        let mut deployment = Deployment::in_dir("/");
        deployment.policy.mode = SandboxMode::WorkspaceWrite;
        let place = Place::new(&deployment, false);
        assert_eq!(place.workspace(), None);
        assert_eq!(place.mode(), SandboxMode::ReadOnly);
        assert!(
            place.describe().contains("no workspace"),
            "{}",
            place.describe()
        );
        let request = place.request("ls".into(), Some("sub".into()));
        assert_eq!(request.workdir, Some(PathBuf::from("/sub")));
    }

    #[test]
    fn a_root_becomes_the_workspace_unless_the_operator_pinned_one() {
        let dir = std::env::temp_dir().join(format!("cordon-place-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let dir = std::fs::canonicalize(&dir).unwrap();
        let uri = format!("file://{}", dir.display());
        let mut deployment = Deployment::in_dir("/");
        deployment.policy.mode = SandboxMode::WorkspaceWrite;
        let place = Place::new(&deployment, false);
        assert_eq!(place.adopt_root(&uri), Ok(true));
        assert_eq!(place.mode(), SandboxMode::WorkspaceWrite);
        let request = place.request("ls".into(), Some("sub".into()));
        assert_eq!(request.workdir, Some(dir.join("sub")));
        assert_eq!(request.policy.unwrap().workspace_root, dir);
        assert!(place.adopt_root("file:///etc").is_err());
        let pinned = Place::new(&Deployment::in_dir(&dir), true);
        assert_eq!(pinned.adopt_root("file:///srv"), Ok(false));
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
