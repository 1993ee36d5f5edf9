//! The command a launcher started ahead of it reads from its fd
//! (`--await-fd`: the namespace runner, the Landlock launcher): working
//! directory, argv and environment, encoded as NUL-ended fields.
//!
//! The host starts a launcher for the grant it expects while it still
//! loads and asks its policy; the launcher does every step that needs no
//! command (a sandbox built, a ruleset made), then reads one of these and
//! checks that what it prepared still stands before it runs it.

use std::fs::File;
use std::os::fd::{FromRawFd, RawFd};
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

/// The command a waiting launcher is handed (`--await-fd`): its working
/// directory, its argv and its environment.
#[derive(Debug, PartialEq, Eq)]
pub struct Command {
    /// Where it runs, in the sandbox's view.
    pub workdir: PathBuf,
    /// Program and arguments.
    pub argv: Vec<std::ffi::OsString>,
    /// Its whole environment.
    pub env: Vec<(std::ffi::OsString, std::ffi::OsString)>,
}

/// The most bytes a command message may have (the host bounds a request
/// far below this).
const MAX_COMMAND_BYTES: u64 = 64 << 20;

impl Command {
    /// The message for the await fd: every field NUL-ended — the working
    /// directory, the number of arguments, the arguments, then the
    /// environment's `NAME=VALUE` entries up to the end.
    pub fn encode(&self) -> Vec<u8> {
        let mut env = vec![];
        for (name, value) in &self.env {
            env.extend_from_slice(name.as_bytes());
            env.push(b'=');
            env.extend_from_slice(value.as_bytes());
            env.push(0);
        }
        let argv: Vec<&[u8]> = self.argv.iter().map(|arg| arg.as_bytes()).collect();
        message(&self.workdir, &argv, &env)
    }
}

/// A command message ([`Command::encode`]) of `workdir` and `argv`, with
/// `env` as the host hands an environment over `--env-fd` already
/// (`NAME=VALUE` entries, each NUL-ended).
pub fn message(workdir: &Path, argv: &[&[u8]], env: &[u8]) -> Vec<u8> {
    let mut bytes = vec![];
    let mut field = |field: &[u8]| {
        bytes.extend_from_slice(field);
        bytes.push(0);
    };
    field(workdir.as_os_str().as_bytes());
    field(argv.len().to_string().as_bytes());
    for arg in argv {
        field(arg);
    }
    bytes.extend_from_slice(env);
    bytes
}

impl Command {
    /// Read a message from `fd` to its end (the fd is closed).
    #[allow(
        unsafe_code,
        reason = "the fd the host handed over is taken as a file; the block says why it is sound"
    )]
    pub fn read(fd: RawFd) -> Result<Command, String> {
        use std::io::Read;
        // SAFETY: the host handed us this fd for our exclusive use.
        let file = unsafe { File::from_raw_fd(fd) };
        let mut bytes = vec![];
        file.take(MAX_COMMAND_BYTES + 1)
            .read_to_end(&mut bytes)
            .map_err(|err| format!("cannot read the command: {err}"))?;
        if bytes.is_empty() {
            return Err("no command came (the host let the launcher go)".into());
        }
        if bytes.len() as u64 > MAX_COMMAND_BYTES {
            return Err(format!("the command is over {MAX_COMMAND_BYTES} bytes"));
        }
        Command::decode(&bytes)
    }

    fn decode(bytes: &[u8]) -> Result<Command, String> {
        use std::os::unix::ffi::OsStrExt;
        let bad = |what: &str| format!("the command message is malformed: {what}");
        let body = bytes
            .strip_suffix(&[0])
            .ok_or_else(|| bad("no final NUL"))?;
        let mut fields = body.split(|b| *b == 0);
        let workdir = PathBuf::from(std::ffi::OsStr::from_bytes(
            fields.next().ok_or_else(|| bad("no working directory"))?,
        ));
        if !workdir.is_absolute() {
            return Err(bad("the working directory is not absolute"));
        }
        let argc: usize = std::str::from_utf8(fields.next().ok_or_else(|| bad("no argc"))?)
            .ok()
            .and_then(|n| n.parse().ok())
            .filter(|n| *n > 0)
            .ok_or_else(|| bad("argc is not a positive number"))?;
        let argv: Vec<std::ffi::OsString> = fields
            .by_ref()
            .take(argc)
            .map(|arg| std::ffi::OsStr::from_bytes(arg).to_owned())
            .collect();
        if argv.len() != argc {
            return Err(bad("fewer arguments than argc"));
        }
        let env = fields
            .map(|entry| {
                let at = entry
                    .iter()
                    .position(|b| *b == b'=')
                    .ok_or_else(|| bad("an environment entry without ="))?;
                Ok((
                    std::ffi::OsStr::from_bytes(&entry[..at]).to_owned(),
                    std::ffi::OsStr::from_bytes(&entry[at + 1..]).to_owned(),
                ))
            })
            .collect::<Result<_, String>>()?;
        Ok(Command { workdir, argv, env })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_command_message_round_trips_with_empty_arguments_and_values() {
        let os = std::ffi::OsString::from;
        let command = Command {
            workdir: "/ws/sub dir".into(),
            argv: vec![os("bash"), os("-c"), os("")],
            env: vec![(os("EMPTY"), os("")), (os("EQ"), os("a=b"))],
        };
        assert_eq!(Command::decode(&command.encode()).unwrap(), command);
        let bare = Command {
            workdir: "/".into(),
            argv: vec![os("true")],
            env: vec![],
        };
        assert_eq!(Command::decode(&bare.encode()).unwrap(), bare);
    }

    #[test]
    fn a_malformed_command_message_is_refused() {
        for (bytes, says) in [
            (&b"/ws\x001\x00true"[..], "no final NUL"),
            (b"ws\x001\x00true\x00", "not absolute"),
            (b"/ws\x000\x00", "positive"),
            (b"/ws\x00x\x00true\x00", "positive"),
            (b"/ws\x003\x00a\x00b\x00", "fewer arguments"),
            (b"/ws\x001\x00true\x00NOEQUALS\x00", "without ="),
        ] {
            let err = Command::decode(bytes).unwrap_err();
            assert!(err.contains(says), "{bytes:?}: {err}");
        }
    }
}
