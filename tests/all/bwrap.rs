//! The namespace suite: real `cordon run` under real bubblewrap and under
//! cordon's own namespace runner (the same profile, SPEC.md §6), with the
//! real embedded `bash-sandbox` component. Each test runs under both.

use crate::common;

use common::{bwrap_usable, confined_facts, host_processes_with, run_json, sandbox, workspace};
use serde_json::json;

/// The namespace runners this machine has: `(flags, pid 1's name)`, each
/// missing one said loudly (a failure where CI requires it).
fn runners(test: &str) -> Vec<(&'static [&'static str], &'static str)> {
    let mut found: Vec<(&'static [&'static str], &'static str)> = vec![];
    if common::namespaces_usable(test) {
        found.push((&["--backend", "namespaces"], "cordon"));
    }
    if bwrap_usable(test) {
        // cordon's init is bwrap's pid 1 (no reaper of bwrap's own: it
        // could be traced and act for the command).
        found.push((&["--backend", "bwrap"], "cordon"));
    }
    found
}

/// `flags` then `extra`.
fn with<'a>(flags: &[&'a str], extra: &[&'a str]) -> Vec<&'a str> {
    flags.iter().chain(extra).copied().collect()
}

#[test]
fn read_only_denies_a_workspace_write_and_says_so() {
    for (flags, _) in runners("read_only_denies_a_workspace_write_and_says_so") {
        let ws = workspace();
        let target = ws.path().join("denied.txt");
        let (code, result) = run_json(ws.path(), flags, &format!("echo hi > {}", target.display()));
        assert_ne!(code, 0);
        assert_ne!(result["exitCode"], json!(0));
        assert_eq!(
            confined_facts(&result),
            json!({"mode": "read-only", "denied": true, "enforcement": "full"}),
            "{flags:?}"
        );
        // The mounts refuse it (EROFS) before any LSM could log it: the
        // text is the evidence on a mount rung.
        assert_eq!(sandbox(&result)["evidence"], "text", "{flags:?}: {result}");
        assert!(
            !target.exists(),
            "{flags:?}: the denied write landed on the host"
        );
    }
}

#[test]
fn read_only_keeps_dev_null_writable() {
    for (flags, _) in runners("read_only_keeps_dev_null_writable") {
        let ws = workspace();
        let (code, result) = run_json(ws.path(), flags, "ls / > /dev/null && echo ok");
        assert_eq!(code, 0, "{flags:?}: {result}");
        assert_eq!(result["stdout"]["text"], "ok\n");
        assert_eq!(
            confined_facts(&result),
            json!({"mode": "read-only", "denied": false, "enforcement": "full"})
        );
    }
}

#[test]
fn workspace_write_allows_its_root_only() {
    for (flags, _) in runners("workspace_write_allows_its_root_only") {
        common::assert_workspace_write_allows_its_root_only(flags, "full");
    }
}

#[test]
fn workspace_write_tmp_is_ephemeral() {
    for (flags, _) in runners("workspace_write_tmp_is_ephemeral") {
        let ws = workspace();
        let ws_arg = ws.path().to_str().unwrap();
        let name = format!("/tmp/cordon-e2e-{}-{}", std::process::id(), line!());
        let (code, result) = run_json(
            ws.path(),
            &with(flags, &["--mode", "workspace-write", "--workspace", ws_arg]),
            &format!("echo scratch > {name} && cat {name}"),
        );
        assert_eq!(code, 0, "{flags:?}: {result}");
        assert_eq!(result["stdout"]["text"], "scratch\n");
        assert!(
            !std::path::Path::new(&name).exists(),
            "{flags:?}: {name} leaked onto the host /tmp"
        );
    }
}

#[test]
fn hardening_holds_even_for_root() {
    for (flags, _) in runners("hardening_holds_even_for_root") {
        let ws = workspace();
        let target = ws.path().join("after-remount.txt");
        // A remount of the read-only root as writable must fail, and the
        // write after it must still be denied; so must unmounting a cover
        // (the fresh /proc's read-only /proc/sys) to reach what is below.
        let (code, result) = run_json(
            ws.path(),
            flags,
            &format!(
                "mount -o remount,bind,rw / 2>&1; mount -o remount,rw {ws} 2>&1; \
                 umount /proc/sys 2>&1; umount -l /dev 2>&1; echo x > {t}",
                ws = ws.path().display(),
                t = target.display()
            ),
        );
        assert_ne!(code, 0, "{result}");
        assert!(
            !target.exists(),
            "{flags:?}: a remount made the read-only bind writable"
        );
        assert_eq!(sandbox(&result)["denied"], json!(true));

        // No capabilities at all, and nothing exec'd can gain any (bwrap,
        // run by root, leaves the bounding set; cordon's runner empties it).
        let (_, result) = run_json(
            ws.path(),
            flags,
            "grep -E '^(Cap|NoNewPrivs)' /proc/self/status",
        );
        let status = result["stdout"]["text"].as_str().unwrap();
        assert_eq!(status.lines().count(), 6, "{status}");
        for line in status.lines() {
            match line.split_once(':').map(|(k, v)| (k, v.trim())) {
                Some(("CapBnd", _)) if flags.contains(&"bwrap") => {}
                Some(("NoNewPrivs", set)) => assert_eq!(set, "1", "{flags:?}: {status}"),
                Some((_, caps)) => assert_eq!(caps, "0000000000000000", "{flags:?}: {status}"),
                None => panic!("{status}"),
            }
        }
    }
}

#[test]
fn the_command_sees_only_its_own_processes() {
    for (flags, init) in runners("the_command_sees_only_its_own_processes") {
        let ws = workspace();
        let (code, result) = run_json(
            ws.path(),
            flags,
            "cat /proc/1/comm; ls /proc | grep -c '^[0-9][0-9]*$'",
        );
        assert_eq!(code, 0, "{result}");
        let text = result["stdout"]["text"].as_str().unwrap();
        let mut lines = text.lines();
        // cordon's own init is the launcher installed beside cordon, when
        // it is of this build (`cargo test --workspace` builds it).
        let beside = common::installed_launcher().is_some();
        let init = match init {
            "cordon" if beside => "cordon-launcher",
            other => other,
        };
        assert_eq!(lines.next(), Some(init), "pid 1 is the sandbox's own init");
        let visible: u32 = lines.next().unwrap().parse().unwrap();
        assert!(
            visible <= 6,
            "{flags:?}: the sandbox sees {visible} processes: {text}"
        );
    }
}

#[test]
fn a_daemon_left_behind_dies_with_the_run() {
    for (flags, _) in runners("a_daemon_left_behind_dies_with_the_run") {
        let ws = workspace();
        let marker = format!("31.{}{}", std::process::id(), line!());
        let (code, result) = run_json(
            ws.path(),
            flags,
            &format!("setsid sleep {marker} > /dev/null 2>&1 < /dev/null & echo started"),
        );
        assert_eq!(code, 0, "{result}");
        assert_eq!(result["stdout"]["text"], "started\n");
        let survivors = host_processes_with(&format!("sleep {marker}"));
        assert!(
            survivors.is_empty(),
            "{flags:?}: daemon outlived the run: pids {survivors:?}"
        );
    }
}

#[test]
fn a_spoofed_bwrap_line_is_an_ordinary_failure() {
    if !bwrap_usable("a_spoofed_bwrap_line_is_an_ordinary_failure") {
        return;
    }
    let ws = workspace();
    // bwrap's status fd says the command ran, so its own "bwrap: …" line
    // is only output, not a sandbox failure.
    let (code, result) = run_json(
        ws.path(),
        &["--backend", "bwrap"],
        "echo 'bwrap: Creating new namespace failed' >&2; exit 1",
    );
    assert_eq!(code, 1, "{result}");
    assert_eq!(
        confined_facts(&result),
        json!({"mode": "read-only", "denied": false, "enforcement": "full"})
    );
}

#[test]
fn a_runner_that_fails_without_its_usual_text_is_still_sandbox_unavailable() {
    // A bwrap stand-in that passes the probe but fails every real run with
    // a message cordon has never seen: only the out-of-band status (no
    // "exit-code" record) can tell, and it must.
    let ws = workspace();
    let config = common::fake_bwrap(
        ws.path(),
        "#!/bin/sh\ncase \"$*\" in *'-- true') exit 0;; esac\necho 'namespace setup went sideways' >&2\nexit 1\n",
    );
    let marker = ws.path().join("ran");
    let output = common::cordon()
        .current_dir(ws.path())
        .arg("run")
        .arg("--config")
        .arg(&config)
        .args(["--backend", "bwrap", "--"])
        .arg(format!("touch {}", marker.display()))
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(69), "{stderr}");
    assert!(
        stderr.contains("Runner failure: bwrap exited (code 1) before starting the command"),
        "{stderr}"
    );
    assert!(!marker.exists());
}

