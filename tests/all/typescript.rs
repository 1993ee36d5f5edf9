//! The TypeScript client (clients/typescript) against the real `cordon
//! serve`: its own Node test suite (`npm test`: the types regenerated from
//! docs/protocol.schema.json and compared, the error table against
//! docs/protocol.md, a run, a denial, a task with input and the error codes
//! over stdio and a socket, the executor adapter and SANDBOX_UNAVAILABLE).
//! Its packages (TypeScript, Node's types) are installed by
//! scripts/setup.sh; without them this skips loudly, and with
//! `CORDON_E2E_REQUIRE_JS=1` (CI) fails.

use std::path::Path;
use std::process::Command;

use crate::common;

#[test]
fn the_typescript_client_drives_cordon_serve() {
    let test = "the_typescript_client_drives_cordon_serve";
    let client = Path::new(env!("CARGO_MANIFEST_DIR")).join("../clients/typescript");
    if !client.join("node_modules/.bin/tsc").exists() {
        assert!(
            std::env::var_os("CORDON_E2E_REQUIRE_JS").is_none(),
            "the TypeScript client's packages are required here (CORDON_E2E_REQUIRE_JS) but \
             not installed: run scripts/setup.sh"
        );
        eprintln!("SKIPPED {test}: clients/typescript has no node_modules (scripts/setup.sh)");
        return;
    }
    let confined = common::ladder_confines(&format!("{test} (confined checks)"));
    let scratch = common::workspace();
    let output = Command::new("npm")
        .args(["test", "--silent"])
        .current_dir(&client)
        .env("CORDON_BIN", env!("CARGO_BIN_EXE_cordon"))
        .env("CORDON_TEST_DIR", scratch.path())
        .env("CORDON_TEST_CONFINED", if confined { "1" } else { "0" })
        .output()
        .expect("run npm test");
    let report = format!(
        "{}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    eprintln!("{report}");
    assert!(output.status.success(), "npm test failed:\n{report}");
    assert!(
        report.contains("# pass 5") && report.contains("# fail 0"),
        "{report}"
    );
}
