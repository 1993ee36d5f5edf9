//! Where the supervisor lets a command change the file tree: pure
//! decisions on paths as the kernel names them (the `/proc/self/fd` link of
//! a descriptor the supervisor holds), kept apart from the system calls so
//! every rule is unit-tested.
//!
//! Three kinds of place:
//!
//! * **supervised roots** — writable roots that hold protected paths.
//!   Landlock grants them read and execute only, so the kernel refuses
//!   every change there; the supervisor carries changes out itself after
//!   these checks. A call it answers *continue* (outside every supervised
//!   root) is still bounded by Landlock, so a racer who swaps a path after
//!   the check lands in a place where the kernel refuses the write.
//! * **protected paths** inside them: never written, created, replaced,
//!   renamed or removed, nor anything beneath them; a directory holding
//!   one (or a root) is not renamed or removed either.
//! * **writable** directories (supervised or granted by Landlock):
//!   where `chmod` and `utimensat` are carried out for the command's own
//!   files, protected paths excepted.

use std::ffi::OsStr;
use std::path::{Component, Path, PathBuf};

use nix::libc;

/// The errno of a refused change to a protected path: what the other rungs'
/// read-only mounts answer.
pub(crate) const PROTECTED: i32 = libc::EROFS;

/// The places of one run.
#[derive(Clone, Debug, Default)]
pub(crate) struct Places {
    /// Every directory the run may write (as the host checked it).
    pub writable: Vec<PathBuf>,
    /// The writable roots whose changes the supervisor carries out.
    pub supervised: Vec<PathBuf>,
    /// The protected paths inside them.
    pub protected: Vec<PathBuf>,
    /// The command's user: metadata changes are for its own files.
    pub owner: u32,
}

/// What the supervisor does with one call.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Verdict {
    /// Carry it out on descriptors it resolved.
    Perform,
    /// Fail it with this errno.
    Refuse(i32),
    /// Let the kernel run it as asked (Landlock still decides).
    Continue,
}

/// A directory entry a call names: its directory as the kernel names it,
/// and its name there.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Named<'a> {
    /// The directory.
    pub dir: &'a Path,
    /// The entry's name: one component.
    pub name: &'a OsStr,
}

impl Named<'_> {
    /// The entry's path; `None` when the name is not one plain component
    /// (`.`, `..`, empty), which the supervisor leaves to the kernel.
    fn path(&self) -> Option<PathBuf> {
        let mut parts = Path::new(self.name).components();
        match (parts.next(), parts.next()) {
            (Some(Component::Normal(name)), None) => Some(self.dir.join(name)),
            _ => None,
        }
    }
}

impl Places {
    /// Whether `path` lies in (or is) a supervised root.
    pub fn supervises(&self, path: &Path) -> bool {
        path.is_absolute() && self.supervised.iter().any(|root| path.starts_with(root))
    }

    /// Whether `path` is protected or lies beneath a protected path: its
    /// content, mode and name stay as they are.
    pub fn guards(&self, path: &Path) -> bool {
        self.protected.iter().any(|p| path.starts_with(p))
    }

    /// Whether removing or renaming `path` would take a protected path or
    /// a root with it.
    fn holds(&self, path: &Path) -> bool {
        self.guards(path)
            || self
                .protected
                .iter()
                .chain(&self.supervised)
                .chain(&self.writable)
                .any(|p| p.starts_with(path))
    }

    /// Create `entry` (a file, directory, node or link) or open it for
    /// writing.
    pub fn create(&self, entry: Named<'_>) -> Verdict {
        self.changing(entry, |path| self.guards(path))
    }

    /// Remove `entry`.
    pub fn remove(&self, entry: Named<'_>) -> Verdict {
        self.changing(entry, |path| self.holds(path))
    }

    /// Rename `from` to `to` (which it may replace, or swap with). A move
    /// between a supervised root and anywhere else is `EXDEV` — the answer
    /// between file systems, which `mv` and friends meet by copying —
    /// because carrying it out would bypass what Landlock grants outside.
    pub fn rename(&self, from: Named<'_>, to: Named<'_>) -> Verdict {
        match (self.supervises(from.dir), self.supervises(to.dir)) {
            (false, false) => Verdict::Continue,
            (true, true) => match (from.path(), to.path()) {
                (Some(a), Some(b)) if self.holds(&a) || self.holds(&b) => {
                    Verdict::Refuse(PROTECTED)
                }
                (Some(_), Some(_)) => Verdict::Perform,
                _ => Verdict::Continue,
            },
            _ => Verdict::Refuse(libc::EXDEV),
        }
    }

