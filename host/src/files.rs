//! Reading a file a caller or an operator named (`--stdin-file`,
//! `--config`, a policy component for `--policy` or a server's `reload`):
//! only a regular file, and only up to a bound — never `/dev/zero` read
//! until memory runs out, nor a FIFO waited on forever (it is opened
//! without blocking, then refused).

use std::io::{self, Read};
use std::path::Path;

/// Bytes `--stdin-file` may hold.
pub const MAX_STDIN_BYTES: u64 = 64 << 20;
/// Bytes a config file may hold.
pub const MAX_CONFIG_BYTES: u64 = 1 << 20;
/// Bytes a policy component may hold (a file or a registry blob).
pub const MAX_COMPONENT_BYTES: u64 = 64 << 20;

/// The contents of the regular file at `path`, refused when it is anything
/// else (a device, a FIFO, a directory) or larger than `limit` bytes.
pub fn read_regular(path: &Path, limit: u64) -> io::Result<Vec<u8>> {
    use std::os::unix::fs::OpenOptionsExt;
    // Non-blocking: the open of a FIFO nobody writes returns at once (a
    // regular file's reads ignore the flag).
    let file = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(nix::libc::O_NONBLOCK)
        .open(path)?;
    let meta = file.metadata()?;
    if !meta.is_file() {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            "not a regular file",
        ));
    }
    let mut bytes = Vec::new();
    // Read one byte past the limit: a file that grew since `metadata` is
    // caught too.
    file.take(limit + 1).read_to_end(&mut bytes)?;
    if bytes.len() as u64 > limit {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("larger than {limit} bytes"),
        ));
    }
    Ok(bytes)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_a_bounded_regular_file_is_read() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("f");
        std::fs::write(&file, b"hello").unwrap();
        assert_eq!(read_regular(&file, 5).unwrap(), b"hello");
        let err = read_regular(&file, 4).unwrap_err().to_string();
        assert!(err.contains("larger than 4 bytes"), "{err}");
        let err = read_regular(Path::new("/dev/zero"), 1 << 20)
            .unwrap_err()
            .to_string();
        assert!(err.contains("not a regular file"), "{err}");
        assert!(read_regular(dir.path(), 10).is_err());
        let fifo = dir.path().join("fifo");
        nix::unistd::mkfifo(&fifo, nix::sys::stat::Mode::from_bits_truncate(0o600)).unwrap();
        let err = read_regular(&fifo, 10).unwrap_err().to_string();
        assert!(err.contains("not a regular file"), "{err}");
    }
}
