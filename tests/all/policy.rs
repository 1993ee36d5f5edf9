//! Policy components as operators deploy them: `--policy` swaps behaviour
//! without rebuilding the host, and a bad component is a clear error.

use crate::common;

use common::{bwrap_usable, component, confined_facts, cordon, run_json, sandbox, workspace};
use serde_json::json;

#[test]
fn a_policy_file_changes_behaviour_without_a_rebuild() {
    if !bwrap_usable("a_policy_file_changes_behaviour_without_a_rebuild") {
        return;
    }
    let ws = workspace();
    let strict = component("strict-policy.wasm");
    let strict = strict.to_str().unwrap();

    let (code, default) = run_json(ws.path(), &[], "exit 3");
    assert_eq!(code, 3);
    assert_eq!(sandbox(&default)["denied"], json!(false));

    let (code, swapped) = run_json(ws.path(), &["--policy", strict], "exit 3");
    assert_eq!(code, 3);
    assert_eq!(
        confined_facts(&swapped),
        json!({"mode": "read-only", "denied": true, "enforcement": "full"})
    );
}

#[test]
fn a_file_that_is_not_a_component_is_a_policy_error() {
    let ws = workspace();
    let bogus = ws.path().join("bogus.wasm");
    std::fs::write(&bogus, b"not wasm at all").unwrap();
    let marker = ws.path().join("ran");
    let output = cordon()
        .current_dir(ws.path())
        .args(["run", "--policy", bogus.to_str().unwrap(), "--"])
        .arg(format!("touch {}", marker.display()))
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(70));
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains("policy component failed in load"),
        "{stderr}"
    );
    assert!(!marker.exists());
}

#[test]
fn a_missing_policy_file_is_named() {
    let ws = workspace();
    let (code, stderr) =
        common::cordon_in(ws.path(), &["run", "--policy", "nope.wasm", "--", "true"]);
    assert_eq!(code, Some(70));
    assert!(
        stderr.contains("cannot read policy component nope.wasm"),
        "{stderr}"
    );
}

#[test]
fn a_rule_file_read_through_the_shell_reader_cannot_be_dodged() {
    let ws = workspace();
    let rules = component("rules-policy.wasm");
    let settings = common::rule_file();
    let marker = ws.path().join("ran");
    let touch = format!("touch {}", marker.display());
    // Unconfined, so the test needs no runner: the rules decide before any.
    let args = [
        "--policy",
        rules.to_str().unwrap(),
        "--settings",
        settings.to_str().unwrap(),
        "--max-mode",
        "danger-full-access",
        "--mode",
        "danger-full-access",
    ];
    for dodge in [
        "curl x",
        "c\\url x",
        "'cu'rl x",
        "bash -c \"curl x\"",
        "env A=1 curl x",
        "echo $(curl x)",
        "${CURL}l x",
        "eval \"$(printf curl) x\"",
    ] {
        let line = format!("{touch}; {dodge}");
        let (code, result) = run_json(ws.path(), &args, &line);
        assert_eq!(code, 77, "{dodge}: {result}");
        assert_eq!(result["error"]["code"], "POLICY_DENIED", "{dodge}");
        let reason = result["error"]["reason"].as_str().unwrap_or_default();
        assert!(
            reason.contains("no downloads") || reason.contains("known at run time"),
            "{dodge}: {reason}"
        );
        assert!(!marker.exists(), "{dodge}: the line ran");
    }
    // Positive controls: what no rule refuses runs, `git status` included.
    let (code, result) = run_json(ws.path(), &args, &format!("{touch} && echo curl"));
    assert_eq!(code, 0, "{result}");
    assert_eq!(result["stdout"]["text"], "curl\n");
    assert!(marker.exists());
    let (code, result) = run_json(ws.path(), &args, "git init -q . && git status --short");
    assert_eq!(code, 0, "{result}");
}

