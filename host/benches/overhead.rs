//! The host's own overhead, measured side by side in one run against doing
//! the same thing directly. Run with `cargo build --release -p
//! cordon-launcher && cargo bench -p cordon --bench overhead` (the
//! launcher's own executable beside cordon, as it is installed); it prints
//! the markdown table recorded in BENCHMARKS.md.
//!
//! Rounds are interleaved (one sample of every case per round) so a busy
//! machine slows every case alike; each figure is the median of its samples.
//!
//! `CORDON_BENCH_BEFORE=/path/to/older/cordon` adds that binary's CLI run
//! and served mode to the same interleaved rounds, so a change is measured
//! before and after side by side in one run (`CORDON_BENCH_BEFORE_NAME`
//! names its rows: the musl release build, say). `CORDON_BENCH_ONLY=policy`
//! measures the policy calls alone in a tight loop. `CORDON_BENCH_RULES_BEFORE=
//! /path/to/older/rules-policy.wasm` adds that component's round trip beside
//! this one's, interleaved. `CORDON_BENCH_ONLY=serving`
//! runs only the served-mode figures (`support/serving.rs`);
//! `CORDON_BENCH_ONLY=proxying` only the downloads through the allow-list
//! proxy, tunnelled and inspected (`support/proxying.rs`).

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use cordon::{Deployment, ExecRequest, Host, SandboxMode, SandboxPolicy};

#[path = "support/proxying.rs"]
mod proxying;
#[path = "support/scale.rs"]
mod scale;
#[path = "support/serving.rs"]
mod serving;

const FLOOD_BYTES: u64 = 100 << 20;

/// The name of a row of `CORDON_BENCH_BEFORE`'s binary: `case`, then
/// what that binary is called — `CORDON_BENCH_BEFORE_NAME` (say, "the
/// musl release build"), else "**before**" — made for the run's whole
/// length.
pub fn before_row(case: &str) -> &'static str {
    let name = std::env::var("CORDON_BENCH_BEFORE_NAME").unwrap_or_else(|_| "**before**".into());
    Box::leak(format!("{case}, {name}").into_boxed_str())
}

/// One benchmark case: its name, one sample of it, and how many samples.
type Case<'a> = (&'a str, Box<dyn FnMut() + 'a>, usize);

