//! New SysV IPC and UTS namespaces for the command (the Landlock
//! launcher; bwrap and the namespace runner make their own).

/// New SysV IPC and UTS namespaces for this process and what it execs:
/// the command can neither see nor remove the host's shared memory,
/// semaphores and message queues, nor change its hostname.
#[cfg(target_os = "linux")]
#[allow(
    unsafe_code,
    reason = "unshare is a raw system call; each block says why it is sound"
)]
pub(crate) fn unshare_ipc() -> std::io::Result<()> {
    // SAFETY: unshare with namespace flags only affects this process.
    if unsafe { nix::libc::unshare(nix::libc::CLONE_NEWIPC | nix::libc::CLONE_NEWUTS) } != 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(())
}
