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

/// The system calls of SysV IPC and POSIX message queues (the objects an
/// IPC namespace holds), each refused always.
#[cfg(target_os = "linux")]
fn ipc_calls() -> Vec<(i64, Vec<seccompiler::SeccompRule>)> {
    use nix::libc;
    let calls = [
        libc::SYS_shmget,
        libc::SYS_shmat,
        libc::SYS_shmdt,
        libc::SYS_shmctl,
        libc::SYS_semget,
        libc::SYS_semop,
        libc::SYS_semtimedop,
        libc::SYS_semctl,
        libc::SYS_msgget,
        libc::SYS_msgsnd,
        libc::SYS_msgrcv,
        libc::SYS_msgctl,
        libc::SYS_mq_open,
        libc::SYS_mq_unlink,
        libc::SYS_mq_timedsend,
        libc::SYS_mq_timedreceive,
        libc::SYS_mq_notify,
        libc::SYS_mq_getsetattr,
    ];
    crate::seccomp::with_x32(calls.into_iter().map(|nr| (nr, vec![])).collect())
}

/// Where the command cannot have an IPC namespace of its own (the Landlock
/// launcher without `CAP_SYS_ADMIN`: a non-root user, a restricted pod), it
/// gets no IPC at all: every SysV IPC and POSIX message-queue call fails
/// with `EPERM`. Otherwise it would share the host's IPC namespace and could
/// read, attach to or remove the shared memory, semaphores and queues of
/// every process of its user. Needs no-new-privs (set by the hardening
/// filter, installed first).
#[cfg(target_os = "linux")]
pub(crate) fn refuse_host_ipc() -> Result<(), String> {
    let calls = ipc_calls().into_iter().collect();
    let program = crate::seccomp::compile(calls, nix::libc::EPERM, "IPC filter")?;
    seccompiler::apply_filter(&program).map_err(|err| format!("IPC filter: {err}"))
}
