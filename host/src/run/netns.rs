//! Network namespaces a serving session lends its spare runners.
//!
//! A closed network is a network namespace of the run's own. Making one
//! costs a run about 0.8 ms of the runner's CPU, and tearing it down
//! about 0.7 ms of a kernel worker's (BENCHMARKS.md, "where a served
//! run's CPU goes"). A session's spare namespace runner joins one the
//! session made earlier instead (`--join-net`: root only, as joining a
//! namespace the host made needs `CAP_SYS_ADMIN` over it). A namespace is
//! lent to one run at a time, and lent again only when
//!
//! * the run that had it is over: every directory of its cgroup is gone
//!   (the kernel removes a cgroup only once no process is left in it, and
//!   every process of a run starts inside its cgroup and cannot leave
//!   it), and
//! * it is quiet: its `/proc/net/sockstat` and `sockstat6`, read from
//!   inside it, show what they showed when it was made — no socket of any
//!   family in any state (`sockets: used`, each protocol's `inuse`), no
//!   `TIME_WAIT`, no fragment queue.
//!
//! Anything else is closed and a fresh one made. The command never has a
//! capability over the namespace (it belongs to the host's user
//! namespace), so it cannot change its interfaces, routes, filters or
//! sysctls. What a later run of the same session does share with an
//! earlier one is what a namespace keeps beyond those: its inode number,
//! its hash seeds and its ephemeral ports' offsets. Sessions never share
//! one.

use std::fs::File;
use std::os::fd::OwnedFd;
use std::path::PathBuf;
use std::sync::Mutex;

/// How many namespaces a session keeps: the one its running command has,
/// the one its spare waits in, and one the spare before may have left.
const KEPT: usize = 3;

/// A session's network namespaces, each with the run that has it.
#[derive(Debug, Default)]
pub(crate) struct Pool(Mutex<Vec<Kept>>);

/// One namespace of the pool.
#[derive(Debug)]
struct Kept {
    namespace: OwnedFd,
    /// Its per-namespace socket counts when it was made.
    made: Counts,
    /// The cgroup directories of the run it was last lent to.
    holder: Vec<PathBuf>,
}

impl Pool {
    /// A network namespace for the run whose cgroup has the directories
    /// `holder`: one kept here that is free and quiet, else a fresh one
    /// (none: none can be made). The pool keeps it as that run's; the fd
    /// returned is the run's copy, for its runner.
    pub(crate) fn lend(&self, holder: Vec<PathBuf>) -> Option<OwnedFd> {
        if holder.is_empty() {
            return None;
        }
        let mut kept = self.0.lock().ok()?;
        let ready = kept.iter().position(|one| one.free() && one.quiet());
        let mut lent = match ready {
            Some(at) => kept.swap_remove(at),
            None => Kept::fresh()?,
        };
        // A free one not lent was not quiet: closed.
        kept.retain(|one| !one.free());
        let copy = lent.namespace.try_clone().ok()?;
        lent.holder = holder;
        kept.push(lent);
        if kept.len() > KEPT {
            kept.remove(0);
        }
        Some(copy)
    }

    /// How many namespaces are kept (for tests).
    #[cfg(test)]
    fn len(&self) -> usize {
        self.0.lock().map(|kept| kept.len()).unwrap_or(0)
    }
}

impl Kept {
    /// A fresh network namespace (only a loopback, down: the runner brings
    /// it up), made on a thread of its own so that no thread of the host
    /// changes namespace.
    fn fresh() -> Option<Kept> {
        on_own_thread(|| {
            if !make_network() {
                return None;
            }
            let namespace = File::open("/proc/thread-self/ns/net").ok()?;
            Some(Kept {
                namespace: namespace.into(),
                made: Counts::here()?,
                holder: vec![],
            })
        })
    }

    /// Whether the run it was lent to is over (its cgroup removed).
    fn free(&self) -> bool {
        self.holder.iter().all(|dir| !dir.exists())
    }

    /// Whether it holds no more sockets than when it was made.
    fn quiet(&self) -> bool {
        let counts = on_own_thread(|| match enter_network(&self.namespace) {
            true => Counts::here(),
            false => None,
        });
        counts.as_ref() == Some(&self.made)
    }
}

/// Move the calling thread into a new network namespace.
#[cfg(target_os = "linux")]
fn make_network() -> bool {
    nix::sched::unshare(nix::sched::CloneFlags::CLONE_NEWNET).is_ok()
}

/// Move the calling thread into the network namespace `namespace`.
#[cfg(target_os = "linux")]
fn enter_network(namespace: &OwnedFd) -> bool {
    nix::sched::setns(namespace, nix::sched::CloneFlags::CLONE_NEWNET).is_ok()
}

/// No network namespaces off Linux: none is ever lent.
#[cfg(not(target_os = "linux"))]
fn make_network() -> bool {
    false
}

/// No network namespaces off Linux.
#[cfg(not(target_os = "linux"))]
fn enter_network(_namespace: &OwnedFd) -> bool {
    false
}

