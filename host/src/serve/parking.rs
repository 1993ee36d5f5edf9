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

/// The server's detached tasks, by attach token.
#[derive(Default)]
pub(super) struct Parking {
    parked: Mutex<HashMap<String, Parked>>,
}

/// A fresh attach token: 128 random bits as 32 hex digits.
pub(super) fn token() -> String {
    format!("{:032x}", crate::random::u128())
}

impl Parking {
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
        self.lock().insert(token, Parked { tasks, uid, expiry });
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
}
