//! The Landlock launcher where there is no Landlock (every system but
//! Linux): the same names as `landlock.rs`, and every one of them fails
//! closed — the probe says unusable, a launch never confines and never
//! runs the command, the kernel has no ABI. The ladder never reaches this
//! rung there; this keeps `cordon __landlock` an honest refusal instead of
//! a build error.

use std::path::PathBuf;

use super::{FAILURE_EXIT, PREFIX};

/// How far the restriction went (never: there is none).
#[allow(
    dead_code,
    reason = "the names landlock.rs has; nothing is restricted where there is no Landlock"
)]
pub(super) enum Restricted {
    /// Every right the mode needs is enforced.
    Fully,
    /// Only part of them.
    Partially,
}

/// What a launch grants (as `landlock.rs` has it).
#[allow(
    dead_code,
    reason = "the names landlock.rs has; nothing is granted where there is no Landlock"
)]
pub(super) struct Grants<'a> {
    /// Read (and execute) rights.
    pub read_only: &'a [PathBuf],
    /// Listing only.
    pub listable: &'a [PathBuf],
    /// Every right.
    pub writable: &'a [PathBuf],
    /// Read rights, changes supervised.
    pub supervised: &'a [PathBuf],
}

/// A ruleset (never made where there is no Landlock).
pub(super) struct Rules;

#[allow(
    dead_code,
    reason = "the names landlock.rs has; nothing is restricted where there is no Landlock"
)]
impl Rules {
    /// No Landlock here: refused, the command never runs.
    pub(super) fn make(
        _grants: &Grants<'_>,
        _roots: &[super::verify::Root],
        _connect_port: Option<u16>,
        _log_denials: bool,
    ) -> Result<Rules, String> {
        Err("Landlock is a Linux interface; this system has none".into())
    }

    /// Never made, so never checked.
    pub(super) fn unchanged(&self) -> Result<(), String> {
        Err("Landlock is a Linux interface; this system has none".into())
    }

    /// Never made, so never in force.
    pub(super) fn restrict_self(self) -> Result<Restricted, String> {
        Err("Landlock is a Linux interface; this system has none".into())
    }
}

/// Report the launcher unusable and exit.
pub(super) fn probe() -> ! {
    println!("{PREFIX}Landlock is a Linux interface; this system has none");
    std::process::exit(FAILURE_EXIT)
}

/// The scopes this kernel enforces: none.
pub fn kernel_scopes() -> Vec<&'static str> {
    vec![]
}

/// This kernel's Landlock ABI: none (0).
pub fn kernel_abi() -> i64 {
    0
}
