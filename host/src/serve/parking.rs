//! Detached tasks: where a connection's tasks wait, for the operator's
//! TTL, for a client to re-attach them with the token the `detach` method
//! gave.
//!
//! Why: a client that restarts (a deploy, a crash) should not lose a long
//! build it started. Off unless the operator sets `detach_ttl_secs`; the
//! token is 128 random bits, single-use, and only a client with the uid
//! that detached may claim it. Unclaimed, the tasks are killed when the TTL
//! passes or the server stops.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::task::JoinHandle;

use crate::tasks::Tasks;

/// One detached session's tasks.
struct Parked {
    tasks: Arc<Tasks>,
    uid: Option<u32>,
    expiry: JoinHandle<()>,
}

/// How long an `attach` waits for the tasks of a token whose connection
/// has not ended yet (a client that closes and reconnects at once can ask
/// before the server has read the end of its old connection).
const PENDING_BOUND: Duration = Duration::from_secs(5);

/// The server's detached tasks, by attach token.
#[derive(Default)]
pub(super) struct Parking {
    parked: Mutex<HashMap<String, Parked>>,
    /// Tokens handed out whose connection is still open: their tasks are
    /// parked when it ends.
    pending: Mutex<std::collections::HashSet<String>>,
    /// Woken when a pending token's tasks are parked or it is dropped.
    settled: tokio::sync::Notify,
}

/// A fresh attach token: 128 random bits as 32 hex digits.
pub(super) fn token() -> String {
    format!("{:032x}", crate::random::u128())
}

impl Parking {
    /// `token` was handed out by `detach`: its tasks come when its
    /// connection ends ([`Parking::park`], or [`Parking::drop_pending`]).
    pub fn reserve(&self, token: &str) {
        self.pending().insert(token.to_owned());
    }

    /// `token`'s connection ended without parking (the server stops).
    pub fn drop_pending(&self, token: &str) {
        self.pending().remove(token);
        self.settled.notify_waiters();
    }

    /// Keep `tasks` under `token` for `ttl`, then kill them.
    pub fn park(self: &Arc<Self>, token: String, tasks: Tasks, uid: Option<u32>, ttl: Duration) {
        let tasks = Arc::new(tasks);
        let parking = self.clone();
        let key = token.clone();
        let expiry = tokio::spawn(async move {
            tokio::time::sleep(ttl).await;
            let expired = parking.lock().remove(&key);
            if let Some(parked) = expired {
                parked.tasks.clear().await;
            }
        });
        self.pending().remove(&token);
        self.lock().insert(token, Parked { tasks, uid, expiry });
        self.settled.notify_waiters();
    }

    /// [`Parking::claim`], waiting (up to [`PENDING_BOUND`]) for the tasks
    /// of a token whose connection has not ended yet.
    pub async fn claim_when_parked(&self, token: &str, uid: Option<u32>) -> Option<Arc<Tasks>> {
        let deadline = tokio::time::Instant::now() + PENDING_BOUND;
        loop {
            let settled = self.settled.notified();
            tokio::pin!(settled);
            // Registered before the check: a park in between still wakes it.
            settled.as_mut().enable();
            if let Some(tasks) = self.claim(token, uid) {
                return Some(tasks);
            }
            if !self.pending().contains(token) {
                return None;
            }
            if tokio::time::timeout_at(deadline, settled).await.is_err() {
                return None;
            }
        }
    }

    /// The tasks parked under `token`, if a client with `uid` may have them
    /// (the uid that detached them); the token is used up. A client of
    /// another uid gets nothing, and the token stays its owner's.
    pub fn claim(&self, token: &str, uid: Option<u32>) -> Option<Arc<Tasks>> {
        let parked = self.lock().remove(token)?;
        if parked.uid != uid {
            // Not theirs: put it back untouched.
            self.lock().insert(token.to_owned(), parked);
            return None;
        }
        parked.expiry.abort();
        Some(parked.tasks)
    }

    /// Kill every parked task (the server is stopping).
    pub async fn clear(&self) {
        self.pending().clear();
        self.settled.notify_waiters();
        let all: Vec<Parked> = self.lock().drain().map(|(_, parked)| parked).collect();
        for parked in all {
            parked.expiry.abort();
            parked.tasks.clear().await;
        }
    }

    /// How many sessions' tasks are parked.
    pub fn len(&self) -> usize {
        self.lock().len()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, Parked>> {
        self.parked.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn pending(&self) -> std::sync::MutexGuard<'_, std::collections::HashSet<String>> {
        self.pending.lock().unwrap_or_else(|p| p.into_inner())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A parking with `token` handed out and a claim of it waiting.
    async fn claiming_pending(
        token: &'static str,
        uid: Option<u32>,
    ) -> (Arc<Parking>, JoinHandle<Option<Arc<Tasks>>>) {
        let parking = Arc::new(Parking::default());
        parking.reserve(token);
        let claiming = {
            let parking = parking.clone();
            tokio::spawn(async move { parking.claim_when_parked(token, uid).await })
        };
        tokio::task::yield_now().await;
        (parking, claiming)
    }

    #[tokio::test]
    async fn an_attach_before_the_old_connection_ended_waits_for_its_tasks() {
        let (parking, claiming) = claiming_pending("t", Some(7)).await;
        assert!(!claiming.is_finished(), "it waits for the park");
        parking.park(
            "t".into(),
            Tasks::default(),
            Some(7),
            Duration::from_secs(60),
        );
        assert!(claiming.await.unwrap().is_some());
        // Used up; an unknown token is answered at once.
        assert!(parking.claim_when_parked("t", Some(7)).await.is_none());
        assert!(parking.claim_when_parked("other", Some(7)).await.is_none());
    }

    #[tokio::test]
    async fn a_pending_token_dropped_or_of_another_uid_gives_nothing() {
        let (parking, claiming) = claiming_pending("t", Some(7)).await;
        parking.drop_pending("t");
        assert!(claiming.await.unwrap().is_none());
        parking.reserve("u");
        parking.park(
            "u".into(),
            Tasks::default(),
            Some(7),
            Duration::from_secs(60),
        );
        assert!(parking.claim_when_parked("u", Some(8)).await.is_none());
        assert!(
            parking.claim_when_parked("u", Some(7)).await.is_some(),
            "still its owner's"
        );
    }
}
