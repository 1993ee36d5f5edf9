//! The Python client (clients/python, stdlib only) against the real
//! `cordon serve`: its own unittest suite, run here so `cargo test` and CI
//! run it. Skips loudly without `python3`; with
//! `CORDON_E2E_REQUIRE_PYTHON=1` (set by scripts/test.sh on CI) that fails.

use crate::common;

use std::path::Path;
use std::process::Command;

use common::{bwrap_usable, component, workspace};

#[test]
fn the_python_client_drives_cordon_serve() {
    if !common::python_usable("the_python_client_drives_cordon_serve") {
        return;
    }
    let confined = bwrap_usable("the_python_client_drives_cordon_serve (confined checks)");
    let scratch = workspace();
    let client_dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../clients/python");
    let output = Command::new("python3")
        .args(["-m", "unittest", "-v", "test_cordon_client"])
        .current_dir(&client_dir)
        .env("CORDON_BIN", env!("CARGO_BIN_EXE_cordon"))
        .env("CORDON_TEST_DIR", scratch.path())
        .env("CORDON_TEST_CONFINED", if confined { "1" } else { "0" })
        .env("CORDON_STRICT_POLICY", component("strict-policy.wasm"))
        .env("CORDON_RULES_POLICY", component("rules-policy.wasm"))
        .env("CORDON_RULES_SETTINGS", common::rule_file())
        .env("PYTHONDONTWRITEBYTECODE", "1")
        .output()
        .expect("run python3");
    let report = String::from_utf8_lossy(&output.stderr);
    eprintln!("{report}");
    assert!(
        output.status.success(),
        "the Python client's tests failed:\n{report}"
    );
    assert!(report.contains("Ran 7 tests"), "{report}");
}
