//! The socket filter: a run whose grant closes the network may create
//! sockets of the families the host names (`--socket-families`) and no
//! other. A mount tree cannot close a host unix socket — `connect` to a
//! socket file works on a read-only bind — and Landlock has no right for
//! it, so the family is refused where the socket is made: `socket(2)`
//! fails with `EACCES` for any other family. `io_uring` is refused too (it
//! can make sockets without `socket(2)`). `socketpair(2)` stays allowed:
//! it connects nothing outside the run.
//!
//! Under bwrap the run has its own network namespace, so `inet`/`inet6`
//! (its private loopback) and `netlink` stay allowed and `unix` is closed
//! unless the grant exposes a socket; under Landlock, which shares the
//! host's network namespace, only `unix` (when a socket is exposed) is.

use std::collections::BTreeMap;

use nix::libc;
use seccompiler::{
    BpfProgram, SeccompAction, SeccompCmpArgLen, SeccompCmpOp, SeccompCondition, SeccompFilter,
    SeccompRule,
};

/// The families a host may name, by name.
pub const FAMILIES: &[(&str, i32)] = &[
    ("unix", libc::AF_UNIX),
    ("inet", libc::AF_INET),
    ("inet6", libc::AF_INET6),
    ("netlink", libc::AF_NETLINK),
];

/// Parse `--socket-families` (comma-separated names; empty: none).
pub(super) fn parse(list: &str) -> Result<Vec<i32>, String> {
    list.split(',')
        .filter(|name| !name.is_empty())
        .map(|name| {
            FAMILIES
                .iter()
                .find(|(known, _)| *known == name)
                .map(|(_, family)| *family)
                .ok_or_else(|| {
                    format!(
                        "unknown socket family {name:?}; expected some of {}",
                        FAMILIES
                            .iter()
                            .map(|(n, _)| *n)
                            .collect::<Vec<_>>()
                            .join(", ")
                    )
                })
        })
        .collect()
}

/// `socket` and `io_uring_setup`, by this architecture's numbers (and the
/// x32 ones on x86_64).
fn calls() -> Vec<(i64, bool)> {
    let mut calls = vec![(libc::SYS_socket, true), (libc::SYS_io_uring_setup, false)];
    #[cfg(target_arch = "x86_64")]
    {
        const X32_SYSCALL_BIT: i64 = 0x4000_0000;
        let x32: Vec<(i64, bool)> = calls
            .iter()
            .map(|&(nr, by_family)| (nr | X32_SYSCALL_BIT, by_family))
            .collect();
        calls.extend(x32);
    }
    calls
}

/// The compiled filter allowing sockets of `allowed` families only.
pub(super) fn filter(allowed: &[i32]) -> Result<BpfProgram, String> {
    fn wrong(err: impl std::fmt::Display) -> String {
        format!("socket filter: {err}")
    }
    // A socket() whose family is none of the allowed ones matches.
    let other_family = allowed
        .iter()
        .map(|family| {
            SeccompCondition::new(0, SeccompCmpArgLen::Dword, SeccompCmpOp::Ne, *family as u64)
        })
        .collect::<Result<Vec<_>, _>>()
        .map_err(wrong)?;
    let mut rules = BTreeMap::new();
    for (nr, by_family) in calls() {
        let rule = match (by_family, other_family.is_empty()) {
            // With no family allowed, every socket() matches.
            (true, false) => vec![SeccompRule::new(other_family.clone()).map_err(wrong)?],
            (true, true) | (false, _) => vec![],
        };
        rules.insert(nr, rule);
    }
    let arch = std::env::consts::ARCH
        .try_into()
        .map_err(|err| format!("no seccomp filter for {}: {err}", std::env::consts::ARCH))?;
    let filter = SeccompFilter::new(
        rules,
        SeccompAction::Allow,
        SeccompAction::Errno(libc::EACCES as u32),
        arch,
    )
    .map_err(wrong)?;
    filter
        .try_into()
        .map_err(|err: seccompiler::BackendError| format!("socket filter: {err}"))
}

/// Install the filter on this process (inherited by what it execs).
/// Needs no-new-privs: bwrap sets it for everything inside, and the
/// Landlock restriction sets it for the launcher's child.
pub(super) fn allow_only(allowed: &[i32]) -> Result<(), String> {
    // SAFETY: prctl with constant arguments.
    if unsafe { libc::prctl(libc::PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) } != 0 {
        return Err(format!(
            "socket filter: cannot set no-new-privs: {}",
            std::io::Error::last_os_error()
        ));
    }
    let program = filter(allowed)?;
    seccompiler::apply_filter(&program).map_err(|err| format!("socket filter: {err}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn families_are_named_and_the_filter_compiles_for_any_set() {
        assert_eq!(parse("unix,inet").unwrap(), [libc::AF_UNIX, libc::AF_INET]);
        assert_eq!(parse("").unwrap(), Vec::<i32>::new());
        assert!(
            parse("bluetooth")
                .unwrap_err()
                .contains("unknown socket family")
        );
        for allowed in [
            vec![],
            vec![libc::AF_UNIX],
            parse("inet,inet6,netlink").unwrap(),
        ] {
            assert!(!filter(&allowed).unwrap().is_empty());
        }
    }

    #[test]
    fn a_filtered_process_cannot_make_other_sockets_but_socketpair_works() {
        // Compiled here: the forked child of a threaded test process must
        // not allocate.
        let program = filter(&[libc::AF_UNIX]).unwrap();
        // SAFETY: the child only makes system calls and exits.
        match unsafe { libc::fork() } {
            0 => {
                // SAFETY: plain system calls on values we own.
                let code = unsafe {
                    let applied = libc::prctl(libc::PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) == 0
                        && seccompiler::apply_filter(&program).is_ok();
                    let inet = libc::socket(libc::AF_INET, libc::SOCK_STREAM, 0);
                    let unix = libc::socket(libc::AF_UNIX, libc::SOCK_STREAM, 0);
                    let mut pair = [0; 2];
                    let paired =
                        libc::socketpair(libc::AF_UNIX, libc::SOCK_STREAM, 0, pair.as_mut_ptr());
                    match (applied, inet, unix >= 0, paired) {
                        (true, -1, true, 0) => 0,
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
                assert_eq!(
                    libc::WEXITSTATUS(status),
                    0,
                    "inet must fail, unix and socketpair work"
                );
            }
        }
    }
}
