//! The run's supervisor: the launcher's parent half, and cordon's init
//! inside bubblewrap.
//!
//! The launcher forks the command and stays as its parent, so that the
//! run's whole process tree is the supervisor's and ends with it:
//!
//! * it is a *child subreaper*: a `setsid` grandchild or a double fork is
//!   reparented to it, not to the machine's init, so nothing leaves the
//!   tree it can see;
//! * when the command's leader exits, every process still in the tree is
//!   `SIGKILL`ed and reaped before the supervisor reports and exits (a
//!   child that outlives its leader does not outlive the run);
//! * `SIGTERM` or `SIGINT` (the host's timeout, abort or Ctrl-C) is
//!   forwarded once to the command's own process group, so a
//!   `trap … TERM` runs; `SIGHUP` — the host's "the grace is over", and the
//!   parent-death signal when the host itself dies — kills the whole tree
//!   at once;
//! * the leader's exact wait status goes out of band (`exit N` or
//!   `signal N` on the status fd), and the supervisor ends the same way
//!   (the same exit code, or the same signal raised on itself), so a
//!   signal death reads as a signal under every runner.
//!
//! The supervisor forks while single-threaded (the only thread it may
//! start, the init's proxy bridge, starts after the fork and inherits the
//! blocked mask) and waits with `sigtimedwait` on a blocked signal set, so
//! no handler runs and nothing races; the command
//! starts with an empty signal mask and default dispositions. It never
//! signals anything but its own descendants (it never uses `kill(-1)`:
//! outside a PID namespace, as root, that would be the whole machine).

use std::convert::Infallible;
use std::fs::File;
use std::io::Write;
use std::time::{Duration, Instant};

use nix::errno::Errno;
use nix::libc;
use nix::sys::signal::{SigSet, SigmaskHow, Signal, kill, killpg, sigprocmask};
use nix::sys::wait::{WaitPidFlag, WaitStatus, waitpid};
use nix::unistd::{ForkResult, Pid, fork, getppid, setpgid};

pub use crate::protocol::Ended;

/// What the supervisor was told.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct HostLink {
    /// The host's pid: the supervisor dies with it (parent-death signal),
    /// and refuses to start the command if it is already gone.
    pub parent: Option<i32>,
}

/// The signals the supervisor waits for.
pub(super) fn watched() -> SigSet {
    let mut set = SigSet::empty();
    for signal in [
        Signal::SIGTERM,
        Signal::SIGINT,
        Signal::SIGHUP,
        Signal::SIGCHLD,
    ] {
        set.add(signal);
    }
    set
}

/// Fork `child` — which confines itself and execs the command, or exits (it never returns) —
/// and supervise it to the end of its tree. Never returns. `fail` reports
/// a failure of the supervisor before the command started. `alongside`
/// runs in the supervisor right after the fork (it may start threads:
/// the fork itself happens while this process has only one).
#[allow(
    unsafe_code,
    reason = "fork, prctl, sigtimedwait and raising a signal are raw system calls; each block says why it is sound"
)]
pub fn run(
    supervision: HostLink,
    mut status: Option<File>,
    fail: impl Fn(Option<&mut File>, &str) -> Infallible,
    alongside: impl FnOnce(),
    child: impl FnOnce(Option<File>) -> Infallible,
) -> ! {
    let fail = |status: Option<&mut File>, detail: &str| -> ! { match fail(status, detail) {} };
    let set = watched();
    if let Err(err) = sigprocmask(SigmaskHow::SIG_BLOCK, Some(&set), None) {
        fail(status.as_mut(), &format!("cannot block signals: {err}"));
    }
    // Elsewhere there is no subreaper nor parent-death signal to set up.
    #[cfg(not(target_os = "linux"))]
    let _ = supervision;
    #[cfg(target_os = "linux")]
    {
        // SAFETY: prctl with integer arguments affects this process only.
        if unsafe { libc::prctl(libc::PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) } != 0 {
            let err = std::io::Error::last_os_error();
            fail(
                status.as_mut(),
                &format!("cannot become a subreaper: {err}"),
            );
        }
        if let Some(parent) = supervision.parent
            && let Err(detail) = die_with(parent, libc::SIGHUP)
        {
            fail(status.as_mut(), &detail);
        }
    }
    // Not dumpable, from before the fork: a command running as the same
    // user cannot open the supervisor's fds through /proc (nor ptrace it),
    // not even in the instant after the fork. The command is dumpable again
    // once it execs.
    #[cfg(target_os = "linux")]
    // SAFETY: prctl with integer arguments affects this process only.
    unsafe {
        libc::prctl(libc::PR_SET_DUMPABLE, 0, 0, 0, 0);
    }
    let supervisor = std::process::id() as i32;
    // SAFETY: the launcher is single-threaded here (the launcher is its own
    // executable, started by the host; its one thread, the bridge, starts
    // after this fork, in `alongside`), so the child may allocate and exec.
    match unsafe { fork() } {
        Err(err) => fail(status.as_mut(), &format!("cannot fork the command: {err}")),
        Ok(ForkResult::Child) => {
            // Its own process group, so a forwarded SIGTERM reaches the
            // command's group and not the supervisor; the signal mask the
            // host gave the launcher (empty) back before exec.
            let _ = setpgid(Pid::from_raw(0), Pid::from_raw(0));
            // Should the supervisor itself be killed, the command dies
            // with it rather than run on unsupervised.
            #[cfg(target_os = "linux")]
            let _ = parent_death(libc::SIGKILL);
            if getppid().as_raw() != supervisor {
                std::process::exit(super::FAILURE_EXIT);
            }
            let _ = sigprocmask(SigmaskHow::SIG_UNBLOCK, Some(&set), None);
            match child(status) {}
        }
        Ok(ForkResult::Parent { child }) => {
            alongside();
            let ended = supervise(child, &set);
            if let Some(status) = status.as_mut() {
                let _ = writeln!(status, "{}", crate::protocol::Status::Ended(ended));
            }
            drop(status);
            end_as(ended)
        }
    }
}

