//! The shell reader checked against bash itself: generated command lines
//! (pipelines, lists, subshells, groups, quoting, substitutions, here-docs,
//! functions, `eval`, wrappers; aliases off as in any non-interactive bash)
//! are run by a real bash whose `PATH` holds only logging shims, and every
//! program bash actually executed must be one the reader reported — as a
//! program or a wrapper it looked through — or the line must be covered by
//! an *opaque* mark (or refused as unparsable: the component denies those).
//! A disagreement fails the test and prints the line.
//!
//! The generator writes the routes a reader of words misses too:
//! expansions with operands and subscripts, arithmetic on variables,
//! builtins that take code (`trap`, `mapfile -C`), hook variables (`PS4`
//! with `set -x`, `${x@P}`, `BASH_ENV`, exported functions), wrappers
//! (`flock`, `taskset`, `prlimit`, `xargs -I`, `find -exec`, …) and
//! interpreters (`python3 -c`, `awk`, `sed`, a shell reading its input) —
//! the shims log a program however bash came to run it.
//!
//! The generator is seeded: `CORDON_SHELL_DIFF_CASES` sets how many lines
//! (default 1000), `CORDON_SHELL_DIFF_SEED` the seed.

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
/// Wrappers and interpreters: they log, then run the real program (found
/// on the host's `PATH`; one the host lacks is left out, loudly), which
/// runs what it wraps.
const WRAPPERS: &[&str] = &[
    "env", "nice", "timeout", "bash", "sh", "xargs", "flock", "taskset", "ionice", "chrt",
    "prlimit", "setsid", "stdbuf", "nohup", "find", "awk", "sed", "python3", "perl", "ed",
    "sqlite3", "vim",
];

fn shims(dir: &Path) {
    for leaf in LEAVES {
        let script = format!("#!/bin/sh\necho {leaf} >>\"$SHIM_LOG\"\nexit 0\n");
        write_exec(&dir.join(leaf), &script);
    }
    for name in WRAPPERS {
        let Some(real) = host_program(name) else {
            eprintln!("shell_diff: SKIPPING the {name} shim: the host has no {name}");
            continue;
        };
        let real = real.display();
        // bash's own shim is bash: dash would drop the exported functions
        // (`BASH_FUNC_ls%%`) the real bash imports.
        let interpreter = if *name == "bash" {
            "/bin/bash"
        } else {
            "/bin/sh"
        };
        let script = format!("#!{interpreter}\necho {name} >>\"$SHIM_LOG\"\nexec {real} \"$@\"\n");
        write_exec(&dir.join(name), &script);
    }
}

/// `name` in the system's directories (not a version manager's shim:
/// the shims' `PATH` holds nothing else).
fn host_program(name: &str) -> Option<std::path::PathBuf> {
    ["/usr/bin", "/bin", "/usr/sbin", "/sbin"]
        .iter()
        .map(|dir| Path::new(dir).join(name))
        .find(|path| path.is_file())
}

