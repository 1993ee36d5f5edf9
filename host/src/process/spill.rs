//! Spill files: the complete bytes of a stream that outgrew its in-memory tail.
//!
//! All spills of a host live in one private directory (mode 0700, created
//! exclusively under the system temp dir) opened once as a `cap-std`
//! directory handle. Files are created through that handle, exclusively and
//! with mode 0600, so nothing planted in the temp dir — a symlink, a file
//! with a guessed name — can redirect or pre-empt a spill.
//!
//! **Cleanup rule:** a spill file lives exactly as long as something can
//! still hand it to a caller — the [`SpillFile`] handle, shared by the
//! result or task that owns the stream. When the last handle is dropped (the
//! caller dropped the result, or the task was removed from the host), the
//! file is deleted. A caller that wants to keep one calls
//! [`SpillFile::keep`]. The directory itself is removed with the last spill
//! handle once it is empty.

use std::io::{self, Write};
use std::os::unix::fs::DirBuilderExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use cap_std::ambient_authority;
use cap_std::fs::{Dir, OpenOptions, OpenOptionsExt};

use super::Stream;

/// Bytes a spill may hold; a larger stream drops its spill (SPEC.md §3).
pub const DEFAULT_SPILL_LIMIT: u64 = 64 << 20;

/// The private directory that holds a host's spill files. It is created
/// lazily, on the first spill, so a host whose runs never spill touches no disk.
#[derive(Debug)]
pub struct SpillDir {
    parent: PathBuf,
    opened: Mutex<Option<Opened>>,
    counter: AtomicU64,
}

#[derive(Debug)]
struct Opened {
    dir: Dir,
    path: PathBuf,
}

impl SpillDir {
    /// Spills under the system temp dir.
    pub fn in_temp_dir() -> Arc<Self> {
        Self::under(&std::env::temp_dir())
    }

    /// Spills in a private directory to be created under `parent`.
    pub fn under(parent: &Path) -> Arc<Self> {
        Arc::new(SpillDir {
            parent: parent.to_path_buf(),
            opened: Mutex::new(None),
            counter: AtomicU64::new(0),
        })
    }

