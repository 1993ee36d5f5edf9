//! Remembered verdicts: a rung the ladder found unusable, kept on disk so
//! that a host without a usable runner does not retry it (an extra process
//! per command) on every `cordon run`; and what the Landlock launcher's
//! probe said, so that a `cordon run` on the Landlock rung does not start
//! the launcher twice more to probe (a third of its cost).
//!
//! A *negative* verdict is kept for any rung. A positive one is needed only
//! where a rung's probe says what its runs need (Landlock's enforcement,
//! scopes, IPC and write supervision): the namespace runner and bwrap run
//! no probe up front, their first real run being the probe (see
//! `ladder.rs`). A verdict is keyed by the boot, the user and the rung's
//! identity — each of its programs' path, device, inode, size,
//! modification and change times — so a reboot, another user or a new
//! runner binary never reads an old verdict; a usable one also by what the
//! launcher inherits from this process (ids, capabilities, no-new-privs,
//! seccomp filters, user namespace), so a host with other privileges
//! probes afresh. `cordon probe` probes afresh and rewrites (or forgets)
//! what is kept.
//!
//! A kept negative verdict can only move runs *down* the ladder or fail
//! them closed. A kept usable one is taken on trial like bwrap: a run its
//! launcher did not start (it checks every step before the exec and says
//! so out of band) probes the rung again. Since a forged verdict could push
//! runs from bwrap to Landlock, or claim unsupervised writes, the directory
//! must be owned by this user with mode 0700 (it is created so; every run
//! has it hidden), and anything else is ignored.

use std::io::Write;
use std::os::unix::fs::{DirBuilderExt, MetadataExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};

use sha2::{Digest, Sha256};

use crate::model::Backend;

/// Where the kernel names this boot.
const BOOT_ID: &str = "/proc/sys/kernel/random/boot_id";

/// The longest reason kept (a runner's message can be long).
const MAX_REASON: usize = 1024;

/// A private directory of verdicts.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Verdicts {
    dir: PathBuf,
}

/// What makes one rung's verdict: its backend and the programs it runs.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RungIdentity {
    backend: Backend,
    programs: Vec<PathBuf>,
}

impl RungIdentity {
    /// The rung of `backend` that runs `programs` (the runner, then the
    /// launcher or init it starts).
    pub fn new(backend: Backend, programs: Vec<PathBuf>) -> Self {
        RungIdentity { backend, programs }
    }

    /// The file name of this rung's verdict in boot `boot` for user `uid`
    /// (a usable one: with the privileges in `usable_in`); none when a
    /// program cannot be examined (then nothing is kept).
    fn key(&self, boot: &str, uid: u32, usable_in: Option<&str>) -> Option<String> {
        let mut hash = Sha256::new();
        hash.update(boot.trim().as_bytes());
        hash.update(uid.to_le_bytes());
        hash.update(format!("{:?}", self.backend).as_bytes());
        if let Some(privileges) = usable_in {
            hash.update(b"\0usable\0");
            hash.update(privileges.as_bytes());
        }
        for program in &self.programs {
            let real = std::fs::canonicalize(program).ok()?;
            let meta = std::fs::metadata(&real).ok()?;
            hash.update([0]);
            hash.update(real.as_os_str().as_encoded_bytes());
            for field in [
                meta.dev(),
                meta.ino(),
                meta.size(),
                meta.mtime() as u64,
                meta.mtime_nsec() as u64,
                meta.ctime() as u64,
                meta.ctime_nsec() as u64,
            ] {
                hash.update(field.to_le_bytes());
            }
        }
        let digest = hash.finalize();
        Some(digest.iter().map(|b| format!("{b:02x}")).collect())
    }
}

impl Verdicts {
    /// The default location: `$XDG_CACHE_HOME/cordon/verdicts`, else
    /// `$HOME/.cache/cordon/verdicts`.
    pub fn default_path() -> Option<PathBuf> {
        Some(crate::places::cache_dir()?.join("verdicts"))
    }

    /// Verdicts kept in `dir` (created 0700 when first written).
    pub fn at(dir: impl Into<PathBuf>) -> Self {
        Verdicts { dir: dir.into() }
    }