fn main() {
    refuse_to_run_nested();
    let rounds: usize = std::env::var("ROUNDS")
        .ok()
        .and_then(|r| r.parse().ok())
        .unwrap_or(100);
    let flood_rounds = (rounds / 10).max(3);
    let dir = std::env::current_dir().expect("cwd");
    let mut deployment = Deployment::in_dir(&dir);
    deployment.max_mode = SandboxMode::DangerFullAccess;
    // The `full` cases need the operator's ceiling (a host's default is none).
    deployment.max_network = cordon::model::Network::Full;
    let cordon_bin = env!("CARGO_BIN_EXE_cordon");
    // The launcher's own executable, as cordon uses it beside itself.
    let launcher_bin: &str = Box::leak(installed_launcher(cordon_bin).into_boxed_str());
    // The same cordon alone in a directory of its own: it is its own
    // launcher there (what a host without `cordon-launcher` pays).
    let alone_dir = tempfile_dir().join("alone");
    std::fs::create_dir_all(&alone_dir).expect("a directory for cordon alone");
    let alone_bin = alone_dir.join("cordon");
    std::fs::copy(cordon_bin, &alone_bin).expect("copy cordon");
    let alone_bin: &str = Box::leak(alone_bin.to_string_lossy().into_owned().into_boxed_str());
    // The library with the ladder cordon itself has (its launcher is the
    // launcher's own executable: the namespace runner is its first rung),
    // and one with bwrap pinned.
    let host_with = |backend: cordon::sandbox::BackendChoice| {
        Host::builder()
            .deployment(deployment.clone())
            .sandbox(cordon::sandbox::SandboxConfig {
                backend,
                launcher: Some(launcher_bin.into()),
                ..Default::default()
            })
            .build()
            .expect("host")
    };
    let host = host_with(cordon::sandbox::BackendChoice::Auto);
    let bwrap_host = host_with(cordon::sandbox::BackendChoice::Bwrap);
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime");
    let bwrap = which("bwrap");
    // An older build of cordon to measure beside this one.
    let before_bin: Option<String> = std::env::var("CORDON_BENCH_BEFORE").ok();

    let run = |mode: SandboxMode, command: &str| {
        let request = ExecRequest::new(command).with_policy(SandboxPolicy::new(mode, &dir));
        let result = runtime.block_on(host.run(request)).expect("cordon run");
        assert_eq!(result.exit_code, Some(0), "{result:?}");
    };
    let run_bwrap = |mode: SandboxMode| {
        let request = ExecRequest::new("true").with_policy(SandboxPolicy::new(mode, &dir));
        let result = runtime
            .block_on(bwrap_host.run(request))
            .expect("cordon run");
        assert_eq!(result.exit_code, Some(0), "{result:?}");
    };
    // `true` under `policy` through the library.
    let run_under = |policy: &SandboxPolicy| {
        let request = ExecRequest::new("true").with_policy(policy.clone());
        let result = runtime.block_on(host.run(request)).expect("cordon run");
        assert_eq!(result.exit_code, Some(0), "{result:?}");
    };
    let flood = format!("head -c {FLOOD_BYTES} /dev/zero");

    let engine = cordon::policy::PolicyEngine::new().expect("engine");
    let load = |bytes: &[u8]| {
        cordon::policy::Policy::load(&engine, bytes, cordon::policy::Limits::default())
            .expect("the component loads")
    };
    // A component host/build.rs built into OUT_DIR.
    let built = |name: &str| {
        std::fs::read(std::path::Path::new(env!("OUT_DIR")).join(name))
            .unwrap_or_else(|err| panic!("{name} is built: {err}"))
    };
    let policy = load(cordon::policy::EMBEDDED_DEFAULT);
    let policy_deployment = Deployment::in_dir(&dir);
    let confiner: std::sync::Arc<dyn cordon::sandbox::Confine> = std::sync::Arc::new(
        cordon::sandbox::Sandbox::with_config(cordon::sandbox::SandboxConfig {
            launcher: Some(launcher_bin.into()),
            ..Default::default()
        }),
    );
    let round_trip = {
        let (deployment, confiner) = (policy_deployment.clone(), confiner.clone());
        move || policy_round_trip(&policy, &deployment, &confiner, "true")
    };
    // The JavaScript component (components/js-policy/build.sh), when built.
    let js_policy = std::env::var_os("CORDON_JS_POLICY")
        .map(std::path::PathBuf::from)
        .unwrap_or_else(|| {
            std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
                .join("../target/components/js-policy.wasm")
        });
    let js_round_trip = match std::fs::read(&js_policy) {
        Ok(bytes) => {
            let js =
                cordon::policy::Policy::load(&engine, &bytes, cordon::policy::Limits::default())
                    .expect("js-policy loads");
            let (deployment, confiner) = (policy_deployment.clone(), confiner.clone());
            Some(move || policy_round_trip(&js, &deployment, &confiner, "true"))
        }
        Err(_) => {
            eprintln!(
                "SKIPPED the js-policy case: {} not built",
                js_policy.display()
            );
            None
        }
    };

    // The rule-file fixture (shell reader + 100 rules) beside bash-sandbox,
    // both resolving the same realistic line.
    let line = "git status && cargo test --workspace 2>&1 | tail -n 20";
    let bash_line = {
        let policy = load(cordon::policy::EMBEDDED_DEFAULT);
        let (deployment, confiner) = (policy_deployment.clone(), confiner.clone());
        move || policy_round_trip(&policy, &deployment, &confiner, line)
    };
    let rules_line = {
        let policy = load(&built("rules-policy.wasm"));
        let mut deployment = policy_deployment.clone();
        deployment.settings = include_str!("../../components/rules-policy/bench-rules.json").into();
        policy
            .validate_settings(&deployment.settings)
            .expect("the 100-rule file is valid");
        let confiner = confiner.clone();
        move || policy_round_trip(&policy, &deployment, &confiner, line)
    };
    // With CORDON_BENCH_RULES_BEFORE, an older rules-policy.wasm on the
    // same line and settings, interleaved with this one (a reader's cost,
    // before and after).
    let rules_before_line = std::env::var("CORDON_BENCH_RULES_BEFORE").ok().map(|path| {
        let policy = load(&std::fs::read(&path).expect("read CORDON_BENCH_RULES_BEFORE"));
        let mut deployment = policy_deployment.clone();
        deployment.settings = include_str!("../../components/rules-policy/bench-rules.json").into();
        let confiner = confiner.clone();
        move || policy_round_trip(&policy, &deployment, &confiner, line)
    });
    // A component built against world 0.1.0 (the legacy fixture), through
    // the 0.1.0 binding layer, beside the 0.2.0 ones.
    let legacy_line = {
        let policy = load(&built("legacy-policy.wasm"));
        let (deployment, confiner) = (policy_deployment.clone(), confiner.clone());
        move || policy_round_trip(&policy, &deployment, &confiner, line)
    };
    // One connection decision through the component (what the allow-list
    // proxy will ask for every connection).
    let connect_decision = {
        let policy = load(cordon::policy::EMBEDDED_DEFAULT);
        let mut grant = SandboxPolicy::new(SandboxMode::ReadOnly, &dir);
        grant.network = cordon::model::Network::Allow(vec![
            "github.com:22".parse().expect("endpoint"),
            "*.npmjs.org:443".parse().expect("endpoint"),
        ]);
        let request = ExecRequest::new("git fetch").with_policy(grant);
        let spec = match policy.resolve(&request, &policy_deployment) {
            Ok(cordon::model::Decision::Allow(spec)) => spec,
            other => panic!("resolve: {other:?}"),
        };
        // The proxy's way: one instance for the run's connections.
        let connector = policy.connector(&spec, "{}");
        move || {
            let answer = connector.connect("registry.npmjs.org", 443);
            assert_eq!(answer.expect("connect"), Ok(()));
        }
    };
    let request_decision = request_decision(&policy_deployment);
    let native_dir = dir.to_string_lossy().into_owned();
    let native = move || native_round_trip(&native_dir);
    let strict = std::path::Path::new(env!("OUT_DIR")).join("strict-policy.wasm");
    let cache_parent = tempfile_dir();
    let warm_cache = cache_parent.join("warm");
    let mut cold_round = 0;
    let cgroup_watch =
        scale::CgroupWatch::start().map(|w| std::rc::Rc::new(std::cell::RefCell::new(w)));

    let mut cases: Vec<Case> = vec![
        (
            "policy round trip only (2 fresh instances: resolve and plan+confine on one, settle)",
            Box::new(round_trip),
            rounds,
        ),
        (
            "the same policy logic as native Rust (resolve, argv, settle)",
            Box::new(native),
            rounds,
        ),
        (
            "one connection decision through the component (`connect`, bash-sandbox, the run's instance)",
            Box::new(connect_decision),
            rounds,
        ),
        (
            "one HTTP request decision through the component (`request`, rules-policy's example rules, the run's instance)",
            Box::new(request_decision),
            rounds,
        ),
        (
            "policy round trip, bash-sandbox, a realistic line (`git status && cargo test …` piped to `tail`)",
            Box::new(bash_line),
            rounds,
        ),
        (
            "policy round trip, rules-policy (shell reader + 100-rule settings), the same line",
            Box::new(rules_line),
            rounds,
        ),
        (
            "policy round trip, a world-0.1.0 component (legacy fixture), the same line",
            Box::new(legacy_line),
            rounds,
        ),
        (
            "`bash -c true` directly",
            Box::new(|| direct(&["bash", "-c", "true"])),
            rounds,
        ),
        (
            "cordon library, danger-full-access, `true`",
            Box::new(|| run(SandboxMode::DangerFullAccess, "true")),
            rounds,
        ),
    ];
    if let Some(rules_before_line) = rules_before_line {
        cases.push((
            "policy round trip, rules-policy BEFORE (CORDON_BENCH_RULES_BEFORE), the same line",
            Box::new(rules_before_line),
            rounds,
        ));
    }
    if let Some(js_round_trip) = js_round_trip {
        cases.push((
            "policy round trip, js-policy (JavaScript, componentize-js)",
            Box::new(js_round_trip),
            rounds,
        ));
    }
    // The exact argv cordon spawns for a read-only run, minus the handover
    // and status fds (`--args 4 --json-status-fd 3`: nobody writes or reads
    // them here).
    let bare_bwrap: Option<Vec<String>> = bwrap.as_ref().map(|bwrap| {
        spawned_true(&dir, 1..=4, |argv, policy, layout| {
            cordon::sandbox::bwrap::Bwrap::at(bwrap).wrap(argv, policy, layout)
        })
    });
    if std::env::var("CORDON_BENCH_ONLY").as_deref() == Ok("policy") {
        tight_policy_loop(&policy_deployment, &confiner, rounds.max(1000));
        return;
    }
    if std::env::var("CORDON_BENCH_ONLY").as_deref() == Ok("proxying") {
        proxying::downloads(cordon_bin, rounds.clamp(3, 7));
        return;
    }
    if std::env::var("CORDON_BENCH_ONLY").as_deref() == Ok("serving") {
        let bare = bare_bwrap.expect("the served-mode figures need bwrap");
        serving::throughput(
            cordon_bin,
            before_bin.as_deref(),
            &dir,
            &bare,
            (rounds * 2).max(50),
        );
        serving::many_tasks(cordon_bin, &dir);
        return;
    }
    if let Some(bare) = bare_bwrap.clone() {
        let runner = bare[0].clone();
        cases.push((
            "`bwrap <read-only profile> -- bash -c true` directly",
            Box::new(move || direct(&bare.iter().map(String::as_str).collect::<Vec<_>>())),
            rounds,
        ));
        // The profile before issue 12's hardening (no procfs covers, no
        // IPC/UTS namespaces), to show what the hardening costs.
        let old: Vec<String> = [
            runner.as_str(),
            "--ro-bind",
            "/",
            "/",
            "--dev",
            "/dev",
            "--proc",
            "/proc",
            "--die-with-parent",
            "--unshare-pid",
            "--new-session",
            "--cap-drop",
            "ALL",
            "--",
            "bash",
            "-c",
            "true",
        ]
        .map(String::from)
        .to_vec();
        cases.push((
            "`bwrap <issue-11 read-only profile> -- bash -c true` directly",
            Box::new(move || direct(&old.iter().map(String::as_str).collect::<Vec<_>>())),
            rounds,
        ));
        // The kernel's floor: a C program that builds the same read-only
        // sandbox (support/floor.c), compiled here.
        if let Some(floor) = scale::build_floor() {
            cases.push((
                FLOOR,
                Box::new(move || direct(&[floor.as_str(), "--", "bash", "-c", "true"])),
                rounds,
            ));
        }
        // The Landlock launcher: this build's (scopes, IPC namespace,
        // metadata filter) and, with CORDON_BENCH_BEFORE, the older one's.
        cases.push((
            "`cordon __landlock --unshare-ipc --ro / --rw /dev/null -- bash -c true`",
            Box::new(move || launcher_true(cordon_bin, &["--unshare-ipc"])),
            rounds,
        ));
        if let Some(before) = before_bin.clone() {
            cases.push((
                before_row("`cordon __landlock --ro / --rw /dev/null -- bash -c true`"),
                Box::new(move || launcher_true(&before, &[])),
                rounds,
            ));
        }
        // cordon's namespace runner alone: the argv the host spawns for a
        // read-only run, minus the fds nobody writes or reads here.
        let ns_argv = spawned_true(&dir, 2..=7, |argv, policy, layout| {
            cordon::sandbox::namespaces::Namespaces::at(cordon_bin).wrap(argv, policy, layout)
        });
        cases.push((
            "`cordon __ns <read-only profile> -- bash -c true` directly (the namespace runner alone)",
            Box::new(move || direct(&ns_argv.iter().map(String::as_str).collect::<Vec<_>>())),
            rounds,
        ));
        let small_ns_argv = spawned_true(&dir, 2..=7, |argv, policy, layout| {
            cordon::sandbox::namespaces::Namespaces::at(launcher_bin).wrap(argv, policy, layout)
        });
        cases.push((
            "`cordon-launcher __ns <read-only profile> -- bash -c true` directly (the same runner from the launcher's own executable)",
            Box::new(move || {
                direct(&small_ns_argv.iter().map(String::as_str).collect::<Vec<_>>())
            }),
            rounds,
        ));
        cases.push((
            "cordon library, read-only (the namespace runner), `true`",
            Box::new(|| run(SandboxMode::ReadOnly, "true")),
            rounds,
        ));
        cases.push((
            "cordon library, read-only (bwrap pinned), `true`",
            Box::new(|| run_bwrap(SandboxMode::ReadOnly)),
            rounds,
        ));
        // The grant's cost under bwrap: the protected defaults (held by
        // placeholders when absent) bound read-only over the workspace.
        let ws_dir = std::path::Path::new(env!("CARGO_TARGET_TMPDIR")).join("bench-ws");
        std::fs::create_dir_all(&ws_dir).expect("bench workspace");
        let ws_policy = SandboxPolicy::new(SandboxMode::WorkspaceWrite, &ws_dir);
        let run_in_ws = move || run_under(&ws_policy);
        cases.push((
            "cordon library, workspace-write (the namespace runner, protected defaults), `true`",
            Box::new(run_in_ws),
            rounds,
        ));
        let full_policy = SandboxPolicy {
            network: cordon::model::Network::Full,
            ..SandboxPolicy::new(SandboxMode::ReadOnly, &dir)
        };
        let run_full = move || run_under(&full_policy);
        cases.push((
            "cordon library, read-only (the namespace runner), network `full` (no network namespace), `true`",
            Box::new(run_full),
            rounds,
        ));
        let warm = warm_cache.clone();
        // Each run's cgroups are counted from outside where they can be.
        let watched = cgroup_watch.clone();
        cases.push((
            "`cordon run -- true` (CLI, cold process, the default ladder: the namespace runner)",
            Box::new(move || match watched.as_ref() {
                Some(watch) => {
                    let cache = warm.to_string_lossy().into_owned();
                    let flags = ["--component-cache", cache.as_str()];
                    scale::cli_true_watched(cordon_bin, &flags, &mut watch.borrow_mut());
                }
                None => cli_true(cordon_bin, None, &warm),
            }),
            rounds,
        ));
        // A workspace 400 directories deep beside a shallow one
        // (workspace-write: the protected paths laid out under each).
        let deep_parent = std::path::Path::new(env!("CARGO_TARGET_TMPDIR")).join("bench-deep");
        let shallow = scale::deep_workspace(&deep_parent.join("shallow"), 1);
        let deep = scale::deep_workspace(&deep_parent.join("deep"), 400);
        for (label, ws) in [(SHALLOW, shallow), (DEEP, deep)] {
            let (warm, ws) = (warm_cache.clone(), ws.to_string_lossy().into_owned());
            cases.push((
                label,
                Box::new(move || cli_with(cordon_bin, &writing_in(&ws), "true", &warm)),
                rounds,
            ));
        }
        let warm = warm_cache.clone();
        cases.push((
            "`cordon run -- true`, cordon alone (no `cordon-launcher` beside it: cordon is its own launcher)",
            Box::new(move || cli_true(alone_bin, None, &warm)),
            rounds,
        ));
        // No sandbox at all: what the CLI costs around a run.
        let warm = warm_cache.clone();
        cases.push((
            "`cordon run --mode danger-full-access -- true` (CLI, no sandbox)",
            Box::new(move || {
                let flags = [
                    "--mode",
                    "danger-full-access",
                    "--max-mode",
                    "danger-full-access",
                ];
                cli_true_with(cordon_bin, &flags, &warm);
            }),
            rounds,
        ));
        for (label, backend) in [
            (
                "`cordon run --backend namespaces -- true` (CLI, the namespace runner pinned)",
                "namespaces",
            ),
            (
                "`cordon run --backend bwrap -- true` (CLI, the bwrap rung pinned)",
                "bwrap",
            ),
            (
                "`cordon run --backend landlock -- true` (CLI, the Landlock rung pinned)",
                "landlock",
            ),
        ] {
            let warm = warm_cache.clone();
            cases.push((
                label,
                Box::new(move || cli_true_with(cordon_bin, &["--backend", backend], &warm)),
                rounds,
            ));
        }
        // Landlock in workspace-write: the file supervisor carries out every
        // write in the workspace (protected defaults), a notification each.
        // With CORDON_BENCH_BEFORE, the older binary (the root granted whole)
        // beside it, and the namespace runner's mount tree for scale.
        let files_ws = std::path::Path::new(env!("CARGO_TARGET_TMPDIR")).join("bench-files");
        std::fs::create_dir_all(&files_ws).expect("bench workspace");
        let files_ws = files_ws.to_string_lossy().into_owned();
        let mut writers = vec![(cordon_bin.to_owned(), "landlock", "")];
        if let Some(before) = before_bin.clone() {
            writers.push((before, "landlock", before_row("")));
        }
        writers.push((cordon_bin.to_owned(), "namespaces", ""));
        for (bin, backend, tag) in writers {
            for (what, command) in [
                ("`true`", "true"),
                (
                    "200 files written, then removed",
                    "for i in $(seq 200); do echo $i > f$i; done; rm f*",
                ),
            ] {
                let (bin, warm, ws) = (bin.clone(), warm_cache.clone(), files_ws.clone());
                cases.push((
                    Box::leak(
                        format!(
                            "`cordon run --backend {backend} --mode workspace-write` — {what}{tag}"
                        )
                        .into_boxed_str(),
                    ),
                    Box::new(move || {
                        let mut flags = vec!["--backend", backend];
                        flags.extend(writing_in(&ws));
                        cli_with(&bin, &flags, command, &warm);
                    }),
                    rounds,
                ));
            }
        }
        // Git's code protected in a repository (issue 37): the search for
        // nested repositories, the pins and the placeholders, beside the
        // same workspace with `.git` lifted (nothing of git held).
        let git_ws = std::path::Path::new(env!("CARGO_TARGET_TMPDIR")).join("bench-git");
        git_workspace(&git_ws);
        let git_ws = git_ws.to_string_lossy().into_owned();
        let lifted = cache_parent.join("git-lifted.toml");
        let config = format!("liftable_protected = [\".git\"]\nallowed_roots = [{git_ws:?}]\n");
        std::fs::write(&lifted, config).expect("write the config");
        let lifted = lifted.to_string_lossy().into_owned();
        let lifted_grant = format!(
            "{{\"mode\": \"workspace-write\", \"workspaceRoot\": {git_ws:?}, \"unprotected\": [\".git\"]}}"
        );
        for backend in ["namespaces", "bwrap", "landlock"] {
            for lift in [false, true] {
                let (warm, ws) = (warm_cache.clone(), git_ws.clone());
                let (config, grant) = (lifted.clone(), lifted_grant.clone());
                let what = match lift {
                    false => "git's code protected (the default)",
                    true => "`.git` lifted (nothing of git held)",
                };
                cases.push((
                    Box::leak(
                        format!(
                            "`cordon run --backend {backend} --mode workspace-write -- true` in a \
                             repository (one nested, 4000 files) — {what}"
                        )
                        .into_boxed_str(),
                    ),
                    Box::new(move || {
                        let mut flags = vec!["--backend", backend, "--workdir", &ws];
                        match lift {
                            true => flags.extend(["--config", &config, "--grant", &grant]),
                            false => {
                                flags.extend(["--mode", "workspace-write", "--workspace", &ws])
                            }
                        }
                        cli_with(cordon_bin, &flags, "true", &warm);
                    }),
                    rounds,
                ));
            }
        }
        // Denials named by the kernel (issue 37): the Landlock rung with its
        // denials logged and read back (the audit barrier at every run's
        // end, and for a run that was refused something, the wait for its
        // domain's end record), beside the same runs with it turned off.
        match cordon::denials::KernelDenials::shared() {
            Ok(_) => {
                let off = cache_parent.join("kernel-denials-off.toml");
                std::fs::write(&off, "kernel_denials = false\n").expect("write the config");
                let off = off.to_string_lossy().into_owned();
                let refused = "touch /etc/cordon-bench-denied; true";
                for (command, what) in [("true", "`true`"), (refused, "a refused `touch /etc/…`")]
                {
                    for kernel in [true, false] {
                        let (warm, off) = (warm_cache.clone(), off.clone());
                        let how = match kernel {
                            true => "denials read from the kernel",
                            false => "`kernel_denials = false` (text)",
                        };
                        cases.push((
                            Box::leak(
                                format!(
                                    "`cordon run --backend landlock --mode workspace-write` of \
                                     {what} — {how}"
                                )
                                .into_boxed_str(),
                            ),
                            Box::new(move || {
                                let mut flags = vec!["--backend", "landlock"];
                                flags.extend(["--mode", "workspace-write"]);
                                if !kernel {
                                    flags.extend(["--config", &off]);
                                }
                                cli_with(cordon_bin, &flags, command, &warm);
                            }),
                            rounds,
                        ));
                    }
                }
            }
            Err(why) => eprintln!("SKIPPED the kernel-denials cases: {why}"),
        }
        let (warm, full) = (
            warm_cache.clone(),
            format!(
                "{{\"mode\": \"read-only\", \"workspaceRoot\": {:?}, \"network\": \"full\"}}",
                dir.display().to_string()
            ),
        );
        let full_network = cache_parent.join("full-network.toml");
        std::fs::write(&full_network, "max_network = \"full\"\n").expect("write the config");
        let full_network = full_network.to_string_lossy().into_owned();
        cases.push((
            "`cordon run --grant '{…network: full}' -- true` (CLI, no network namespace)",
            Box::new(move || {
                cli_true_with(
                    cordon_bin,
                    &["--grant", &full, "--config", &full_network],
                    &warm,
                )
            }),
            rounds,
        ));
        if let Some(before) = before_bin.clone() {
            let warm = cache_parent.join("warm-before");
            cases.push((
                before_row("`cordon run -- true` (CLI, cold process, the default ladder)"),
                Box::new(move || cli_true(&before, None, &warm)),
                rounds,
            ));
        }
        let (strict_cached, warm) = (strict.clone(), warm_cache.clone());
        cases.push((
            "`cordon run --policy custom.wasm -- true`, component cached",
            Box::new(move || cli_true(cordon_bin, Some(&strict_cached), &warm)),
            rounds,
        ));
        let cold_parent = cache_parent.clone();
        cases.push((
            "`cordon run --policy custom.wasm -- true`, first run (uncached)",
            Box::new(move || {
                cold_round += 1;
                let fresh_cache = cold_parent.join(format!("cold-{cold_round}"));
                cli_true(cordon_bin, Some(&strict), &fresh_cache);
            }),
            flood_rounds,
        ));
        // The peers, installed by support/peers.sh when missing, each with
        // its own defaults (both read-only for the file tree).
        for (name, version, path) in peers() {
            let (label, args, wanted) = match name.as_str() {
                "codex" => (
                    format!("`codex sandbox -- bash -c true` (peer: codex-cli {version})"),
                    &["sandbox", "--", "bash", "-c", "true"][..],
                    rounds,
                ),
                _ => (
                    format!("`srt -c true` (peer: sandbox-runtime {version})"),
                    &["-c", "true"][..],
                    flood_rounds,
                ),
            };
            let argv: Vec<String> = std::iter::once(path)
                .chain(args.iter().map(|arg| arg.to_string()))
                .collect();
            cases.push((
                // A case's name lives as long as the bench: leaking the
                // two formatted labels keeps `Case` borrowing plain `&str`.
                label.leak(),
                Box::new(move || direct(&argv.iter().map(String::as_str).collect::<Vec<_>>())),
                wanted,
            ));
        }
    } else {
        eprintln!("SKIPPED bwrap cases: bwrap not found on PATH");
    }
    let flood_direct = flood.clone();
    cases.push((
        "100 MiB to stdout, read directly",
        Box::new(move || direct_drain(&["bash", "-c", &flood_direct])),
        flood_rounds,
    ));
    cases.push((
        "100 MiB to stdout, through cordon (danger-full-access)",
        Box::new(|| run(SandboxMode::DangerFullAccess, &flood)),
        flood_rounds,
    ));

    let max_rounds = cases.iter().map(|c| c.2).max().unwrap_or(0);
    let mut samples: Vec<Vec<Duration>> = vec![vec![]; cases.len()];
    for round in 0..max_rounds {
        for (i, (_, case, wanted)) in cases.iter_mut().enumerate() {
            if round < *wanted {
                let start = Instant::now();
                case();
                samples[i].push(start.elapsed());
            }
        }
    }

    let medians: Vec<Duration> = samples.iter_mut().map(|s| median(s)).collect();
    let find = |name: &str| cases.iter().position(|c| c.0 == name).map(|i| medians[i]);
    let bash_true = find("`bash -c true` directly").expect("baseline");
    let bwrap_true = find("`bwrap <read-only profile> -- bash -c true` directly");
    let hardened = find("`bwrap <issue-11 read-only profile> -- bash -c true` directly");
    let floor = find(FLOOR);
    println!(
        "| case | median | vs `bash -c true` | vs B (bwrap, cordon's profile) | vs H (hardened bwrap) | vs the C floor |"
    );
    println!("|---|---|---|---|---|---|");
    let versus = |m: Duration, base: Option<Duration>| {
        base.map(|b| format!("{:.2}×", ratio(m, b)))
            .unwrap_or_else(|| "—".into())
    };
    for (i, (name, _, _)) in cases.iter().enumerate() {
        let m = medians[i];
        println!(
            "| {name} | {:.2} ms | {:.2}× | {} | {} | {} |",
            m.as_secs_f64() * 1e3,
            ratio(m, bash_true),
            versus(m, bwrap_true),
            versus(m, hardened),
            versus(m, floor),
        );
    }
    if let (Some(shallow), Some(deep)) = (find(SHALLOW), find(DEEP)) {
        println!();
        println!(
            "a workspace 400 directories deep vs a shallow one (workspace-write CLI): {:.2}×",
            ratio(deep, shallow)
        );
    }
    if let Some(watch) = &cgroup_watch {
        let watch = watch.borrow();
        let wrong = watch.not_one();
        assert!(
            wrong.is_empty(),
            "one-shot runs that did not make exactly one cgroup: {wrong:?}"
        );
        println!(
            "cgroups a one-shot `cordon run` made, watched with inotify: exactly one in each of {} runs",
            watch.runs.len()
        );
    }
    stream_through_the_cli(cordon_bin, flood_rounds.max(7));
    let policy_wasm = medians[0];
    let policy_native = medians[1];
    println!();
    println!(
        "policy round trip: {:.1} µs through the component vs {:.1} µs native; {:.2}% of bwrap `true`",
        policy_wasm.as_secs_f64() * 1e6,
        policy_native.as_secs_f64() * 1e6,
        bwrap_true.map_or(f64::NAN, |b| 100.0 * ratio(policy_wasm, b))
    );
    if let Some(connect) = find(
        "one connection decision through the component (`connect`, bash-sandbox, the run's instance)",
    ) {
        println!(
            "one connection decision: {:.1} µs (target ≤ 25 µs)",
            connect.as_secs_f64() * 1e6
        );
    }
    if let Some(js) = find("policy round trip, js-policy (JavaScript, componentize-js)") {
        println!(
            "js-policy round trip: {:.1} µs, {:.1}× the Rust component's",
            js.as_secs_f64() * 1e6,
            ratio(js, policy_wasm)
        );
    }
    let flood_direct = find("100 MiB to stdout, read directly").unwrap();
    let flood_cordon = find("100 MiB to stdout, through cordon (danger-full-access)").unwrap();
    println!();
    println!(
        "100 MiB flood through cordon vs direct: {:.2}× ({} rounds; other cases {} rounds)",
        ratio(flood_cordon, flood_direct),
        flood_rounds,
        rounds
    );
    if let Some(bare) = &bare_bwrap {
        serving::throughput(
            cordon_bin,
            before_bin.as_deref(),
            &dir,
            bare,
            (rounds * 2).max(50),
        );
        serving::many_tasks(cordon_bin, &dir);
        serving::pss_per_task(cordon_bin, &dir);
    }
    assert_no_copies_of_itself();
}

