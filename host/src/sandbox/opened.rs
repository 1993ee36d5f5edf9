//! Directories opened once for the grant's layout, so that its questions
//! about the paths below them go through the open directory instead of
//! walking the directory's own path again. (On the sandbox's floor: which
//! path lies below which is the launcher's byte comparison,
//! [`super::launcher::prefix`].)

use std::path::{Path, PathBuf};

use super::launcher::prefix::strip_prefix;

/// Directories opened once, so that questions about paths below them go
/// through the open directory (`/proc/self/fd/N/rest`) instead of walking
/// the directory's own path again: in a workspace 400 directories deep,
/// each `lstat` of a protected name walked 400 components (the grant's
/// layout asks some forty times a run, on each of its threads).
#[derive(Debug, Default)]
pub struct Opened {
    /// Each directory, its open descriptor, and the path through it.
    dirs: Vec<(PathBuf, std::fs::File, PathBuf)>,
}

impl Opened {
    /// Open each of `dirs` (`O_PATH`); one that cannot be opened, or whose
    /// path through `/proc/self/fd` is not the very directory (no `/proc`
    /// mounted), is asked about by its own path as before.
    pub fn open(dirs: &[PathBuf]) -> Opened {
        #[cfg(target_os = "linux")]
        {
            use std::os::fd::AsRawFd;
            use std::os::unix::fs::{MetadataExt, OpenOptionsExt};
            let opened = dirs.iter().filter_map(|dir| {
                let file = std::fs::OpenOptions::new()
                    .read(true)
                    .custom_flags(nix::libc::O_PATH | nix::libc::O_DIRECTORY)
                    .open(dir)
                    .ok()?;
                let through = PathBuf::from(format!("/proc/self/fd/{}", file.as_raw_fd()));
                let (own, seen) = (file.metadata().ok()?, std::fs::metadata(&through).ok()?);
                (own.dev() == seen.dev() && own.ino() == seen.ino())
                    .then(|| (dir.clone(), file, through))
            });
            Opened {
                dirs: opened.collect(),
            }
        }
        #[cfg(not(target_os = "linux"))]
        {
            let _ = dirs;
            Opened::default()
        }
    }

    /// The `(device, inode)` of the open directory `dir`, when the kernel
    /// names what was opened `dir` itself — `dir` canonical, no symlink in
    /// it —, as `--writable-root` hands it to the runner
    /// (by [`super::launcher::verify::identity_of_open`], the rule
    /// `root_arg` applies after walking the path again); none otherwise.
    pub fn identity(&self, dir: &Path) -> Option<(u64, u64)> {
        #[cfg(target_os = "linux")]
        {
            use std::os::fd::AsFd;
            let (_, file, _) = self.dirs.iter().find(|(opened, _, _)| opened == dir)?;
            super::launcher::verify::identity_of_open(file.as_fd(), dir)
        }
        #[cfg(not(target_os = "linux"))]
        {
            let _ = dir;
            None
        }
    }

    /// `path` as the open directory below which it lies names it (the
    /// deepest one), else `path` itself.
    pub fn at<'a>(&self, path: &'a Path) -> std::borrow::Cow<'a, Path> {
        let below = self
            .dirs
            .iter()
            .filter_map(|(dir, _, through)| Some((strip_prefix(path, dir)?, dir, through)))
            .max_by_key(|(_, dir, _)| dir.as_os_str().len());
        match below {
            Some((rest, _, through)) if rest.as_os_str().is_empty() => through.clone().into(),
            Some((rest, _, through)) => through.join(rest).into(),
            None => path.into(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_opened_directory_answers_for_the_paths_below_it() {
        let root = tempfile::tempdir().unwrap();
        let base = std::fs::canonicalize(root.path()).unwrap();
        let deep = base.join(["d"; 400].join("/"));
        std::fs::create_dir_all(&deep).unwrap();
        std::fs::create_dir_all(deep.join("x")).unwrap();
        std::os::unix::fs::symlink("nowhere", deep.join("link")).unwrap();
        let opened = Opened::open(std::slice::from_ref(&deep));
        let x = deep.join("x");
        let through = opened.at(&x);
        assert!(
            through.starts_with("/proc/self/fd/"),
            "{}",
            through.display()
        );
        assert!(through.is_dir());
        assert!(opened.at(&deep).is_dir());
        // The last component is not followed, as for the path itself.
        let link = deep.join("link");
        let link = opened.at(&link);
        assert!(link.symlink_metadata().unwrap().file_type().is_symlink());
        assert!(opened.at(&deep.join("absent")).symlink_metadata().is_err());
        // Outside every opened directory: the path itself.
        assert_eq!(opened.at(&base.join("other")), base.join("other"));
        // A directory that is not there is not opened.
        let none = Opened::open(&[base.join("missing")]);
        assert_eq!(none.at(&base.join("missing/x")), base.join("missing/x"));
    }

    #[test]
    fn an_opened_directory_has_the_identity_the_runner_is_told_only_by_its_own_name() {
        let root = tempfile::tempdir().unwrap();
        let base = std::fs::canonicalize(root.path()).unwrap();
        let deep = base.join(["d"; 400].join("/"));
        std::fs::create_dir_all(&deep).unwrap();
        std::os::unix::fs::symlink(&deep, base.join("link")).unwrap();
        let dirs = [deep.clone(), base.join("link"), base.join("d/../d")];
        let opened = Opened::open(&dirs);
        // As the runner's own check (`verify::root_arg`) finds it.
        let told = super::super::launcher::verify::root_arg(&deep);
        let (dev, ino) = opened.identity(&deep).unwrap();
        assert_eq!(told, format!("{dev}:{ino}:{}", deep.display()));
        // A name through a symlink or `..` is not the directory's own.
        assert_eq!(opened.identity(&base.join("link")), None);
        assert_eq!(opened.identity(&base.join("d/../d")), None);
        assert_eq!(opened.identity(&base), None, "not opened");
    }
}
