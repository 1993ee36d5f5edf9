//! Policy components as operators deploy them: `--policy` swaps behaviour
//! without rebuilding the host, and a bad component is a clear error.

use crate::common;

use common::{bwrap_usable, component, cordon, run_json, sandbox, workspace};
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
        sandbox(&swapped),
        &json!({"mode": "read-only", "denied": true, "enforcement": "full"})
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
    let rules = rules.to_str().unwrap();
    let marker = ws.path().join("ran");
    let touch = format!("touch {}", marker.display());
    // Unconfined, so the test needs no runner: the rules decide before any.
    let args = [
        "--policy",
        rules,
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
        assert_eq!(code, 64, "{dodge}: {result}");
        assert_eq!(result["error"]["code"], "INVALID_REQUEST", "{dodge}");
        let message = result["error"]["message"].as_str().unwrap_or_default();
        assert!(
            message.contains("refused: no downloads") || message.contains("known at run time"),
            "{dodge}: {message}"
        );
        assert!(!marker.exists(), "{dodge}: the line ran");
    }
    // Positive control: what no rule refuses runs.
    let (code, result) = run_json(ws.path(), &args, &format!("{touch} && echo curl"));
    assert_eq!(code, 0, "{result}");
    assert_eq!(result["stdout"]["text"], "curl\n");
    assert!(marker.exists());
}
