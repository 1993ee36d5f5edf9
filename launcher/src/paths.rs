//! Reaching a path through no symlink at all: `openat2` with
//! `RESOLVE_NO_SYMLINKS` (Linux 5.6), one call however deep the path. The
//! namespace runner reaches its mountpoints so (a directory a run swapped
//! for a link cannot move a mount or a cover), and the host opens the
//! directory of each placeholder it makes so.

use std::ffi::CString;
use std::os::fd::{FromRawFd, OwnedFd, RawFd};
use std::os::unix::ffi::OsStrExt;
use std::path::Path;

use nix::libc;

/// `openat2(AT_FDCWD, path, flags, RESOLVE_NO_SYMLINKS)`: a symlink
/// anywhere in `path` is `ELOOP`; `ENOSYS` where the kernel (or a seccomp
/// filter) has no `openat2`.
#[allow(
    unsafe_code,
    reason = "openat2 has no wrapper in libc or nix; the block says why it is sound"
)]
pub fn open_no_symlinks(path: &Path, flags: libc::c_int) -> std::io::Result<OwnedFd> {
    let to = CString::new(path.as_os_str().as_bytes())
        .map_err(|_| std::io::Error::from(std::io::ErrorKind::InvalidInput))?;
    // SAFETY: open_how is plain data; zeroed is a valid value.
    let mut how: libc::open_how = unsafe { std::mem::zeroed() };
    how.flags = (flags | libc::O_CLOEXEC) as u64;
    how.resolve = libc::RESOLVE_NO_SYMLINKS;
    // SAFETY: openat2 reads a NUL-terminated path and a struct we own, of
    // the size passed.
    let at = unsafe {
        libc::syscall(
            libc::SYS_openat2,
            libc::AT_FDCWD,
            to.as_ptr(),
            &how as *const libc::open_how,
            std::mem::size_of::<libc::open_how>(),
        )
    };
    if at < 0 {
        return Err(std::io::Error::last_os_error());
    }
    // SAFETY: a fresh fd the kernel just gave us, owned by nothing else.
    Ok(unsafe { OwnedFd::from_raw_fd(at as RawFd) })
}