/// The C floor's case name.
const FLOOR: &str = "the C floor (`support/floor.c`: the same read-only sandbox, `bash -c true`)";
/// The deep workspace's case names.
const SHALLOW: &str = "`cordon run --mode workspace-write -- true` in a shallow workspace";
const DEEP: &str =
    "`cordon run --mode workspace-write -- true` in a workspace 400 directories deep";

/// 500 MiB through `cordon run` (the CLI, read-only, stdout a pipe the
/// bench drains) against the same command run directly, interleaved:
/// the median time of each, and the CLI's peak resident memory.
fn stream_through_the_cli(cordon: &str, rounds: usize) {
    let flood = "head -c 500M /dev/zero";
    let (mut direct, mut through, mut peak) = (vec![], vec![], 0);
    for _ in 0..rounds {
        direct.push(scale::drained(&["bash", "-c", flood]).0);
        let (elapsed, rss) = scale::drained(&[cordon, "run", "--", flood]);
        through.push(elapsed);
        peak = peak.max(rss);
    }
    let (direct, through) = (median(&mut direct), median(&mut through));
    println!(
        "500 MiB to stdout through `cordon run` (CLI) {:.0} ms vs directly {:.0} ms: {:.2}×; \
         the CLI's peak RSS {:.1} MiB ({rounds} rounds)",
        through.as_secs_f64() * 1e3,
        direct.as_secs_f64() * 1e3,
        ratio(through, direct),
        peak as f64 / 1024.0
    );
}

