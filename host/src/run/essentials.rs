//! What every confined command needs to read, whatever its grant hides:
//! cordon's own binary (the namespace runner and cordon's init under bwrap
//! exec it inside the sandbox), the dynamic loader it and the shell are
//! linked against, and the shell itself. A grant whose `denyRead` covers
//! one of them cannot be laid out as a working sandbox on any rung, so it
//! is refused as the invalid request it is, naming the field and the path,
//! instead of failing inside the runner as if no sandbox were usable.

use std::path::{Path, PathBuf};
use std::sync::OnceLock;

/// One path a confined command needs, and what it is.
#[derive(Clone, Debug)]
pub(super) struct Essential {
    pub(super) path: PathBuf,
    pub(super) what: &'static str,
}

/// This host's essentials, found once (canonical paths of those present).
pub(super) fn essentials() -> &'static [Essential] {
    static FOUND: OnceLock<Vec<Essential>> = OnceLock::new();
    FOUND.get_or_init(find)
}

fn find() -> Vec<Essential> {
    let mut found = vec![];
    // Each as named and as resolved: hiding `/lib64` breaks a loader
    // named `/lib64/ld-linux-x86-64.so.2` that resolves into `/usr/lib`.
    let mut add = |named: Option<PathBuf>, what| {
        let Some(named) = named else { return };
        let resolved = named.canonicalize().ok();
        for path in [Some(named), resolved].into_iter().flatten() {
            if path.is_absolute() && !found.iter().any(|e: &Essential| e.path == path) {
                found.push(Essential { path, what });
            }
        }
    };
    let cordon = std::env::current_exe().ok();
    let shell = ["/usr/bin/bash", "/bin/bash"]
        .into_iter()
        .map(PathBuf::from)
        .find(|p| p.exists());
    add(
        cordon.clone(),
        "cordon's own binary, which its runners exec inside",
    );
    add(
        crate::sandbox::landlock::installed_launcher(),
        "cordon's launcher, which its runners exec inside",
    );
    add(
        cordon.as_deref().and_then(interpreter),
        "the dynamic loader",
    );
    add(shell.as_deref().and_then(interpreter), "the dynamic loader");
    add(shell, "the shell commands run in");
    found
}

/// The ELF interpreter (`PT_INTERP`) a 64-bit little-endian executable
/// names; none for anything else (a static binary has none).
pub(super) fn interpreter(binary: &Path) -> Option<PathBuf> {
    use std::io::{Read, Seek, SeekFrom};
    let mut file = std::fs::File::open(binary).ok()?;
    let mut header = [0u8; 64];
    file.read_exact(&mut header).ok()?;
    // ELF magic, ELFCLASS64, ELFDATA2LSB.
    if header[..4] != *b"\x7fELF" || header[4] != 2 || header[5] != 1 {
        return None;
    }
    let u16_at = |b: &[u8], at: usize| u16::from_le_bytes([b[at], b[at + 1]]);
    let u64_at = |b: &[u8], at: usize| u64::from_le_bytes(b[at..at + 8].try_into().unwrap());
    let (phoff, phentsize, phnum) = (
        u64_at(&header, 0x20),
        u16_at(&header, 0x36),
        u16_at(&header, 0x38),
    );
    if phentsize < 56 || phnum > 256 {
        return None;
    }
    let mut table = vec![0u8; usize::from(phentsize) * usize::from(phnum)];
    file.seek(SeekFrom::Start(phoff)).ok()?;
    file.read_exact(&mut table).ok()?;
    let entry = table
        .chunks(usize::from(phentsize))
        .find(|entry| u32::from_le_bytes(entry[..4].try_into().unwrap()) == 3)?; // PT_INTERP
    let (offset, size) = (u64_at(entry, 8), u64_at(entry, 32));
    if size == 0 || size > 4096 {
        return None;
    }
    let mut name = vec![0u8; usize::try_from(size).ok()?];
    file.seek(SeekFrom::Start(offset)).ok()?;
    file.read_exact(&mut name).ok()?;
    let name = name.split(|&b| b == 0).next()?;
    use std::os::unix::ffi::OsStrExt;
    Some(PathBuf::from(std::ffi::OsStr::from_bytes(name)))
}

/// The essential that hiding `hidden` would hide, if any.
pub(super) fn hidden_by(hidden: &Path) -> Option<&'static Essential> {
    let resolved = hidden.canonicalize().ok();
    essentials().iter().find(|e| {
        e.path.starts_with(hidden) || resolved.as_ref().is_some_and(|r| e.path.starts_with(r))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_shell_names_its_loader_and_hiding_a_parent_of_it_is_found() {
        let shell = essentials()
            .iter()
            .find(|e| e.what == "the shell commands run in")
            .expect("bash is installed");
        let loader = interpreter(&shell.path).expect("bash is dynamically linked");
        assert!(loader.is_absolute(), "{}", loader.display());
        let parent = shell.path.parent().unwrap();
        assert!(hidden_by(parent).is_some());
        assert!(hidden_by(Path::new("/nonexistent-cordon-test")).is_none());
        assert_eq!(interpreter(Path::new("/etc/hostname")), None);
    }
}