#[test]
fn the_rule_files_own_examples_pass_under_policy_test_and_a_wrong_one_fails_the_load() {
    let ws = workspace();
    let rules = component("rules-policy.wasm");
    let rules = rules.to_str().unwrap();
    let settings = common::rule_file();
    let settings = settings.to_str().unwrap();
    let (code, out) = common::cordon_out(
        ws.path(),
        &["policy", "test", rules, "--settings", settings],
    );
    assert_eq!(code, Some(0), "{out}");
    assert!(out.contains("ok   settings"), "{out}");
    let (code, out) = common::cordon_out(
        ws.path(),
        &["policy", "check", rules, "--settings", settings],
    );
    assert_eq!(code, Some(0), "{out}");
    assert!(
        out.contains("cordon:sandbox/executor-policy@0.3.0"),
        "{out}"
    );

    // A rule whose example says otherwise: the load fails with the
    // component's own words, in every command that loads it.
    let wrong = ws.path().join("wrong.toml");
    std::fs::write(
        &wrong,
        "[[rules]]\nprogram = \"curl\"\ndecision = \"deny\"\nmatch = [\"wget x\"]\n",
    )
    .unwrap();
    let wrong = wrong.to_str().unwrap();
    let (code, out) =
        common::cordon_out(ws.path(), &["policy", "test", rules, "--settings", wrong]);
    assert_eq!(code, Some(1), "{out}");
    assert!(
        out.contains("\"wget x\" should match but does not"),
        "{out}"
    );
    let (code, stderr) = common::cordon_in(
        ws.path(),
        &["run", "--policy", rules, "--settings", wrong, "--", "true"],
    );
    assert_eq!(code, Some(70), "{stderr}");
    assert!(
        stderr.contains("the component refused its settings: 1 rule example(s) fail"),
        "{stderr}"
    );
    // A component that takes no settings refuses some.
    let (code, stderr) =
        common::cordon_in(ws.path(), &["run", "--settings", settings, "--", "true"]);
    assert_eq!(code, Some(70), "{stderr}");
    assert!(
        stderr.contains("this component takes no settings"),
        "{stderr}"
    );
    // A malformed settings file is the configuration's error.
    let bad = ws.path().join("bad.toml");
    std::fs::write(&bad, "rules = [").unwrap();
    let (code, stderr) = common::cordon_in(
        ws.path(),
        &["run", "--settings", bad.to_str().unwrap(), "--", "true"],
    );
    assert_eq!(code, Some(78), "{stderr}");
}

/// The shipped components run by name from the binary, and export as the
/// bytes the build made; a name not shipped is refused, naming those that are.
#[test]
fn a_shipped_policy_runs_as_builtin_and_exports_as_built() {
    let ws = workspace();
    let marker = ws.path().join("ran");
    let touch = format!("touch {}", marker.display());
    let settings = common::rule_file();
    // Unconfined, so the test needs no runner: the rules decide before any.
    let args = [
        "--policy",
        "builtin:rules-policy",
        "--settings",
        settings.to_str().unwrap(),
        "--max-mode",
        "danger-full-access",
        "--mode",
        "danger-full-access",
    ];
    let (code, result) = run_json(ws.path(), &args, &format!("{touch}; curl x"));
    assert_eq!(code, 77, "{result}");
    assert_eq!(result["error"]["code"], "POLICY_DENIED");
    assert!(!marker.exists(), "a refused line ran");
    let (code, result) = run_json(ws.path(), &args, &format!("{touch} && echo ok"));
    assert_eq!(
        (code, &result["stdout"]["text"]),
        (0, &json!("ok\n")),
        "{result}"
    );
    assert!(marker.exists(), "an allowed line did not run");

    // Exported: the same bytes the build made, and `policy check` reads it by name too.
    let out = ws.path().join("rules.wasm");
    let (code, stderr) = common::cordon_in(
        ws.path(),
        &[
            "policy",
            "export",
            "rules-policy",
            "-o",
            out.to_str().unwrap(),
        ],
    );
    assert_eq!(code, Some(0), "{stderr}");
    assert_eq!(
        std::fs::read(&out).unwrap(),
        std::fs::read(component("rules-policy.wasm")).unwrap()
    );
    let listed = cordon().args(["policy", "export"]).output().unwrap();
    let listed = String::from_utf8_lossy(&listed.stdout);
    for name in ["bash-sandbox", "rules-policy", "pwsh-sandbox", "bash-local"] {
        assert!(listed.contains(&format!("builtin:{name}\t")), "{listed}");
    }
    let (code, stderr) = common::cordon_in(
        ws.path(),
        &[
            "policy",
            "check",
            "builtin:rules-policy",
            "--settings",
            settings.to_str().unwrap(),
        ],
    );
    assert_eq!(code, Some(0), "{stderr}");

    // Not shipped: refused before anything runs, naming what is.
    let (code, stderr) = common::cordon_in(
        ws.path(),
        &["run", "--policy", "builtin:rules", "--", "true"],
    );
    assert_eq!(code, Some(2), "{stderr}");
    assert!(stderr.contains("builtin:rules-policy"), "{stderr}");
    let config = ws.path().join("cordon.toml");
    std::fs::write(&config, "[policy]\nbuiltin = \"rules\"\n").unwrap();
    let (code, stderr) = common::cordon_in(
        ws.path(),
        &["run", "--config", config.to_str().unwrap(), "--", "true"],
    );
    assert_eq!(code, Some(78), "{stderr}");
    assert!(stderr.contains("policy.builtin"), "{stderr}");
}
