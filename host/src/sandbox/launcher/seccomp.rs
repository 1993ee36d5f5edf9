//! What the launcher's seccomp filters share (the metadata filter of
//! `metadata.rs`, the socket filter of `sockets.rs`): compiling a rule map
//! for this architecture, where a matching call fails with an errno and
//! every other call is allowed, and the x32 marker on x86_64. Built with
//! `seccompiler`.

use std::collections::BTreeMap;

use seccompiler::{BpfProgram, SeccompAction, SeccompFilter, SeccompRule};

/// Marks an x32 system call on x86_64.
#[cfg(target_arch = "x86_64")]
pub(super) const X32_SYSCALL_BIT: i64 = 0x4000_0000;

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
