//! The command's privileges, dropped right before its exec: no
//! capability (even as root: Landlock confines files, not what
//! `CAP_SYS_BOOT`, `CAP_SYS_MODULE` or `CAP_NET_ADMIN` reach), and
//! no-new-privs (nothing it execs gains any, and a seccomp filter needs it).

/// Set no-new-privs: nothing this process execs gains privileges (no
/// setuid, no file capabilities); a seccomp filter needs it too.
#[cfg(target_os = "linux")]
#[allow(
    unsafe_code,
    reason = "prctl and capset are raw system calls; each block says why it is sound"
)]
pub(crate) fn no_new_privileges() -> std::io::Result<()> {
    // SAFETY: prctl with constant arguments affects this process only.
    match unsafe { nix::libc::prctl(nix::libc::PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) } {
        0 => Ok(()),
        _ => Err(std::io::Error::last_os_error()),
    }
}

/// Drop every capability from this process and what it execs: the
/// bounding set where this process may (it needs `CAP_SETPCAP`), the
/// ambient set, and the effective, permitted and inheritable sets.
///
/// An unprivileged user cannot shrink the bounding set, and need not: it
/// only caps what an exec could gain, and under no-new-privs (which every
/// rung sets) an exec gains nothing — no setuid, no file capabilities. What
/// does matter, that no capability is held, is checked before the exec
/// (`verify::confined`).
#[cfg(target_os = "linux")]
#[allow(
    unsafe_code,
    reason = "prctl and capset are raw system calls; each block says why it is sound"
)]
pub(crate) fn drop_capabilities() -> Result<(), String> {
    use nix::libc;
    for cap in 0..64 {
        // SAFETY: prctl with integer arguments; EINVAL past the last
        // capability this kernel knows, EPERM without CAP_SETPCAP.
        if unsafe { libc::prctl(libc::PR_CAPBSET_DROP, cap, 0, 0, 0) } != 0 {
            let err = std::io::Error::last_os_error();
            match err.raw_os_error() {
                Some(libc::EINVAL) | Some(libc::EPERM) => break,
                _ => {
                    return Err(format!(
                        "cannot drop capability {cap} from the bounding set: {err}"
                    ));
                }
            }
        }
    }
    // SAFETY: prctl with integer arguments.
    unsafe {
        libc::prctl(
            libc::PR_CAP_AMBIENT,
            libc::PR_CAP_AMBIENT_CLEAR_ALL,
            0,
            0,
            0,
        )
    };
    clear_capability_sets().map_err(|err| format!("cannot drop the command's capabilities: {err}"))
}

/// Clear the effective, permitted and inheritable capability sets of the
/// calling *thread* (`capset` works per thread): the file supervisor's
/// thread gives up what the launcher holds, so what it does for the
/// command meets the kernel's checks as the command would.
#[cfg(target_os = "linux")]
#[allow(
    unsafe_code,
    reason = "prctl and capset are raw system calls; each block says why it is sound"
)]
pub(crate) fn clear_capability_sets() -> std::io::Result<()> {
    use nix::libc;
    #[repr(C)]
    struct Header {
        version: u32,
        pid: i32,
    }
    #[repr(C)]
    #[derive(Clone, Copy)]
    struct Data {
        effective: u32,
        permitted: u32,
        inheritable: u32,
    }
    const LINUX_CAPABILITY_VERSION_3: u32 = 0x2008_0522;
    let header = Header {
        version: LINUX_CAPABILITY_VERSION_3,
        pid: 0,
    };
    let data = [Data {
        effective: 0,
        permitted: 0,
        inheritable: 0,
    }; 2];
    // SAFETY: capset reads one header and two data structs we own.
    if unsafe { libc::syscall(libc::SYS_capset, &header, data.as_ptr()) } != 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(())
}