    /// The private directory's path, once it exists.
    pub fn path(&self) -> Option<PathBuf> {
        self.lock().as_ref().map(|opened| opened.path.clone())
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Option<Opened>> {
        self.opened
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// Create the private directory (0700) exclusively, with a fresh name.
    fn open(parent: &Path) -> io::Result<Opened> {
        for _ in 0..16 {
            let path = parent.join(format!(
                "cordon-spill-{}-{:016x}",
                std::process::id(),
                crate::random::u64()
            ));
            match std::fs::DirBuilder::new().mode(0o700).create(&path) {
                Ok(()) => {
                    let dir = Dir::open_ambient_dir(&path, ambient_authority())?;
                    return Ok(Opened { dir, path });
                }
                Err(err) if err.kind() == io::ErrorKind::AlreadyExists => continue,
                Err(err) => return Err(err),
            }
        }
        Err(io::Error::new(
            io::ErrorKind::AlreadyExists,
            "could not create a unique spill directory",
        ))
    }

    /// A new, empty spill file for `stream` (exclusive, 0600).
    pub fn create_file(
        self: &Arc<Self>,
        stream: Stream,
    ) -> io::Result<(Arc<SpillFile>, std::fs::File)> {
        let name = format!(
            "{}-{}-{:016x}.{}",
            std::process::id(),
            self.counter.fetch_add(1, Ordering::Relaxed),
            crate::random::u64(),
            match stream {
                Stream::Stdout => "stdout",
                Stream::Stderr => "stderr",
            }
        );
        let mut opened = self.lock();
        if opened.is_none() {
            *opened = Some(Self::open(&self.parent)?);
        }
        let opened = opened.as_ref().expect("opened above");
        let mut options = OpenOptions::new();
        options.write(true).create_new(true).mode(0o600);
        let file = opened.dir.open_with(&name, &options)?.into_std();
        let spill = SpillFile {
            dir: self.clone(),
            path: opened.path.join(&name),
            name,
            kept: AtomicBool::new(false),
        };
        Ok((Arc::new(spill), file))
    }

    fn remove_file(&self, name: &str) {
        if let Some(opened) = self.lock().as_ref() {
            let _ = opened.dir.remove_file(name);
        }
    }
}

impl Drop for SpillDir {
    fn drop(&mut self) {
        // Only when empty: a file a caller chose to keep stays readable.
        if let Some(opened) = self.lock().as_ref() {
            let _ = std::fs::remove_dir(&opened.path);
        }
    }
}

/// One spill file; deleted when the last handle is dropped unless kept.
#[derive(Debug)]
pub struct SpillFile {
    dir: Arc<SpillDir>,
    name: String,
    path: PathBuf,
    kept: AtomicBool,
}

impl SpillFile {
    /// Where the file is.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Keep the file after the last handle is gone; the caller deletes it.
    pub fn keep(&self) -> &Path {
        self.kept.store(true, Ordering::Relaxed);
        &self.path
    }
}

impl crate::model::SpillHandle for SpillFile {
    fn path(&self) -> &Path {
        SpillFile::path(self)
    }

    fn keep(&self) -> &Path {
        SpillFile::keep(self)
    }
}

impl Drop for SpillFile {
    fn drop(&mut self) {
        if !self.kept.load(Ordering::Relaxed) {
            self.dir.remove_file(&self.name);
        }
    }
}

/// The writing side of a spill, bounded by a byte limit.
#[derive(Debug)]
pub struct SpillWriter {
    file: std::fs::File,
    handle: Arc<SpillFile>,
    written: u64,
    limit: u64,
}

impl SpillWriter {
    /// Start a spill for `stream` in `dir`, holding at most `limit` bytes.
    pub fn create(dir: &Arc<SpillDir>, stream: Stream, limit: u64) -> io::Result<Self> {
        let (handle, file) = dir.create_file(stream)?;
        Ok(SpillWriter {
            file,
            handle,
            written: 0,
            limit,
        })
    }

    /// Append `bytes`. `Ok(false)` when the limit would be passed: the
    /// caller drops the spill (which deletes the file).
    pub fn append(&mut self, bytes: &[u8]) -> io::Result<bool> {
        if self.written + bytes.len() as u64 > self.limit {
            return Ok(false);
        }
        self.file.write_all(bytes)?;
        self.written += bytes.len() as u64;
        Ok(true)
    }

    /// The shared handle that keeps the file alive.
    pub fn handle(&self) -> &Arc<SpillFile> {
        &self.handle
    }
}

/// A random 64-bit value for unguessable names (not for cryptography: the
/// exclusive create is what makes a name safe to use).
/// The directory a host's sessions make their spill directories in, when
/// the embedder names none: `cordon-spill-<uid>` in `/run` (root) or
/// `$XDG_RUNTIME_DIR`, else in cordon's cache directory (a user without a
/// login session: a CI job, a Kubernetes pod), else in the temp dir —
/// outside `/tmp` where it can be, since a workspace-write run may write
/// there under Landlock. Made 0700 if absent; one that is not a directory
/// of ours, private, is refused (someone else made it first).
pub fn default_root() -> io::Result<PathBuf> {
    let uid = nix::unistd::geteuid().as_raw();
    let cache = || {
        let dir = crate::places::cache_dir()?;
        std::fs::create_dir_all(&dir).ok()?;
        Some(dir)
    };
    let base = match std::env::var_os("XDG_RUNTIME_DIR").map(PathBuf::from) {
        _ if uid == 0 && Path::new("/run").is_dir() => PathBuf::from("/run"),
        Some(dir) if dir.is_absolute() && dir.is_dir() => dir,
        _ => cache().unwrap_or_else(std::env::temp_dir),
    };
    let root = base.join(format!("cordon-spill-{uid}"));
    match std::fs::DirBuilder::new().mode(0o700).create(&root) {
        Ok(()) => {}
        Err(err) if err.kind() == io::ErrorKind::AlreadyExists => {}
        Err(err) => {
            return Err(io::Error::new(
                err.kind(),
                format!("cannot make the spill directory {}: {err}", root.display()),
            ));
        }
    }
    let meta = std::fs::symlink_metadata(&root)?;
    use std::os::unix::fs::MetadataExt;
    if !meta.is_dir() || meta.uid() != uid || meta.mode() & 0o077 != 0 {
        return Err(io::Error::new(
            io::ErrorKind::PermissionDenied,
            format!(
                "{} is not a private directory of uid {uid} (someone else made it?); remove it \
                 or name a spill directory",
                root.display()
            ),
        ));
    }
    Ok(root)
}

#[cfg(test)]
mod tests {
    use std::os::unix::fs::PermissionsExt;

    use super::*;

    fn parent() -> tempfile::TempDir {
        tempfile::tempdir().unwrap()
    }

    #[test]
    fn directory_is_private_and_files_are_0600() {
        let parent = parent();
        let dir = SpillDir::under(parent.path());
        assert!(dir.path().is_none(), "created lazily");
        let mut writer = SpillWriter::create(&dir, Stream::Stdout, 100).unwrap();
        assert!(writer.append(b"hello").unwrap());
        let path = writer.handle().path().to_path_buf();
        let mode = std::fs::metadata(&path).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o600);
        assert_eq!(std::fs::read(&path).unwrap(), b"hello");
        assert!(path.to_str().unwrap().ends_with(".stdout"));
        let mode = std::fs::metadata(dir.path().unwrap())
            .unwrap()
            .permissions()
            .mode();
        assert_eq!(mode & 0o777, 0o700);
    }

    #[test]
    fn the_last_handle_deletes_the_file_and_then_the_directory() {
        let parent = parent();
        let dir = SpillDir::under(parent.path());
        let writer = SpillWriter::create(&dir, Stream::Stderr, 100).unwrap();
        let dir_path = dir.path().unwrap();
        let handle = writer.handle().clone();
        let path = handle.path().to_path_buf();
        drop(writer);
        assert!(path.exists(), "a handle still references it");
        drop(handle);
        assert!(!path.exists());
        drop(dir);
        assert!(!dir_path.exists());
    }

    #[test]
    fn a_kept_file_survives() {
        let parent = parent();
        let dir = SpillDir::under(parent.path());
        let writer = SpillWriter::create(&dir, Stream::Stdout, 100).unwrap();
        let path = writer.handle().keep().to_path_buf();
        drop(writer);
        drop(dir);
        assert!(path.exists());
    }

    #[test]
    fn append_refuses_past_the_limit() {
        let parent = parent();
        let dir = SpillDir::under(parent.path());
        let mut writer = SpillWriter::create(&dir, Stream::Stdout, 10).unwrap();
        assert!(writer.append(b"0123456789").unwrap());
        assert!(!writer.append(b"x").unwrap());
    }

    #[test]
    fn a_planted_symlink_cannot_redirect_a_spill() {
        let parent = parent();
        let dir = SpillDir::under(parent.path());
        SpillWriter::create(&dir, Stream::Stderr, 1).unwrap();
        let dir_path = dir.path().unwrap();
        let victim = parent.path().join("victim");
        std::fs::write(&victim, b"keep").unwrap();
        // Even a symlink inside the private dir (it is ours) is never
        // followed: names are fresh and creation is exclusive.
        std::os::unix::fs::symlink(&victim, dir_path.join("planted")).unwrap();
        let mut writer = SpillWriter::create(&dir, Stream::Stdout, 100).unwrap();
        writer.append(b"spill").unwrap();
        assert_eq!(std::fs::read(&victim).unwrap(), b"keep");
        std::fs::remove_file(dir_path.join("planted")).unwrap();
    }
}
