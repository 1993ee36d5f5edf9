//! Denials named by the kernel: Landlock's audit records, read for the
//! runs that asked for them.
//!
//! Why: a command's stderr is the only other witness of a denial, and it
//! lies both ways — `touch /etc/x; echo done` exits 0 with the denial
//! printed by a program that carried on, and a program may print what a
//! denial looks like without one. Landlock (ABI 7) logs each access it
//! refuses to the kernel's audit subsystem, with the rights refused and
//! the path or port; a launcher that restricts itself with
//! `--log-denials` has its domain's denials logged after its exec too,
//! and says on its status pipe which process made the domain
//! (`confined PID`, the `pid=` of the domain's `allocated` record).
//!
//! Reading: a netlink socket on the audit's read-only multicast group
//! (`CAP_AUDIT_READ`, so root in practice), and a control socket whose
//! `AUDIT_GET` says whether audit is enabled (`auditctl -e 1`: without
//! it the kernel logs nothing) and how many records wait in the kernel's
//! queue. Records are pulled when a run ends, not by a thread. By then
//! every process of the run is gone (its supervisor or its cgroup ended
//! them), and the kernel queues a denial's record in the very system call
//! that was refused: once the queue is seen empty (twice) and the socket
//! drained, every record of the run has been read. Waiting for the
//! domain's own end record instead (`deallocated`) would cost ~50 ms a
//! refused run (the kernel frees a domain late; measured in
//! BENCHMARKS.md). Anything uncertain —
//! audit off, records lost (`ENOBUFS`), the queue not draining — gives no
//! list, and the run's facts say its evidence is the text.

// Elsewhere the reader never opens; its parts stay for the types.
#![cfg_attr(not(target_os = "linux"), allow(dead_code, unused_imports))]

mod record;

use std::collections::HashMap;
use std::os::fd::{AsRawFd, OwnedFd};
use std::sync::{Mutex, OnceLock};
use std::time::{Duration, Instant};

#[cfg(target_os = "linux")]
use nix::sys::socket::{
    AddressFamily, MsgFlags, NetlinkAddr, SockFlag, SockProtocol, SockType, bind, recv, send,
    socket,
};

use crate::model::Denial;
use record::Record;

/// The most denials a run's facts carry (the first ones, each distinct).
pub const MAX_DENIALS: usize = 16;

/// How long a run's end waits for the kernel's queue to drain.
const SETTLE_BOUND: Duration = Duration::from_millis(250);

/// How long `AUDIT_GET` waits for its reply.
const STATUS_BOUND: Duration = Duration::from_millis(100);

/// How long a domain no run has claimed is kept.
const UNCLAIMED_FOR: Duration = Duration::from_secs(60);

/// The most domains kept at once: a command that makes domains of its own
/// (each logged with its own id) cannot grow the host past this; past it
/// the oldest are dropped and counted as lost.
const MAX_DOMAINS: usize = 4096;

/// `AUDIT_GET`: the audit status.
#[cfg_attr(not(target_os = "linux"), allow(dead_code))]
const AUDIT_GET: u16 = 1000;
/// The audit's read-only multicast group (`AUDIT_NLGRP_READLOG`).
#[cfg(target_os = "linux")]
const READLOG_GROUP: u32 = 1;
/// A netlink message header's length.
const HEADER: usize = 16;

/// The process's reader of Landlock's denial records.
#[derive(Debug)]
pub struct KernelDenials {
    /// The multicast socket the records arrive on (non-blocking).
    records: OwnedFd,
    /// The control socket `AUDIT_GET` is asked on.
    control: OwnedFd,
    /// What was read so far, by domain.
    state: Mutex<State>,
}

#[derive(Debug, Default)]
struct State {
    domains: HashMap<u64, Domain>,
    /// When records were last lost (the socket overflowed).
    lost_at: Option<Instant>,
}

#[derive(Debug)]
struct Domain {
    creator: Option<i32>,
    denials: Vec<Denial>,
    seen: Instant,
}

impl Domain {
    fn new() -> Domain {
        Domain {
            creator: None,
            denials: vec![],
            seen: Instant::now(),
        }
    }
}

/// The audit's state, as `AUDIT_GET` answers.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct AuditStatus {
    enabled: bool,
    /// Records waiting in the kernel's queue.
    backlog: u32,
}

impl KernelDenials {
    /// The process's reader, opened on first use; why there is none
    /// (no `CAP_AUDIT_READ`, not Linux, audit off) otherwise.
    pub fn shared() -> Result<&'static KernelDenials, &'static str> {
        static SHARED: OnceLock<Result<KernelDenials, String>> = OnceLock::new();
        SHARED
            .get_or_init(KernelDenials::open)
            .as_ref()
            .map_err(String::as_str)
    }

    /// No audit records to read here.
    #[cfg(not(target_os = "linux"))]
    fn open() -> Result<KernelDenials, String> {
        Err("the kernel's audit records are Linux's".into())
    }