/// Wait for the leader, forwarding `SIGTERM` once and killing the tree on
/// `SIGHUP`; then sweep whatever is left. Returns how the leader ended.
fn supervise(leader: Pid, set: &SigSet) -> Ended {
    let mut ended = None;
    let mut terminated = false;
    loop {
        if let Reaped::NoChildren = reap(leader, &mut ended) {
            break;
        }
        if ended.is_some() {
            break;
        }
        match wait_signal(set) {
            Some(libc::SIGTERM | libc::SIGINT) if !terminated => {
                terminated = true;
                if killpg(leader, Signal::SIGTERM).is_err() {
                    let _ = kill(leader, Signal::SIGTERM);
                }
            }
            Some(libc::SIGHUP) => kill_children(),
            _ => {}
        }
    }
    sweep(leader, &mut ended);
    // The leader is our child: it is reaped above, always. A supervisor
    // that somehow lost it reports a kill rather than a made-up exit.
    ended.unwrap_or(Ended::Signaled(libc::SIGKILL))
}

/// What a round of reaping found.
enum Reaped {
    /// Children remain (alive).
    Some,
    /// No child is left at all.
    NoChildren,
}

/// Reap every child that has ended, recording the leader's status.
fn reap(leader: Pid, ended: &mut Option<Ended>) -> Reaped {
    loop {
        match waitpid(Pid::from_raw(-1), Some(WaitPidFlag::WNOHANG)) {
            Ok(WaitStatus::StillAlive) => return Reaped::Some,
            Ok(WaitStatus::Exited(pid, code)) if pid == leader => {
                *ended = Some(Ended::Exited(code));
            }
            Ok(WaitStatus::Signaled(pid, signal, _)) if pid == leader => {
                *ended = Some(Ended::Signaled(signal as i32));
            }
            Ok(_) | Err(Errno::EINTR) => {}
            Err(_) => return Reaped::NoChildren,
        }
    }
}

/// Have the kernel send `signal` to this process when its parent dies.
#[cfg(target_os = "linux")]
#[allow(
    unsafe_code,
    reason = "fork, prctl, sigtimedwait and raising a signal are raw system calls; each block says why it is sound"
)]
pub(super) fn parent_death(signal: i32) -> std::io::Result<()> {
    // SAFETY: prctl with integer arguments affects this process only.
    match unsafe { libc::prctl(libc::PR_SET_PDEATHSIG, signal, 0, 0, 0) } {
        0 => Ok(()),
        _ => Err(std::io::Error::last_os_error()),
    }
}

/// Die of `signal` with `parent` (the host), and refuse to go on if it is
/// gone already (then the parent-death signal came too early to arrive).
#[cfg(target_os = "linux")]
pub(super) fn die_with(parent: i32, signal: i32) -> Result<(), String> {
    parent_death(signal).map_err(|err| format!("cannot set the parent-death signal: {err}"))?;
    if getppid().as_raw() != parent {
        return Err("the host went away before the command started".into());
    }
    Ok(())
}

