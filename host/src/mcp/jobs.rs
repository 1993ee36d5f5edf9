//! Short job ids for a model: `1`, `2`, … per connection.
//!
//! A task's own id is 128 random bits (32 hex digits) so that no other
//! session can guess it; a model copies ids between calls, where 32 digits
//! cost tokens and invite a slip. Lookups stay within the connection's own
//! tasks, so a small counter is no capability either.

use std::sync::Mutex;

use crate::tasks::TaskId;

/// The jobs of one connection, in the order they started.
#[derive(Debug, Default)]
pub struct Jobs(Mutex<Vec<TaskId>>);

impl Jobs {
    fn ids(&self) -> std::sync::MutexGuard<'_, Vec<TaskId>> {
        self.0.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Remember `id`; its short id.
    pub fn add(&self, id: TaskId) -> String {
        let mut ids = self.ids();
        ids.push(id);
        ids.len().to_string()
    }

    /// The task a short id names (an optional leading `job ` or `#` is
    /// allowed: models copy what they read).
    pub fn get(&self, short: &str) -> Option<TaskId> {
        let short = short.trim();
        let short = short.strip_prefix("job").unwrap_or(short).trim();
        let short = short.strip_prefix('#').unwrap_or(short);
        let n: usize = short.parse().ok()?;
        self.ids().get(n.checked_sub(1)?).copied()
    }

    /// The short id of `id`.
    pub fn short(&self, id: TaskId) -> Option<String> {
        self.ids()
            .iter()
            .position(|have| *have == id)
            .map(|at| (at + 1).to_string())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn short_ids_count_from_one() {
        let jobs = Jobs::default();
        let (a, b) = (TaskId::random(), TaskId::random());
        assert_eq!(jobs.add(a), "1");
        assert_eq!(jobs.add(b), "2");
        assert_eq!(jobs.get("2"), Some(b));
        assert_eq!(jobs.get("job 1"), Some(a));
        assert_eq!(jobs.get("#1"), Some(a));
        assert_eq!(jobs.get("0"), None);
        assert_eq!(jobs.get("3"), None);
        assert_eq!(jobs.short(b).as_deref(), Some("2"));
    }
}
