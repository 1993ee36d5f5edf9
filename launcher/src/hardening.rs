//! The hardening filter: what no confined command may do on any rung,
//! whatever its mode or grant, installed by the launcher (every mode: the
//! Landlock launcher, cordon's init inside bwrap, the namespace runner)
//! right before the command's exec. Built with `seccompiler`.
//!
//! * **No setuid or setgid file, no device node.** The sandbox's mounts are
//!   `nosuid` only from the inside: a file a run made setuid in its
//!   workspace (as root: a setuid-root shell) would give any local user
//!   who reaches it root on the host. So `chmod`/`fchmod`/`fchmodat`/
//!   `fchmodat2`, `open`/`openat`/`creat`, `mkdir`/`mkdirat` and
//!   `mknod`/`mknodat` fail with `EPERM` when their mode carries
//!   `S_ISUID` or `S_ISGID`, and `mknod*` when it makes a character or
//!   block device. `openat2` takes its mode behind a pointer, which a
//!   filter cannot read: it fails with `ENOSYS`, so libc and cap-std fall
//!   back to `openat`, which the filter reads. `chmod +x` and every
//!   ordinary mode keep working (where the mount tree or Landlock lets
//!   the file be written at all).
//! * **No kernel keyring.** `keyctl`, `add_key` and `request_key` fail with
//!   `EPERM` (the container runtimes' default profiles refuse them too): a
//!   user's keyring is shared by every process of that uid on the host, so
//!   a run could read the host's keys or plant its own.
//! * **No `io_uring`**: it opens files and changes modes without the
//!   system calls above.
//!
//! A call from another architecture's table kills the process
//! (seccompiler's architecture check); on x86_64 the x32 numbers of the
//! filtered calls are filtered alike.

use std::collections::BTreeMap;

use nix::libc;
use seccompiler::{BpfProgram, SeccompRule};

use super::seccomp::{FCHMODAT2, compile};

/// `openat2` (Linux 5.6), the same number on every architecture.
const OPENAT2: i64 = 437;

/// The mode bits no confined command may set.
const PRIVILEGE_BITS: [u64; 2] = [libc::S_ISUID as u64, libc::S_ISGID as u64];
/// The file types of device nodes.
const DEVICE_TYPES: [u64; 2] = [libc::S_IFCHR as u64, libc::S_IFBLK as u64];

/// Argument `arg` (a 32-bit mode) with `mask` applied equals `value`.
fn masked(arg: u8, mask: u64, value: u64) -> Result<SeccompRule, String> {
    super::seccomp::masked(arg, mask, value, "hardening filter")
}

/// The rules refusing a mode argument at `arg` that carries a privilege
/// bit (and, with `devices`, one that makes a device node).
fn mode_rules(arg: u8, devices: bool) -> Result<Vec<SeccompRule>, String> {
    let mut rules = PRIVILEGE_BITS
        .iter()
        .map(|bit| masked(arg, *bit, *bit))
        .collect::<Result<Vec<_>, _>>()?;
    if devices {
        for kind in DEVICE_TYPES {
            rules.push(masked(arg, libc::S_IFMT as u64, kind)?);
        }
    }
    Ok(rules)
}

/// The calls refused with `EPERM`, each with its rules (none: always), by
/// this architecture's numbers.
fn refused() -> Result<Vec<(i64, Vec<SeccompRule>)>, String> {
    // Other architectures add nothing: only x86_64 has the legacy calls.
    #[cfg_attr(not(target_arch = "x86_64"), allow(unused_mut))]
    let mut calls = vec![
        (libc::SYS_fchmod, mode_rules(1, false)?),
        (libc::SYS_fchmodat, mode_rules(2, false)?),
        (FCHMODAT2, mode_rules(2, false)?),
        (libc::SYS_openat, mode_rules(3, false)?),
        (libc::SYS_mkdirat, mode_rules(2, false)?),
        (libc::SYS_mknodat, mode_rules(2, true)?),
        (libc::SYS_keyctl, vec![]),
        (libc::SYS_add_key, vec![]),
        (libc::SYS_request_key, vec![]),
        (libc::SYS_io_uring_setup, vec![]),
    ];
    #[cfg(target_arch = "x86_64")]
    {
        calls.extend([
            (libc::SYS_chmod, mode_rules(1, false)?),
            (libc::SYS_open, mode_rules(2, false)?),
            (libc::SYS_creat, mode_rules(1, false)?),
            (libc::SYS_mkdir, mode_rules(1, false)?),
            (libc::SYS_mknod, mode_rules(1, true)?),
        ]);
    }
    Ok(super::seccomp::with_x32(calls))
}