#[test]
fn nested_children_stay_confined() {
    for (flags, _) in runners("nested_children_stay_confined") {
        let ws = workspace();
        let target = ws.path().join("nested.txt");
        let (code, result) = run_json(
            ws.path(),
            flags,
            &format!("bash -c \"sh -c 'echo deep > {}'\"", target.display()),
        );
        assert_ne!(code, 0);
        assert_eq!(sandbox(&result)["denied"], json!(true), "{result}");
        assert!(!target.exists());
    }
}

#[test]
fn a_command_in_its_own_user_namespace_cannot_undo_a_cover() {
    // Root without capabilities may still make a user namespace (and hold
    // every capability there): the mounts it inherits are locked, so no
    // cover can be lifted and no read-only mount made writable.
    for (flags, _) in runners("a_command_in_its_own_user_namespace_cannot_undo_a_cover") {
        let ws = workspace();
        let target = ws.path().join("escaped.txt");
        let (_, result) = run_json(
            ws.path(),
            flags,
            &format!(
                "unshare -Um sh -c 'umount /proc/sys; mount -o remount,rw /; \
                 mount -o remount,bind,rw {ws}; echo x > {t}; \
                 echo 1 > /proc/sys/kernel/ns_last_pid' 2>&1; echo end",
                ws = ws.path().display(),
                t = target.display()
            ),
        );
        assert!(
            result["stdout"]["text"]
                .as_str()
                .unwrap()
                .ends_with("end\n"),
            "{result}"
        );
        assert!(!target.exists(), "{flags:?}: {result}");
    }
}