/// Where a copy of the bench started by something it ran records itself.
fn nested_marker() -> std::path::PathBuf {
    let me = std::env::current_exe().expect("this executable");
    me.with_extension("nested-copies")
}

/// A copy of this executable started as one of cordon's hidden modes (a
/// library host that took it for cordon's launcher) records its pid and
/// ends at once instead of running the bench again;
/// [`assert_no_copies_of_itself`] fails the bench on such a record.
fn refuse_to_run_nested() {
    let args: Vec<std::ffi::OsString> = std::env::args_os().collect();
    if cordon::sandbox::launcher::invoked(&args).is_some() {
        use std::io::Write;
        let mode = args[1].to_string_lossy();
        let mut record = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(nested_marker())
            .expect("the nested-copy record");
        let _ = writeln!(record, "{} {mode}", std::process::id());
        std::process::exit(127);
    }
    let _ = std::fs::remove_file(nested_marker());
}

/// The figures are this bench's alone: no copy of its executable ran
/// beside it (a library host that started it as cordon's launcher once
/// ran the whole bench again, ten times over).
fn assert_no_copies_of_itself() {
    let me = std::env::current_exe().expect("this executable");
    let copies: Vec<u32> = std::fs::read_dir("/proc")
        .expect("/proc")
        .flatten()
        .filter_map(|entry| entry.file_name().to_str()?.parse::<u32>().ok())
        .filter(|pid| *pid != std::process::id())
        .filter(|pid| std::fs::read_link(format!("/proc/{pid}/exe")).is_ok_and(|exe| exe == me))
        .collect();
    assert!(
        copies.is_empty(),
        "copies of the bench ran beside it: {copies:?}"
    );
    let started = std::fs::read_to_string(nested_marker()).unwrap_or_default();
    assert!(
        started.is_empty(),
        "copies of the bench were started as cordon's modes: {started}"
    );
    println!("no copy of the bench ran beside it, nor was one started");
}