/// The two compiled programs: the refusals (`EPERM`), and `openat2`
/// answered as if the kernel lacked it (`ENOSYS`).
pub(super) fn filters() -> Result<[BpfProgram; 2], String> {
    let refusals: BTreeMap<i64, Vec<SeccompRule>> = refused()?.into_iter().collect();
    let mut absent = BTreeMap::new();
    absent.insert(OPENAT2, vec![]);
    #[cfg(target_arch = "x86_64")]
    absent.insert(OPENAT2 | super::seccomp::X32_SYSCALL_BIT, vec![]);
    Ok([
        compile(refusals, libc::EPERM, "hardening filter")?,
        compile(absent, libc::ENOSYS, "hardening filter (openat2)")?,
    ])
}

/// Install both programs on this process (inherited by what it execs),
/// setting no-new-privs first (a filter needs it without `CAP_SYS_ADMIN`).
pub(super) fn install() -> Result<(), String> {
    crate::privileges::no_new_privileges()
        .map_err(|err| format!("hardening filter: cannot set no-new-privs: {err}"))?;
    for program in filters()? {
        seccompiler::apply_filter(&program).map_err(|err| format!("hardening filter: {err}"))?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    #[allow(
        unsafe_code,
        reason = "its test forks a child that installs the filter; each block says why it is sound"
    )]
    fn a_hardened_process_makes_no_setuid_file_no_device_and_no_key_but_chmods_plus_x() {
        let dir = tempfile::tempdir().unwrap();
        let path =
            |name: &str| std::ffi::CString::new(dir.path().join(name).to_str().unwrap()).unwrap();
        let (plain, setuid, node, sub) = (path("plain"), path("setuid"), path("node"), path("sub"));
        // Compiled here: the forked child of a threaded test process must
        // not allocate.
        let [refusals, absent] = filters().unwrap();
        // SAFETY: the child only makes system calls on values made before
        // the fork, and exits.
        match unsafe { libc::fork() } {
            0 => {
                // SAFETY: plain system calls on values we own.
                let code = unsafe {
                    let applied = libc::prctl(libc::PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) == 0
                        && seccompiler::apply_filter(&refusals).is_ok()
                        && seccompiler::apply_filter(&absent).is_ok();
                    let fd = libc::open(plain.as_ptr(), libc::O_CREAT | libc::O_WRONLY, 0o644);
                    let plus_x = libc::fchmod(fd, 0o755) == 0;
                    let chmod_suid = libc::fchmod(fd, 0o4755);
                    let chmodat_sgid = libc::fchmodat(libc::AT_FDCWD, plain.as_ptr(), 0o2755, 0);
                    let created =
                        libc::open(setuid.as_ptr(), libc::O_CREAT | libc::O_WRONLY, 0o4755);
                    let device = libc::mknod(node.as_ptr(), libc::S_IFCHR | 0o600, 0);
                    let fifo = libc::mknod(sub.as_ptr(), libc::S_IFIFO | 0o600, 0) == 0;
                    let key = libc::syscall(libc::SYS_keyctl, 0 /* GET_KEYRING_ID */, -4, 0);
                    let openat2 = libc::syscall(OPENAT2, libc::AT_FDCWD, plain.as_ptr(), 0, 0);
                    let enosys = *libc::__errno_location() == libc::ENOSYS;
                    match (applied, fd >= 0, plus_x, chmod_suid, chmodat_sgid, created) {
                        (true, true, true, -1, -1, -1) if device == -1 && fifo => {
                            i32::from(!(key == -1 && openat2 == -1 && enosys))
                        }
                        _ => 1,
                    }
                };
                // SAFETY: ends the child at once.
                unsafe { libc::_exit(code) }
            }
            child => {
                let mut status = 0;
                // SAFETY: waits for our own child.
                unsafe { libc::waitpid(child, &mut status, 0) };
                assert!(libc::WIFEXITED(status), "{status}");
                assert_eq!(libc::WEXITSTATUS(status), 0);
                assert!(!dir.path().join("setuid").exists());
                let mode = std::fs::metadata(dir.path().join("plain")).unwrap();
                use std::os::unix::fs::PermissionsExt;
                assert_eq!(mode.permissions().mode() & 0o7777, 0o755);
            }
        }
    }
}
