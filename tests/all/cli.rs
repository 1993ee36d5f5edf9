//! `cordon run` as a user drives it: danger-full-access, byte-exact
//! commands, the ceiling, fail-closed without a runner, exit codes.

use crate::common;

use common::{bwrap_usable, cordon, cordon_in, parse, run_json, sandbox, workspace};
use serde_json::json;

/// Run unconfined, with the ceiling raised to allow it.
const DANGER: [&str; 4] = [
    "--mode",
    "danger-full-access",
    "--max-mode",
    "danger-full-access",
];

#[test]
fn danger_full_access_runs_unconfined_with_mode_only_facts() {
    let ws = workspace();
    let outside = workspace();
    let target = outside.path().join("written.txt");
    let (code, result) = run_json(
        ws.path(),
        &DANGER,
        &format!("echo free > {}; cat /proc/1/comm", target.display()),
    );
    assert_eq!(code, 0, "{result}");
    assert_eq!(
        sandbox(&result),
        &json!({"mode": "danger-full-access", "denied": false})
    );
    assert_eq!(std::fs::read_to_string(&target).unwrap(), "free\n");
    assert_ne!(result["stdout"]["text"], "bwrap\n", "no runner wraps it");
}

#[test]
fn danger_full_access_above_the_ceiling_is_refused_before_anything_runs() {
    let ws = workspace();
    let marker = ws.path().join("ran");
    let output = cordon()
        .current_dir(ws.path())
        .args(["run", "--mode", "danger-full-access", "--"])
        .arg(format!("touch {}", marker.display()))
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(64));
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains("exceeds this deployment's ceiling"),
        "{stderr}"
    );
    assert!(stderr.contains("--max-mode"), "{stderr}");
    assert!(!marker.exists());
}

#[test]
fn the_command_reaches_bash_byte_exact() {
    let command =
        "printf '%s|' \"dq\" 'sq$HOME' \"back\\\\slash\" 'a\\b'\nprintf '%s\\n' \"$((6*7))\"";
    let expected = "dq|sq$HOME|back\\slash|a\\b|42\n";
    let ws = workspace();
    let mut modes: Vec<&[&str]> = vec![&DANGER];
    if bwrap_usable("the_command_reaches_bash_byte_exact (confined)") {
        modes.push(&[]);
    }
    for args in modes {
        let (code, result) = run_json(ws.path(), args, command);
        assert_eq!(code, 0, "{result}");
        assert_eq!(result["stdout"]["text"], expected, "args {args:?}");
    }
}

#[test]
fn no_runner_fails_closed_and_nothing_runs() {
    let ws = workspace();
    let marker = ws.path().join("ran");
    for json in [false, true] {
        let config = ws.path().join("cordon.toml");
        std::fs::write(&config, "bwrap_path = \"/nonexistent-cordon-test/bwrap\"\n").unwrap();
        let mut command = cordon();
        command
            .current_dir(ws.path())
            // Pinned to a bwrap that does not exist: no rung is usable (the
            // Landlock rung would otherwise confine the run).
            .args(["run", "--config", config.to_str().unwrap()])
            .args(["--backend", "bwrap", "--mode", "workspace-write"]);
        if json {
            command.arg("--json");
        }
        let output = command
            .arg("--")
            .arg(format!("touch {}", marker.display()))
            .output()
            .unwrap();
        assert_eq!(output.status.code(), Some(69), "json={json}");
        if json {
            let error = &parse(&output)["error"];
            assert_eq!(error["code"], "SANDBOX_UNAVAILABLE");
            assert_eq!(error["mode"], "workspace-write");
        } else {
            let stderr = String::from_utf8_lossy(&output.stderr);
            assert_eq!(stderr.lines().count(), 1, "one line: {stderr}");
            assert!(stderr.starts_with("cordon: SANDBOX_UNAVAILABLE: sandbox mode \"workspace-write\" is requested but no sandbox backend could confine this run here; refusing to run the command unconfined."), "{stderr}");
        }
        assert!(!marker.exists(), "the command ran without a sandbox");
    }
}

#[test]
fn exit_codes_mirror_the_command() {
    let ws = workspace();
    let status = |command: &str, extra: &[&str]| {
        cordon()
            .current_dir(ws.path())
            .arg("run")
            .args(DANGER)
            .args(extra)
            .arg("--")
            .arg(command)
            .output()
            .unwrap()
    };
    assert_eq!(status("exit 7", &[]).status.code(), Some(7));
    assert_eq!(status("kill -TERM $$", &[]).status.code(), Some(128 + 15));
    let timed_out = status("sleep 5", &["--timeout-ms", "100"]);
    assert_eq!(timed_out.status.code(), Some(124));
    let out = status("echo out; echo err >&2", &[]);
    assert_eq!(String::from_utf8_lossy(&out.stdout), "out\n");
    assert_eq!(String::from_utf8_lossy(&out.stderr), "err\n");
}

