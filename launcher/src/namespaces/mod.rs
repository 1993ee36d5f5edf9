//! cordon's namespace runner (`cordon __ns`): the sandbox bwrap builds,
//! built by cordon itself, so a run costs no bwrap exec and no second exec
//! of cordon's init inside it.
//!
//! The mount program is bwrap's own profile ([`crate::sandbox::bwrap::profile`]
//! writes it, this module reads it), so both runners give a command the
//! same view: the host's `/` read-only (and `nosuid`, `nodev`), the mode's
//! writable binds, a fresh minimal `/dev`, a fresh `/proc` with its kernel
//! interfaces covered read-only, the ephemeral `/tmp`, and the grant's
//! covers, in the profile's order.
//!
//! ```text
//! launcher (the host's child)        unshare: user (not root), mount, pid, ipc, uts, [net]
//!   └─ pid 1 of the new namespace    clone every bind source, build the root, pivot into it,
//!        │                           then supervise (`supervise::run`): it is the command's init
//!        └─ the command              no capabilities, no_new_privs, seccomp, then exec
//! ```
//!
//! The launcher relays the host's signals to pid 1 and ends as it ended;
//! pid 1 dies with the launcher (parent-death `SIGKILL`), and every process
//! in the namespace dies with pid 1. Mounts use the kernel's new mount API
//! (`open_tree`, `mount_setattr`, `fsopen`/`fsmount`, `move_mount`): every
//! bind source is cloned from the host's view *before* anything is covered
//! (a source under the fresh `/tmp` stays reachable), read-only is applied
//! to a whole subtree in one call, and every destination is resolved in the
//! sandbox's own view after the pivot, as the command will see it.
//!
//! Every failure before the command runs is a `failed: …` line on the
//! status fd, with no `exec` line before it: the host then knows the
//! command never ran ([`crate::sandbox::StatusReport::never_started`]).
//!
//! By mechanism: `profile.rs` reads the mount program, `mounts.rs` builds
//! the sandbox, `relay.rs` is the launcher's side outside the namespaces;
//! the command a runner started ahead waits for is [`crate::command`]'s.

mod mounts;
mod profile;
mod relay;

pub use mounts::{View, build, enter, enter_workdir};
pub use profile::{Plan, Step};
pub use relay::{launcher_alive, relay};

#[cfg(test)]
mod tests {
    use super::*;

    fn plan(args: &[&str]) -> Result<Plan, String> {
        Plan::read(args)
    }

    #[test]
    fn a_program_that_does_not_start_with_the_read_only_root_is_refused() {
        assert!(plan(&["--bind", "/", "/"]).is_err());
        assert!(plan(&["--dev", "/dev"]).is_err());
        assert!(plan(&[]).is_err());
        assert!(plan(&["--ro-bind", "/", "/", "--tmpfs", "relative"]).is_err());
        assert!(plan(&["--ro-bind", "/"]).is_err());
        let net = plan(&["--ro-bind", "/", "/", "--unshare-net", "--die-with-parent"]).unwrap();
        assert!(net.unshare_net);
        assert_eq!(net.steps.len(), 1);
    }
}