    /// Link the existing file at `file` (as the kernel names it) as
    /// `entry`. A file from outside the supervised roots is `EXDEV` (its
    /// rights there are Landlock's to judge); a protected file gets no
    /// second name.
    pub fn link(&self, file: &Path, entry: Named<'_>) -> Verdict {
        if self.guards(file) {
            return Verdict::Refuse(PROTECTED);
        }
        match (self.supervises(file), self.supervises(entry.dir)) {
            (_, false) => Verdict::Continue,
            (false, true) => Verdict::Refuse(libc::EXDEV),
            (true, true) => self.create(entry),
        }
    }

    /// Open the existing `file` (as the kernel names it, reached through a
    /// symlink or a descriptor's link) for writing.
    pub fn write(&self, file: &Path) -> Verdict {
        match (self.supervises(file), self.guards(file)) {
            (false, _) => Verdict::Continue,
            (true, true) => Verdict::Refuse(PROTECTED),
            (true, false) => Verdict::Perform,
        }
    }

    /// The verdict on changing `entry`, refused where `held` says so.
    fn changing(&self, entry: Named<'_>, held: impl Fn(&Path) -> bool) -> Verdict {
        if !self.supervises(entry.dir) {
            return Verdict::Continue;
        }
        match entry.path() {
            None => Verdict::Continue,
            Some(path) if held(&path) => Verdict::Refuse(PROTECTED),
            Some(_) => Verdict::Perform,
        }
    }