#[test]
fn timeout_is_reported_as_a_fact() {
    let ws = workspace();
    let (code, result) = run_json(
        ws.path(),
        &[&DANGER[..], &["--timeout-ms", "100"]].concat(),
        "sleep 60",
    );
    assert_eq!(code, 124);
    assert_eq!(result["timedOut"], json!(true));
    assert_eq!(result["signal"], json!("SIGTERM"));
    assert_eq!(result["exitCode"], json!(null));
    assert_eq!(result["timeoutMs"], json!(100));
}

#[test]
fn a_missing_workdir_is_an_ordinary_error() {
    let ws = workspace();
    let (code, stderr) = cordon_in(
        ws.path(),
        &["run", "--workdir", "no/such/dir", "--", "true"],
    );
    assert_eq!(code, Some(66));
    assert!(
        stderr.contains("cordon: WORKDIR: working directory"),
        "{stderr}"
    );
    assert!(stderr.contains("no/such/dir"), "{stderr}");
}

#[test]
fn invalid_requests_name_the_field() {
    let ws = workspace();
    let (code, stderr) = cordon_in(ws.path(), &["run", "--timeout-ms", "0", "--", "true"]);
    assert_eq!(code, Some(64));
    assert!(stderr.contains("timeout-ms must be positive"), "{stderr}");
}

#[test]
fn stdin_dash_streams_the_callers_stdin_while_the_command_runs() {
    use std::io::{BufRead, BufReader, Write};
    use std::process::Stdio;
    for (backend, _) in common::confined_backends("stdin_dash_streams") {
        let ws = workspace();
        // A pipe: `echo x | cordon run --stdin - -- 'read a; echo $a'`.
        let mut child = cordon()
            .current_dir(ws.path())
            .args(["run"])
            .args(backend)
            .args(["--stdin", "-", "--", "read a; echo $a"])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .unwrap();
        child.stdin.take().unwrap().write_all(b"x\n").unwrap();
        let out = child.wait_with_output().unwrap();
        assert_eq!(String::from_utf8_lossy(&out.stdout), "x\n", "{backend:?}");
        assert!(out.status.success());

        // Streamed, not read to its end first: the answer to the first line
        // arrives while the caller still holds its stdin open.
        let mut child = cordon()
            .current_dir(ws.path())
            .args(["run"])
            .args(backend)
            .args([
                "--stdin",
                "-",
                "--",
                "read a; echo got $a; read b; echo got $b",
            ])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .unwrap();
        let mut input = child.stdin.take().unwrap();
        let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
        input.write_all(b"one\n").unwrap();
        assert_eq!(lines.next().unwrap().unwrap(), "got one", "{backend:?}");
        input.write_all(b"two\n").unwrap();
        drop(input);
        assert_eq!(lines.next().unwrap().unwrap(), "got two", "{backend:?}");
        assert!(child.wait().unwrap().success());
    }
    // Without --stdin the command reads nothing, and a non-file
    // --stdin-file names the flag that streams.
    let ws = workspace();
    let out = cordon()
        .current_dir(ws.path())
        .args(["run", "--stdin-file", "/dev/stdin", "--", "true"])
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("use --stdin -"));
}

