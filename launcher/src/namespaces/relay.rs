//! The launcher outside the namespaces: it relays the host's signals to
//! the sandbox's pid 1 and ends as it ended; pid 1 watches that it lives.

use std::os::fd::{AsRawFd, OwnedFd};

use nix::libc;

/// The launcher's half after pid 1 is forked: relay the host's signals to
/// it and end as it ended. `alive` is the pipe end pid 1 watches: it is
/// closed only when this process dies.
pub fn relay(pid1: i32, set: &nix::sys::signal::SigSet, alive: OwnedFd) -> ! {
    use nix::sys::signal::{Signal, kill};
    use nix::sys::wait::{WaitStatus, waitpid};
    use nix::unistd::Pid;
    let child = Pid::from_raw(pid1);
    loop {
        match waitpid(child, Some(nix::sys::wait::WaitPidFlag::WNOHANG)) {
            Ok(WaitStatus::Exited(_, code)) => {
                drop(alive);
                crate::supervise::end_as(crate::Ended::Exited(code))
            }
            Ok(WaitStatus::Signaled(_, signal, _)) => {
                drop(alive);
                crate::supervise::end_as(crate::Ended::Signaled(signal as i32))
            }
            Ok(_) | Err(nix::errno::Errno::EINTR) => {}
            Err(_) => std::process::exit(crate::FAILURE_EXIT),
        }
        if let Some(signal) = crate::supervise::wait_signal(set)
            && let Ok(signal) = Signal::try_from(signal)
            && signal != Signal::SIGCHLD
        {
            let _ = kill(child, signal);
        }
    }
}

/// Pid 1's check that the launcher is still there, once its parent-death
/// signal is set: the launcher's end of `alive` is open until it dies.
#[allow(
    unsafe_code,
    reason = "namespaces, mounts and the new mount API are raw system calls; each block says why it is sound"
)]
pub fn launcher_alive(alive: &OwnedFd) -> bool {
    let mut poll = libc::pollfd {
        fd: alive.as_raw_fd(),
        events: libc::POLLIN,
        revents: 0,
    };
    // SAFETY: poll reads and writes one pollfd we own.
    let ready = unsafe { libc::poll(&mut poll, 1, 0) };
    ready == 0
}