/// Wait for one of the watched signals, for at most a short while (so a
/// missed `SIGCHLD` costs a poll, never a hang).
#[cfg(target_os = "linux")]
#[allow(
    unsafe_code,
    reason = "fork, prctl, sigtimedwait and raising a signal are raw system calls; each block says why it is sound"
)]
pub(super) fn wait_signal(set: &SigSet) -> Option<i32> {
    let timeout = libc::timespec {
        tv_sec: 0,
        tv_nsec: 200_000_000,
    };
    // SAFETY: sigtimedwait reads the set and the timeout we own; no
    // siginfo is asked for.
    let signal = unsafe { libc::sigtimedwait(set.as_ref(), std::ptr::null_mut(), &timeout) };
    (signal > 0).then_some(signal)
}

/// Wait for one of the watched signals (no `sigtimedwait` here: the
/// blocked `SIGCHLD` wakes it).
#[cfg(not(target_os = "linux"))]
fn wait_signal(set: &SigSet) -> Option<i32> {
    set.wait().ok().map(|signal| signal as i32)
}

/// How long the final sweep may take before the supervisor gives up and
/// leaves the rest to the host (its cgroup, or the PID namespace).
const SWEEP_BOUND: Duration = Duration::from_secs(2);

/// `SIGKILL` every child and reap, until no child is left: each round's
/// victims' own children are reparented to us and die in the next.
fn sweep(leader: Pid, ended: &mut Option<Ended>) {
    let until = Instant::now() + SWEEP_BOUND;
    loop {
        kill_children();
        if let Reaped::NoChildren = reap(leader, ended) {
            return;
        }
        if Instant::now() >= until {
            return;
        }
        std::thread::sleep(Duration::from_millis(1));
    }
}

/// `SIGKILL` every current child of this process. A child cannot be
/// reaped by anyone else, so its pid cannot be reused before we kill it.
fn kill_children() {
    for pid in children() {
        let _ = kill(Pid::from_raw(pid), Signal::SIGKILL);
    }
}

/// This process's children: `/proc/self/task/TID/children` where the
/// kernel has it, else a scan of `/proc` for our pid as parent.
fn children() -> Vec<i32> {
    let me = std::process::id() as i32;
    if let Ok(list) = std::fs::read_to_string(format!("/proc/self/task/{me}/children")) {
        return list
            .split_whitespace()
            .filter_map(|pid| pid.parse().ok())
            .collect();
    }
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return vec![];
    };
    entries
        .filter_map(|entry| entry.ok()?.file_name().to_str()?.parse::<i32>().ok())
        .filter(|pid| {
            std::fs::read_to_string(format!("/proc/{pid}/stat"))
                .ok()
                .and_then(|stat| parent_of(&stat))
                == Some(me)
        })
        .collect()
}

/// The parent pid in a `/proc/PID/stat` line: the second field after the
/// command name, which is in parentheses and may itself contain spaces.
pub fn parent_of(stat: &str) -> Option<i32> {
    let (_, rest) = stat.rsplit_once(") ")?;
    rest.split_whitespace().nth(1)?.parse().ok()
}

/// End this process as the leader ended: its exit code, or its signal
/// raised on ourselves (without a core dump).
#[allow(
    unsafe_code,
    reason = "fork, prctl, sigtimedwait and raising a signal are raw system calls; each block says why it is sound"
)]
pub(super) fn end_as(ended: Ended) -> ! {
    match ended {
        Ended::Exited(code) => std::process::exit(code),
        Ended::Signaled(signal) => {
            let no_core = libc::rlimit {
                rlim_cur: 0,
                rlim_max: 0,
            };
            // SAFETY: plain libc calls on integers and a struct we own; the
            // signal gets its default action and is unblocked, so raising
            // it ends this process the way it ended the command.
            unsafe {
                libc::setrlimit(libc::RLIMIT_CORE, &no_core);
                libc::signal(signal, libc::SIG_DFL);
                let mut one: libc::sigset_t = std::mem::zeroed();
                libc::sigemptyset(&mut one);
                libc::sigaddset(&mut one, signal);
                libc::sigprocmask(libc::SIG_UNBLOCK, &one, std::ptr::null_mut());
                libc::raise(signal);
            }
            std::process::exit(128 + signal)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_report_line_round_trips_and_the_last_one_wins() {
        for ended in [Ended::Exited(0), Ended::Exited(137), Ended::Signaled(9)] {
            assert_eq!(Ended::parse(&ended.line()), Some(ended));
        }
        assert_eq!(
            Ended::parse("exec\nexit 3\nsignal 15\n"),
            Some(Ended::Signaled(15))
        );
        assert_eq!(Ended::parse("exec\n"), None);
        assert_eq!(Ended::parse("failed: exit soon\n"), None);
    }

    #[test]
    fn the_parent_is_read_past_a_command_name_with_spaces() {
        assert_eq!(parent_of("42 (a b) c) S 7 42 42 0"), Some(7));
        assert_eq!(parent_of("42 (sh) S 1 42"), Some(1));
        assert_eq!(parent_of("garbage"), None);
    }
}
