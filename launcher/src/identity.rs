//! `cordon __as`: a root server's run for a socket client takes on that
//! client's identity — its uid, gid and supplementary groups — and then
//! executes its runner, which confines as that user would be confined
//! (bubblewrap and the namespace runner in a user namespace of the user's,
//! the Landlock launcher as the user). What the command may read, whom it
//! is and whose files it makes are then the kernel's answer for that user,
//! not root's: a ceiling bounds writes, an identity bounds everything.
//!
//! Why a step of its own: the host starts runners with `posix_spawn`
//! (no fork of the host, `spawn.rs` says why), which cannot change
//! identity. This mode runs between that spawn and the runner's exec, with
//! the process's pid, session and fds unchanged, so the host sees the
//! runner it started.
//!
//! It runs as root until it has taken the identity on, so it never holds
//! the command's environment (a client's `LD_PRELOAD` would load into it):
//! it is spawned with a fixed one, and an unconfined command's own comes
//! over `--env-fd` (a memfd it reads, then closes) for the exec.
//!
//! Groups first, then the gid, then the uid (after `setresuid` a process
//! could not change its groups any more); every id is set real, effective
//! and saved, and checked after: a process that could still become root
//! again is not executed.

use std::ffi::{CString, OsString};
use std::os::unix::ffi::OsStrExt;

use nix::unistd::{Gid, Uid};

use crate::Mode;

/// Who to become, and what to execute then.
#[derive(Debug, PartialEq, Eq)]
struct Become {
    uid: u32,
    gid: u32,
    groups: Vec<u32>,
    /// Where the executed program's environment comes from (else: this
    /// process's own, the host's fixed one).
    env_fd: Option<i32>,
    argv: Vec<OsString>,
}

/// `cordon __as …`: never returns.
pub(crate) fn main(args: Vec<OsString>) -> ! {
    let become_ = match parse(args) {
        Ok(become_) => become_,
        Err(message) => Mode::Identity.fail(None, &format!("usage: {message}")),
    };
    let env = match become_.env_fd.map(read_env).transpose() {
        Ok(env) => env,
        Err(message) => Mode::Identity.fail(None, &message),
    };
    if let Err(message) = take_on(&become_) {
        Mode::Identity.fail(None, &message);
    }
    let err = execute(&become_.argv, env.as_deref());
    Mode::Identity.fail(
        None,
        &format!(
            "cannot execute the runner {}: {err}",
            become_.argv[0].to_string_lossy()
        ),
    )
}

fn parse(args: Vec<OsString>) -> Result<Become, String> {
    let mut args = args.into_iter();
    let (mut uid, mut gid, mut groups, mut env_fd) = (None, None, vec![], None);
    let number = |value: Option<OsString>, flag: &str| -> Result<u32, String> {
        value
            .as_ref()
            .and_then(|v| v.to_str())
            .and_then(|v| v.parse().ok())
            .ok_or_else(|| format!("{flag} takes a number"))
    };
    loop {
        let Some(flag) = args.next() else {
            return Err("no `--` before the runner's argv".into());
        };
        match flag.to_str() {
            Some("--uid") => uid = Some(number(args.next(), "--uid")?),
            Some("--gid") => gid = Some(number(args.next(), "--gid")?),
            Some("--env-fd") => {
                let fd = number(args.next(), "--env-fd")?;
                env_fd = Some(i32::try_from(fd).map_err(|_| "--env-fd takes an fd")?);
            }
            Some("--groups") => {
                let list = args.next().ok_or("--groups takes a list")?;
                let list = list.to_str().ok_or("--groups takes a list")?;
                groups = list
                    .split(',')
                    .filter(|g| !g.is_empty())
                    .map(|g| g.parse().map_err(|_| format!("{g:?} is no gid")))
                    .collect::<Result<_, _>>()?;
            }
            Some("--") => break,
            _ => return Err(format!("unknown flag {}", flag.to_string_lossy())),
        }
    }
    let argv: Vec<OsString> = args.collect();
    match (uid, gid, argv.is_empty()) {
        (Some(uid), Some(gid), false) => Ok(Become {
            uid,
            gid,
            groups,
            env_fd,
            argv,
        }),
        (None, _, _) | (_, None, _) => Err("--uid and --gid are required".into()),
        (_, _, true) => Err("no runner to execute".into()),
    }
}

