//! What the launcher's seccomp filters share (the metadata filter of
//! `metadata.rs`, the socket filter of `sockets.rs`): compiling a rule map
//! for this architecture, where a matching call fails with an errno and
//! every other call is allowed, and the x32 marker on x86_64. Built with
//! `seccompiler`; the file supervisor's filter (`notify/`) too,
//! rewritten for the one action `seccompiler` lacks.

use std::collections::BTreeMap;

use seccompiler::{
    BpfProgram, SeccompAction, SeccompCmpArgLen, SeccompCmpOp, SeccompCondition, SeccompFilter,
    SeccompRule,
};

/// `fchmodat2` (Linux 6.6), the same number on every architecture.
pub(super) const FCHMODAT2: i64 = 452;

/// Marks an x32 system call on x86_64.
#[cfg(target_arch = "x86_64")]
pub(super) const X32_SYSCALL_BIT: i64 = 0x4000_0000;

/// `calls` and, on x86_64, the same calls by their x32 numbers: a filter
/// that matched only the native numbers would be dodged through the x32
/// ABI. Each call keeps what it carries (its rules, a flag).
pub(super) fn with_x32<T: Clone>(calls: Vec<(i64, T)>) -> Vec<(i64, T)> {
    #[cfg(target_arch = "x86_64")]
    {
        let mut calls = calls;
        let x32: Vec<(i64, T)> = calls
            .iter()
            .map(|(nr, with)| (nr | X32_SYSCALL_BIT, with.clone()))
            .collect();
        calls.extend(x32);
        calls
    }
    #[cfg(not(target_arch = "x86_64"))]
    calls
}

/// Compile `rules` (a call with no rule matches always): a matching call
/// fails with `errno`, anything else is allowed; a call from another
/// architecture's table kills the process (seccompiler's arch check).
/// `what` names the filter in errors.
pub(super) fn compile(
    rules: BTreeMap<i64, Vec<SeccompRule>>,
    errno: i32,
    what: &str,
) -> Result<BpfProgram, String> {
    let arch = std::env::consts::ARCH
        .try_into()
        .map_err(|err| format!("no seccomp filter for {}: {err}", std::env::consts::ARCH))?;
    let filter = SeccompFilter::new(
        rules,
        SeccompAction::Allow,
        SeccompAction::Errno(errno as u32),
        arch,
    )
    .map_err(|err| format!("{what}: {err}"))?;
    filter
        .try_into()
        .map_err(|err: seccompiler::BackendError| format!("{what}: {err}"))
}

/// A rule matching when argument `arg` (32 bits) with `mask` applied
/// equals `value`; `what` names the filter in errors.
pub(super) fn masked(arg: u8, mask: u64, value: u64, what: &str) -> Result<SeccompRule, String> {
    let wrong = |err: seccompiler::BackendError| format!("{what}: {err}");
    let condition = SeccompCondition::new(
        arg,
        SeccompCmpArgLen::Dword,
        SeccompCmpOp::MaskedEq(mask),
        value,
    )
    .map_err(wrong)?;
    SeccompRule::new(vec![condition]).map_err(wrong)
}

/// Compile a filter handing each call of `rules` (a call with no rule:
/// always; else when one of its rules matches) to the process holding its
/// listener (`SECCOMP_RET_USER_NOTIF`), allowing anything else; a call from
/// another architecture's table kills the process.
///
/// `seccompiler` has no user-notification action, so the filter is compiled
/// with `SECCOMP_RET_TRACE` (data 0) for the calls — an action it has, and
/// one no other part of the program returns — and each such return
/// instruction is rewritten to `SECCOMP_RET_USER_NOTIF`.
pub(super) fn compile_notifying(
    rules: BTreeMap<i64, Vec<SeccompRule>>,
    what: &str,
) -> Result<BpfProgram, String> {
    let arch = std::env::consts::ARCH
        .try_into()
        .map_err(|err| format!("no seccomp filter for {}: {err}", std::env::consts::ARCH))?;
    let filter = SeccompFilter::new(rules, SeccompAction::Allow, SeccompAction::Trace(0), arch)
        .map_err(|err| format!("{what}: {err}"))?;
    let mut program: BpfProgram = filter
        .try_into()
        .map_err(|err: seccompiler::BackendError| format!("{what}: {err}"))?;
    let trace = u32::from(SeccompAction::Trace(0));
    let mut rewritten = 0;
    for instruction in &mut program {
        if instruction.code == RETURN_CONSTANT && instruction.k == trace {
            instruction.k = nix::libc::SECCOMP_RET_USER_NOTIF;
            rewritten += 1;
        }
    }
    match rewritten {
        0 => Err(format!(
            "{what}: the compiled filter returns no trace action"
        )),
        _ => Ok(program),
    }
}

/// A BPF `ret` of a constant (`BPF_RET | BPF_K`).
const RETURN_CONSTANT: u16 = 0x06;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_notifying_filter_returns_user_notif_and_never_trace() {
        let rules = BTreeMap::from([(nix::libc::SYS_fchmod, vec![])]);
        let program = compile_notifying(rules, "test").unwrap();
        let returns: Vec<u32> = program
            .iter()
            .filter(|i| i.code == RETURN_CONSTANT)
            .map(|i| i.k)
            .collect();
        assert!(returns.contains(&nix::libc::SECCOMP_RET_USER_NOTIF));
        assert!(returns.contains(&nix::libc::SECCOMP_RET_ALLOW));
        assert!(!returns.contains(&u32::from(SeccompAction::Trace(0))));
    }
}
