//! Whether a running command is waiting for input on the stdin the host
//! feeds (a task's open stdin or its terminal).
//!
//! Why from `/proc` and not from the pipe: nothing on a pipe or a terminal
//! says that someone is blocked reading it. The kernel does say, per
//! process, which system call it is blocked in and with what arguments
//! (`/proc/PID/syscall`), and what each of its descriptors is
//! (`/proc/PID/fd`). A process of the run blocked in `read`/`readv` on a
//! descriptor that is the run's stdin — or in `select`/`pselect6` whose
//! only possible descriptor is 0 (`nfds` 1), and 0 is that stdin, as GNU
//! readline waits — is waiting for input. That is all this says: a
//! program that polls several descriptors at once (an event loop) is not
//! seen, so *not awaiting* is never claimed, only *awaiting* when seen.
//!
//! The host can read these files for its own runs: they are its
//! descendants, under its own uid or in user namespaces it owns. The
//! processes are the leader's descendants, found through `/proc/*/stat`
//! (a PID namespace's processes keep their parent links as the host sees
//! them).

#[cfg(target_os = "linux")]
use std::os::unix::fs::MetadataExt;
#[cfg(target_os = "linux")]
use std::path::Path;

use nix::unistd::Pid;

/// The file a run's stdin is (device and inode, as `fstat` names a pipe
/// or a terminal), and the run's leader.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct InputWatch {
    leader: Pid,
    stdin: (u64, u64),
}

impl InputWatch {
    /// Watch the descendants of `leader` for reads of the file `stdin`
    /// (an fd the host holds on the read side, or on the same pipe).
    pub(super) fn new(leader: Pid, stdin: &impl std::os::fd::AsFd) -> Option<InputWatch> {
        let stat = nix::sys::stat::fstat(stdin.as_fd()).ok()?;
        Some(InputWatch {
            leader,
            stdin: (stat.st_dev as u64, stat.st_ino as u64),
        })
    }

    /// Whether a process of the run is now seen blocked reading its stdin.
    #[cfg(target_os = "linux")]
    pub fn awaiting(&self) -> bool {
        descendants(self.leader)
            .into_iter()
            .any(|pid| self.reads_stdin(pid))
    }

    /// Never seen where there is no `/proc/PID/syscall`.
    #[cfg(not(target_os = "linux"))]
    pub fn awaiting(&self) -> bool {
        false
    }

    #[cfg(target_os = "linux")]
    /// Whether `pid` is blocked in a read of the run's stdin.
    fn reads_stdin(&self, pid: i32) -> bool {
        let proc = Path::new("/proc").join(pid.to_string());
        let Ok(line) = std::fs::read_to_string(proc.join("syscall")) else {
            return false;
        };
        let Some(fd) = blocked_reading(&line) else {
            return false;
        };
        std::fs::metadata(proc.join("fd").join(fd.to_string()))
            .is_ok_and(|meta| (meta.dev(), meta.ino()) == self.stdin)
    }
}

#[cfg(target_os = "linux")]
/// The descriptor a blocked system call (a `/proc/PID/syscall` line) is
/// waiting to read, when it is one of those read above.
fn blocked_reading(line: &str) -> Option<u64> {
    let mut fields = line.split_whitespace();
    let number: i64 = fields.next()?.parse().ok()?;
    let arg = |text: Option<&str>| {
        text.and_then(|text| u64::from_str_radix(text.strip_prefix("0x")?, 16).ok())
    };
    let (first, second, third, fourth) = (
        arg(fields.next()),
        arg(fields.next()),
        arg(fields.next()),
        arg(fields.next()),
    );
    if READS.contains(&number) {
        return first;
    }
    // select(nfds, readfds, writefds, exceptfds, …): only fd 0 possible.
    let only_fd0 = first == Some(1) && second.is_some_and(|set| set != 0);
    let reads_only = third == Some(0) && fourth == Some(0);
    (SELECTS.contains(&number) && only_fd0 && reads_only).then_some(0)
}

#[cfg(target_os = "linux")]
/// The system calls whose first argument is the descriptor being read.
const READS: &[i64] = &[
    nix::libc::SYS_read,
    nix::libc::SYS_readv,
    nix::libc::SYS_pread64,
    nix::libc::SYS_preadv,
];

/// The `select`-shaped system calls (`nfds`, then the read set).
#[cfg(all(target_os = "linux", target_arch = "x86_64"))]
const SELECTS: &[i64] = &[nix::libc::SYS_pselect6, nix::libc::SYS_select];
/// The `select`-shaped system calls (`nfds`, then the read set).
#[cfg(all(target_os = "linux", not(target_arch = "x86_64")))]
const SELECTS: &[i64] = &[nix::libc::SYS_pselect6];

#[cfg(target_os = "linux")]
/// `leader` and every process below it, as `/proc/*/stat` links them.
fn descendants(leader: Pid) -> Vec<i32> {
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return vec![];
    };
    let links: Vec<(i32, i32)> = entries
        .filter_map(|entry| entry.ok()?.file_name().to_str()?.parse::<i32>().ok())
        .filter_map(|pid| Some((pid, parent_of(pid)?)))
        .collect();
    let mut found = vec![leader.as_raw()];
    let mut next = 0;
    while next < found.len() {
        let parent = found[next];
        found.extend(
            links
                .iter()
                .filter(|(_, p)| *p == parent)
                .map(|(pid, _)| *pid),
        );
        next += 1;
    }
    found
}

#[cfg(target_os = "linux")]
/// The parent of `pid` (the field after the command name in its `stat`,
/// whose name may hold spaces and parentheses).
fn parent_of(pid: i32) -> Option<i32> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let (_, after) = stat.rsplit_once(')')?;
    after.split_whitespace().nth(1)?.parse().ok()
}

#[cfg(all(test, target_os = "linux"))]
mod tests {
    use super::*;

    #[test]
    fn a_read_names_its_descriptor_and_a_select_on_fd_0_alone_names_0() {
        let read = format!(
            "{} 0x3 0x7ffc 0x1000 0x0 0x0 0x0 0x7ff 0x7ff",
            nix::libc::SYS_read
        );
        assert_eq!(blocked_reading(&read), Some(3));
        let select = format!(
            "{} 0x1 0x7ffef925f150 0x0 0x0 0x0 0x0 0x7ff 0x7ff",
            nix::libc::SYS_pselect6
        );
        assert_eq!(blocked_reading(&select), Some(0));
        // Several descriptors, or a write set: not only stdin.
        let wide = select.replacen(" 0x1 ", " 0x5 ", 1);
        assert_eq!(blocked_reading(&wide), None);
        let writes = format!("{} 0x1 0x7ffe 0x7ffd 0x0 0x0", nix::libc::SYS_pselect6);
        assert_eq!(blocked_reading(&writes), None);
        assert_eq!(blocked_reading("running"), None);
        assert_eq!(blocked_reading("-1 0x7ffc 0x7ff"), None);
        let wait = format!("{} 0xffffffff 0x7ffc 0x0", nix::libc::SYS_wait4);
        assert_eq!(blocked_reading(&wait), None);
    }

    #[test]
    fn the_descendants_of_this_process_include_a_child_it_started() {
        let mut child = std::process::Command::new("sleep")
            .arg("5")
            .spawn()
            .unwrap();
        let found = descendants(nix::unistd::getpid());
        let _ = child.kill();
        let _ = child.wait();
        assert!(found.contains(&(child.id() as i32)), "{found:?}");
    }
}
