//! The compiled-component cache: a second load skips Cranelift, and a blob
//! cordon did not write is never deserialized.

use crate::common;

use std::os::unix::fs::PermissionsExt;
use std::path::Path;

use common::{component, cordon, workspace};

/// `cordon policy check --json` with this cache: did it compile?
fn check(cache: &Path, file: &Path) -> (bool, bool, String) {
    let output = cordon()
        .args(["policy", "check", "--json", "--component-cache"])
        .arg(cache)
        .arg(file)
        .output()
        .unwrap();
    let json = common::parse(&output);
    (
        json["ok"] == true,
        json["compiled"] == true,
        String::from_utf8_lossy(&output.stderr).into_owned(),
    )
}

fn entries(cache: &Path) -> Vec<std::path::PathBuf> {
    std::fs::read_dir(cache)
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|e| e == "cwasm"))
        .collect()
}

#[test]
fn a_second_load_comes_from_the_cache() {
    let ws = workspace();
    let cache = ws.path().join("cache");
    let file = component("strict-policy.wasm");
    assert_eq!(check(&cache, &file), (true, true, String::new()));
    assert_eq!(check(&cache, &file), (true, false, String::new()));
    let mode = std::fs::metadata(&cache).unwrap().permissions().mode();
    assert_eq!(mode & 0o777, 0o700);
    for entry in entries(&cache) {
        let mode = std::fs::metadata(entry).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o600);
    }
}

#[test]
fn a_tampered_entry_is_never_deserialized() {
    let ws = workspace();
    let cache = ws.path().join("cache");
    let file = component("strict-policy.wasm");
    check(&cache, &file);
    let entry = entries(&cache).pop().expect("an entry");
    // Flip bytes in the blob, keeping the length: the MAC no longer verifies.
    let mut bytes = std::fs::read(&entry).unwrap();
    let middle = bytes.len() / 2;
    bytes[middle] ^= 0xff;
    std::fs::write(&entry, &bytes).unwrap();
    assert_eq!(
        check(&cache, &file),
        (true, true, String::new()),
        "recompiled"
    );
    assert_eq!(
        check(&cache, &file),
        (true, false, String::new()),
        "rewritten"
    );

    // A genuine compiled blob planted from another cache (another key) is
    // not one this cache wrote: ignored, and recompiled over.
    let other = ws.path().join("other");
    check(&other, &file);
    let planted = entries(&other).pop().unwrap();
    let target = entries(&cache).pop().unwrap();
    std::fs::copy(&planted, &target).unwrap();
    assert_eq!(
        check(&cache, &file),
        (true, true, String::new()),
        "planted blob ignored"
    );
}

#[test]
fn a_cache_others_can_write_is_refused() {
    let ws = workspace();
    let cache = ws.path().join("cache");
    std::fs::create_dir(&cache).unwrap();
    std::fs::set_permissions(&cache, std::fs::Permissions::from_mode(0o777)).unwrap();
    let (ok, compiled, stderr) = check(&cache, &component("strict-policy.wasm"));
    assert!(ok && compiled);
    assert!(
        stderr.contains("warning: not caching compiled policy components")
            && stderr.contains("mode 0700"),
        "{stderr}"
    );
    assert!(entries(&cache).is_empty());
}

#[test]
fn cordon_run_uses_the_cache_too() {
    let ws = workspace();
    let cache = ws.path().join("cache");
    let run = |policy: Option<&std::path::Path>| {
        let mut command = cordon();
        command
            .current_dir(ws.path())
            .args(["run", "--component-cache"])
            .arg(&cache);
        if let Some(policy) = policy {
            command.arg("--policy").arg(policy);
        }
        command
            .args([
                "--max-mode",
                "danger-full-access",
                "--mode",
                "danger-full-access",
            ])
            .args(["--", "true"])
            .status()
            .unwrap()
    };
    // The embedded default comes precompiled with the binary: nothing to
    // compile, nothing to cache.
    assert!(run(None).success());
    assert!(entries(&cache).is_empty(), "the default needs no cache");
    let deployed = component("strict-policy.wasm");
    assert!(run(Some(&deployed)).success());
    assert_eq!(entries(&cache).len(), 1, "a deployed component is cached");
    assert!(run(Some(&deployed)).success());
    assert_eq!(entries(&cache).len(), 1);
}