    /// Open both sockets and check that audit is enabled.
    #[cfg(target_os = "linux")]
    fn open() -> Result<KernelDenials, String> {
        let netlink = |flags| {
            socket(
                AddressFamily::Netlink,
                SockType::Raw,
                SockFlag::SOCK_CLOEXEC | flags,
                SockProtocol::NetlinkAudit,
            )
            .map_err(|err| format!("no audit netlink socket: {err}"))
        };
        let records = netlink(SockFlag::SOCK_NONBLOCK)?;
        bind(records.as_raw_fd(), &NetlinkAddr::new(0, READLOG_GROUP)).map_err(|err| {
            format!("cannot read the kernel's audit records ({err}): it needs CAP_AUDIT_READ")
        })?;
        // Room for bursts between two runs' ends (root may force it).
        let room = 4 << 20;
        let _ =
            nix::sys::socket::setsockopt(&records, nix::sys::socket::sockopt::RcvBufForce, &room);
        // Blocking, with a bound: `AUDIT_GET`'s reply wakes the reader at
        // once (a polling sleep cost each run's end a scheduler tick).
        let control = netlink(SockFlag::empty())?;
        bind(control.as_raw_fd(), &NetlinkAddr::new(0, 0))
            .map_err(|err| format!("no audit control socket: {err}"))?;
        let bound = nix::sys::time::TimeVal::new(0, STATUS_BOUND.as_micros() as _);
        nix::sys::socket::setsockopt(&control, nix::sys::socket::sockopt::ReceiveTimeout, &bound)
            .map_err(|err| format!("cannot bound the audit control socket: {err}"))?;
        let reader = KernelDenials {
            records,
            control,
            state: Mutex::default(),
        };
        match reader.status() {
            Ok(status) if status.enabled => Ok(reader),
            Ok(_) => Err("the kernel's audit is off (auditctl -e 1 turns it on)".into()),
            Err(err) => Err(format!("cannot ask the audit's status: {err}")),
        }
    }

    /// The denials of the run whose domain `creator` made, once the run
    /// has ended (started at `since`); none when they cannot be known
    /// whole.
    pub fn collect(&self, creator: i32, since: Instant) -> Option<Vec<Denial>> {
        let deadline = Instant::now() + SETTLE_BOUND;
        let mut state = self.state.lock().unwrap_or_else(|p| p.into_inner());
        // The kernel's queue empty and the socket drained, twice over: every
        // record made before now has been read.
        let mut quiet = 0;
        while quiet < 2 {
            let status = self.status().ok()?;
            if !status.enabled || Instant::now() > deadline {
                return None;
            }
            self.drain(&mut state);
            quiet = if status.backlog == 0 { quiet + 1 } else { 0 };
        }
        if state.lost_at.is_some_and(|at| at >= since) {
            return None;
        }
        // No domain of its making: the kernel refused it nothing.
        let id = state
            .domains
            .iter()
            .find(|(_, domain)| domain.creator == Some(creator))
            .map(|(id, _)| *id);
        let domain = id.and_then(|id| state.domains.remove(&id));
        Some(domain.map(|domain| domain.denials).unwrap_or_default())
    }

    /// Read every record waiting on the socket into `state`.
    #[cfg(not(target_os = "linux"))]
    fn drain(&self, _state: &mut State) {}

    /// Read every record waiting on the socket into `state`.
    #[cfg(target_os = "linux")]
    fn drain(&self, state: &mut State) {
        let mut buf = vec![0u8; 64 * 1024];
        loop {
            match recv(self.records.as_raw_fd(), &mut buf, MsgFlags::empty()) {
                Ok(0) => break,
                Ok(n) => {
                    for (kind, text) in messages(&buf[..n]) {
                        if let Some(record) = Record::parse(kind, &text) {
                            state.take(record);
                        }
                    }
                }
                Err(nix::errno::Errno::ENOBUFS) => state.lost_at = Some(Instant::now()),
                Err(nix::errno::Errno::EINTR) => {}
                Err(_) => break,
            }
        }
        state.evict();
    }

    /// Ask `AUDIT_GET` (never reached elsewhere: no reader opens).
    #[cfg(not(target_os = "linux"))]
    fn status(&self) -> nix::Result<AuditStatus> {
        Err(nix::errno::Errno::ENOSYS)
    }

    /// Ask `AUDIT_GET`.
    #[cfg(target_os = "linux")]
    fn status(&self) -> nix::Result<AuditStatus> {
        let fd = self.control.as_raw_fd();
        let mut request = [0u8; HEADER];
        request[0..4].copy_from_slice(&(HEADER as u32).to_ne_bytes());
        request[4..6].copy_from_slice(&AUDIT_GET.to_ne_bytes());
        request[6..8].copy_from_slice(&(nix::libc::NLM_F_REQUEST as u16).to_ne_bytes());
        send(fd, &request, MsgFlags::empty())?;
        let mut reply = [0u8; 512];
        // Each receive waits at most STATUS_BOUND (the socket's timeout:
        // `EAGAIN` past it); other messages (an ack) are skipped.
        let deadline = Instant::now() + STATUS_BOUND;
        loop {
            match recv(fd, &mut reply, MsgFlags::empty()) {
                Ok(n) => {
                    if let Some(status) = audit_status(&reply[..n]) {
                        return Ok(status);
                    }
                    if Instant::now() > deadline {
                        return Err(nix::errno::Errno::ETIMEDOUT);
                    }
                }
                Err(nix::errno::Errno::EINTR) => {}
                Err(err) => return Err(err),
            }
        }
    }
}