    /// Where they are kept.
    pub fn path(&self) -> &Path {
        &self.dir
    }

    /// Make the directory now (0700) if it is missing, and check that it
    /// is private: the host hides it from every run, which needs it to
    /// exist before the first run could make it.
    pub fn prepare(&self) -> std::io::Result<()> {
        self.private_dir()
    }

    /// The reason kept for `rung` in this boot, if any.
    pub fn recall(&self, rung: &RungIdentity) -> Option<String> {
        self.recall_in(rung, &boot_id()?)
    }

    /// Keep `reason` for `rung` in this boot. Best effort: a verdict that
    /// cannot be written only means the next host probes again.
    pub fn remember(&self, rung: &RungIdentity, reason: &str) {
        if let Some(boot) = boot_id() {
            self.remember_in(rung, &boot, reason);
        }
    }

    /// Forget what was kept for `rung` (a probe found it usable).
    pub fn forget(&self, rung: &RungIdentity) {
        if let Some(name) = boot_id().and_then(|boot| rung.key(&boot, euid(), None)) {
            let _ = std::fs::remove_file(self.dir.join(name));
        }
    }

    /// What `rung`'s probe said when it found the rung usable this boot,
    /// with this process's privileges, if it was kept.
    pub fn recall_usable(&self, rung: &RungIdentity) -> Option<String> {
        self.read(usable_key(rung)?)
    }

    /// Keep what `rung`'s probe said when it found the rung usable (best
    /// effort, as [`Verdicts::remember`]).
    pub fn remember_usable(&self, rung: &RungIdentity, said: &str) {
        if let Some(name) = usable_key(rung) {
            self.write(&name, said);
        }
    }

    /// Forget what a usable probe of `rung` said (the rung failed since).
    pub fn forget_usable(&self, rung: &RungIdentity) {
        if let Some(name) = usable_key(rung) {
            let _ = std::fs::remove_file(self.dir.join(name));
        }
    }

    fn recall_in(&self, rung: &RungIdentity, boot: &str) -> Option<String> {
        let reason = self.read(rung.key(boot, euid(), None)?)?;
        Some(reason.trim().to_owned()).filter(|r| !r.is_empty())
    }

    fn remember_in(&self, rung: &RungIdentity, boot: &str, reason: &str) {
        if let Some(name) = rung.key(boot, euid(), None) {
            self.write(&name, &reason.replace('\n', " "));
        }
    }

    /// The verdict named `name`: a regular file of this user's, not
    /// longer than a verdict is written.
    fn read(&self, name: String) -> Option<String> {
        self.private_dir().ok()?;
        let path = self.dir.join(name);
        let meta = std::fs::symlink_metadata(&path).ok()?;
        if !meta.is_file() || meta.uid() != euid() || meta.len() > MAX_REASON as u64 * 2 {
            return None;
        }
        std::fs::read_to_string(&path).ok()
    }

    /// Keep `text` (cut to [`MAX_REASON`] bytes) as the verdict `name`.
    fn write(&self, name: &str, text: &str) {
        if self.private_dir().is_err() {
            return;
        }
        let mut text = text.to_owned();
        if text.len() > MAX_REASON {
            let mut cut = MAX_REASON;
            while !text.is_char_boundary(cut) {
                cut -= 1;
            }
            text.truncate(cut);
        }
        self.prune();
        // Written privately and renamed into place: a reader sees a whole
        // verdict or none.
        let tmp = self.dir.join(format!(".{name}.{}.tmp", std::process::id()));
        let written = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .open(&tmp)
            .and_then(|mut file| file.write_all(text.as_bytes()));
        match written {
            Ok(()) => {
                if std::fs::rename(&tmp, self.dir.join(name)).is_err() {
                    let _ = std::fs::remove_file(&tmp);
                }
            }
            Err(_) => {
                let _ = std::fs::remove_file(&tmp);
            }
        }
    }

