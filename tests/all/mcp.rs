//! `cordon mcp` end to end, driven by the official MCP Python SDK (a client
//! cordon did not write): `tests/mcp/test_cordon_mcp.py`. Skips loudly
//! without the `mcp` package; with `CORDON_E2E_REQUIRE_MCP=1` (set by
//! `scripts/test.sh` on CI, whose setup installs it) that fails instead.

use crate::common;

use std::path::Path;
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
    common::python_suite(test, "tests/mcp", "test_cordon_mcp", 25);
}

/// Where scripts/setup.sh installs the agent programs from npm
/// (`CORDON_AGENTS_DIR` overrides it).
fn agents_bin() -> std::path::PathBuf {
    std::env::var_os("CORDON_AGENTS_DIR")
        .map(std::path::PathBuf::from)
        .unwrap_or_else(|| Path::new(env!("CARGO_MANIFEST_DIR")).join("../target/agents"))
        .join("node_modules/.bin")
}

/// The Codex CLI and Claude Code, from npm, mount `cordon mcp` from
/// docs/mcp.md's snippets and are driven by a scripted model on loopback:
/// `tests/agents/test_real_agents.py`. Skips loudly when the packages are
/// not installed; with `CORDON_E2E_REQUIRE_AGENTS=1` (set by
/// `scripts/test.sh` on CI when setup installed them) that fails instead.
#[test]
fn real_agents_forward_what_cordon_tells_the_model() {
    let test = "real_agents_forward_what_cordon_tells_the_model";
    if !common::python_usable(test) {
        return;
    }
    let bin = agents_bin();
    let usable = |agent: &str| {
        Command::new(bin.join(agent))
            .arg("--version")
            .output()
            .is_ok_and(|out| out.status.success())
    };
    if !(usable("codex") && usable("claude")) {
        assert!(
            std::env::var_os("CORDON_E2E_REQUIRE_AGENTS").is_none(),
            "the agent programs are required here (CORDON_E2E_REQUIRE_AGENTS) but {} has no \
             working codex and claude (scripts/setup.sh installs them with npm)",
            bin.display()
        );
        eprintln!(
            "SKIPPED {test}: no codex and claude in {} (scripts/setup.sh installs them with npm)",
            bin.display()
        );
        return;
    }
    common::python_suite_with(
        test,
        "tests/agents",
        "test_real_agents",
        3,
        &[("CORDON_AGENTS_BIN", &bin)],
    );
}

/// The facts every surface reports of a run, without what differs by
/// nature between two runs (spill paths).
fn facts(result: &serde_json::Value) -> serde_json::Value {
    let mut facts = result.clone();
    for stream in ["stdout", "stderr"] {
        if let Some(stream) = facts[stream].as_object_mut() {
            stream.remove("spillPath");
        }
    }
    facts
}

#[test]
fn run_serve_and_mcp_give_the_same_facts_for_the_same_request() {
    let test = "run_serve_and_mcp_give_the_same_facts";
    if !common::python_usable(test) {
        return;
    }
    let confined = common::bwrap_usable(test);
    let ws = common::workspace();
    let dir = ws.path();
    let command = "echo out; echo err >&2; touch /etc/cordon-three-surfaces";
    let args = ["--backend", if confined { "bwrap" } else { "auto" }];

    let (_, from_run) = common::run_json(dir, &args, command);

    let mut serve = common::cordon()
        .current_dir(dir)
        .arg("serve")
        .args(args)
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .expect("spawn cordon serve");
    let mut rpc = crate::rpc::Rpc::new(serve.stdout.take().unwrap(), serve.stdin.take().unwrap());
    let from_serve = rpc.call("run", serde_json::json!({ "command": command }));
    rpc.close();
    let _ = serve.wait();

    let script = "import asyncio, json, sys\n\
        from mcp import ClientSession, StdioServerParameters\n\
        from mcp.client.stdio import stdio_client\n\
        async def main():\n\
        \x20   params = StdioServerParameters(command=sys.argv[1], args=['mcp', '--structured-content', *sys.argv[3:]])\n\
        \x20   async with stdio_client(params) as (r, w):\n\
        \x20       async with ClientSession(r, w) as s:\n\
        \x20           await s.initialize()\n\
        \x20           res = await s.call_tool('shell', {'command': sys.argv[2]})\n\
        \x20           print(json.dumps(res.structured_content))\n\
        asyncio.run(main())\n";
    let output = Command::new("python3")
        .arg("-c")
        .arg(script)
        .arg(env!("CARGO_BIN_EXE_cordon"))
        .arg(command)
        .args(args)
        .current_dir(dir)
        .output()
        .expect("run the MCP client");
    if !output.status.success() {
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert!(
            std::env::var_os("CORDON_E2E_REQUIRE_MCP").is_none()
                || !stderr.contains("No module named 'mcp'"),
            "{stderr}"
        );
        if stderr.contains("No module named 'mcp'") {
            eprintln!("SKIPPED {test}: the MCP Python SDK is not installed");
            return;
        }
        panic!("the MCP client failed: {stderr}");
    }
    let from_mcp: serde_json::Value = serde_json::from_slice(&output.stdout).expect("facts");

    assert_eq!(facts(&from_run), facts(&from_serve), "run vs serve");
    assert_eq!(facts(&from_serve), facts(&from_mcp), "serve vs mcp");
    assert_eq!(from_mcp["stdout"]["text"], "out\n");
    if confined {
        assert_eq!(from_mcp["sandbox"]["denied"], true, "{from_mcp}");
    }
    assert!(!Path::new("/etc/cordon-three-surfaces").exists());
}