/// `work` on a thread of its own, which ends with it (a thread that
/// entered another namespace is never reused).
fn on_own_thread<T: Send>(work: impl FnOnce() -> Option<T> + Send) -> Option<T> {
    std::thread::scope(|scope| {
        std::thread::Builder::new()
            .name("cordon-netns".into())
            .spawn_scoped(scope, work)
            .ok()?
            .join()
            .ok()
            .flatten()
    })
}

/// The per-namespace counts of the calling thread's network namespace's
/// `sockstat` and `sockstat6`: `sockets: used`, each protocol's `inuse`,
/// TCP's `tw` and the fragment queues' `inuse` and `memory` (not the
/// kernel-wide `orphan`, `alloc` and `mem`).
#[derive(Debug, PartialEq, Eq)]
struct Counts(Vec<(String, u64)>);

impl Counts {
    fn here() -> Option<Counts> {
        let mut counts = vec![];
        for file in ["sockstat", "sockstat6"] {
            match std::fs::read_to_string(format!("/proc/thread-self/net/{file}")) {
                Ok(text) => counts.extend(per_namespace(&text)),
                // No IPv6 here: nothing to count.
                Err(_) if file == "sockstat6" => {}
                Err(_) => return None,
            }
        }
        Some(Counts(counts))
    }
}

/// The per-namespace `(PROTOCOL KEY, value)` pairs of a `sockstat` text.
fn per_namespace(text: &str) -> Vec<(String, u64)> {
    let mut counts = vec![];
    for line in text.lines() {
        let Some((protocol, fields)) = line.split_once(':') else {
            continue;
        };
        let fields: Vec<&str> = fields.split_whitespace().collect();
        for pair in fields.chunks(2) {
            let [key, value] = pair else { continue };
            let per_namespace =
                matches!(*key, "used" | "inuse" | "memory") || (protocol == "TCP" && *key == "tw");
            if per_namespace {
                counts.push((
                    format!("{protocol} {key}"),
                    value.parse().unwrap_or(u64::MAX),
                ));
            }
        }
    }
    counts
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_the_namespace_s_own_counts_are_read() {
        let text = "sockets: used 3\nTCP: inuse 1 orphan 7 tw 2 alloc 9 mem 4\n\
                    UDP: inuse 0 mem 5\nFRAG: inuse 0 memory 0\n";
        let counts: Vec<(String, u64)> = per_namespace(text);
        let expected = [
            ("sockets used", 3),
            ("TCP inuse", 1),
            ("TCP tw", 2),
            ("UDP inuse", 0),
            ("FRAG inuse", 0),
            ("FRAG memory", 0),
        ];
        let expected: Vec<(String, u64)> = expected
            .iter()
            .map(|(key, value)| (key.to_string(), *value))
            .collect();
        assert_eq!(counts, expected);
    }

    fn inode(path: &str) -> u64 {
        std::os::unix::fs::MetadataExt::ino(&std::fs::metadata(path).unwrap())
    }

    fn inode_of(fd: &OwnedFd) -> u64 {
        inode(&format!(
            "/proc/self/fd/{}",
            std::os::fd::AsRawFd::as_raw_fd(fd)
        ))
    }

    /// Root only (making a network namespace needs `CAP_SYS_ADMIN`).
    #[test]
    fn a_namespace_is_lent_again_only_when_its_run_is_over_and_it_is_quiet() {
        if !nix::unistd::geteuid().is_root() {
            eprintln!("SKIP: making network namespaces needs root");
            return;
        }
        let dir = tempfile::tempdir().unwrap();
        let running = |name: &str| {
            let holder = dir.path().join(name);
            std::fs::create_dir(&holder).unwrap();
            holder
        };
        let pool = Pool::default();
        let first = pool.lend(vec![running("run-1")]).unwrap();
        assert_ne!(
            inode_of(&first),
            inode("/proc/self/ns/net"),
            "not the host's"
        );
        // Its run still going: another one is made.
        let second = pool.lend(vec![running("run-2")]).unwrap();
        assert_ne!(inode_of(&second), inode_of(&first));
        // Its run over, nothing left in it: lent again.
        std::fs::remove_dir(dir.path().join("run-1")).unwrap();
        let third = pool.lend(vec![running("run-3")]).unwrap();
        assert_eq!(inode_of(&third), inode_of(&first));
        // Its run over, but a socket left in it (as a stray daemon of the
        // command's would leave one): not lent again.
        let left = on_own_thread(|| {
            enter_network(&third).then_some(())?;
            std::os::unix::net::UnixDatagram::unbound().ok()
        })
        .unwrap();
        std::fs::remove_dir(dir.path().join("run-3")).unwrap();
        let fourth = pool.lend(vec![running("run-4")]).unwrap();
        assert_ne!(
            inode_of(&fourth),
            inode_of(&first),
            "a namespace with a socket"
        );
        assert_ne!(
            inode_of(&fourth),
            inode_of(&second),
            "a namespace still lent"
        );
        drop(left);
        assert!(pool.len() <= KEPT);
    }
}
