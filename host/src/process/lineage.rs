//! Whose process is this: the ancestry of a pid, read from `/proc`.
//!
//! A socket server (`cordon serve --listen`, `cordon mcp --listen`) must
//! never serve one of its own runs: a confined command that reached the
//! server's socket (under `network: full`, or through a socket left
//! visible) could otherwise ask for a wider run than it was given. Every
//! process of a run descends from this host — its runner is the host's
//! child, and the run's supervisor is a subreaper (or the pid 1 of the
//! run's own PID namespace), so nothing a run starts is reparented out of
//! its tree. A peer descending from the host is therefore one of its runs.

use crate::sandbox::launcher::supervise::parent_of as parent_in_stat;

/// Whether `pid` is `ancestor` or descends from it. `Err` when the chain
/// cannot be read (the process is gone): the caller cannot tell, and
/// should refuse.
pub fn descends_from(pid: i32, ancestor: i32) -> std::io::Result<bool> {
    let mut at = pid;
    // Bounded: a pid chain is never longer than the pid space allows, and
    // a loop (a pid reused mid-walk) must not spin.
    for _ in 0..4096 {
        if at == ancestor {
            return Ok(true);
        }
        if at <= 1 {
            return Ok(false);
        }
        let stat = std::fs::read_to_string(format!("/proc/{at}/stat"))?;
        at = parent_in_stat(&stat).ok_or_else(|| {
            std::io::Error::new(
                std::io::ErrorKind::InvalidData,
                format!("/proc/{at}/stat has no parent pid"),
            )
        })?;
    }
    Ok(false)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_child_descends_from_this_process_and_this_process_not_from_it() {
        let mut child = std::process::Command::new("sleep")
            .arg("5")
            .spawn()
            .unwrap();
        let (me, it) = (std::process::id() as i32, child.id() as i32);
        assert!(descends_from(it, me).unwrap());
        assert!(descends_from(me, me).unwrap());
        assert!(!descends_from(me, it).unwrap());
        child.kill().unwrap();
        child.wait().unwrap();
        assert!(descends_from(it, me).is_err(), "a gone pid cannot be told");
    }
}