/// One HTTP request decision through the component (what the proxy asks
/// for every request it can read): rules-policy with its example rule
/// file's `[[requests]]`, on the run's kept instance, for a `GET` no rule
/// refuses.
fn request_decision(deployment: &Deployment) -> impl FnMut() + 'static {
    let engine = cordon::policy::PolicyEngine::new().expect("engine");
    let bytes = std::fs::read(std::path::Path::new(env!("OUT_DIR")).join("rules-policy.wasm"))
        .expect("rules-policy.wasm is built");
    let policy = cordon::policy::Policy::load(&engine, &bytes, cordon::policy::Limits::default())
        .expect("loads");
    let toml: toml::Value =
        toml::from_str(include_str!("../../components/rules-policy/rules.toml")).expect("rules");
    let settings = serde_json::to_string(&toml).expect("settings");
    let mut deployment = deployment.clone();
    deployment.settings = settings.clone();
    let spec = match policy.resolve(&ExecRequest::new("git status"), &deployment) {
        Ok(cordon::model::Decision::Allow(spec)) => spec,
        other => panic!("resolve: {other:?}"),
    };
    let connector = policy.connector(&spec, &settings);
    let request = cordon::model::HttpRequest {
        method: "GET".into(),
        scheme: "https".into(),
        host: "registry.npmjs.org".into(),
        port: 443,
        path: "/left-pad".into(),
        query: None,
        headers: vec![
            ("host".into(), "registry.npmjs.org".into()),
            (
                "user-agent".into(),
                "npm/10.8.2 node/v22.11.0 linux x64".into(),
            ),
            (
                "accept".into(),
                "application/vnd.npm.install-v1+json".into(),
            ),
            ("authorization".into(), cordon::model::WITHHELD.into()),
        ],
    };
    move || {
        let _engine = &engine;
        let verdict = connector.request(&request).expect("request");
        assert_eq!(verdict, cordon::model::RequestVerdict::Allow);
    }
}