    /// Whether the file at `path` (as the kernel names the descriptor),
    /// of type `kind` and owned by `uid`, may have its metadata changed:
    /// the command's own regular file or directory — or symlink, where
    /// `links` (its owner and times are its own) — beneath a writable
    /// directory, and not protected.
    pub fn admits_metadata(&self, path: &Path, kind: libc::mode_t, uid: u32, links: bool) -> bool {
        let admitted = match kind & libc::S_IFMT {
            libc::S_IFREG | libc::S_IFDIR => true,
            libc::S_IFLNK => links,
            _ => false,
        };
        admitted
            && uid == self.owner
            && path.is_absolute()
            && self.writable.iter().any(|root| path.starts_with(root))
            && !self.guards(path)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn places() -> Places {
        Places {
            writable: vec!["/ws".into(), "/tmp".into()],
            supervised: vec!["/ws".into()],
            protected: vec!["/ws/.git".into(), "/ws/.bashrc".into()],
            owner: 1000,
        }
    }

    fn at<'a>(dir: &'a str, name: &'a str) -> Named<'a> {
        Named {
            dir: Path::new(dir),
            name: OsStr::new(name),
        }
    }

    #[test]
    fn writes_in_a_supervised_root_are_performed_unless_protected() {
        let p = places();
        assert_eq!(p.create(at("/ws", "new.txt")), Verdict::Perform);
        assert_eq!(p.create(at("/ws/src/git", "hooks")), Verdict::Perform);
        assert_eq!(p.create(at("/ws", ".git")), Verdict::Refuse(PROTECTED));
        assert_eq!(
            p.create(at("/ws/.git", "config")),
            Verdict::Refuse(PROTECTED)
        );
        assert_eq!(
            p.create(at("/ws/.git/hooks", "pre-commit")),
            Verdict::Refuse(PROTECTED)
        );
        assert_eq!(p.create(at("/ws", ".bashrc")), Verdict::Refuse(PROTECTED));
        // A name that only starts like a protected one is not protected.
        assert_eq!(p.create(at("/ws", ".gitignore")), Verdict::Perform);
        assert_eq!(p.create(at("/ws", ".bashrc.d")), Verdict::Perform);
    }

    #[test]
    fn outside_the_supervised_roots_the_kernel_decides() {
        let p = places();
        assert_eq!(p.create(at("/tmp", "x")), Verdict::Continue);
        assert_eq!(p.create(at("/etc", "passwd")), Verdict::Continue);
        assert_eq!(p.create(at("/wsx", "a")), Verdict::Continue);
        assert_eq!(p.remove(at("/", "ws")), Verdict::Continue);
        assert_eq!(p.create(at("pipe:[3]", "x")), Verdict::Continue);
        // Dot names are the kernel's (Landlock refuses writes in /ws).
        assert_eq!(p.create(at("/ws", ".")), Verdict::Continue);
        assert_eq!(p.remove(at("/ws/a", "..")), Verdict::Continue);
        assert_eq!(p.create(at("/ws", "")), Verdict::Continue);
    }

    #[test]
    fn what_holds_a_protected_path_or_a_root_is_not_removed() {
        let mut p = places();
        p.protected.push("/ws/sub/.git".into());
        p.supervised.push("/ws/nested".into());
        assert_eq!(p.remove(at("/ws", "file")), Verdict::Perform);
        assert_eq!(p.remove(at("/ws", ".git")), Verdict::Refuse(PROTECTED));
        assert_eq!(p.remove(at("/ws/.git", "HEAD")), Verdict::Refuse(PROTECTED));
        assert_eq!(p.remove(at("/ws", "sub")), Verdict::Refuse(PROTECTED));
        assert_eq!(p.remove(at("/ws", "nested")), Verdict::Refuse(PROTECTED));
        assert_eq!(p.remove(at("/ws/sub", "other")), Verdict::Perform);
    }

    #[test]
    fn renames_stay_inside_and_spare_what_is_held() {
        let p = places();
        assert_eq!(p.rename(at("/ws", "a"), at("/ws/d", "b")), Verdict::Perform);
        assert_eq!(
            p.rename(at("/ws", ".git"), at("/ws", "away")),
            Verdict::Refuse(PROTECTED)
        );
        assert_eq!(
            p.rename(at("/ws", "evil"), at("/ws", ".git")),
            Verdict::Refuse(PROTECTED)
        );
        assert_eq!(
            p.rename(at("/ws", "hook"), at("/ws/.git/hooks", "pre-commit")),
            Verdict::Refuse(PROTECTED)
        );
        assert_eq!(
            p.rename(at("/tmp", "a"), at("/ws", "a")),
            Verdict::Refuse(libc::EXDEV)
        );
        assert_eq!(
            p.rename(at("/ws", "a"), at("/tmp", "a")),
            Verdict::Refuse(libc::EXDEV)
        );
        assert_eq!(
            p.rename(at("/tmp", "a"), at("/tmp", "b")),
            Verdict::Continue
        );
    }

    #[test]
    fn links_give_no_second_name_to_protected_or_outside_files() {
        let p = places();
        let f = Path::new;
        assert_eq!(p.link(f("/ws/a"), at("/ws", "b")), Verdict::Perform);
        assert_eq!(
            p.link(f("/ws/.git/config"), at("/ws", "c")),
            Verdict::Refuse(PROTECTED)
        );
        assert_eq!(
            p.link(f("/ws/.git/config"), at("/tmp", "c")),
            Verdict::Refuse(PROTECTED)
        );
        assert_eq!(
            p.link(f("/etc/passwd"), at("/ws", "p")),
            Verdict::Refuse(libc::EXDEV)
        );
        assert_eq!(
            p.link(f("/ws/a"), at("/ws/.git/hooks", "pre-commit")),
            Verdict::Refuse(PROTECTED)
        );
        assert_eq!(p.link(f("/tmp/a"), at("/tmp", "b")), Verdict::Continue);
    }

    #[test]
    fn a_file_reached_through_a_link_is_judged_where_it_lies() {
        let p = places();
        assert_eq!(p.write(Path::new("/ws/src/a.rs")), Verdict::Perform);
        assert_eq!(
            p.write(Path::new("/ws/.git/config")),
            Verdict::Refuse(PROTECTED)
        );
        assert_eq!(p.write(Path::new("/tmp/a")), Verdict::Continue);
        assert_eq!(p.write(Path::new("socket:[12]")), Verdict::Continue);
    }

    #[test]
    fn metadata_is_for_own_files_in_writable_places_and_never_protected() {
        let p = places();
        assert!(p.admits_metadata(Path::new("/ws/a/b"), libc::S_IFREG, 1000, false));
        assert!(p.admits_metadata(Path::new("/ws"), libc::S_IFDIR, 1000, false));
        assert!(p.admits_metadata(Path::new("/tmp/x"), libc::S_IFREG, 1000, false));
        assert!(!p.admits_metadata(Path::new("/wsx/a"), libc::S_IFREG, 1000, false));
        assert!(!p.admits_metadata(Path::new("/etc/passwd"), libc::S_IFREG, 1000, false));
        assert!(!p.admits_metadata(Path::new("/ws/a"), libc::S_IFREG, 0, false));
        assert!(!p.admits_metadata(Path::new("/ws/dev"), libc::S_IFCHR, 1000, false));
        assert!(!p.admits_metadata(Path::new("/ws/link"), libc::S_IFLNK, 1000, false));
        assert!(!p.admits_metadata(Path::new("anon_inode:[x]"), libc::S_IFREG, 1000, false));
        assert!(!p.admits_metadata(
            Path::new("/ws/.git/hooks/pre-commit"),
            libc::S_IFREG,
            1000,
            false
        ));
        assert!(!p.admits_metadata(Path::new("/ws/.bashrc"), libc::S_IFREG, 1000, false));
    }
}
