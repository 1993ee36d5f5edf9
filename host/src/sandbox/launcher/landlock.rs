//! The Landlock half of the launcher: build a ruleset that handles every
//! file right up to Landlock ABI 5 (truncate arrived in ABI 3, ioctl on
//! devices in ABI 5), grant read rights beneath each `--ro` path and all
//! rights beneath each `--rw` path, set no-new-privs and restrict this
//! process; nested children inherit the restriction. On a kernel with an
//! older ABI the ruleset is *partially* enforced, which the launcher
//! reports (informational, never a failure).

use std::path::PathBuf;

use ::landlock::{
    ABI, Access, AccessFs, PathBeneath, PathFd, Ruleset, RulesetAttr, RulesetCreatedAttr,
    RulesetStatus,
};

use super::{PROBE_FULL, PROBE_PARTIAL, fail};

/// The ABI whose file rights cordon's modes need.
const TARGET_ABI: ABI = ABI::V5;

/// How completely the kernel enforces the ruleset.
#[derive(Debug, PartialEq, Eq)]
pub(super) enum Restricted {
    /// Every right the ruleset handles.
    Fully,
    /// An older ABI: some rights are not enforced.
    Partially,
}

/// The kernel's Landlock ABI version (0 when unsupported).
pub fn kernel_abi() -> i64 {
    const LANDLOCK_CREATE_RULESET_VERSION: nix::libc::c_uint = 1;
    // SAFETY: the version query takes no attribute pointer and size 0.
    let abi = unsafe {
        nix::libc::syscall(
            nix::libc::SYS_landlock_create_ruleset,
            std::ptr::null::<u8>(),
            0usize,
            LANDLOCK_CREATE_RULESET_VERSION,
        )
    };
    abi.max(0)
}

/// Restrict this process to the grants; the error is the launcher's detail.
pub(super) fn restrict(read_only: &[PathBuf], writable: &[PathBuf]) -> Result<Restricted, String> {
    let all = AccessFs::from_all(TARGET_ABI);
    let mut ruleset = Ruleset::default()
        .handle_access(all)
        .and_then(|r| r.create())
        .map_err(|err| format!("ruleset error: {err}"))?;
    let grants = read_only
        .iter()
        .map(|path| (path, AccessFs::from_read(TARGET_ABI)))
        .chain(writable.iter().map(|path| (path, all)));
    for (path, access) in grants {
        let fd =
            PathFd::new(path).map_err(|err| format!("cannot open {}: {err}", path.display()))?;
        // Directory-only rights cannot be granted on a file.
        let access = if path.is_dir() {
            access
        } else {
            access & AccessFs::from_file(TARGET_ABI)
        };
        ruleset = ruleset
            .add_rule(PathBeneath::new(fd, access))
            .map_err(|err| format!("cannot grant {}: {err}", path.display()))?;
    }
    let restricted = ruleset
        .restrict_self()
        .map_err(|err| format!("cannot restrict: {err}"))?;
    match restricted.ruleset {
        RulesetStatus::FullyEnforced => Ok(Restricted::Fully),
        RulesetStatus::PartiallyEnforced => Ok(Restricted::Partially),
        RulesetStatus::NotEnforced => Err("this kernel does not enforce Landlock".into()),
    }
}

/// `--probe`: restrict a throwaway ruleset and say how it was enforced.
pub(super) fn probe() -> ! {
    let ruleset = Ruleset::default()
        .handle_access(AccessFs::from_all(TARGET_ABI))
        .and_then(|r| r.create())
        .and_then(|r| r.restrict_self());
    match ruleset.map(|status| status.ruleset) {
        Ok(RulesetStatus::FullyEnforced) => println!("{PROBE_FULL}"),
        Ok(RulesetStatus::PartiallyEnforced) => println!("{PROBE_PARTIAL}"),
        Ok(RulesetStatus::NotEnforced) => fail(None, "this kernel does not enforce Landlock"),
        Err(err) => fail(None, &format!("ruleset error: {err}")),
    }
    println!("abi: {}", kernel_abi());
    std::process::exit(0)
}
