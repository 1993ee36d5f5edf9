//! The command's environment, which comes over its own fd (`--env-fd`):
//! `NAME=VALUE` entries, each ended by a NUL. It reaches the command only,
//! never the launcher, which runs before confinement.

use std::ffi::OsString;
use std::fs::File;
use std::os::fd::{FromRawFd, RawFd};

/// The command's environment from `fd`: `NAME=VALUE` entries, each ended
/// by a NUL. The fd is closed.
#[allow(
    unsafe_code,
    reason = "taking ownership of the fd the host handed over; each block says why it is sound"
)]
pub(crate) fn read_env(fd: RawFd) -> std::io::Result<Vec<(OsString, OsString)>> {
    use std::io::Read;
    use std::os::unix::ffi::OsStringExt;
    // SAFETY: the host handed us this fd for our exclusive use.
    let mut file = unsafe { File::from_raw_fd(fd) };
    let mut bytes = vec![];
    file.read_to_end(&mut bytes)?;
    Ok(parse_env(&bytes)
        .into_iter()
        .map(|(name, value)| (OsString::from_vec(name), OsString::from_vec(value)))
        .collect())
}

/// Split NUL-ended `NAME=VALUE` entries (an entry without `=` is skipped).
pub(crate) fn parse_env(bytes: &[u8]) -> Vec<(Vec<u8>, Vec<u8>)> {
    bytes
        .split(|b| *b == 0)
        .filter_map(|entry| {
            let at = entry.iter().position(|b| *b == b'=')?;
            Some((entry[..at].to_vec(), entry[at + 1..].to_vec()))
        })
        .collect()
}