/// Become `who`: groups, gid, uid — each real, effective and saved —
/// then check that nothing of the old identity is left.
fn take_on(who: &Become) -> Result<(), String> {
    let groups: Vec<Gid> = who.groups.iter().map(|g| Gid::from_raw(*g)).collect();
    let (uid, gid) = (Uid::from_raw(who.uid), Gid::from_raw(who.gid));
    nix::unistd::setgroups(&groups)
        .map_err(|err| format!("cannot set the groups {:?}: {err}", who.groups))?;
    nix::unistd::setresgid(gid, gid, gid)
        .map_err(|err| format!("cannot become gid {}: {err}", who.gid))?;
    nix::unistd::setresuid(uid, uid, uid)
        .map_err(|err| format!("cannot become uid {}: {err}", who.uid))?;
    let ids = nix::unistd::getresuid().map_err(|err| err.to_string())?;
    let gids = nix::unistd::getresgid().map_err(|err| err.to_string())?;
    if [ids.real, ids.effective, ids.saved] != [uid; 3]
        || [gids.real, gids.effective, gids.saved] != [gid; 3]
    {
        return Err(format!(
            "the identity did not take: uids {ids:?}, gids {gids:?}"
        ));
    }
    if who.uid != 0 && nix::unistd::setuid(Uid::from_raw(0)).is_ok() {
        return Err("the process could become root again after the change".into());
    }
    Ok(())
}

/// The environment at `fd` (`NAME=VALUE` entries, NUL-separated), read
/// whole; the fd and the status slot below it (unused by an unconfined
/// run) are closed, so the program inherits neither.
#[allow(
    unsafe_code,
    reason = "taking ownership of an inherited fd; the block says why it is sound"
)]
fn read_env(fd: i32) -> Result<Vec<CString>, String> {
    use std::io::Read;
    use std::os::fd::FromRawFd;
    if fd <= crate::protocol::STATUS_FD {
        return Err(format!("--env-fd {fd} is not above the status slot"));
    }
    // SAFETY: the host placed this fd for this process alone (its
    // `--env-fd`); nothing else here owns it, and the File closes it.
    let mut file = unsafe { std::fs::File::from_raw_fd(fd) };
    let mut bytes = Vec::new();
    file.read_to_end(&mut bytes)
        .map_err(|err| format!("cannot read the environment at fd {fd}: {err}"))?;
    drop(file);
    let _ = nix::unistd::close(crate::protocol::STATUS_FD);
    bytes
        .split(|&b| b == 0)
        .filter(|entry| !entry.is_empty())
        .map(|entry| CString::new(entry).map_err(|err| err.to_string()))
        .collect()
}

/// Execute `argv` (its first word a path, or a name looked up in `PATH`)
/// with `env` (else this process's environment); returns only on failure.
fn execute(argv: &[OsString], env: Option<&[CString]>) -> nix::Error {
    let words: Result<Vec<CString>, _> = argv
        .iter()
        .map(|word| CString::new(word.as_bytes()))
        .collect();
    let Ok(words) = words else {
        return nix::Error::EINVAL;
    };
    let executed = match env {
        Some(env) => nix::unistd::execvpe(&words[0], &words, env),
        None => nix::unistd::execvp(&words[0], &words),
    };
    match executed {
        Err(err) => err,
        Ok(never) => match never {},
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(words: &[&str]) -> Vec<OsString> {
        words.iter().map(OsString::from).collect()
    }

    #[test]
    fn the_identity_and_the_runner_parse() {
        let parsed = parse(args(&[
            "--uid", "1001", "--gid", "1002", "--groups", "1002,27", "--", "bwrap", "--", "id",
        ]))
        .unwrap();
        assert_eq!(
            parsed,
            Become {
                uid: 1001,
                gid: 1002,
                groups: vec![1002, 27],
                env_fd: None,
                argv: args(&["bwrap", "--", "id"]),
            }
        );
    }

    #[test]
    fn a_missing_id_or_runner_is_a_usage_error() {
        assert!(parse(args(&["--gid", "1", "--", "x"])).is_err());
        assert!(parse(args(&["--uid", "1", "--", "x"])).is_err());
        assert!(parse(args(&["--uid", "1", "--gid", "1", "--"])).is_err());
        assert!(parse(args(&["--uid", "x", "--gid", "1", "--", "y"])).is_err());
        assert!(
            parse(args(&[
                "--uid", "1", "--gid", "1", "--groups", "a", "--", "y"
            ]))
            .is_err()
        );
        assert!(parse(args(&["--uid", "1", "--gid", "1", "y"])).is_err());
        let with_env = parse(args(&[
            "--uid", "1", "--gid", "1", "--env-fd", "4", "--", "y",
        ]));
        assert_eq!(with_env.unwrap().env_fd, Some(4));
    }
}