    /// Remove verdicts written before this boot: no key can match them.
    fn prune(&self) {
        let Some(booted) = boot_time() else {
            return;
        };
        let Ok(entries) = std::fs::read_dir(&self.dir) else {
            return;
        };
        for entry in entries.flatten() {
            if entry
                .metadata()
                .is_ok_and(|m| m.is_file() && m.mtime() < booted)
            {
                let _ = std::fs::remove_file(entry.path());
            }
        }
    }

    /// The directory, created 0700 if missing; refused unless it is a
    /// directory owned by this user with no group or other access.
    fn private_dir(&self) -> std::io::Result<()> {
        std::fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(&self.dir)?;
        let meta = std::fs::symlink_metadata(&self.dir)?;
        match meta.is_dir() && meta.uid() == euid() && meta.permissions().mode() & 0o077 == 0 {
            true => Ok(()),
            false => Err(std::io::Error::new(
                std::io::ErrorKind::PermissionDenied,
                format!(
                    "verdict directory {} must be owned by uid {} with mode 0700",
                    self.dir.display(),
                    euid()
                ),
            )),
        }
    }
}

/// This boot's id; none where the kernel does not say (then nothing is
/// kept or recalled).
fn boot_id() -> Option<String> {
    std::fs::read_to_string(BOOT_ID)
        .ok()
        .map(|id| id.trim().to_owned())
        .filter(|id| !id.is_empty())
}

/// When this boot began, in seconds since the epoch (`btime`).
fn boot_time() -> Option<i64> {
    std::fs::read_to_string("/proc/stat")
        .ok()?
        .lines()
        .find_map(|line| line.strip_prefix("btime "))?
        .trim()
        .parse()
        .ok()
}

/// The file name of `rung`'s usable verdict in this boot, for this user
/// with this process's privileges.
fn usable_key(rung: &RungIdentity) -> Option<String> {
    rung.key(&boot_id()?, euid(), Some(&privileges()?))
}

/// What a launcher this process starts inherits that its probe depends
/// on: the ids, the capability sets, no-new-privs, the seccomp mode and
/// filters (`/proc/self/status`), and the user namespace. None where the
/// kernel does not say (then no usable verdict is kept or recalled).
fn privileges() -> Option<String> {
    const FIELDS: &[&str] = &[
        "Uid:",
        "Gid:",
        "Groups:",
        "CapInh:",
        "CapPrm:",
        "CapEff:",
        "CapBnd:",
        "CapAmb:",
        "NoNewPrivs:",
        "Seccomp:",
        "Seccomp_filters:",
    ];
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let mut said: Vec<&str> = status
        .lines()
        .filter(|line| FIELDS.iter().any(|field| line.starts_with(field)))
        .collect();
    let namespace = std::fs::read_link("/proc/self/ns/user").ok()?;
    let namespace = namespace.to_string_lossy();
    said.push(&namespace);
    Some(said.join("\n"))
}