impl State {
    fn take(&mut self, record: Record) {
        match record {
            Record::Access { domain, denial } => {
                let denials = &mut self
                    .domains
                    .entry(domain)
                    .or_insert_with(Domain::new)
                    .denials;
                if denials.len() < MAX_DENIALS && !denials.contains(&denial) {
                    denials.push(denial);
                }
            }
            Record::Allocated { domain, pid } => {
                self.domains
                    .entry(domain)
                    .or_insert_with(Domain::new)
                    .creator = Some(pid);
            }
        }
    }

    /// Drop the domains no run claimed in time, and the oldest past
    /// [`MAX_DOMAINS`] (records lost: the runs that overlap them cannot
    /// know their list is whole).
    fn evict(&mut self) {
        self.domains
            .retain(|_, domain| domain.seen.elapsed() < UNCLAIMED_FOR);
        if self.domains.len() > MAX_DOMAINS {
            let mut ages: Vec<(Instant, u64)> =
                self.domains.iter().map(|(id, d)| (d.seen, *id)).collect();
            ages.sort_unstable();
            for (_, id) in &ages[..ages.len() - MAX_DOMAINS] {
                self.domains.remove(id);
            }
            self.lost_at = Some(Instant::now());
        }
    }
}

/// The (type, text) of each netlink message in `buf`.
fn messages(mut buf: &[u8]) -> Vec<(u16, String)> {
    let mut found = vec![];
    while buf.len() >= HEADER {
        let len = u32::from_ne_bytes(buf[0..4].try_into().expect("4 bytes")) as usize;
        let kind = u16::from_ne_bytes(buf[4..6].try_into().expect("2 bytes"));
        // An audit record's length may leave out its header's padding or
        // run past the datagram: then the rest is its text.
        let end = if (HEADER..=buf.len()).contains(&len) {
            len
        } else {
            buf.len()
        };
        let text = String::from_utf8_lossy(&buf[HEADER..end]);
        found.push((kind, text.trim_end_matches('\0').to_owned()));
        buf = &buf[end.next_multiple_of(4).min(buf.len())..];
    }
    found
}

/// The audit status in an `AUDIT_GET` reply (`struct audit_status`:
/// mask, enabled, failure, pid, rate_limit, backlog_limit, lost, backlog).
fn audit_status(reply: &[u8]) -> Option<AuditStatus> {
    let kind = u16::from_ne_bytes(reply.get(4..6)?.try_into().ok()?);
    if kind != AUDIT_GET {
        return None;
    }
    let word = |i: usize| {
        let at = HEADER + 4 * i;
        Some(u32::from_ne_bytes(reply.get(at..at + 4)?.try_into().ok()?))
    };
    Some(AuditStatus {
        enabled: word(1)? != 0,
        backlog: word(7)?,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn messages_are_split_on_their_headers_and_padding() {
        let mut buf = vec![];
        for (kind, text) in [
            (1423u16, "domain=1 blockers=fs.make_reg path=\"/e\""),
            (1424, "x"),
        ] {
            let len = HEADER + text.len();
            buf.extend_from_slice(&(len as u32).to_ne_bytes());
            buf.extend_from_slice(&kind.to_ne_bytes());
            buf.extend_from_slice(&[0; 10]);
            buf.extend_from_slice(text.as_bytes());
            buf.resize(buf.len().next_multiple_of(4), 0);
        }
        let found = messages(&buf);
        assert_eq!(found.len(), 2);
        assert_eq!(found[0].0, 1423);
        assert!(found[0].1.ends_with("path=\"/e\""), "{found:?}");
        assert_eq!(found[1], (1424, "x".into()));
    }

    #[test]
    fn a_domain_keeps_its_first_distinct_denials_and_its_creator() {
        let mut state = State::default();
        let denial = |path: &str| Denial {
            blockers: vec!["fs.write_file".into()],
            path: Some(path.into()),
            address: None,
            by: "landlock".into(),
        };
        for i in 0..40 {
            state.take(Record::Access {
                domain: 7,
                denial: denial(&format!("/etc/{}", i % 20)),
            });
        }
        state.take(Record::Allocated { domain: 7, pid: 99 });
        let domain = &state.domains[&7];
        assert_eq!(domain.creator, Some(99));
        assert_eq!(domain.denials.len(), MAX_DENIALS);
        assert_eq!(domain.denials[0], denial("/etc/0"));
    }

    #[test]
    fn a_flood_of_domains_is_bounded_and_counted_as_lost() {
        let mut state = State::default();
        for domain in 0..(MAX_DOMAINS as u64 + 10) {
            state.take(Record::Allocated { domain, pid: 1 });
        }
        state.evict();
        assert_eq!(state.domains.len(), MAX_DOMAINS);
        assert!(state.lost_at.is_some());
        assert!(!state.domains.contains_key(&0), "the oldest go first");
    }
}
