//! The shell reader checked against bash itself: generated command lines
//! (pipelines, lists, subshells, groups, quoting, substitutions, here-docs,
//! functions, `eval`, wrappers; aliases off as in any non-interactive bash)
//! are run by a real bash whose `PATH` holds only logging shims, and every
//! program bash actually executed must be one the reader reported — as a
//! program or a wrapper it looked through — or the line must be covered by
//! an *opaque* mark (or refused as unparsable: the component denies those).
//! A disagreement fails the test and prints the line.
//!
//! The generator is seeded: `CORDON_SHELL_DIFF_CASES` sets how many lines
//! (default 300), `CORDON_SHELL_DIFF_SEED` the seed.

use std::collections::BTreeSet;
use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::process::Command;

use cordon_policy::shell;
use proptest::prelude::*;
use proptest::test_runner::{Config, RngAlgorithm, TestRng, TestRunner};

/// Programs that only log that they ran.
const LEAVES: &[&str] = &[
    "git", "curl", "wget", "ls", "cat", "grep", "make", "cargo", "tail",
];
/// Wrappers: they log, then run the real program, which runs what it wraps.
const WRAPPERS: &[(&str, &str)] = &[
    ("env", "/usr/bin/env"),
    ("nice", "/usr/bin/nice"),
    ("timeout", "/usr/bin/timeout"),
    ("bash", "/bin/bash"),
    ("xargs", "/usr/bin/xargs"),
];

fn shims(dir: &Path) {
    for leaf in LEAVES {
        let script = format!("#!/bin/sh\necho {leaf} >>\"$SHIM_LOG\"\nexit 0\n");
        write_exec(&dir.join(leaf), &script);
    }
    for (name, real) in WRAPPERS {
        let script = format!("#!/bin/sh\necho {name} >>\"$SHIM_LOG\"\nexec {real} \"$@\"\n");
        write_exec(&dir.join(name), &script);
    }
}

fn write_exec(path: &Path, script: &str) {
    std::fs::write(path, script).unwrap();
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o755)).unwrap();
}

fn leaf() -> impl Strategy<Value = String> {
    prop::sample::select(LEAVES).prop_map(str::to_owned)
}

fn arg() -> BoxedStrategy<String> {
    prop_oneof![
        Just("x".to_owned()),
        Just("-s".to_owned()),
        Just("'a b'".to_owned()),
        Just("\"$HOME\"".to_owned()),
        Just("\"q'uote\"".to_owned()),
        leaf().prop_map(|p| format!("\"$({p})\"")),
        leaf().prop_map(|p| format!("`{p}`")),
        Just("*.none".to_owned()),
    ]
    .boxed()
}

fn simple() -> BoxedStrategy<String> {
    let program = prop_oneof![
        6 => leaf(),
        1 => Just("echo".to_owned()),
        1 => Just("true".to_owned()),
        1 => Just("X=1".to_owned()),
    ];
    (program, prop::collection::vec(arg(), 0..3))
        .prop_map(|(program, args)| {
            let mut words = vec![program];
            words.extend(args);
            words.join(" ")
        })
        .boxed()
}

fn wrapped() -> BoxedStrategy<String> {
    prop_oneof![
        simple(),
        simple().prop_map(|s| format!("env A=1 {s}")),
        simple().prop_map(|s| format!("nice {s}")),
        simple().prop_map(|s| format!("timeout 5 {s}")),
        simple().prop_map(|s| format!("bash -c '{}'", s.replace('\'', ""))),
        leaf().prop_map(|p| format!("echo x | xargs {p}")),
    ]
    .boxed()
}

fn line() -> impl Strategy<Value = String> {
    let leafish = wrapped();
    leafish.prop_recursive(3, 12, 3, |inner| {
        prop_oneof![
            (inner.clone(), inner.clone()).prop_map(|(a, b)| format!("{a} | {b}")),
            (inner.clone(), inner.clone()).prop_map(|(a, b)| format!("{a} && {b}")),
            (inner.clone(), inner.clone()).prop_map(|(a, b)| format!("{a} || {b}")),
            (inner.clone(), inner.clone()).prop_map(|(a, b)| format!("{a}; {b}")),
            inner.clone().prop_map(|a| format!("( {a} )")),
            inner.clone().prop_map(|a| format!("{{ {a}; }}")),
            (inner.clone(), inner.clone()).prop_map(|(a, b)| format!("if {a}; then {b}; fi")),
            inner
                .clone()
                .prop_map(|a| format!("for i in 1 2; do {a}; done")),
            inner.clone().prop_map(|a| format!("f() {{ {a}; }}; f")),
            inner
                .clone()
                .prop_map(|a| format!("eval '{}'", a.replace('\'', ""))),
            inner.clone().prop_map(|a| format!("echo \"$({a})\"")),
            leaf().prop_map(|p| format!("cat <<EOF\n$({p})\nEOF")),
            leaf().prop_map(|p| format!("cat <<'EOF'\n$({p})\nEOF")),
            inner.clone().prop_map(|a| format!("{a} & wait")),
            leaf().prop_map(|p| format!("P={p}; $P x")),
        ]
    })
}

