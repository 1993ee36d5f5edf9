//! `rules-policy` with its example rule file, e2e: through `cordon run`
//! every route in `cases/dodges.toml` is refused and nothing it hides runs
//! on the host; through `cordon policy test` (the real component, real
//! wasmtime) every line of `cases/ordinary.toml` is allowed, and a sample
//! of them runs for real.

use crate::common;
use crate::shell_diff::{dodges, write_exec};

/// Every dodge, e2e: `cordon run` with rules-policy and the example rule
/// file refuses it (deny, or ask: nothing runs either way) — and on the
/// host after, the program it hides never ran: its shim's log is empty
/// and the directory `rm -rf` aims at is still there. Beside it, an
/// allowed line runs and leaves its mark (the positive control).
#[test]
fn rules_policy_refuses_every_dodge_and_nothing_runs() {
    let ws = common::workspace();
    let bin = ws.path().join("bin");
    std::fs::create_dir_all(ws.path().join("victim")).unwrap();
    std::fs::create_dir_all(&bin).unwrap();
    let log = ws.path().join("ran.log");
    for program in ["curl", "rm"] {
        let script = format!("#!/bin/sh\necho {program} >>{}\nexit 0\n", log.display());
        write_exec(&bin.join(program), &script);
    }
    let rules = common::component("rules-policy.wasm");
    let run = |line: &str| {
        common::cordon()
            .current_dir(ws.path())
            .args(["run", "--mode", "workspace-write", "--policy"])
            .arg(&rules)
            .arg("--settings")
            .arg(common::rule_file())
            // The shims first: a hidden program that ran would log.
            .arg("--env")
            .arg(format!("PATH={}:/usr/bin:/bin", bin.display()))
            .args(["--", line])
            .output()
            .unwrap()
    };
    let control = run("echo ran > control.txt");
    assert_eq!(
        control.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&control.stderr)
    );
    assert!(
        ws.path().join("control.txt").exists(),
        "the allowed line ran"
    );
    let mut ran = vec![];
    for dodge in dodges() {
        let out = run(&dodge.line);
        if !matches!(out.status.code(), Some(75 | 77)) {
            ran.push(format!(
                "{} ({}): exit {:?}: {}",
                dodge.line,
                dodge.class,
                out.status.code(),
                String::from_utf8_lossy(&out.stderr)
            ));
        }
    }
    assert!(ran.is_empty(), "not refused:\n{}", ran.join("\n"));
    assert!(
        !log.exists(),
        "a hidden program ran: {:?}",
        std::fs::read_to_string(&log)
    );
    assert!(
        ws.path().join("victim").is_dir(),
        "rm -rf reached the victim"
    );
}

/// The ordinary lines agents write, e2e: every one is allowed by the
/// component with the example rule file (a case file made of them,
/// through `cordon policy test`: the real component deciding, nothing
/// spawned), and a sample — `git status`, `ls | grep x`, `echo "$HOME"`,
/// `cd x && make`, `cargo test` — runs through `cordon run` and is not
/// refused (the sandbox, not the rule, decides what each may touch).
#[test]
fn rules_policy_allows_every_ordinary_line() {
    #[derive(serde::Deserialize)]
    struct Ordinary {
        lines: Vec<String>,
    }
    let text = include_str!("../../components/policy-core/cases/ordinary.toml");
    let ordinary: Ordinary = toml::from_str(text).unwrap();
    assert!(ordinary.lines.len() >= 200);
    let ws = common::workspace();
    let mut cases = String::from(
        "[defaults]\ndeployment = { policy = { mode = \"read-only\", workspaceRoot = \"/ws\" }, \
         maxMode = \"workspace-write\", workdir = \"/ws\" }\nsandbox = { backend = \"bwrap\" }\n",
    );
    for (at, line) in ordinary.lines.iter().enumerate() {
        let command = serde_json::to_string(line).unwrap();
        cases.push_str(&format!(
            "\n[[case]]\nname = \"ordinary line {at}\"\nrequest = {{ command = {command} }}\n\
             expect.launch = {{ confined = true }}\n"
        ));
    }
    let case_file = ws.path().join("ordinary-cases.toml");
    std::fs::write(&case_file, cases).unwrap();
    let rules = common::component("rules-policy.wasm");
    let settings = common::rule_file();
    let (code, out) = common::cordon_out(
        ws.path(),
        &[
            "policy",
            "test",
            rules.to_str().unwrap(),
            case_file.to_str().unwrap(),
            "--settings",
            settings.to_str().unwrap(),
        ],
    );
    assert_eq!(code, Some(0), "{out}");
    assert_eq!(
        out.matches("ok   ordinary line").count(),
        ordinary.lines.len(),
        "{out}"
    );

    std::fs::create_dir_all(ws.path().join("x")).unwrap();
    std::fs::write(
        ws.path().join("x/Makefile"),
        "all:\n\techo made > made.txt\n",
    )
    .unwrap();
    std::fs::write(ws.path().join("notes-x.md"), "x").unwrap();
    for line in [
        "git init -q . && git status --short",
        "ls | grep x",
        "echo \"$HOME\"",
        "cd x && make",
        "cargo test --offline 2>&1 | tail -n 1",
    ] {
        let out = common::cordon()
            .current_dir(ws.path())
            .args(["run", "--mode", "workspace-write", "--policy"])
            .arg(&rules)
            .arg("--settings")
            .arg(&settings)
            .args(["--", line])
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(
            !matches!(out.status.code(), Some(75 | 77)),
            "{line}: refused: {stderr}"
        );
    }
    assert!(ws.path().join("x/made.txt").exists(), "make ran its recipe");
}