/// resolve, plan (confined) and settle of `true` through `policy`.
/// The policy round trip in a tight loop (nothing between the calls), and
/// each call apart: `resolve`, `plan` with the real ladder's `confine`
/// (the grant laid out on the file tree) and with the test kit's fake
/// (the component's own share), and `settle`.
fn tight_policy_loop(
    deployment: &Deployment,
    confiner: &std::sync::Arc<dyn cordon::sandbox::Confine>,
    rounds: usize,
) {
    let engine = cordon::policy::PolicyEngine::new().expect("engine");
    let policy = cordon::policy::Policy::load(
        &engine,
        cordon::policy::EMBEDDED_DEFAULT,
        cordon::policy::Limits::default(),
    )
    .expect("loads");
    let fake: std::sync::Arc<dyn cordon::sandbox::Confine> = std::sync::Arc::new(
        cordon::testkit::FakeSandbox::backend(cordon::model::Backend::Namespaces),
    );
    let request = ExecRequest::new("true");
    let spec = match policy.resolve(&request, deployment) {
        Ok(cordon::model::Decision::Allow(spec)) => spec,
        other => panic!("resolve: {other:?}"),
    };
    let facts = cordon::model::LaunchFacts {
        background: false,
        wrap: None,
    };
    let outcome = cordon::model::Outcome {
        exit_code: Some(0),
        ..cordon::model::Outcome::default()
    };
    let time = |f: &mut dyn FnMut()| {
        let mut samples: Vec<Duration> = (0..rounds)
            .map(|_| {
                let started = std::time::Instant::now();
                f();
                started.elapsed()
            })
            .collect();
        median(&mut samples)
    };
    let whole = time(&mut || policy_round_trip(&policy, deployment, confiner, "true"));
    let whole_fake = time(&mut || policy_round_trip(&policy, deployment, &fake, "true"));
    let resolve = time(&mut || {
        policy.resolve(&request, deployment).expect("resolve");
    });
    let plan = time(&mut || {
        policy.plan(&spec, confiner.clone()).expect("plan");
    });
    let resolve_plan = time(&mut || {
        let (_, preparation) = policy.begin(&request, deployment).expect("resolve");
        preparation.plan(&spec, confiner.clone()).expect("plan");
    });
    let plan_fake = time(&mut || {
        policy.plan(&spec, fake.clone()).expect("plan");
    });
    let settle = time(&mut || {
        policy.settle(&spec, &facts, &outcome).expect("settle");
    });
    let request = time(&mut request_decision(deployment));
    let us = |d: Duration| d.as_secs_f64() * 1e6;
    println!("| policy, tight loop ({rounds} rounds, medians) | µs |");
    println!("|---|---|");
    println!(
        "| round trip (resolve, plan with the ladder's confine, settle) | {:.1} |",
        us(whole)
    );
    println!(
        "| round trip with the test kit's fake confine | {:.1} |",
        us(whole_fake)
    );
    println!("| `resolve` | {:.1} |", us(resolve));
    println!(
        "| `plan`, the ladder's confine (the grant laid out) | {:.1} |",
        us(plan)
    );
    println!(
        "| `resolve` and `plan` (the ladder's confine) on one instance | {:.1} |",
        us(resolve_plan)
    );
    println!("| `plan`, the fake confine | {:.1} |", us(plan_fake));
    println!("| `settle` | {:.1} |", us(settle));
    println!(
        "| `request`, one HTTP request on the run's kept instance (rules-policy, its example rules) | {:.1} |",
        us(request)
    );
}

