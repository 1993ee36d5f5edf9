//! The other shipped executors loaded by the unchanged `cordon` binary:
//! `bash-local` (never confines; refused at load unless the ceiling allows
//! danger-full-access), `pwsh-sandbox` (needs a real `pwsh`; skips loudly
//! without one) and `js-policy`, the component written in JavaScript.

use crate::common;

use common::{
    bwrap_usable, component, cordon_in, js_policy, run_json, sandbox, shared_component_cache,
    workspace,
};

#[test]
fn bash_local_is_refused_at_load_below_a_danger_ceiling() {
    let ws = workspace();
    let policy = component("bash-local.wasm");
    let marker = ws.path().join("ran");
    let (code, stderr) = cordon_in(
        ws.path(),
        &[
            "run",
            "--policy",
            policy.to_str().unwrap(),
            "--",
            &format!("touch {}", marker.display()),
        ],
    );
    assert_eq!(code, Some(70), "{stderr}");
    assert!(
        stderr.contains("policy component bash-local runs commands as danger-full-access")
            && stderr.contains("--max-mode danger-full-access"),
        "{stderr}"
    );
    assert!(
        !marker.exists(),
        "nothing may run when the policy is refused"
    );
}

#[test]
fn bash_local_runs_every_command_unconfined_when_the_ceiling_allows_it() {
    let ws = workspace();
    let policy = component("bash-local.wasm");
    let marker = ws.path().join("outside-any-sandbox");
    let (code, result) = run_json(
        ws.path(),
        &[
            "--policy",
            policy.to_str().unwrap(),
            "--max-mode",
            "danger-full-access",
            "--mode",
            "read-only",
        ],
        &format!("touch {} && echo done", marker.display()),
    );
    assert_eq!(code, 0, "{result}");
    assert_eq!(result["stdout"]["text"], "done\n");
    assert_eq!(sandbox(&result)["mode"], "danger-full-access");
    assert!(sandbox(&result).get("enforcement").is_none(), "{result}");
    assert!(marker.exists());
}

#[test]
fn pwsh_sandbox_runs_a_real_pwsh_confined() {
    let Some(_) = which("pwsh") else {
        eprintln!(
            "SKIPPED pwsh_sandbox_runs_a_real_pwsh_confined: pwsh is not installed \
             (its behaviour is still checked by components/pwsh-sandbox/cases.toml)"
        );
        return;
    };
    if !bwrap_usable("pwsh_sandbox_runs_a_real_pwsh_confined") {
        return;
    }
    let ws = workspace();
    let policy = component("pwsh-sandbox.wasm");
    let (code, result) = run_json(
        ws.path(),
        &["--policy", policy.to_str().unwrap()],
        "Write-Output 'héllo'; New-Item -Path /etc/cordon-pwsh -ItemType File",
    );
    assert_ne!(code, 0, "{result}");
    assert!(
        result["stdout"]["text"].as_str().unwrap().contains("héllo"),
        "{result}"
    );
    assert_eq!(sandbox(&result)["mode"], "read-only");
    assert!(!std::path::Path::new("/etc/cordon-pwsh").exists());
}

/// A shell the host lacks (pwsh-sandbox without `pwsh`) is the command's
/// own failure, exit 127 with the reason, on every rung: the sandbox was
/// built, so it is not `SANDBOX_UNAVAILABLE` (whose fixes are about
/// sandboxes) and no rung is demoted for it.
#[test]
fn a_shell_the_host_lacks_exits_127_and_is_no_missing_sandbox() {
    if which("pwsh").is_some() {
        eprintln!(
            "SKIPPED a_shell_the_host_lacks_exits_127_and_is_no_missing_sandbox: pwsh is \
             installed here"
        );
        return;
    }
    let ws = workspace();
    let policy = component("pwsh-sandbox.wasm");
    for (backend, _) in crate::common::confined_backends("a_shell_the_host_lacks_exits_127") {
        let mut args = backend.to_vec();
        args.extend(["--policy", policy.to_str().unwrap()]);
        let (code, result) = run_json(ws.path(), &args, "Write-Output hi");
        assert_eq!(code, 127, "{backend:?}: {result}");
        assert!(result.get("error").is_none(), "{backend:?}: {result}");
        assert_eq!(result["exitCode"], 127, "{backend:?}: {result}");
        assert!(
            result["stderr"]["text"]
                .as_str()
                .unwrap()
                .contains("cannot execute pwsh"),
            "{backend:?}: {result}"
        );
    }
}

#[test]
fn the_javascript_policy_runs_under_the_unchanged_binary() {
    let Some(wasm) = js_policy("the_javascript_policy_runs_under_the_unchanged_binary") else {
        return;
    };
    if !bwrap_usable("the_javascript_policy_runs_under_the_unchanged_binary") {
        return;
    }
    let ws = workspace();
    let cache = shared_component_cache();
    let flags = [
        "--policy",
        wasm.to_str().unwrap(),
        "--component-cache",
        cache.to_str().unwrap(),
    ];
    let (code, result) = run_json(ws.path(), &flags, "echo from js; touch /etc/cordon-js");
    assert_eq!(code, 1, "{result}");
    assert_eq!(result["stdout"]["text"], "from js\n");
    assert_eq!(sandbox(&result)["denied"], true, "{result}");
    assert_eq!(sandbox(&result)["enforcement"], "full");

    // Its own rule: git push under read-only asks for workspace-write.
    let (code, result) = run_json(ws.path(), &flags, "git push origin main");
    assert_eq!(code, 75, "{result}");
    assert_eq!(result["error"]["code"], "APPROVAL_REQUIRED");
    assert!(
        result["error"]["reason"]
            .as_str()
            .unwrap()
            .contains("git push needs workspace-write"),
        "{result}"
    );
    assert_eq!(result["error"]["policy"]["mode"], "workspace-write");
    // The approved re-send with that policy runs (the command is harmless).
    let grant = result["error"]["policy"].to_string();
    let mut approved = flags.to_vec();
    approved.extend(["--approved", "--grant", &grant]);
    let (code, result) = run_json(ws.path(), &approved, "echo 'git push' approved");
    assert_eq!(code, 0, "{result}");
    assert_eq!(sandbox(&result)["mode"], "workspace-write");
}

fn which(program: &str) -> Option<std::path::PathBuf> {
    std::env::split_paths(&std::env::var_os("PATH")?)
        .map(|dir| dir.join(program))
        .find(|path| path.is_file())
}