pub(crate) fn write_exec(path: &Path, script: &str) {
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

/// A route to run the leaf program `p` that is not a plain simple
/// command, or an ordinary shape of the same construct beside it.
fn route(p: &str) -> Vec<String> {
    [
        // Expansions with operands and subscripts.
        "echo ${x:-$(P)}",
        "echo \"${a[$(P)]}\"",
        "x=1; echo ${x:+$(P)}",
        "echo \"${x:-'$(P)'}\"",
        "echo ${HOME:-/tmp} \"${a[@]}\" ${#x}",
        // Arithmetic on a variable's text.
        "x='a[$(P)]'; echo $((x))",
        "x='a[$(P)]'; [[ $x -eq 0 ]]",
        "x='a[$(P)]'; let y=x",
        "read 'a[$(P)]' <<< 1",
        "x='a[$(P)]'; a[x]=1",
        "echo $((1 + 2)); [[ 1 -eq 1 ]]",
        // Builtins that take code.
        "trap 'P' EXIT",
        "trap 'P' DEBUG; true",
        "mapfile -C 'P' -c 1 arr <<< x",
        "f() { P; }; f",
        "trap - EXIT; P",
        // Hooks bash reads from variables and its environment.
        "PS4='$(P)'; set -x; true",
        "x='$(P)'; echo ${x@P}",
        "echo P > rc; BASH_ENV=rc bash -c true",
        "env 'BASH_FUNC_ls%%=() { P; }' bash -c ls",
        "while IFS= read -r l; do P; done <<< x",
        // Programs that run programs.
        "flock lk P",
        "flock lk -c 'P'",
        "taskset 1 P",
        "ionice -c 3 P",
        "chrt -o 0 P",
        "prlimit --nofile=100 P",
        "setsid -w P",
        "stdbuf -oL P",
        "nohup P",
        "find . -maxdepth 0 -exec P \\;",
        "echo x | xargs P",
        "echo P | xargs -I{} sh -c '{}'",
        // Interpreters.
        "python3 -c 'import os; os.system(\"P\")'",
        "awk 'BEGIN{system(\"P\")}'",
        "awk '{print $1}' <<< 'a b'; P",
        "sed 's/.*/P/e' <<< x",
        "sed -n '1p' <<< x; P",
        "echo P | bash",
        "echo P | sh -s",
        "perl -e 'system(\"P\")'",
    ]
    .iter()
    .map(|shape| shape.replace('P', p))
    .collect()
}

fn routes() -> BoxedStrategy<String> {
    leaf()
        .prop_flat_map(|p| prop::sample::select(route(&p)))
        .boxed()
}

fn wrapped() -> BoxedStrategy<String> {
    prop_oneof![
        3 => routes(),
        1 => simple(),
        1 => simple().prop_map(|s| format!("env A=1 {s}")),
        1 => simple().prop_map(|s| format!("nice {s}")),
        1 => simple().prop_map(|s| format!("timeout 5 {s}")),
        1 => simple().prop_map(|s| format!("bash -c '{}'", s.replace('\'', ""))),
        1 => leaf().prop_map(|p| format!("echo x | xargs {p}")),
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
        .unwrap_or(1000);
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

#[derive(serde::Deserialize)]
struct Dodges {
    dodge: Vec<Dodge>,
}

#[derive(serde::Deserialize)]
pub(crate) struct Dodge {
    pub(crate) class: String,
    pub(crate) line: String,
    #[serde(default = "ran_by_bash")]
    bash: bool,
}

fn ran_by_bash() -> bool {
    true
}

pub(crate) fn dodges() -> Vec<Dodge> {
    let text = include_str!("../../components/policy-core/cases/dodges.toml");
    toml::from_str::<Dodges>(text).unwrap().dodge
}

/// The program a dodge runs by its route (`curl`, or `rm` for the
/// recursive-delete ones).
fn target_of(dodge: &Dodge) -> &'static str {
    if dodge.class.contains("rm -rf") {
        "rm"
    } else {
        "curl"
    }
}

/// The dodge case file is real: bash, with logging shims for every
/// program, runs the program each line hides (so a line the reader
/// refuses is a route bash takes, not one it only looks like), and the
/// reader covers each — reports the program or marks the line opaque.
#[test]
fn every_dodge_runs_its_program_under_bash_and_the_reader_covers_it() {
    let shim_dir = tempfile::tempdir().unwrap();
    shims(shim_dir.path());
    write_exec(
        &shim_dir.path().join("rm"),
        "#!/bin/sh\necho rm >>\"$SHIM_LOG\"\nexit 0\n",
    );
    let scratch = tempfile::tempdir().unwrap();
    std::fs::create_dir(scratch.path().join("victim")).unwrap();
    let mut not_run = vec![];
    let mut missed = vec![];
    for dodge in dodges() {
        let target = target_of(&dodge);
        if dodge.bash && !executed(shim_dir.path(), scratch.path(), &dodge.line).contains(target) {
            not_run.push(format!("{} ({})", dodge.line, dodge.class));
        }
        let base = |p: &String| p.rsplit('/').next().unwrap_or(p).to_owned();
        if reported(&dodge.line).is_some_and(|seen| !seen.iter().map(base).any(|p| p == target)) {
            missed.push(format!("{} ({})", dodge.line, dodge.class));
        }
    }
    assert!(
        not_run.is_empty(),
        "bash did not run what these hide:\n{}",
        not_run.join("\n")
    );
    assert!(
        missed.is_empty(),
        "the reader missed:\n{}",
        missed.join("\n")
    );
}