fn policy_round_trip(
    policy: &cordon::policy::Policy,
    deployment: &Deployment,
    confiner: &std::sync::Arc<dyn cordon::sandbox::Confine>,
    command: &str,
) {
    // As a run does: `plan` on the instance that resolved.
    let (spec, preparation) = match policy.begin(&ExecRequest::new(command), deployment) {
        Ok((cordon::model::Decision::Allow(spec), preparation)) => (spec, preparation),
        Ok((other, _)) => panic!("resolve: {other:?}"),
        Err(err) => panic!("resolve: {err}"),
    };
    let wrap = match preparation.plan(&spec, confiner.clone()) {
        Ok(cordon::policy::Launch::Confined(wrap)) => Some(wrap.facts().clone()),
        _ => None,
    };
    let facts = cordon::model::LaunchFacts {
        background: false,
        wrap,
    };
    let outcome = cordon::model::Outcome {
        exit_code: Some(0),
        ..cordon::model::Outcome::default()
    };
    policy.settle(&spec, &facts, &outcome).expect("settle");
}

/// The component's logic, called natively: what the Wasm boundary costs.
fn native_round_trip(dir: &str) {
    use cordon_policy::{
        Backend, Enforcement, ExecRequest, LaunchFacts, Outcome, RunnerStatus, Signatures,
        WrapFacts,
    };
    let deployment = cordon_policy::deployment_in(dir);
    let request = ExecRequest {
        command: "true".into(),
        workdir: None,
        timeout_ms: None,
        env: vec![],
        policy: None,
        approved: false,
    };
    let spec =
        cordon_policy::resolve::resolve(request, &deployment, cordon_policy::resolve::DEFAULT_ENV)
            .expect("resolve");
    std::hint::black_box(cordon_policy::bash_argv(&spec.command));
    let facts = LaunchFacts {
        background: false,
        wrap: Some(WrapFacts {
            backend: Backend::Bwrap,
            enforcement: Enforcement::Full,
            signatures: Signatures {
                runner_failure: vec!["bwrap: ".into()],
                runner_failure_exit: None,
                runner_notices: vec![],
                denial: vec!["read-only file system".into()],
            },
        }),
    };
    let outcome = Outcome {
        exit_code: Some(0),
        signal: None,
        timed_out: false,
        aborted: false,
        stderr_tail: String::new(),
        runner_status: RunnerStatus::Unknown,
    };
    std::hint::black_box(cordon_policy::classify::settle(&spec, &facts, &outcome).expect("settle"));
}

/// A scratch directory outside /tmp for the benchmark's caches.
/// `cordon-launcher` beside `cordon`, of its build — the launcher cordon
/// uses; the bench refuses to measure without it (a stale one would not
/// be used, and the figures would not be this build's).
fn installed_launcher(cordon: &str) -> String {
    let path = std::path::Path::new(cordon).with_file_name(cordon::sandbox::launcher::EXECUTABLE);
    assert!(
        cordon::sandbox::landlock::of_this_build(&path),
        "{} is missing or of another build: `cargo build --release -p cordon-launcher` first",
        path.display()
    );
    path.to_string_lossy().into_owned()
}

