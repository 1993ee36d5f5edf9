//! Where cordon keeps its state on this host, and how a user's `~` is
//! read: one ground helper, so the policy cache, the sandbox's verdicts and
//! the run checks agree on both without importing one another.

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
