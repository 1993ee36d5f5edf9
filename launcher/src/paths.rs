//! Reaching a path through no symlink at all: `openat2` with
//! `RESOLVE_NO_SYMLINKS` (Linux 5.6), one call however deep the path. The
//! namespace runner reaches its mountpoints so (a directory a run swapped
//! for a link cannot move a mount or a cover), and the host opens the
//! directory of each placeholder it makes so. Making a missing mountpoint
//! walks down one component at a time from the last directory reached
//! ([`make_missing`]): a path 400 directories deep costs 400 steps, not
//! 400 resolutions of ever longer paths.

use std::ffi::CString;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
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

/// Make `path` where it is missing — its missing directories (mode 0777
/// less the umask), and the last component a directory (`dir`) or an empty
/// file — walking down from `/` one component at a time, each reached
/// relative to its parent with no symlink followed (`ENOTDIR` where one
/// is). An existing last component is left as it is.
#[allow(
    unsafe_code,
    reason = "openat, mkdirat and the descriptors they return; each block says why it is sound"
)]
pub fn make_missing(path: &Path, dir: bool) -> std::io::Result<()> {
    use std::path::Component;
    let names: Vec<&std::ffi::OsStr> = path
        .components()
        .filter_map(|part| match part {
            Component::Normal(name) => Some(name),
            _ => None,
        })
        .collect();
    if !path.is_absolute() || names.len() + 1 != path.components().count() {
        return Err(std::io::Error::new(
            std::io::ErrorKind::InvalidInput,
            "a mountpoint is an absolute path of plain names",
        ));
    }
    let mut at = open_no_symlinks(Path::new("/"), libc::O_PATH | libc::O_DIRECTORY)?;
    for (index, name) in names.iter().enumerate() {
        let name = CString::new(name.as_bytes())
            .map_err(|_| std::io::Error::from(std::io::ErrorKind::InvalidInput))?;
        let last = index + 1 == names.len();
        if last && !dir {
            let flags = libc::O_WRONLY | libc::O_CREAT | libc::O_NOFOLLOW | libc::O_CLOEXEC;
            // SAFETY: openat reads a NUL-terminated name relative to a
            // descriptor we own.
            let file = unsafe { libc::openat(at.as_raw_fd(), name.as_ptr(), flags, 0o666) };
            if file < 0 {
                return Err(std::io::Error::last_os_error());
            }
            // SAFETY: a fresh fd the kernel just gave us; dropped here.
            drop(unsafe { OwnedFd::from_raw_fd(file) });
            return Ok(());
        }
        // SAFETY: mkdirat reads a NUL-terminated name relative to a
        // descriptor we own.
        let made = unsafe { libc::mkdirat(at.as_raw_fd(), name.as_ptr(), 0o777) };
        if made != 0 && std::io::Error::last_os_error().kind() != std::io::ErrorKind::AlreadyExists
        {
            return Err(std::io::Error::last_os_error());
        }
        let flags = libc::O_PATH | libc::O_DIRECTORY | libc::O_NOFOLLOW | libc::O_CLOEXEC;
        // SAFETY: as above; the result is checked before it is owned.
        let next = unsafe { libc::openat(at.as_raw_fd(), name.as_ptr(), flags) };
        if next < 0 {
            return Err(std::io::Error::last_os_error());
        }
        // SAFETY: a fresh fd the kernel just gave us, owned by nothing else.
        at = unsafe { OwnedFd::from_raw_fd(next as RawFd) };
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn missing_directories_are_made_one_step_each_and_a_symlink_on_the_way_refused() {
        let root = tempfile::tempdir().unwrap();
        let mut deep = root.path().to_path_buf();
        for _ in 0..400 {
            deep.push("d");
        }
        make_missing(&deep, true).unwrap();
        assert!(deep.is_dir());
        // Made again: left as it is.
        make_missing(&deep, true).unwrap();
        let file = deep.join("mountpoint");
        make_missing(&file, false).unwrap();
        assert!(file.is_file());
        // A symlink on the way (to a directory) is not followed.
        let target = root.path().join("elsewhere");
        std::fs::create_dir(&target).unwrap();
        std::os::unix::fs::symlink(&target, root.path().join("link")).unwrap();
        let through = root.path().join("link/made");
        assert!(make_missing(&through, true).is_err());
        assert!(
            !target.join("made").exists(),
            "nothing made through the link"
        );
        assert!(make_missing(Path::new("relative/path"), true).is_err());
        assert!(make_missing(Path::new("/tmp/../etc"), true).is_err());
    }
}
