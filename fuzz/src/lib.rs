//! What the fuzz targets share: the workspace their inputs name.

use std::path::Path;

/// The workspace the targets' inputs name (`/var/tmp/cordon-fuzz/ws`),
/// with the directories they may grant — `a`, `b`, `secret`, `.git` —
/// made once: a check that a writable root exists then passes for them.
pub fn workspace() -> &'static str {
    const WORKSPACE: &str = "/var/tmp/cordon-fuzz/ws";
    static MADE: std::sync::Once = std::sync::Once::new();
    MADE.call_once(|| {
        for dir in ["a", "b", "secret", ".git"] {
            std::fs::create_dir_all(Path::new(WORKSPACE).join(dir)).unwrap();
        }
    });
    WORKSPACE
}
