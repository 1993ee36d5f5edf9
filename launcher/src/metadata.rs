//! The metadata filter: Landlock has no access right for changing a file's
//! mode, owner, timestamps or extended attributes, so under Landlock alone
//! a command could `chmod`, `chown` or `touch -d` any file it can name —
//! as root, make a host binary setuid. The launcher therefore installs a
//! seccomp filter (built with `seccompiler`) that refuses every such system
//! call with `EPERM`, for paths and file descriptors alike: a filter cannot
//! tell a path inside the workspace from one outside, so the change is
//! refused everywhere — except where the file supervisor (`notify/`) is at
//! work: it takes over `chmod`, `chown`, `utimensat` and the extended
//! attribute calls and carries them out inside the run's writable roots
//! only.
//!
//! `io_uring` is refused too (it can set extended attributes without these
//! system calls). A call from another architecture's system-call table
//! (`int 0x80`) kills the process (seccompiler's architecture check); the
//! x32 numbers of the refused calls are refused as well.

use std::collections::BTreeMap;

use seccompiler::BpfProgram;

#[cfg(all(test, target_arch = "x86_64"))]
use super::seccomp::X32_SYSCALL_BIT;
use super::seccomp::compile;

/// The system calls that change metadata, by this architecture's numbers:
/// those the file supervisor can take (mode, owner, times, extended
/// attributes) and the rest.
fn refused() -> Vec<i64> {
    use nix::libc;
    let mut calls = super::notify::metadata_calls();
    calls.extend([SETXATTRAT, REMOVEXATTRAT, libc::SYS_io_uring_setup]);
    #[cfg(target_arch = "x86_64")]
    calls.extend([libc::SYS_utime, libc::SYS_utimes, libc::SYS_futimesat]);
    // The same calls through the x32 ABI.
    super::seccomp::with_x32(calls.into_iter().map(|nr| (nr, ())).collect())
        .into_iter()
        .map(|(nr, ())| nr)
        .collect()
}

/// `setxattrat` (Linux 6.13).
const SETXATTRAT: i64 = 463;
/// `removexattrat` (Linux 6.13).
const REMOVEXATTRAT: i64 = 466;

/// The compiled filter: the refused calls fail with `EPERM`, everything
/// else is allowed (Landlock and the mount tree decide the rest). With
/// `supervised`, the calls the file supervisor carries out (`notify/`)
/// are left to it: an errno would outrank its notification.
pub(super) fn filter(supervised: bool) -> Result<BpfProgram, String> {
    let handed = match supervised {
        true => super::notify::metadata_calls(),
        false => vec![],
    };
    let rules = refused()
        .into_iter()
        .filter(|nr| !handed.contains(nr))
        .map(|nr| (nr, vec![]))
        .collect::<BTreeMap<_, _>>();
    compile(rules, nix::libc::EPERM, "metadata filter")
}

/// Install the filter on this process (inherited by what it execs).
/// Needs no-new-privs, which the Landlock restriction has set.
pub(super) fn refuse_metadata_changes(supervised: bool) -> Result<(), String> {
    let program = filter(supervised)?;
    seccompiler::apply_filter(&program).map_err(|err| format!("metadata filter: {err}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_filter_covers_every_metadata_call_and_compiles() {
        let calls = refused();
        for nr in [
            nix::libc::SYS_fchmodat,
            nix::libc::SYS_fchownat,
            nix::libc::SYS_utimensat,
            nix::libc::SYS_fsetxattr,
        ] {
            assert!(calls.contains(&nr), "{nr}");
        }
        #[cfg(target_arch = "x86_64")]
        assert!(calls.contains(&(nix::libc::SYS_chmod | X32_SYSCALL_BIT)));
        assert!(!filter(false).unwrap().is_empty());
        assert!(!filter(true).unwrap().is_empty());
    }
}
