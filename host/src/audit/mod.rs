//! The audit log: one JSON line per run, task, refusal and reload, for an
//! operator to answer "what ran, for whom, approved by whom, under which
//! policy, and what happened" — and to show that nobody changed the answer.
//!
//! Turned on with `audit_log = PATH` in `cordon.toml` (or
//! [`crate::HostBuilder::audit`]). The file is created 0600 and refused
//! when it is a symlink or readable by anyone else (it holds every
//! client's commands); it is hidden from every run, whatever its user.
//!
//! * **Whole records or none.** A record is one `write(2)` of its line and
//!   an `fdatasync`. A write that fails (a full disk) is undone — the file
//!   is cut back to its last whole record — and a warning goes to stderr
//!   every time; a fragment a crash left is cut when the log is next
//!   opened. With `audit_required = true` a run that cannot be recorded
//!   does not run: its start record is written first, and a failure is
//!   `AUDIT_UNAVAILABLE`.
//! * **A chain** ([`chain`]): every record carries its number and the hash
//!   of the line before; each file opens with a `genesis` record that
//!   continues the file before. `cordon audit verify` names the first
//!   record whose predecessor was changed, removed or inserted.
//! * **Rotation** by size or age: the file moves to `PATH.d/` (named by
//!   its last record's number, so the names sort in order), sealed first
//!   with a record signed by the operator's key when one is configured,
//!   and a new file continues the chain.
//! * Several processes may share one log (CLI runs, a server): each write
//!   holds an exclusive `flock`, and a writer that finds the file grown or
//!   rotated under it reads the chain's head again first.
//!
//! A record that cannot be written never fails the run it describes
//! unless the operator requires the log: the run already happened.

pub mod chain;
pub mod record;

