//! The component test kit through `cordon policy test`: the shipped
//! components pass their case files (the contract of SPEC.md §2, §3, §7),
//! a component that breaks the contract gets a readable diff and a nonzero
//! exit, and a broken case file is named precisely.

use crate::common;

use std::path::{Path, PathBuf};

use common::{component, cordon, js_policy, shared_component_cache, workspace};

fn cases(relative: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("..")
        .join(relative)
}

/// `cordon policy test COMPONENT CASES`: exit code and stdout.
fn policy_test(wasm: &Path, case_file: &Path) -> (i32, String) {
    let output = cordon()
        .args(["policy", "test"])
        .arg(wasm)
        .arg(case_file)
        .arg("--component-cache")
        .arg(shared_component_cache())
        .output()
        .expect("run cordon policy test");
    let stdout = String::from_utf8_lossy(&output.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&output.stderr);
    (
        output.status.code().unwrap_or(-1),
        format!("{stdout}{stderr}"),
    )
}

#[test]
fn every_shipped_component_passes_its_case_file() {
    for name in ["bash-sandbox", "pwsh-sandbox", "bash-local", "rules-policy"] {
        let (code, out) = policy_test(
            &component(&format!("{name}.wasm")),
            &cases(&format!("components/{name}/cases.toml")),
        );
        assert_eq!(code, 0, "{name}: {out}");
        assert!(out.contains(&format!("{name}: ")), "{out}");
        assert!(
            out.contains(" passed, 0 failed") && !out.contains("FAIL"),
            "{name}: {out}"
        );
    }
}

#[test]
fn the_javascript_component_keeps_the_same_contract() {
    let Some(wasm) = js_policy("the_javascript_component_keeps_the_same_contract") else {
        return;
    };
    let (code, out) = policy_test(&wasm, &cases("components/js-policy/cases.toml"));
    assert_eq!(code, 0, "{out}");
    assert!(
        out.contains("js-policy: ") && out.contains(" passed, 0 failed"),
        "{out}"
    );
}

#[test]
fn a_component_that_breaks_the_contract_gets_a_diff_per_failing_case() {
    // strict-policy stamps every confined nonzero exit as denied.
    let (code, out) = policy_test(
        &component("strict-policy.wasm"),
        &cases("components/cases/classify.toml"),
    );
    assert_eq!(code, 1, "{out}");
    assert!(
        out.contains("FAIL bwrap: another dialect's denial text is not a denial"),
        "{out}"
    );
    assert!(
        out.contains("facts.denied: expected false, got true"),
        "{out}"
    );
    assert!(
        out.contains("ok   bwrap: a read-only file system error"),
        "{out}"
    );
    assert!(out.contains("strict-policy: "), "{out}");
}

#[test]
fn a_broken_case_file_is_named_with_its_key() {
    let ws = workspace();
    let file = ws.path().join("cases.toml");
    std::fs::write(
        &file,
        "[[case]]\nname = \"x\"\nrequest = { command = \"ls\" }\nexpect.spek = {}\n",
    )
    .unwrap();
    let (code, out) = policy_test(&component("bash-sandbox.wasm"), &file);
    assert_eq!(code, 78, "{out}");
    assert!(out.contains("unknown field `spek`"), "{out}");
    assert!(out.contains("cases.toml"), "{out}");
}

#[test]
fn a_component_that_does_not_load_is_policy_failed() {
    let ws = workspace();
    let bogus = ws.path().join("bogus.wasm");
    std::fs::write(&bogus, b"not wasm").unwrap();
    let (code, out) = policy_test(&bogus, &cases("components/cases/resolve.toml"));
    assert_eq!(code, 70, "{out}");
    assert!(out.contains("POLICY_FAILED"), "{out}");
}

#[test]
fn the_kit_calls_a_components_render_and_none_for_one_without() {
    use cordon::model::Told;
    let load = |name: &str| {
        cordon::testkit::Kit::load(&std::fs::read(component(name)).unwrap()).expect("load")
    };
    let rendering = load("render-policy.wasm");
    assert_eq!(
        rendering
            .render("curl x", &Told::Refused("no downloads".into()))
            .unwrap(),
        Some("RENDERED: refused (no downloads)".to_owned())
    );
    // `none` from the component: the host's text applies.
    assert_eq!(
        rendering
            .render(
                "git push",
                &Told::NeedsApproval("leaves the machine".into())
            )
            .unwrap(),
        None
    );
    let plain = load("bash-sandbox.wasm");
    assert_eq!(
        plain.render("true", &Told::Refused("x".into())).unwrap(),
        None
    );
}
