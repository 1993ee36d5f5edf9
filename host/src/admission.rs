//! Admission: the operator's bounds on what the sessions of one host hold
//! at once, and the permits that count against them.
//!
//! Why here and not in the server: every surface that hands a host to many
//! clients (the JSON-RPC server, the MCP server, an embedder's agents) must
//! refuse past the same bounds with the same error, so the count lives with
//! the host and its sessions. A request past a bound is refused at once
//! with [`RunError::Busy`] naming the bound — never queued, never frozen.
//!
//! * A *run* is a command in flight: a foreground run from its preparation
//!   to its result, a background task until it settles.
//! * A *task* is held from `start` until it is removed or its session ends
//!   (a settled task still holds its output and spill files).

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use serde::{Deserialize, Serialize};

use crate::error::RunError;

/// The operator's bounds (see the module docs). Zero is not a bound: a
/// zero field is refused by the configuration.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct SessionLimits {
    /// Runs in flight across the host.
    pub max_runs: usize,
    /// Runs in flight in one session.
    pub max_session_runs: usize,
    /// Tasks held across the host.
    pub max_tasks: usize,
    /// Tasks held by one session.
    pub max_session_tasks: usize,
}

impl Default for SessionLimits {
    fn default() -> Self {
        SessionLimits {
            max_runs: 1024,
            max_session_runs: 256,
            max_tasks: 1024,
            max_session_tasks: 512,
        }
    }
}

/// What the sessions of a host hold right now.
#[derive(
    Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema,
)]
#[serde(rename_all = "camelCase")]
pub struct Load {
    /// Live sessions (the host's own counts as one).
    pub sessions: usize,
    /// Runs in flight.
    pub runs: usize,
    /// Tasks held.
    pub tasks: usize,
}

/// The host's counters against its [`SessionLimits`].
#[derive(Debug, Default)]
pub(crate) struct Admission {
    pub limits: SessionLimits,
    sessions: AtomicUsize,
    runs: Arc<AtomicUsize>,
    tasks: Arc<AtomicUsize>,
}

/// One session's counters.
#[derive(Debug, Default)]
pub(crate) struct SessionCounts {
    runs: Arc<AtomicUsize>,
    tasks: Arc<AtomicUsize>,
}

/// One unit held against a host's bound and a session's; released on drop.
#[derive(Debug)]
pub(crate) struct Permit {
    host: Arc<AtomicUsize>,
    session: Arc<AtomicUsize>,
}

impl Drop for Permit {
    fn drop(&mut self) {
        self.host.fetch_sub(1, Ordering::AcqRel);
        self.session.fetch_sub(1, Ordering::AcqRel);
    }
}

/// Take one unit of `counter` if it is below `max`.
fn take(counter: &AtomicUsize, max: usize) -> bool {
    counter
        .fetch_update(Ordering::AcqRel, Ordering::Acquire, |held| {
            (held < max).then_some(held + 1)
        })
        .is_ok()
}

impl Admission {
    /// Counters for `limits`.
    pub fn new(limits: SessionLimits) -> Self {
        Admission {
            limits,
            ..Admission::default()
        }
    }

    /// What is held now.
    pub fn load(&self) -> Load {
        Load {
            sessions: self.sessions.load(Ordering::Acquire),
            runs: self.runs.load(Ordering::Acquire),
            tasks: self.tasks.load(Ordering::Acquire),
        }
    }

    /// Count a session for its life (see [`SessionCount`]).
    pub fn session_opened(self: &Arc<Self>) -> SessionCount {
        self.sessions.fetch_add(1, Ordering::AcqRel);
        SessionCount(self.clone())
    }

    /// A permit for one more run of `session`, or `BUSY`.
    pub fn run(&self, session: &SessionCounts) -> Result<Permit, RunError> {
        let limits = &self.limits;
        admit(
            (&self.runs, limits.max_runs, "maxRuns"),
            (&session.runs, limits.max_session_runs, "maxSessionRuns"),
        )
    }

    /// A permit for one more task of `session`, or `BUSY`.
    pub fn task(&self, session: &SessionCounts) -> Result<Permit, RunError> {
        let limits = &self.limits;
        admit(
            (&self.tasks, limits.max_tasks, "maxTasks"),
            (&session.tasks, limits.max_session_tasks, "maxSessionTasks"),
        )
    }
}

/// Take a unit of the session's bound, then the host's; refuse naming the
/// first that is full (the session's first: it is what its client controls).
fn admit(
    (host, host_max, host_name): (&Arc<AtomicUsize>, usize, &'static str),
    (session, session_max, session_name): (&Arc<AtomicUsize>, usize, &'static str),
) -> Result<Permit, RunError> {
    if !take(session, session_max) {
        return Err(RunError::Busy {
            limit: session_name,
            max: session_max,
        });
    }
    if !take(host, host_max) {
        session.fetch_sub(1, Ordering::AcqRel);
        return Err(RunError::Busy {
            limit: host_name,
            max: host_max,
        });
    }
    Ok(Permit {
        host: host.clone(),
        session: session.clone(),
    })
}

/// A live session, counted until dropped.
#[derive(Debug)]
pub(crate) struct SessionCount(Arc<Admission>);

impl Drop for SessionCount {
    fn drop(&mut self) {
        self.0.sessions.fetch_sub(1, Ordering::AcqRel);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn limits(runs: usize, session_runs: usize) -> SessionLimits {
        SessionLimits {
            max_runs: runs,
            max_session_runs: session_runs,
            ..SessionLimits::default()
        }
    }

    #[test]
    fn a_session_is_refused_past_its_own_bound_and_the_hosts() {
        let admission = Admission::new(limits(3, 2));
        let (a, b) = (SessionCounts::default(), SessionCounts::default());
        let a1 = admission.run(&a).unwrap();
        let _a2 = admission.run(&a).unwrap();
        let err = admission.run(&a).unwrap_err();
        assert!(
            matches!(
                err,
                RunError::Busy {
                    limit: "maxSessionRuns",
                    max: 2
                }
            ),
            "{err:?}"
        );
        let _b1 = admission.run(&b).unwrap();
        let err = admission.run(&b).unwrap_err();
        assert!(
            matches!(
                err,
                RunError::Busy {
                    limit: "maxRuns",
                    max: 3
                }
            ),
            "{err:?}"
        );
        // A refusal by the host's bound gives back the session's unit.
        assert_eq!(b.runs.load(Ordering::Acquire), 1);
        drop(a1);
        let _b2 = admission.run(&b).unwrap();
        assert_eq!(admission.load().runs, 3);
    }

    #[test]
    fn sessions_are_counted_while_alive() {
        let admission = Arc::new(Admission::new(SessionLimits::default()));
        let one = admission.session_opened();
        let _two = admission.session_opened();
        assert_eq!(admission.load().sessions, 2);
        drop(one);
        assert_eq!(admission.load().sessions, 1);
    }
}
