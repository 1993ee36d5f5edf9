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
//!
//! TCP Fast Open is refused with it (`MSG_FASTOPEN` on `sendto`,
//! `sendmsg`, `sendmmsg`; `TCP_FASTOPEN_CONNECT`): the kernel's Fast Open
//! path connects without the connect hook Landlock's TCP rules sit on, so
//! under Landlock it would reach any host and port past the proxy.

use std::collections::BTreeMap;

use nix::libc;
use seccompiler::{BpfProgram, SeccompCmpArgLen, SeccompCmpOp, SeccompCondition, SeccompRule};

use super::seccomp::compile;

/// The families a host may name, by name.
pub const FAMILIES: &[(&str, i32)] = &[
    ("unix", libc::AF_UNIX),
    ("inet", libc::AF_INET),
    ("inet6", libc::AF_INET6),
    ("netlink", libc::AF_NETLINK),
];

/// One family a run may make sockets of.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct Allowed {
    /// The address family.
    pub family: i32,
    /// Stream sockets only (`inet:stream`): no datagram, raw or packet
    /// socket, which Landlock's TCP rules would not see.
    pub stream_only: bool,
}

/// Parse `--socket-families`: comma-separated names, each optionally
/// `:stream`; empty: none.
pub(super) fn parse(list: &str) -> Result<Vec<Allowed>, String> {
    list.split(',')
        .filter(|name| !name.is_empty())
        .map(|entry| {
            let (name, stream_only) = match entry.strip_suffix(":stream") {
                Some(name) => (name, true),
                None => (entry, false),
            };
            let known: Vec<&str> = FAMILIES.iter().map(|(n, _)| *n).collect();
            FAMILIES
                .iter()
                .find(|(known, _)| *known == name)
                .map(|(_, family)| Allowed {
                    family: *family,
                    stream_only,
                })
                .ok_or_else(|| {
                    format!(
                        "unknown socket family {name:?}; expected some of {} (each may end in \
                         :stream)",
                        known.join(", ")
                    )
                })
        })
        .collect()
}

/// The socket types a `:stream` family refuses (the type's low bits; the
/// flags above them are masked off).
const NOT_STREAM: &[i32] = &[
    libc::SOCK_DGRAM,
    libc::SOCK_RAW,
    libc::SOCK_RDM,
    libc::SOCK_SEQPACKET,
    // SOCK_PACKET (10), the obsolete packet type, by number.
    10,
];

/// `socket` and `io_uring_setup`, by this architecture's numbers (and the
/// x32 ones on x86_64).
fn calls() -> Vec<(i64, bool)> {
    super::seccomp::with_x32(vec![
        (libc::SYS_socket, true),
        (libc::SYS_io_uring_setup, false),
    ])
}

fn wrong(err: impl std::fmt::Display) -> String {
    format!("socket filter: {err}")
}

/// `socket()`'s argument `arg` compared with `op` to `value`.
fn argument(arg: u8, op: SeccompCmpOp, value: i32) -> Result<SeccompCondition, String> {
    SeccompCondition::new(arg, SeccompCmpArgLen::Dword, op, value as u64).map_err(wrong)
}

/// The rules under which a `socket()` is refused: a family none of
/// `allowed` names, or a stream-only family with another type.
fn refusals(allowed: &[Allowed]) -> Result<Vec<SeccompRule>, String> {
    let other_family = allowed
        .iter()
        .map(|a| argument(0, SeccompCmpOp::Ne, a.family))
        .collect::<Result<Vec<_>, _>>()?;
    if other_family.is_empty() {
        // No family allowed: every socket() matches.
        return Ok(vec![]);
    }
    let mut rules = vec![SeccompRule::new(other_family).map_err(wrong)?];
    for allowed in allowed.iter().filter(|a| a.stream_only) {
        for kind in NOT_STREAM {
            let family = argument(0, SeccompCmpOp::Eq, allowed.family)?;
            let of_type = argument(1, SeccompCmpOp::MaskedEq(0xf), *kind)?;
            rules.push(SeccompRule::new(vec![family, of_type]).map_err(wrong)?);
        }
    }
    Ok(rules)
}

/// `TCP_FASTOPEN_CONNECT` (Linux 4.11), by number.
const TCP_FASTOPEN_CONNECT: i32 = 30;

