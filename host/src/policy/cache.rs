//! The compiled-component cache: Cranelift's output for a component, kept
//! on disk so the next host that loads the same component skips compiling.
//!
//! Deserializing a compiled blob runs native code it describes, so a blob
//! cordon did not write must never be deserialized:
//!
//! * the cache directory must be a directory owned by this user with mode
//!   0700 (it is created so); anything else is refused;
//! * it is opened once as a `cap-std` directory handle, and every file is
//!   reached through it, created exclusively with mode 0600 and renamed
//!   into place;
//! * each entry carries an HMAC-SHA-256 of its name and blob under a
//!   random key kept in the directory (0600); an entry whose MAC does not
//!   verify is ignored (and recompiled over).
//!
//! An entry's name is a SHA-256 of the component's bytes and the engine's
//! compatibility hash (wasmtime version and compilation settings), so an
//! upgraded host never reads an old entry.

use std::hash::{Hash, Hasher};
use std::io::{self, Read, Write};
use std::os::unix::fs::{DirBuilderExt, MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};

use cap_std::ambient_authority;
use cap_std::fs::{Dir, OpenOptions, OpenOptionsExt};
use hmac::{Hmac, Mac};
use sha2::{Digest, Sha256};
use wasmtime::Engine;
use wasmtime::component::Component;

const KEY_FILE: &str = "key";
const MAC_LEN: usize = 32;

/// A private directory of compiled components.
#[derive(Debug)]
pub struct ComponentCache {
    dir: Dir,
    path: PathBuf,
    key: [u8; 32],
}

impl ComponentCache {
    /// The default location: `$XDG_CACHE_HOME/cordon/components`, else
    /// `$HOME/.cache/cordon/components`.
    pub fn default_path() -> Option<PathBuf> {
        Some(crate::places::cache_dir()?.join("components"))
    }

    /// Open (creating it 0700 if missing) the cache at `path`. Refused when
    /// it is not a directory owned by this user with no group or other access.
    pub fn open(path: &Path) -> io::Result<Self> {
        std::fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(path)?;
        let meta = std::fs::symlink_metadata(path)?;
        // SAFETY: geteuid has no preconditions.
        let uid = unsafe { nix::libc::geteuid() };
        if !meta.is_dir() || meta.uid() != uid || meta.permissions().mode() & 0o077 != 0 {
            return Err(io::Error::new(
                io::ErrorKind::PermissionDenied,
                format!(
                    "component cache {} must be a directory owned by uid {uid} with mode 0700",
                    path.display()
                ),
            ));
        }
        let dir = Dir::open_ambient_dir(path, ambient_authority())?;
        let key = Self::key(&dir)?;
        Ok(ComponentCache {
            dir,
            path: path.to_path_buf(),
            key,
        })
    }

    /// Where the cache is.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The cache's MAC key, created on first use. A fresh key is written
    /// to a private temporary file and hard-linked into place, so processes
    /// racing to create it all end up reading the one that won.
    fn key(dir: &Dir) -> io::Result<[u8; 32]> {
        let mut key = [0u8; 32];
        if !dir.exists(KEY_FILE) {
            std::fs::File::open("/dev/urandom")?.read_exact(&mut key)?;
            let tmp = format!(".key.{}.tmp", std::process::id());
            let mut options = OpenOptions::new();
            options.write(true).create_new(true).mode(0o600);
            dir.open_with(&tmp, &options)?.write_all(&key)?;
            let linked = dir.hard_link(&tmp, dir, KEY_FILE);
            let _ = dir.remove_file(&tmp);
            match linked {
                Ok(()) => return Ok(key),
                Err(err) if err.kind() == io::ErrorKind::AlreadyExists => {}
                Err(err) => return Err(err),
            }
        }
        let mut file = dir.open(KEY_FILE)?;
        let meta = file.metadata()?;
        if cap_std::fs::PermissionsExt::mode(&meta.permissions()) & 0o077 != 0
            || meta.len() != key.len() as u64
        {
            return Err(io::Error::new(
                io::ErrorKind::InvalidData,
                "the component cache key is not a private 32-byte file",
            ));
        }
        file.read_exact(&mut key)?;
        Ok(key)
    }

    /// The entry name for `bytes` compiled by `engine`.
    fn name(engine: &Engine, bytes: &[u8]) -> String {
        let mut hasher = ShaHasher(Sha256::new());
        engine.precompile_compatibility_hash().hash(&mut hasher);
        hasher.0.update(Sha256::digest(bytes));
        let digest = hasher.0.finalize();
        let hex: String = digest.iter().map(|b| format!("{b:02x}")).collect();
        format!("{hex}.cwasm")
    }

