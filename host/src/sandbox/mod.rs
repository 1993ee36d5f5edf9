//! The host side of `sandbox.confine`: wrapping an argv in a platform
//! sandbox runner.
//!
//! A [`Confine`] implementation turns `(argv, policy)` into a [`Wrap`]: the
//! full argv to spawn plus the facts of the confinement. The policy bindings
//! hand a `Wrap` to the component only as an opaque resource, and the run
//! pipeline spawns confined modes only from a `Wrap` the host issued, so a
//! component can neither forge nor edit what actually runs.
//!
//! [`Sandbox`] is the platform ladder. Today it has one rung, bubblewrap
//! ([`bwrap`]): present → confine with it; absent → `unavailable`, so the
//! command is refused rather than run unconfined.

pub mod bwrap;

use std::path::PathBuf;
use std::sync::OnceLock;

use crate::model::{SandboxMode, SandboxPolicy, WrapFacts};

/// Why a policy cannot be confined here.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Unavailable {
    /// The mode that was asked for.
    pub mode: SandboxMode,
    /// Why, when there is more to say than "no backend".
    pub detail: Option<String>,
}

/// An argv wrapped in a sandbox runner, with the facts of its confinement.
/// Only the host creates these.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Wrap {
    argv: Vec<String>,
    policy: SandboxPolicy,
    facts: WrapFacts,
}

impl Wrap {
    /// A confinement of `policy` that spawns `argv` (runner first).
    pub fn new(argv: Vec<String>, policy: SandboxPolicy, facts: WrapFacts) -> Self {
        Wrap {
            argv,
            policy,
            facts,
        }
    }

    /// The full argv to spawn, runner first.
    pub fn argv(&self) -> &[String] {
        &self.argv
    }

    /// The policy this wrap enforces.
    pub fn policy(&self) -> &SandboxPolicy {
        &self.policy
    }

    /// Backend, enforcement and message dialect.
    pub fn facts(&self) -> &WrapFacts {
        &self.facts
    }
}

/// Something that can confine an argv: the platform ladder in production,
/// a scripted fake in component tests.
pub trait Confine: Send + Sync {
    /// Wrap `argv` for `policy`, or say why that is impossible here.
    fn confine(&self, argv: &[String], policy: &SandboxPolicy) -> Result<Wrap, Unavailable>;
}

/// The platform ladder: bubblewrap when it is installed, otherwise fail closed.
#[derive(Debug, Default)]
pub struct Sandbox {
    bwrap: OnceLock<Option<PathBuf>>,
}

impl Sandbox {
    /// A ladder that looks for its runners lazily, on the first confine.
    pub fn new() -> Self {
        Sandbox::default()
    }

    fn bwrap(&self) -> Option<&PathBuf> {
        self.bwrap
            .get_or_init(|| find_on_path(bwrap::PROGRAM))
            .as_ref()
    }
}

impl Confine for Sandbox {
    fn confine(&self, argv: &[String], policy: &SandboxPolicy) -> Result<Wrap, Unavailable> {
        if !policy.mode.is_confined() {
            return Err(Unavailable {
                mode: policy.mode,
                detail: Some(
                    "danger-full-access is never confined; plan an unconfined launch".into(),
                ),
            });
        }
        match self.bwrap() {
            Some(runner) => Ok(bwrap::wrap(runner, argv, policy)),
            None => Err(Unavailable {
                mode: policy.mode,
                detail: None,
            }),
        }
    }
}

/// The first executable file called `program` on `PATH`.
fn find_on_path(program: &str) -> Option<PathBuf> {
    use std::os::unix::fs::PermissionsExt;
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .filter(|dir| dir.is_absolute())
        .map(|dir| dir.join(program))
        .find(|candidate| {
            candidate
                .metadata()
                .is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
        })
}