fn tempfile_dir() -> std::path::PathBuf {
    let dir = std::path::Path::new(env!("CARGO_TARGET_TMPDIR"))
        .join(format!("bench-cache-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("bench cache dir");
    dir
}

/// The argv a runner's `wrap` gives a read-only `bash -c true` in `dir`,
/// minus the arguments at `fds` (the status and handover fds, the host's
/// pid: nobody writes, reads or watches them here).
fn spawned_true(
    dir: &std::path::Path,
    fds: std::ops::RangeInclusive<usize>,
    wrap: impl Fn(&[String], &SandboxPolicy, &cordon::sandbox::grant::Layout) -> cordon::sandbox::Wrap,
) -> Vec<String> {
    let policy = SandboxPolicy::new(SandboxMode::ReadOnly, dir);
    let argv: Vec<String> = ["bash", "-c", "true"].map(String::from).to_vec();
    let layout = cordon::sandbox::grant::lay_out(&policy, &[], &[]);
    wrap(&argv, &policy, &layout)
        .argv()
        .iter()
        .enumerate()
        .filter(|(i, _)| !fds.contains(i))
        .map(|(_, a)| a.clone())
        .collect()
}

/// A workspace at `root` holding a repository, one nested two deep
/// (`vendor/lib`) and 4000 files in 40 directories (made once).
fn git_workspace(root: &std::path::Path) {
    if root.join("vendor/lib/.git").exists() {
        return;
    }
    for dir in [root.to_path_buf(), root.join("vendor/lib")] {
        std::fs::create_dir_all(&dir).expect("bench repository");
        let status = Command::new("git")
            .args(["init", "-q"])
            .current_dir(&dir)
            .status()
            .expect("git");
        assert!(status.success());
    }
    for d in 0..40 {
        let dir = root.join(format!("src/m{d}"));
        std::fs::create_dir_all(&dir).expect("bench tree");
        for f in 0..100 {
            std::fs::write(dir.join(format!("f{f}.rs")), "").expect("bench file");
        }
    }
}

/// The flags of a `workspace-write` run in, and rooted at, `ws`.
fn writing_in(ws: &str) -> [&str; 6] {
    [
        "--mode",
        "workspace-write",
        "--workspace",
        ws,
        "--workdir",
        ws,
    ]
}

/// `cordon run FLAGS --component-cache CACHE -- true`, as a new process.
fn cli_true_with(cordon: &str, flags: &[&str], cache: &std::path::Path) {
    cli_with(cordon, flags, "true", cache);
}

/// `cordon run FLAGS --component-cache CACHE -- COMMAND`, as a new process.
fn cli_with(cordon: &str, flags: &[&str], command: &str, cache: &std::path::Path) {
    let status = Command::new(cordon)
        .arg("run")
        .args(flags)
        .arg("--component-cache")
        .arg(cache)
        .args(["--", command])
        .status()
        .expect("cordon");
    assert!(status.success());
}

/// `cordon run [--policy P] --component-cache C -- true`.
fn cli_true(cordon: &str, policy: Option<&std::path::Path>, cache: &std::path::Path) {
    let policy = policy.map(|p| p.to_string_lossy().into_owned());
    let flags: Vec<&str> = match &policy {
        Some(policy) => vec!["--policy", policy],
        None => vec![],
    };
    cli_true_with(cordon, &flags, cache);
}

/// `CORDON __landlock FLAGS --ro / --rw /dev/null -- bash -c true`.
fn launcher_true(cordon: &str, flags: &[&str]) {
    let mut argv = vec![cordon, "__landlock"];
    argv.extend_from_slice(flags);
    argv.extend(["--ro", "/", "--rw", "/dev/null", "--", "bash", "-c", "true"]);
    direct(&argv);
}

/// The peers support/peers.sh installed (or found): `(name, version,
/// path)` each; none, loudly, when it cannot (no npm, no registry) or when
/// `CORDON_BENCH_PEERS=0`.
fn peers() -> Vec<(String, String, String)> {
    if std::env::var("CORDON_BENCH_PEERS").as_deref() == Ok("0") {
        eprintln!("SKIPPED the peers: CORDON_BENCH_PEERS=0");
        return vec![];
    }
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/benches/support/peers.sh");
    let dir = std::path::Path::new(env!("CARGO_TARGET_TMPDIR")).join("../bench-peers");
    let output = Command::new("bash")
        .arg(script)
        .arg(&dir)
        .stderr(Stdio::inherit())
        .output();
    let found: Vec<(String, String, String)> = match output {
        Ok(output) if output.status.success() => String::from_utf8_lossy(&output.stdout)
            .lines()
            .filter_map(|line| {
                let mut fields = line.splitn(3, ' ');
                let (name, version, path) = (fields.next()?, fields.next()?, fields.next()?);
                Some((name.to_owned(), version.to_owned(), path.to_owned()))
            })
            .collect(),
        Ok(output) => {
            eprintln!("SKIPPED the peers: {script} exited with {}", output.status);
            vec![]
        }
        Err(err) => {
            eprintln!("SKIPPED the peers: cannot run {script}: {err}");
            vec![]
        }
    };
    for peer in ["codex", "srt"] {
        if !found.iter().any(|(name, _, _)| name == peer) {
            eprintln!("SKIPPED the peer {peer}: not installed (see {script})");
        }
    }
    found
}

fn direct(argv: &[&str]) {
    let status = Command::new(argv[0])
        .args(&argv[1..])
        .stdin(Stdio::null())
        .status()
        .expect("spawn");
    assert!(status.success());
}

fn direct_drain(argv: &[&str]) {
    scale::drained(argv);
}

fn which(program: &str) -> Option<String> {
    std::env::split_paths(&std::env::var_os("PATH")?)
        .map(|dir| dir.join(program))
        .find(|p| p.is_file())
        .map(|p| p.to_string_lossy().into_owned())
}

fn median(samples: &mut [Duration]) -> Duration {
    samples.sort();
    samples[samples.len() / 2]
}

fn ratio(a: Duration, b: Duration) -> f64 {
    a.as_secs_f64() / b.as_secs_f64()
}