use std::fs::File;
use std::io::Write;
use std::os::unix::fs::{MetadataExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::{Duration, SystemTime};

pub use chain::{Broken, Verified, verify};
pub use record::{Origin, Record, RecordedEnd, Stamp};

use crate::registry::PrivateKey;

/// How the operator keeps the audit log.
#[derive(Clone, Debug)]
pub struct AuditOptions {
    /// The live file.
    pub path: PathBuf,
    /// Runs refuse while a record cannot be written (`audit_required`).
    pub required: bool,
    /// Rotate once the file would pass this many bytes.
    pub max_bytes: Option<u64>,
    /// Rotate once the file is this old.
    pub max_age: Option<Duration>,
    /// Seal each rotated file with a record signed by this key.
    pub signing_key: Option<std::sync::Arc<PrivateKey>>,
}

impl AuditOptions {
    /// A log at `path`, not required, never rotated, unsigned.
    pub fn at(path: impl Into<PathBuf>) -> Self {
        AuditOptions {
            path: path.into(),
            required: false,
            max_bytes: None,
            max_age: None,
            signing_key: None,
        }
    }

    /// Whether the log rotates at all.
    pub fn rotates(&self) -> bool {
        self.max_bytes.is_some() || self.max_age.is_some()
    }

    /// Where rotated files go: `PATH.d/`.
    pub fn rotated_dir(&self) -> PathBuf {
        let mut name = self.path.as_os_str().to_owned();
        name.push(".d");
        PathBuf::from(name)
    }
}

/// An open audit log.
#[derive(Debug)]
pub struct AuditLog {
    options: AuditOptions,
    state: Mutex<State>,
}

/// The open file and where its chain stands.
#[derive(Debug)]
struct State {
    file: File,
    head: chain::Head,
    /// When the current file began (for rotation by age).
    began: SystemTime,
}

/// Why the audit log could not be opened.
#[derive(Debug, thiserror::Error)]
#[error("cannot open the audit log {}: {reason}", path.display())]
pub struct AuditError {
    /// The file.
    pub path: PathBuf,
    /// Why, and what to do.
    pub reason: String,
}

impl AuditLog {
    /// Open (creating it 0600) the log at `path` for appending.
    pub fn open(path: &Path) -> Result<Self, AuditError> {
        Self::open_with(AuditOptions::at(path))
    }

    /// Open the log `options` names: its file (cutting a fragment a crash
    /// left, said on stderr) and its rotation directory.
    pub fn open_with(options: AuditOptions) -> Result<Self, AuditError> {
        let fail = |reason: String| AuditError {
            path: options.path.clone(),
            reason,
        };
        let mut file = open_private(&options.path).map_err(&fail)?;
        if options.rotates() {
            // Made now, so that it is hidden from every run from the start.
            make_private_dir(&options.rotated_dir()).map_err(|err| fail(err.to_string()))?;
        }
        let head = read_head(&mut file, &options.path).map_err(|err| fail(err.to_string()))?;
        let began = file
            .metadata()
            .and_then(|meta| meta.created())
            .unwrap_or_else(|_| SystemTime::now());
        Ok(Self {
            state: Mutex::new(State { file, head, began }),
            options,
        })
    }

    /// Where the log is.
    pub fn path(&self) -> &Path {
        &self.options.path
    }

    /// Whether runs refuse while a record cannot be written.
    pub fn required(&self) -> bool {
        self.options.required
    }

    /// The paths a run must not see: the log and its rotated files.
    pub fn hidden_paths(&self) -> Vec<PathBuf> {
        let mut hidden = vec![self.options.path.clone()];
        if self.options.rotates() {
            hidden.push(self.options.rotated_dir());
        }
        hidden
    }

    /// Append `record` (numbered and chained here) as one whole line,
    /// durably; or leave the file as it was, say why on stderr, and
    /// return the error.
    pub fn write(&self, record: Record) -> std::io::Result<()> {
        let mut state = self.state.lock().unwrap_or_else(|p| p.into_inner());
        let written = self.write_locked(&mut state, record);
        if let Err(err) = &written {
            let path = self.options.path.display();
            eprintln!(
                "cordon: WARNING: the audit log {path} cannot be written ({err}); the record is \
                 lost, the file is kept whole{}",
                if self.options.required {
                    "; runs refuse until it can be written"
                } else {
                    ""
                }
            );
            tracing::error!(path = %path, %err, "cannot write the audit log");
        }
        written
    }

    fn write_locked(&self, state: &mut State, record: Record) -> std::io::Result<()> {
        let mut _locks = vec![self.lock_live(state)?];
        if self.rotation_due(state) {
            _locks.push(self.rotate(state)?);
        }
        if state.head.len == 0 || state.head.unchained {
            append(state, genesis())?;
            state.head.unchained = false;
        }
        append(state, record)
    }

    /// Lock the live file for one write. Another process may have written
    /// or rotated the log since this one last did: the chain's head is
    /// read again (from the new file, after a rotation or a removal).
    fn lock_live(&self, state: &mut State) -> std::io::Result<Flock> {
        let path = &self.options.path;
        loop {
            let lock = Flock::exclusive(&state.file)?;
            let ours = state.file.metadata()?;
            match std::fs::symlink_metadata(path) {
                Ok(live) if (live.dev(), live.ino()) == (ours.dev(), ours.ino()) => {
                    if ours.len() != state.head.len {
                        state.head = read_head(&mut state.file, path)?;
                    }
                    return Ok(lock);
                }
                Ok(_) => {}
                Err(err) if err.kind() == std::io::ErrorKind::NotFound => {}
                Err(err) => return Err(err),
            }
            drop(lock);
            state.file = open_private(path).map_err(std::io::Error::other)?;
            state.head = read_head(&mut state.file, path)?;
            state.began = SystemTime::now();
        }
    }

    fn rotation_due(&self, state: &State) -> bool {
        let big = (self.options.max_bytes).is_some_and(|max| state.head.len >= max);
        let old = (self.options.max_age)
            .is_some_and(|max| state.began.elapsed().unwrap_or_default() >= max);
        state.head.len > 0 && (big || old)
    }

    /// Seal the current file (with a key), move it into the rotation
    /// directory, and start a new one that continues the chain; returns
    /// the new file's lock (the caller holds the old one's still).
    fn rotate(&self, state: &mut State) -> std::io::Result<Flock> {
        if let Some(key) = &self.options.signing_key {
            append(state, seal(&state.head, key))?;
        }
        let dir = self.options.rotated_dir();
        make_private_dir(&dir)?;
        let last = state.head.seq.saturating_sub(1);
        let rotated = dir.join(format!("{last:012}.jsonl"));
        std::fs::rename(&self.options.path, &rotated)?;
        let file = open_private(&self.options.path).map_err(std::io::Error::other)?;
        let lock = Flock::exclusive(&file)?;
        let head = chain::Head {
            len: 0,
            ..state.head.clone()
        };
        *state = State {
            file,
            head,
            began: SystemTime::now(),
        };
        Ok(lock)
    }
}

/// The files of the log whose live file is `live`, oldest first: its
/// rotated files (in `live.d/`, named so that they sort in order), then
/// `live` itself.
pub fn log_files(live: &Path) -> Vec<PathBuf> {
    let rotated = AuditOptions::at(live).rotated_dir();
    let mut files: Vec<PathBuf> = std::fs::read_dir(&rotated)
        .into_iter()
        .flatten()
        .flatten()
        .map(|entry| entry.path())
        .filter(|path| path.extension().is_some_and(|ext| ext == "jsonl"))
        .collect();
    files.sort();
    files.push(live.to_path_buf());
    files
}

/// The first record of a file ([`append`] chains it on the head before).
fn genesis() -> Record {
    Record {
        time: record::now(),
        event: "genesis",
        ..Record::default()
    }
}

/// The last record of a rotated file: its `prev` (the head) signed.
fn seal(head: &chain::Head, key: &PrivateKey) -> Record {
    Record {
        time: record::now(),
        event: "seal",
        signature: Some(key.sign(&record::seal_payload(&head.prev))),
        key: Some(key.public().fingerprint().to_owned()),
        ..Record::default()
    }
}

impl Record {
    /// This record numbered and chained after `head`.
    fn continuing(mut self, head: &chain::Head) -> Self {
        self.seq = head.seq;
        self.prev = head.prev.clone();
        self
    }
}

/// Write `record`, numbered and chained, as one line: all of it, synced,
/// or nothing (the file cut back to its last whole record).
fn append(state: &mut State, record: Record) -> std::io::Result<()> {
    let record = record.continuing(&state.head);
    let mut line = serde_json::to_vec(&record).map_err(std::io::Error::other)?;
    let hash = chain::hash(&line);
    line.push(b'\n');
    match state
        .file
        .write_all(&line)
        .and_then(|()| state.file.sync_data())
    {
        Ok(()) => {
            state.head.len += line.len() as u64;
            state.head.seq += 1;
            state.head.prev = hash;
            Ok(())
        }
        Err(err) => {
            // Whatever part of the line reached the file goes again.
            let _ = state.file.set_len(state.head.len);
            let _ = state.file.sync_data();
            Err(err)
        }
    }
}

/// The chain's head of `file`, a fragment at its end cut off (and said).
fn read_head(file: &mut File, path: &Path) -> std::io::Result<chain::Head> {
    let len = file.metadata()?.len();
    let head = chain::head(file, len)?;
    if head.fragment > 0 {
        file.set_len(head.len)?;
        file.sync_data()?;
        eprintln!(
            "cordon: WARNING: the audit log {} ended in {} bytes of an unfinished record (a \
             crash or a full disk); they were cut",
            path.display(),
            head.fragment
        );
    }
    Ok(head)
}

/// Open `path` for appending, created 0600: a regular file of this user's,
/// readable by no one else, not a symlink.
fn open_private(path: &Path) -> Result<File, String> {
    let file = std::fs::OpenOptions::new()
        .read(true)
        .append(true)
        .create(true)
        .mode(0o600)
        .custom_flags(nix::libc::O_NOFOLLOW | nix::libc::O_CLOEXEC)
        .open(path)
        .map_err(|err| format!("{err} (a symlink is refused)"))?;
    let meta = file.metadata().map_err(|err| err.to_string())?;
    if !meta.is_file() {
        return Err("it is not a regular file".into());
    }
    if meta.mode() & 0o077 != 0 {
        return Err(format!(
            "its mode is {:04o}: it holds every client's commands, so it must be readable by its \
             owner only (chmod 600 it)",
            meta.mode() & 0o7777
        ));
    }
    let me = nix::unistd::geteuid().as_raw();
    if meta.uid() != me {
        return Err(format!(
            "it is owned by uid {}, not this user (uid {me})",
            meta.uid()
        ));
    }
    Ok(file)
}

/// Make `dir` (0700) unless it is there.
fn make_private_dir(dir: &Path) -> std::io::Result<()> {
    use std::os::unix::fs::DirBuilderExt;
    match std::fs::DirBuilder::new().mode(0o700).create(dir) {
        Err(err) if err.kind() == std::io::ErrorKind::AlreadyExists => Ok(()),
        other => other,
    }
}

/// An exclusive `flock` on an open file, released when dropped. It holds
/// a duplicate of the file's descriptor: the lock belongs to the open file,
/// so it stays valid (and is released right) even after the log replaced
/// that file with a rotated one's successor.
struct Flock(
    #[allow(dead_code, reason = "held for its drop, which unlocks")] nix::fcntl::Flock<File>,
);

impl Flock {
    fn exclusive(file: &File) -> std::io::Result<Self> {
        nix::fcntl::Flock::lock(file.try_clone()?, nix::fcntl::FlockArg::LockExclusive)
            .map(Flock)
            .map_err(|(_, errno)| errno.into())
    }
}

#[cfg(test)]
mod tests;
