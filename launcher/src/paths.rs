//! Reaching a path through no symlink at all: `openat2` with
//! `RESOLVE_NO_SYMLINKS` (Linux 5.6), one call however deep the path. The
//! namespace runner reaches its mountpoints so (a directory a run swapped
//! for a link cannot move a mount or a cover), and the host opens the
//! directory of each placeholder it makes so. Making a missing mountpoint
//! walks down one component at a time from the last directory reached
//! ([`make_missing`]): a path 400 directories deep costs 400 steps, not
//! 400 resolutions of ever longer paths.
//!
//! One resolution is still a walk of every component: a dozen covers of a
//! workspace 400 directories deep, each reached a few times, were ~50
//! walks of 400 components a run. [`Anchors`] keeps the directories a
//! mount program already reached, and reaches a path below one from it.

use std::ffi::{CStr, CString};
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, FromRawFd, OwnedFd, RawFd};
use std::os::unix::ffi::OsStrExt;
use std::path::{Component, Path, PathBuf};

use nix::libc;

use crate::prefix::{plain, strip_plain};

/// Directories already reached, each by its path: a path below one is
/// reached from the nearest, relative — through no symlink when the walk
/// from `/` would be (the one below was reached through none), so what it
/// reaches is what the whole path reaches from `/`, one walk of the rest.
///
/// An anchor stands for what its path reached when it was taken: its
/// holder forgets it ([`Anchors::covered`]) when a mount is attached at
/// it or above it, after which the path reaches something else.
#[derive(Debug, Default)]
pub struct Anchors(Vec<(PathBuf, OwnedFd)>);

impl Anchors {
    /// `fd` (a directory) is what `path` reaches now. Only an absolute
    /// path of plain names is kept: any other walks from `/`.
    pub fn add(&mut self, path: &Path, fd: OwnedFd) {
        if !plain(path.as_os_str().as_bytes()) {
            return;
        }
        self.0.retain(|(at, _)| at != path);
        self.0.push((path.to_path_buf(), fd));
    }

    /// A mount was attached at `path`: an anchor at it or below it stands
    /// for a tree the path no longer reaches. (Compared as bytes, which
    /// may forget a sibling too — `/ws2` for `/ws` —; a path not plain
    /// forgets every anchor.)
    pub fn covered(&mut self, path: &Path) {
        let path = path.as_os_str().as_bytes();
        match plain(path) {
            true => self
                .0
                .retain(|(at, _)| !at.as_os_str().as_bytes().starts_with(path)),
            false => self.0.clear(),
        }
    }

    /// The nearest anchor strictly above `path`, and the rest of the path
    /// from it — plain names only (a `..` or `.` walks from `/`).
    fn nearest<'a>(&self, path: &'a Path) -> Option<(BorrowedFd<'_>, &'a Path)> {
        // Every anchor is plain: so is the rest below one of a plain path.
        if !plain(path.as_os_str().as_bytes()) {
            return None;
        }
        self.0
            .iter()
            .filter_map(|(at, fd)| Some((fd.as_fd(), strip_plain(path, at)?)))
            .filter(|(_, rest)| !rest.as_os_str().is_empty())
            .min_by_key(|(_, rest)| rest.as_os_str().len())
    }

    /// [`Anchors::nearest`], the rest as a C string (for a `*at` call).
    pub fn below(&self, path: &Path) -> Option<(BorrowedFd<'_>, CString)> {
        let (at, rest) = self.nearest(path)?;
        Some((at, CString::new(rest.as_os_str().as_bytes()).ok()?))
    }

    /// [`open_no_symlinks`], from the nearest anchor above `path`.
    pub fn open(&self, path: &Path, flags: libc::c_int) -> std::io::Result<OwnedFd> {
        match self.below(path) {
            Some((at, rest)) => openat2_no_symlinks(at.as_raw_fd(), &rest, flags),
            None => open_no_symlinks(path, flags),
        }
    }

    /// The directory `path` reaches (`O_PATH`): the anchor itself when
    /// `path` is one (a duplicate, nothing walked), else [`Anchors::open`]'s
    /// walk of the rest from the nearest anchor above it.
    pub fn open_dir(&self, path: &Path) -> std::io::Result<OwnedFd> {
        match self.0.iter().find(|(at, _)| at.as_path() == path) {
            Some((_, fd)) => fd.try_clone(),
            None => self.open(path, libc::O_PATH | libc::O_DIRECTORY),
        }
    }

    /// [`make_missing`], from the nearest anchor above `path`.
    pub fn make_missing(&self, path: &Path, dir: bool) -> std::io::Result<()> {
        plain_names(path)?;
        match self.nearest(path) {
            Some((at, rest)) => make_down(at.try_clone_to_owned()?, &plain_names_of(rest), dir),
            None => make_missing(path, dir),
        }
    }
}

