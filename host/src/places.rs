//! Where cordon keeps its state on this host, how a user's `~` is read,
//! and how a path is resolved once ([`canonical`], [`Opened`]): one ground
//! helper, so the policy cache, the sandbox's verdicts, the grant's layout
//! and the run checks agree without importing one another.

use std::path::{Path, PathBuf};

/// cordon's cache directory: `$XDG_CACHE_HOME/cordon` (when absolute),
/// else `$HOME/.cache/cordon`; none without either.
pub fn cache_dir() -> Option<PathBuf> {
    let base = std::env::var_os("XDG_CACHE_HOME")
        .map(PathBuf::from)
        .filter(|p| p.is_absolute())
        .or_else(|| std::env::var_os("HOME").map(|home| Path::new(&home).join(".cache")))?;
    Some(base.join("cordon"))
}

/// `path` with a leading `~` replaced by `$HOME` (unchanged without one).
pub fn expand_home(path: &Path) -> PathBuf {
    match (path.strip_prefix("~"), std::env::var_os("HOME")) {
        (Ok(rest), Some(home)) => PathBuf::from(home).join(rest),
        _ => path.to_path_buf(),
    }
}

/// `path` made canonical — absolute, every symlink and `..` resolved — as
/// `std::fs::canonicalize` does, in one resolution: the path is opened
/// (`O_PATH`, nothing read) and the kernel names what it reached
/// (`/proc/self/fd/N`). `realpath` instead reads every prefix as a link,
/// each from `/`: a path 400 directories deep cost 400 resolutions of ever
/// longer paths (a workspace that deep took 2.4 times as long to run in).
/// Falls back to `std::fs::canonicalize` where the kernel's name is not a
/// plain path (no `/proc`, a deleted entry).
pub fn canonical(path: &Path) -> std::io::Result<PathBuf> {
    #[cfg(target_os = "linux")]
    {
        use std::os::fd::AsRawFd;
        use std::os::unix::fs::OpenOptionsExt;
        let opened = std::fs::OpenOptions::new()
            .read(true)
            .custom_flags(nix::libc::O_PATH)
            .open(path)?;
        let named = std::fs::read_link(format!("/proc/self/fd/{}", opened.as_raw_fd()));
        if let Ok(named) = named
            && named.is_absolute()
            && !named
                .as_os_str()
                .as_encoded_bytes()
                .ends_with(b" (deleted)")
        {
            return Ok(named);
        }
    }
    std::fs::canonicalize(path)
}

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

    /// `path` as the open directory below which it lies names it (the
    /// deepest one), else `path` itself.
    pub fn at<'a>(&self, path: &'a Path) -> std::borrow::Cow<'a, Path> {
        let below = self
            .dirs
            .iter()
            .filter_map(|(dir, _, through)| Some((path.strip_prefix(dir).ok()?, dir, through)))
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

    /// A temporary directory, its canonical path, and a directory 400
    /// levels below it (`d/d/…`), made.
    fn deep_tree() -> (tempfile::TempDir, PathBuf, PathBuf) {
        let root = tempfile::tempdir().unwrap();
        let base = std::fs::canonicalize(root.path()).unwrap();
        let deep = (0..400).fold(base.clone(), |path, _| path.join("d"));
        std::fs::create_dir_all(&deep).unwrap();
        (root, base, deep)
    }

    #[test]
    fn an_opened_directory_answers_for_the_paths_below_it() {
        let (_root, base, deep) = deep_tree();
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
    fn canonical_agrees_with_realpath_in_one_resolution() {
        let (root, base, deep) = deep_tree();
        std::os::unix::fs::symlink(&deep, base.join("link")).unwrap();
        std::fs::write(base.join("file"), "").unwrap();
        for path in [
            base.clone(),
            deep.clone(),
            base.join("link"),
            base.join("link/../d"),
            base.join("d/./d/../d"),
            base.join("file"),
            root.path().join("link"),
        ] {
            assert_eq!(
                canonical(&path).unwrap(),
                std::fs::canonicalize(&path).unwrap(),
                "{}",
                path.display()
            );
        }
        assert!(canonical(&base.join("missing")).is_err());
        std::os::unix::fs::symlink(base.join("nowhere"), base.join("dangling")).unwrap();
        assert!(canonical(&base.join("dangling")).is_err());
    }
}