    fn mac(&self, name: &str, blob: &[u8]) -> [u8; MAC_LEN] {
        let mut mac = Hmac::<Sha256>::new_from_slice(&self.key).expect("any key length");
        mac.update(name.as_bytes());
        mac.update(blob);
        mac.finalize().into_bytes().into()
    }

    /// The cached compilation of `bytes`, if there is one cordon wrote.
    pub fn load(&self, engine: &Engine, bytes: &[u8]) -> Option<Component> {
        let blob = self.read_entry(&Self::name(engine, bytes))?;
        // SAFETY: the blob verified under this cache's private key, so it
        // is exactly what `store` serialized from a compilation by an
        // engine with the same compatibility hash (part of the name).
        unsafe { Component::deserialize(engine, &blob) }.ok()
    }

    /// Keep `component` (compiled from `bytes`) for next time. Best effort:
    /// a cache that cannot be written only costs a recompile.
    pub fn store(&self, engine: &Engine, bytes: &[u8], component: &Component) {
        let Ok(blob) = component.serialize() else {
            return;
        };
        self.write_entry(&Self::name(engine, bytes), &blob);
    }

    /// The component pulled from a registry as the manifest `digest`
    /// (`sha256:…`) and the settings its artifact carries, if cordon kept
    /// them — with `signed_by`, only ones whose signature verified under
    /// the key with that fingerprint. A component kept without its
    /// settings' entry (an older cordon's) is not kept: it is pulled again.
    pub fn load_pulled(
        &self,
        digest: &str,
        signed_by: Option<&str>,
    ) -> Option<(Vec<u8>, Option<String>)> {
        let name = Self::pulled_name(digest, signed_by);
        let settings = match self.read_entry(&format!("{name}.settings"))?.split_first() {
            Some((0, [])) => None,
            Some((1, json)) => Some(String::from_utf8(json.to_vec()).ok()?),
            _ => return None,
        };
        Some((self.read_entry(&name)?, settings))
    }

    /// Keep the component pulled as the manifest `digest` and the settings
    /// its artifact carries (both already checked against the manifest),
    /// and, when a signature verified, under that key's fingerprint too.
    /// Best effort.
    pub fn store_pulled(
        &self,
        digest: &str,
        signed_by: Option<&str>,
        bytes: &[u8],
        settings: Option<&str>,
    ) {
        let settings = match settings {
            None => vec![0],
            Some(json) => [&[1], json.as_bytes()].concat(),
        };
        for signed_by in std::iter::once(None).chain(signed_by.map(Some)) {
            let name = Self::pulled_name(digest, signed_by);
            self.write_entry(&name, bytes);
            self.write_entry(&format!("{name}.settings"), &settings);
        }
    }

    /// The entry name of a pulled component: only hex digits and fixed
    /// words, whatever the digest strings hold.
    fn pulled_name(digest: &str, signed_by: Option<&str>) -> String {
        let hex = |text: &str| -> String {
            let digest = crate::reference::digest_of(text.as_bytes());
            digest.trim_start_matches("sha256:").to_owned()
        };
        match signed_by {
            None => format!("pulled-{}.wasm", hex(digest)),
            Some(key) => format!("pulled-{}.signed-{}.wasm", hex(digest), hex(key)),
        }
    }

    /// An entry's blob, if its MAC verifies under this cache's key.
    fn read_entry(&self, name: &str) -> Option<Vec<u8>> {
        let mut entry = vec![];
        self.dir.open(name).ok()?.read_to_end(&mut entry).ok()?;
        if entry.len() < MAC_LEN {
            return None;
        }
        let (tag, blob) = entry.split_at(MAC_LEN);
        let mut mac = Hmac::<Sha256>::new_from_slice(&self.key).expect("any key length");
        mac.update(name.as_bytes());
        mac.update(blob);
        mac.verify_slice(tag).ok()?;
        Some(blob.to_vec())
    }

    /// Write an entry: a private temporary file renamed into place.
    fn write_entry(&self, name: &str, blob: &[u8]) {
        let tmp = format!(".{name}.{}.tmp", std::process::id());
        let mut options = OpenOptions::new();
        options.write(true).create_new(true).mode(0o600);
        let written = self.dir.open_with(&tmp, &options).and_then(|mut file| {
            file.write_all(&self.mac(name, blob))?;
            file.write_all(blob)
        });
        match written {
            Ok(()) => {
                let _ = self.dir.rename(&tmp, &self.dir, name);
            }
            Err(_) => {
                let _ = self.dir.remove_file(&tmp);
            }
        }
    }
}

/// Feeds `Hash` output into SHA-256.
struct ShaHasher(Sha256);

impl Hasher for ShaHasher {
    fn finish(&self) -> u64 {
        0
    }

    fn write(&mut self, bytes: &[u8]) {
        self.0.update(bytes);
    }
}