/// `openat2(AT_FDCWD, path, flags, RESOLVE_NO_SYMLINKS)`: a symlink
/// anywhere in `path` is `ELOOP`; `ENOSYS` where the kernel (or a seccomp
/// filter) has no `openat2`.
pub fn open_no_symlinks(path: &Path, flags: libc::c_int) -> std::io::Result<OwnedFd> {
    let to = CString::new(path.as_os_str().as_bytes())
        .map_err(|_| std::io::Error::from(std::io::ErrorKind::InvalidInput))?;
    openat2_no_symlinks(libc::AT_FDCWD, &to, flags)
}

/// `openat2(dir, path, flags, RESOLVE_NO_SYMLINKS)`.
#[allow(
    unsafe_code,
    reason = "openat2 has no wrapper in libc or nix; the block says why it is sound"
)]
fn openat2_no_symlinks(dir: RawFd, path: &CStr, flags: libc::c_int) -> std::io::Result<OwnedFd> {
    // SAFETY: open_how is plain data; zeroed is a valid value.
    let mut how: libc::open_how = unsafe { std::mem::zeroed() };
    how.flags = (flags | libc::O_CLOEXEC) as u64;
    how.resolve = libc::RESOLVE_NO_SYMLINKS;
    // SAFETY: openat2 reads a NUL-terminated path and a struct we own, of
    // the size passed; `dir` is AT_FDCWD or a descriptor the caller holds.
    let at = unsafe {
        libc::syscall(
            libc::SYS_openat2,
            dir,
            path.as_ptr(),
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
pub fn make_missing(path: &Path, dir: bool) -> std::io::Result<()> {
    let names = plain_names(path)?;
    make_down(
        open_no_symlinks(Path::new("/"), libc::O_PATH | libc::O_DIRECTORY)?,
        &names,
        dir,
    )
}

/// The names of an absolute path of plain names; refused otherwise.
fn plain_names(path: &Path) -> std::io::Result<Vec<&std::ffi::OsStr>> {
    let names = plain_names_of(path);
    if !path.is_absolute() || names.len() + 1 != path.components().count() {
        return Err(std::io::Error::new(
            std::io::ErrorKind::InvalidInput,
            "a mountpoint is an absolute path of plain names",
        ));
    }
    Ok(names)
}

fn plain_names_of(path: &Path) -> Vec<&std::ffi::OsStr> {
    path.components()
        .filter_map(|part| match part {
            Component::Normal(name) => Some(name),
            _ => None,
        })
        .collect()
}

/// [`make_missing`]'s walk: `names` made and reached below `at`, one at a
/// time.
#[allow(
    unsafe_code,
    reason = "openat, mkdirat and the descriptors they return; each block says why it is sound"
)]
fn make_down(mut at: OwnedFd, names: &[&std::ffi::OsStr], dir: bool) -> std::io::Result<()> {
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

    /// A path below an anchor is reached from it, through no symlink,
    /// to what the whole path reaches; the deepest anchor is the one used,
    /// an anchor a mount covered is forgotten, and a path that is not plain
    /// names below it walks from `/`.
    #[test]
    fn a_path_below_an_anchor_is_reached_from_it_through_no_symlink() {
        use std::os::unix::fs::MetadataExt;
        let root = tempfile::tempdir().unwrap();
        let (ws, deep) = (root.path().join("ws"), root.path().join("ws/a/b"));
        std::fs::create_dir_all(&deep).unwrap();
        std::fs::write(deep.join("file"), "x").unwrap();
        std::os::unix::fs::symlink(&deep, ws.join("link")).unwrap();
        let inode = |fd: &OwnedFd| {
            let link = format!("/proc/self/fd/{}", fd.as_raw_fd());
            std::fs::metadata(link).unwrap().ino()
        };
        let mut anchors = Anchors::default();
        anchors.add(&ws, open_no_symlinks(&ws, libc::O_PATH).unwrap());
        let (_, rest) = anchors.below(&deep.join("file")).unwrap();
        assert_eq!(rest.as_bytes(), b"a/b/file");
        let file = anchors.open(&deep.join("file"), libc::O_PATH).unwrap();
        assert_eq!(
            inode(&file),
            std::fs::metadata(deep.join("file")).unwrap().ino()
        );
        // The deepest anchor above wins.
        anchors.add(&deep, open_no_symlinks(&deep, libc::O_PATH).unwrap());
        assert_eq!(
            anchors.below(&deep.join("file")).unwrap().1.as_bytes(),
            b"file"
        );
        // A symlink below an anchor is refused as from `/`.
        let err = anchors
            .open(&ws.join("link/file"), libc::O_PATH)
            .unwrap_err();
        assert_eq!(err.raw_os_error(), Some(libc::ELOOP));
        // Not plain names below it: no anchor, the walk is from `/`.
        assert!(anchors.below(&ws.join("a/../a/b")).is_none());
        assert!(
            anchors.below(&ws).is_none(),
            "an anchor is not above itself"
        );
        // A directory is opened as the anchor it is, or from the one above.
        let same = |fd: &OwnedFd, path: &Path| {
            let link = format!("/proc/self/fd/{}", fd.as_raw_fd());
            let (a, b) = (
                std::fs::metadata(link).unwrap(),
                std::fs::metadata(path).unwrap(),
            );
            (a.dev(), a.ino()) == (b.dev(), b.ino())
        };
        assert!(same(&anchors.open_dir(&ws).unwrap(), &ws));
        assert!(same(
            &anchors.open_dir(&ws.join("a")).unwrap(),
            &ws.join("a")
        ));
        assert!(
            anchors.open_dir(&deep.join("file")).is_err(),
            "not a directory"
        );
        assert_eq!(
            anchors
                .open_dir(&ws.join("link"))
                .unwrap_err()
                .raw_os_error(),
            Some(libc::ELOOP)
        );
        // A mount attached at `ws` (or above): both forgotten.
        anchors.covered(&ws);
        assert!(anchors.below(&deep.join("file")).is_none());
        // Made from an anchor: the missing rest, one step each; a symlink on
        // the way refused, nothing made through it.
        anchors.add(&ws, open_no_symlinks(&ws, libc::O_PATH).unwrap());
        anchors.make_missing(&ws.join("new/dir"), true).unwrap();
        assert!(ws.join("new/dir").is_dir());
        anchors
            .make_missing(&ws.join("new/dir/file"), false)
            .unwrap();
        assert!(ws.join("new/dir/file").is_file());
        assert!(anchors.make_missing(&ws.join("link/made"), true).is_err());
        assert!(!deep.join("made").exists(), "nothing made through the link");
        // A path not plain is no anchor, and covering one forgets them all.
        let odd = PathBuf::from(format!("{}/./a", ws.display()));
        anchors.add(&odd, open_no_symlinks(&deep, libc::O_PATH).unwrap());
        assert!(
            anchors
                .below(&PathBuf::from(format!("{}/b", odd.display())))
                .is_none()
        );
        assert!(anchors.below(&ws.join("a")).is_some());
        anchors.covered(&PathBuf::from(format!("{}//", ws.display())));
        assert!(anchors.below(&ws.join("a")).is_none());
        // A sibling sharing the anchor's bytes is not below it.
        anchors.add(&ws, open_no_symlinks(&ws, libc::O_PATH).unwrap());
        assert!(
            anchors
                .below(&PathBuf::from(format!("{}2/a", ws.display())))
                .is_none()
        );
    }
}