/// `cordon run` without `--json` moves the command's stdout into its own
/// stdout inside the kernel (`splice`) when that is a pipe or a file: every
/// byte arrives, in order, with stderr apart, on every rung; `--json` still
/// carries the tail (it is not moved past the host).
#[test]
fn stdout_moves_into_a_pipe_or_a_file_whole_and_in_order() {
    use std::process::Stdio;
    let test = "stdout_moves_into_a_pipe_or_a_file_whole_and_in_order";
    let command = "seq 1 300000; echo apart >&2; printf end";
    let expected: String = (1..=300_000).map(|n| format!("{n}\n")).collect::<String>() + "end";
    for (backend, _) in common::confined_backends(test) {
        let ws = workspace();
        let out = cordon()
            .current_dir(ws.path())
            .arg("run")
            .args(backend)
            .args(["--", command])
            .output()
            .unwrap();
        assert!(out.status.success(), "{backend:?}: {out:?}");
        assert!(
            out.stdout == expected.as_bytes(),
            "{backend:?}: the pipe got {} bytes",
            out.stdout.len()
        );
        assert_eq!(
            String::from_utf8_lossy(&out.stderr),
            "apart\n",
            "{backend:?}"
        );

        // Into a file opened for appending, after what it held.
        let file = ws.path().join("out.txt");
        std::fs::write(&file, "before\n").unwrap();
        let appending = std::fs::OpenOptions::new()
            .append(true)
            .open(&file)
            .unwrap();
        let status = cordon()
            .current_dir(ws.path())
            .arg("run")
            .args(backend)
            .args(["--", command])
            .stdout(Stdio::from(appending))
            .stderr(Stdio::null())
            .status()
            .unwrap();
        assert!(status.success());
        let held = std::fs::read_to_string(&file).unwrap();
        assert!(
            held == format!("before\n{expected}"),
            "{backend:?}: the file holds {} bytes",
            held.len()
        );

        // --json: the tail is the result's.
        let (code, result) = run_json(ws.path(), backend, "seq 1 3");
        assert_eq!(code, 0);
        assert_eq!(result["stdout"]["text"], "1\n2\n3\n", "{backend:?}");
    }
    // The stdout really moves by splice (traced where strace can trace).
    if !crate::launcher::strace_traces(test) {
        return;
    }
    let ws = workspace();
    let trace = ws.path().join("trace");
    let out = std::process::Command::new("strace")
        .args(["-f", "-qq", "-e", "trace=splice", "-o"])
        .arg(&trace)
        .arg(env!("CARGO_BIN_EXE_cordon"))
        .current_dir(ws.path())
        .args(["run", "--", "seq 1 100000"])
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    assert_eq!(out.stdout.len(), 588_895, "seq 1 100000 is 588,895 bytes");
    let traced = std::fs::read_to_string(&trace).unwrap();
    // A call a signal interrupted is two lines: `splice(… <unfinished ...>`
    // (no result) and `<... splice resumed>) = N`.
    let moved: usize = traced
        .lines()
        .filter(|line| line.contains("splice(") || line.contains("<... splice resumed>"))
        .filter_map(|line| line.rsplit("= ").next()?.trim().parse::<usize>().ok())
        .sum();
    assert_eq!(
        moved, 588_895,
        "not all of stdout moved by splice:\n{traced}"
    );
}

/// The caller's `PWD` and `OLDPWD` stay the caller's: the command's shell
/// names its own working directory, on every rung and unconfined.
#[test]
fn the_command_names_its_own_working_directory_not_the_callers() {
    let ws = workspace();
    let canonical = std::fs::canonicalize(ws.path()).unwrap();
    let mut modes: Vec<Vec<&str>> =
        common::confined_backends("the_command_names_its_own_working_directory")
            .into_iter()
            .map(|(backend, _)| backend.to_vec())
            .collect();
    modes.push(DANGER.to_vec());
    // A link to the workspace: bash keeps an inherited PWD that names its
    // directory by another path.
    let link = ws.path().join("link");
    std::os::unix::fs::symlink(&canonical, &link).unwrap();
    for mode in modes {
        for callers in ["/", canonical.to_str().unwrap(), link.to_str().unwrap()] {
            let out = cordon()
                .current_dir(ws.path())
                .env("PWD", callers)
                .env("OLDPWD", "/somewhere/the/caller/was")
                .arg("run")
                .args(&mode)
                .args(["--", r#"echo "$PWD|${OLDPWD-unset}"; pwd"#])
                .output()
                .unwrap();
            assert!(out.status.success(), "{mode:?}: {out:?}");
            let want = format!("{0}|unset\n{0}\n", canonical.display());
            assert_eq!(
                String::from_utf8_lossy(&out.stdout),
                want,
                "{mode:?}, caller's PWD {callers}"
            );
        }
    }
}

#[test]
fn a_report_whose_reader_is_gone_ends_quietly_on_sigpipe() {
    use std::os::unix::process::ExitStatusExt;
    // A pipe whose read end is closed before cordon writes: every write
    // fails with EPIPE.
    let (read, write) = nix::unistd::pipe().unwrap();
    drop(read);
    for args in [&["completions", "bash"][..], &["probe"][..]] {
        let output = cordon()
            .args(args)
            .stdout(std::process::Stdio::from(write.try_clone().unwrap()))
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert!(
            !stderr.contains("panicked") && !stderr.contains("Broken pipe"),
            "{args:?}: {stderr}"
        );
        assert_eq!(
            output.status.signal(),
            Some(nix::libc::SIGPIPE),
            "{args:?} ends as ls or cat would: {:?}",
            output.status
        );
    }
}