/// The rules refusing TCP Fast Open: data sent with `MSG_FASTOPEN`
/// (`sendto`, `sendmsg`, `sendmmsg`) opens a connection without
/// `connect(2)`, past Landlock's connect rule, and `TCP_FASTOPEN_CONNECT`
/// makes a later `connect` do the same. Each call with its rules, by this
/// architecture's numbers.
fn fast_open() -> Result<Vec<(i64, Vec<SeccompRule>)>, String> {
    let flag = |arg: u8| -> Result<Vec<SeccompRule>, String> {
        let fast = argument(
            arg,
            SeccompCmpOp::MaskedEq(libc::MSG_FASTOPEN as u64),
            libc::MSG_FASTOPEN,
        )?;
        Ok(vec![SeccompRule::new(vec![fast]).map_err(wrong)?])
    };
    let option = SeccompRule::new(vec![
        argument(1, SeccompCmpOp::Eq, libc::IPPROTO_TCP)?,
        argument(2, SeccompCmpOp::Eq, TCP_FASTOPEN_CONNECT)?,
    ])
    .map_err(wrong)?;
    // Other architectures add nothing: only x86_64 has the legacy calls.
    #[cfg_attr(not(target_arch = "x86_64"), allow(unused_mut))]
    let mut calls = vec![
        (libc::SYS_sendto, flag(3)?),
        (libc::SYS_sendmsg, flag(2)?),
        (libc::SYS_sendmmsg, flag(3)?),
        (libc::SYS_setsockopt, vec![option]),
    ];
    #[cfg(target_arch = "x86_64")]
    {
        use super::seccomp::X32_SYSCALL_BIT;
        let x32: Vec<(i64, Vec<SeccompRule>)> = calls
            .iter()
            .map(|(nr, rules)| (nr | X32_SYSCALL_BIT, rules.clone()))
            .collect();
        calls.extend(x32);
    }
    Ok(calls)
}

/// The compiled filter allowing sockets of `allowed` families only, and
/// no TCP Fast Open (the host's proxy must see every connection).
pub(super) fn filter(allowed: &[Allowed]) -> Result<BpfProgram, String> {
    let refused = refusals(allowed)?;
    let mut rules = BTreeMap::new();
    for (nr, by_family) in calls() {
        rules.insert(nr, if by_family { refused.clone() } else { vec![] });
    }
    rules.extend(fast_open()?);
    compile(rules, libc::EACCES, "socket filter")
}

/// Install the filter on this process (inherited by what it execs).
/// Needs no-new-privs: bwrap sets it for everything inside, and the
/// Landlock restriction sets it for the launcher's child.
pub(super) fn allow_only(allowed: &[Allowed]) -> Result<(), String> {
    crate::privileges::no_new_privileges()
        .map_err(|err| format!("socket filter: cannot set no-new-privs: {err}"))?;
    let program = filter(allowed)?;
    seccompiler::apply_filter(&program).map_err(|err| format!("socket filter: {err}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn families_are_named_and_the_filter_compiles_for_any_set() {
        let families = |list: &str| -> Vec<i32> {
            parse(list).unwrap().into_iter().map(|a| a.family).collect()
        };
        assert_eq!(families("unix,inet"), [libc::AF_UNIX, libc::AF_INET]);
        assert_eq!(families(""), Vec::<i32>::new());
        assert!(parse("inet:stream").unwrap()[0].stream_only);
        assert!(
            parse("bluetooth")
                .unwrap_err()
                .contains("unknown socket family")
        );
        for allowed in ["", "unix", "inet,inet6,netlink", "inet:stream,inet6:stream"] {
            assert!(!filter(&parse(allowed).unwrap()).unwrap().is_empty());
        }
    }

    #[test]
    #[allow(
        unsafe_code,
        reason = "its tests fork children that install the filter; each block says why it is sound"
    )]
    fn a_filtered_process_makes_only_the_sockets_it_may() {
        // Compiled here: the forked child of a threaded test process must
        // not allocate.
        let program = filter(&parse("unix,inet:stream").unwrap()).unwrap();
        // SAFETY: the child only makes system calls and exits.
        match unsafe { libc::fork() } {
            0 => {
                // SAFETY: plain system calls on values we own.
                let code = unsafe {
                    let applied = libc::prctl(libc::PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) == 0
                        && seccompiler::apply_filter(&program).is_ok();
                    let inet6 = libc::socket(libc::AF_INET6, libc::SOCK_STREAM, 0);
                    let udp = libc::socket(libc::AF_INET, libc::SOCK_DGRAM | libc::SOCK_CLOEXEC, 0);
                    let tcp =
                        libc::socket(libc::AF_INET, libc::SOCK_STREAM | libc::SOCK_CLOEXEC, 0);
                    let unix = libc::socket(libc::AF_UNIX, libc::SOCK_STREAM, 0);
                    let mut pair = [0; 2];
                    let paired =
                        libc::socketpair(libc::AF_UNIX, libc::SOCK_STREAM, 0, pair.as_mut_ptr());
                    let to = libc::sockaddr_in {
                        sin_family: libc::AF_INET as u16,
                        sin_port: 9u16.to_be(),
                        sin_addr: libc::in_addr {
                            s_addr: u32::from(std::net::Ipv4Addr::LOCALHOST).to_be(),
                        },
                        sin_zero: [0; 8],
                    };
                    let fast = libc::sendto(
                        tcp,
                        b"x".as_ptr().cast(),
                        1,
                        libc::MSG_FASTOPEN,
                        (&raw const to).cast(),
                        std::mem::size_of::<libc::sockaddr_in>() as u32,
                    );
                    let fast_refused = fast == -1 && *libc::__errno_location() == libc::EACCES;
                    match (applied, inet6, udp, tcp >= 0, unix >= 0, paired) {
                        (true, -1, -1, true, true, 0) if fast_refused => 0,
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
                    "inet6, udp and a Fast Open sendto must fail; tcp, unix and socketpair work"
                );
            }
        }
    }
}