fn euid() -> u32 {
    nix::unistd::geteuid().as_raw()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn program(dir: &Path, body: &str) -> PathBuf {
        let path = dir.join("runner");
        std::fs::write(&path, body).unwrap();
        path
    }

    #[test]
    fn a_verdict_is_kept_for_its_boot_and_its_programs_only() {
        let dir = tempfile::tempdir().unwrap();
        let verdicts = Verdicts::at(dir.path().join("verdicts"));
        let bin = program(dir.path(), "#!/bin/sh\nexit 1\n");
        let rung = RungIdentity::new(Backend::Bwrap, vec![bin.clone()]);
        assert_eq!(verdicts.recall_in(&rung, "boot-a"), None);
        verdicts.remember_in(&rung, "boot-a", "bwrap: no user namespaces\nhere");
        assert_eq!(
            verdicts.recall_in(&rung, "boot-a").as_deref(),
            Some("bwrap: no user namespaces here")
        );
        assert_eq!(verdicts.recall_in(&rung, "boot-b"), None, "a reboot");
        let other = RungIdentity::new(Backend::Landlock, vec![bin.clone()]);
        assert_eq!(verdicts.recall_in(&other, "boot-a"), None, "another rung");
        // A new runner binary (other size, other times) is probed again.
        std::thread::sleep(std::time::Duration::from_millis(10));
        program(dir.path(), "#!/bin/sh\nexit 0\n\n");
        assert_eq!(verdicts.recall_in(&rung, "boot-a"), None, "a new binary");
        let mode = std::fs::metadata(verdicts.path()).unwrap().permissions();
        assert_eq!(mode.mode() & 0o777, 0o700);
    }

    #[test]
    fn a_usable_verdict_is_kept_whole_apart_from_the_unusable_one_and_keyed_by_privileges() {
        let dir = tempfile::tempdir().unwrap();
        let verdicts = Verdicts::at(dir.path().join("verdicts"));
        let rung = RungIdentity::new(Backend::Landlock, vec![program(dir.path(), "x")]);
        assert_eq!(verdicts.recall_usable(&rung), None);
        let said = "landlock: fully enforced\nscopes: signal\n";
        verdicts.remember_usable(&rung, said);
        assert_eq!(verdicts.recall_usable(&rung).as_deref(), Some(said));
        assert_eq!(verdicts.recall(&rung), None, "no unusable verdict");
        verdicts.remember(&rung, "it failed");
        assert_eq!(verdicts.recall_usable(&rung).as_deref(), Some(said));
        verdicts.forget_usable(&rung);
        assert_eq!(verdicts.recall_usable(&rung), None);
        assert_eq!(verdicts.recall(&rung).as_deref(), Some("it failed"));
        // Other privileges, another key; the unusable key is neither.
        let keys = [None, Some("CapEff: 0"), Some("CapEff: 1ff")]
            .map(|privileges| rung.key("boot", 0, privileges).unwrap());
        assert!(keys[0] != keys[1] && keys[1] != keys[2] && keys[0] != keys[2]);
        assert!(privileges().is_some_and(|p| p.contains("CapEff:") && p.contains("user:[")));
    }

    #[test]
    fn a_directory_others_may_write_is_ignored() {
        let dir = tempfile::tempdir().unwrap();
        let open = dir.path().join("verdicts");
        std::fs::create_dir(&open).unwrap();
        std::fs::set_permissions(&open, std::fs::Permissions::from_mode(0o777)).unwrap();
        let verdicts = Verdicts::at(&open);
        let rung = RungIdentity::new(Backend::Bwrap, vec![program(dir.path(), "x")]);
        verdicts.remember_in(&rung, "boot", "forged");
        assert_eq!(std::fs::read_dir(&open).unwrap().count(), 0);
        // Even a verdict placed there by someone else is not read.
        let name = rung.key("boot", euid(), None).unwrap();
        std::fs::write(open.join(name), "forged").unwrap();
        assert_eq!(verdicts.recall_in(&rung, "boot"), None);
    }

    #[test]
    fn a_rung_whose_program_is_missing_keeps_nothing() {
        let dir = tempfile::tempdir().unwrap();
        let verdicts = Verdicts::at(dir.path().join("v"));
        let rung = RungIdentity::new(Backend::Bwrap, vec![dir.path().join("absent")]);
        verdicts.remember_in(&rung, "boot", "missing");
        assert_eq!(verdicts.recall_in(&rung, "boot"), None);
    }

    #[test]
    fn this_kernel_names_its_boot() {
        assert!(boot_id().is_some_and(|id| id.len() >= 32));
        assert!(boot_time().is_some_and(|t| t > 0));
    }

    #[test]
    fn verdicts_from_before_this_boot_are_removed() {
        let dir = tempfile::tempdir().unwrap();
        let verdicts = Verdicts::at(dir.path().join("v"));
        verdicts.private_dir().unwrap();
        let stale = verdicts.path().join("stale");
        std::fs::write(&stale, "old").unwrap();
        let long_ago = std::time::SystemTime::UNIX_EPOCH + std::time::Duration::from_secs(1);
        std::fs::File::options()
            .write(true)
            .open(&stale)
            .unwrap()
            .set_modified(long_ago)
            .unwrap();
        let rung = RungIdentity::new(Backend::Bwrap, vec![program(dir.path(), "x")]);
        verdicts.remember_in(&rung, "boot", "fresh");
        assert!(!stale.exists());
        assert_eq!(verdicts.recall_in(&rung, "boot").as_deref(), Some("fresh"));
    }
}