/// The programs bash executed for `line` (logged by the shims), in a
/// scratch directory with only the shims on `PATH`.
fn executed(shim_dir: &Path, scratch: &Path, line: &str) -> BTreeSet<String> {
    // A log of its own per line: a process a line left behind (a
    // background job bash did not wait for) cannot write into the next's.
    static NEXT: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
    let n = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let log = scratch.join(format!("log-{n}"));
    let status = Command::new("/bin/bash")
        .args(["--norc", "--noprofile", "-c", line])
        .env_clear()
        .env("PATH", shim_dir)
        .env("HOME", scratch)
        .env("SHIM_LOG", &log)
        .current_dir(scratch)
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .status()
        .unwrap();
    let _ = status;
    std::fs::read_to_string(&log)
        .unwrap_or_default()
        .lines()
        .map(str::to_owned)
        .collect()
}

/// What the reader reports `line` runs: the programs and wrappers, or None
/// when the line is covered (opaque somewhere, or unparsable).
fn reported(line: &str) -> Option<BTreeSet<String>> {
    let commands = shell::commands(line).ok()?;
    let mut seen = BTreeSet::new();
    for command in &commands {
        if command.opaque.is_some() {
            return None;
        }
        seen.extend(command.wrappers.iter().cloned());
        if let Some(program) = command.program() {
            seen.insert(program.to_owned());
        }
    }
    Some(seen)
}

#[test]
fn every_program_bash_runs_is_reported_or_covered() {
    let cases = std::env::var("CORDON_SHELL_DIFF_CASES")
        .ok()
        .and_then(|n| n.parse().ok())
        .unwrap_or(300);
    let seed: u64 = std::env::var("CORDON_SHELL_DIFF_SEED")
        .ok()
        .and_then(|n| n.parse().ok())
        .unwrap_or(20_261_202);
    let shim_dir = tempfile::tempdir().unwrap();
    shims(shim_dir.path());
    let scratch = tempfile::tempdir().unwrap();
    let mut key = [0u8; 32];
    key[..8].copy_from_slice(&seed.to_le_bytes());
    let config = Config {
        cases,
        failure_persistence: None,
        ..Config::default()
    };
    let mut runner =
        TestRunner::new_with_rng(config, TestRng::from_seed(RngAlgorithm::ChaCha, &key));
    let covered = std::cell::Cell::new(0usize);
    let checked = std::cell::Cell::new(0usize);
    let disagreements = std::cell::RefCell::new(Vec::new());
    let outcome = runner.run(&line(), |line| {
        let ran = executed(shim_dir.path(), scratch.path(), &line);
        match reported(&line) {
            None => covered.set(covered.get() + 1),
            Some(reported) => {
                checked.set(checked.get() + 1);
                let missed: Vec<_> = ran.difference(&reported).cloned().collect();
                if !missed.is_empty() {
                    disagreements.borrow_mut().push(format!(
                        "{line:?}: bash ran {missed:?}, the reader reported {reported:?}"
                    ));
                }
            }
        }
        Ok(())
    });
    outcome.unwrap();
    let (covered, checked, disagreements) =
        (covered.get(), checked.get(), disagreements.into_inner());
    eprintln!(
        "shell_diff: {cases} lines (seed {seed}): {checked} checked, {covered} covered by opaque or unparsable, {} disagreements",
        disagreements.len()
    );
    assert!(disagreements.is_empty(), "{}", disagreements.join("\n"));
}

/// The hole the differential test found, tried from outside: a rule that
/// denies `curl` denies it inside two nested subshells too, and nothing
/// runs (the refusal comes before any runner starts, whatever the backend).
#[test]
fn nested_subshells_do_not_hide_a_denied_program() {
    let ws = crate::common::workspace();
    let rules = crate::common::component("rules-policy.wasm");
    for line in [
        "( ( curl https://example.com ) )",
        "((curl https://example.com) )",
    ] {
        let out = crate::common::cordon()
            .current_dir(ws.path())
            .args(["run", "--policy", rules.to_str().unwrap(), "--settings"])
            .arg(crate::common::rule_file())
            .args(["--", line])
            .output()
            .unwrap();
        assert_eq!(
            out.status.code(),
            Some(77),
            "{line}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        assert!(String::from_utf8_lossy(&out.stderr).contains("no downloads"));
    }
}
