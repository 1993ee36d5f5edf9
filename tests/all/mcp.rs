//! `cordon mcp` end to end, driven by the official MCP Python SDK (a client
//! cordon did not write): `tests/mcp/test_cordon_mcp.py`. Skips loudly
//! without the `mcp` package; with `CORDON_E2E_REQUIRE_MCP=1` (set by
//! `scripts/test.sh` on CI, whose setup installs it) that fails instead.

use crate::common;

use std::process::Command;

#[test]
fn the_official_mcp_sdk_drives_cordon_mcp() {
    let test = "the_official_mcp_sdk_drives_cordon_mcp";
    if !common::python_usable(test) {
        return;
    }
    let sdk = Command::new("python3").args(["-c", "import mcp"]).output();
    if !sdk.is_ok_and(|out| out.status.success()) {
        assert!(
            std::env::var_os("CORDON_E2E_REQUIRE_MCP").is_none(),
            "the MCP Python SDK is required here (CORDON_E2E_REQUIRE_MCP) but `import mcp` fails"
        );
        eprintln!("SKIPPED {test}: the MCP Python SDK is not installed (pip install mcp)");
        return;
    }
    common::python_suite(test, "tests/mcp", "test_cordon_mcp", 5);
}
