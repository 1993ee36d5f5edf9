//! The launcher's build identity: a hash of this crate's sources, so that a
//! host finds out without starting it whether a `cordon-launcher` installed
//! beside it is built from the very same code (its modes' arguments and
//! messages are a private protocol between the two).
//!
//! Only the sources count (no time, no path): a rebuild of the same code
//! elsewhere has the same identity.

use std::hash::{Hash, Hasher};
use std::path::{Path, PathBuf};

fn main() {
    let root = PathBuf::from(std::env::var_os("CARGO_MANIFEST_DIR").expect("cargo sets it"));
    let mut files = vec![root.join("Cargo.toml"), root.join("build.rs")];
    collect(&root.join("src"), &mut files);
    files.sort();
    let mut hasher = std::hash::DefaultHasher::new();
    for file in &files {
        file.strip_prefix(&root).unwrap_or(file).hash(&mut hasher);
        std::fs::read(file).unwrap_or_default().hash(&mut hasher);
    }
    println!(
        "cargo:rustc-env=CORDON_LAUNCHER_BUILD={:016x}",
        hasher.finish()
    );
    println!("cargo:rerun-if-changed=src");
    println!("cargo:rerun-if-changed=Cargo.toml");
    println!("cargo:rerun-if-changed=build.rs");
}

/// Every file under `dir`.
fn collect(dir: &Path, files: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        let path = entry.path();
        match path.is_dir() {
            true => collect(&path, files),
            false => files.push(path),
        }
    }
}
