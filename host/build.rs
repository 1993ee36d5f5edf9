//! Builds the policy components from source for `wasm32-wasip2` and puts
//! them in `OUT_DIR`: `bash-sandbox.wasm` (embedded in the binary as the
//! default policy), the other shipped executors (`pwsh-sandbox.wasm`,
//! `bash-local.wasm`, `rules-policy.wasm`) and the test fixtures the e2e suites load with
//! `--policy`.
//!
//! The embedded default is also precompiled (`bash-sandbox.cwasm`) by an
//! engine with the host's code-shaping settings (`src/policy/compilation.rs`)
//! for a baseline CPU of the target, so a host loads it without compiling,
//! hashing or reading a cache; a host whose engine refuses it compiles the
//! embedded bytes as before.
//!
//! The inner cargo gets its own target directory (the outer build holds the
//! lock on its own) and none of the outer build's target settings
//! (`RUSTFLAGS`, `CARGO_*`, wrappers), which are meant for the host target.

use std::env;
use std::path::{Path, PathBuf};
use std::process::Command;

#[path = "src/policy/compilation.rs"]
mod compilation;

/// (package, artifact stem, file name in OUT_DIR)
const GUESTS: &[(&str, &str, &str)] = &[
    (
        "cordon-bash-sandbox",
        "cordon_bash_sandbox",
        "bash-sandbox.wasm",
    ),
    (
        "cordon-pwsh-sandbox",
        "cordon_pwsh_sandbox",
        "pwsh-sandbox.wasm",
    ),
    ("cordon-bash-local", "cordon_bash_local", "bash-local.wasm"),
    (
        "cordon-fixture-strict-policy",
        "cordon_fixture_strict_policy",
        "strict-policy.wasm",
    ),
    (
        "cordon-fixture-hostile-policy",
        "cordon_fixture_hostile_policy",
        "hostile-policy.wasm",
    ),
    (
        "cordon-fixture-legacy-policy",
        "cordon_fixture_legacy_policy",
        "legacy-policy.wasm",
    ),
    (
        "cordon-fixture-render-policy",
        "cordon_fixture_render_policy",
        "render-policy.wasm",
    ),
    (
        "cordon-rules-policy",
        "cordon_rules_policy",
        "rules-policy.wasm",
    ),
];

const TARGET: &str = "wasm32-wasip2";
const PROFILE: &str = "guest";

fn main() {
    pack_relative_relocations();
    let manifest_dir =
        PathBuf::from(env::var_os("CARGO_MANIFEST_DIR").expect("CARGO_MANIFEST_DIR"));
    let root = manifest_dir.parent().expect("workspace root").to_path_buf();
    let out_dir = PathBuf::from(env::var_os("OUT_DIR").expect("OUT_DIR"));
    if !root.join("components/bash-sandbox/Cargo.toml").exists() {
        // A packaged crate (`cargo package`, crates.io): no workspace
        // around it, only the prebuilt default it ships.
        from_package(&manifest_dir, &out_dir);
        return;
    }
    for watched in [
        "wit",
        "components",
        "tests/fixtures",
        "Cargo.lock",
        "Cargo.toml",
        // The guests' link flags (their stack size) live here.
        ".cargo/config.toml",
    ] {
        println!("cargo:rerun-if-changed={}", root.join(watched).display());
    }
    println!("cargo:rerun-if-env-changed=CARGO_TARGET_DIR");

    let target_dir = env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| root.join("target"))
        .join("guests");
    build_guests(&root, &target_dir);

    let artifacts = target_dir.join(TARGET).join(PROFILE);
    for (_, stem, name) in GUESTS {
        let built = artifacts.join(format!("{stem}.wasm"));
        std::fs::copy(&built, out_dir.join(name))
            .unwrap_or_else(|err| panic!("copying {}: {err}", built.display()));
    }
    precompile(
        &out_dir.join("bash-sandbox.wasm"),
        &out_dir.join(PRECOMPILED),
    );
    digest(
        &out_dir.join("bash-sandbox.wasm"),
        &out_dir.join("bash-sandbox.sha256"),
    );
}

/// The components a packaged crate ships prebuilt in `embedded/` (the
/// default first): what `--policy builtin:NAME` loads.
const SHIPPED: &[&str] = &["bash-sandbox", "rules-policy", "pwsh-sandbox", "bash-local"];

/// The packaged crate's shipped components: `embedded/NAME.wasm`, which
/// `scripts/package.sh` built from the workspace's source (twice, checking
/// both builds gave the same bytes) and put beside their digests. Bytes
/// that do not match the digest shipped with them are refused.
fn from_package(manifest_dir: &Path, out_dir: &Path) {
    for name in SHIPPED {
        let shipped = manifest_dir.join(format!("embedded/{name}.wasm"));
        let recorded = manifest_dir.join(format!("embedded/{name}.wasm.sha256"));
        println!("cargo:rerun-if-changed={}", shipped.display());
        println!("cargo:rerun-if-changed={}", recorded.display());
        let wasm = out_dir.join(format!("{name}.wasm"));
        std::fs::copy(&shipped, &wasm).unwrap_or_else(|err| {
            panic!(
                "{}: {err} (a packaged cordon ships its policy components there; \
                 build from the repository, or package with scripts/package.sh)",
                shipped.display()
            )
        });
        let digest = out_dir.join(format!("{name}.sha256"));
        self::digest(&wasm, &digest);
        let want = std::fs::read_to_string(&recorded)
            .unwrap_or_else(|err| panic!("{}: {err}", recorded.display()));
        let have = std::fs::read_to_string(&digest).expect("just written");
        assert_eq!(
            want.trim(),
            have.trim(),
            "{} does not match the digest shipped with it",
            shipped.display()
        );
    }
    precompile(
        &out_dir.join("bash-sandbox.wasm"),
        &out_dir.join(PRECOMPILED),
    );
}

/// Write `sha256:HEX` of the embedded default, so a host names the
/// component in force (the audit log, `cordon doctor`) without hashing it
/// at every start.
fn digest(wasm: &Path, out: &Path) {
    use sha2::Digest;
    let bytes = std::fs::read(wasm).unwrap_or_else(|err| panic!("{}: {err}", wasm.display()));
    let hex: String = sha2::Sha256::digest(&bytes)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect();
    std::fs::write(out, format!("sha256:{hex}"))
        .unwrap_or_else(|err| panic!("{}: {err}", out.display()));
}

/// Link the binaries with packed relative relocations (`DT_RELR`) where
/// the C library they are built against loads them (glibc 2.36 and
/// later): the dynamic loader then reads a table of a few kilobytes instead
/// of 32 000 entries (≈ 0.8 MB) at every start — of `cordon` itself and of
/// its init inside every bwrap run (≈ 0.5 ms each, measured). The binary
/// stays position-independent (ASLR); it then needs glibc 2.36 to run,
/// which the glibc it was linked against already is.
fn pack_relative_relocations() {
    let native = env::var("TARGET").ok() == env::var("HOST").ok();
    let gnu_linux = env::var("CARGO_CFG_TARGET_OS").as_deref() == Ok("linux")
        && env::var("CARGO_CFG_TARGET_ENV").as_deref() == Ok("gnu");
    if !native || !gnu_linux {
        return;
    }
    let version = Command::new("getconf")
        .arg("GNU_LIBC_VERSION")
        .output()
        .ok()
        .map(|out| String::from_utf8_lossy(&out.stdout).into_owned())
        .unwrap_or_default();
    let Some((major, minor)) = version
        .trim()
        .strip_prefix("glibc ")
        .and_then(|v| v.split_once('.'))
        .and_then(|(major, minor)| {
            let minor: String = minor.chars().take_while(char::is_ascii_digit).collect();
            Some((major.parse::<u32>().ok()?, minor.parse::<u32>().ok()?))
        })
    else {
        return;
    };
    if (major, minor) >= (2, 36) {
        println!("cargo:rustc-link-arg-bins=-Wl,-z,pack-relative-relocs");
    }
}

/// Where the precompiled default goes in `OUT_DIR` (empty: none).
const PRECOMPILED: &str = "bash-sandbox.cwasm";

/// Precompile the component at `wasm` for the target's baseline CPU (an
/// explicit target: no native CPU features are inferred, so it loads on
/// any CPU of the architecture) into `out`. Only for a native build: the
/// compiler here has the host's architecture only, and a cross-built host
/// compiles the component when it loads.
fn precompile(wasm: &Path, out: &Path) {
    let target = env::var("TARGET").expect("TARGET");
    if Some(&target) != env::var("HOST").ok().as_ref() {
        std::fs::write(out, b"").expect("write the empty precompiled component");
        return;
    }
    let mut config = wasmtime::Config::new();
    compilation::apply(&mut config);
    config
        .target(&target)
        .unwrap_or_else(|err| panic!("wasmtime has no compiler for {target}: {err}"));
    let engine = wasmtime::Engine::new(&config).expect("a compile-only engine");
    let bytes = std::fs::read(wasm).unwrap_or_else(|err| panic!("{}: {err}", wasm.display()));
    let compiled = engine
        .precompile_component(&bytes)
        .unwrap_or_else(|err| panic!("precompiling {}: {err:#}", wasm.display()));
    std::fs::write(out, compiled).unwrap_or_else(|err| panic!("{}: {err}", out.display()));
}

/// The cargo that builds the guests: the repository's pinned toolchain's
/// (`rust-toolchain.toml`), through rustup, whatever toolchain builds the
/// host — a nightly build (the fuzz targets') embeds the very component
/// bytes a stable one does, and needs no `wasm32-wasip2` std of its own —
/// else, without rustup or a pin, the outer build's cargo.
fn guest_cargo(root: &Path) -> Command {
    let toolchain = root.join("rust-toolchain.toml");
    println!("cargo:rerun-if-changed={}", toolchain.display());
    let pinned = std::fs::read_to_string(&toolchain).ok().and_then(|text| {
        text.lines().find_map(|line| {
            let value = line
                .trim()
                .strip_prefix("channel")?
                .trim()
                .strip_prefix('=')?;
            Some(value.trim().trim_matches('"').to_owned())
        })
    });
    let rustup = Command::new("rustup")
        .arg("--version")
        .output()
        .is_ok_and(|out| out.status.success());
    match pinned {
        Some(pinned) if rustup => {
            let mut command = Command::new("rustup");
            command.args(["run", &pinned, "cargo"]);
            command.env_remove("RUSTUP_TOOLCHAIN");
            command
        }
        _ => Command::new(env::var_os("CARGO").unwrap_or_else(|| "cargo".into())),
    }
}

fn build_guests(root: &Path, target_dir: &Path) {
    let mut command = guest_cargo(root);
    command
        .current_dir(root)
        .args([
            "build",
            "--locked",
            "--target",
            TARGET,
            "--profile",
            PROFILE,
        ])
        .arg("--target-dir")
        .arg(target_dir);
    for (package, _, _) in GUESTS {
        command.args(["-p", package]);
    }
    for (name, _) in env::vars_os() {
        let Some(name) = name.to_str() else { continue };
        let outer_setting = (name.starts_with("CARGO_") && name != "CARGO_HOME")
            || name.starts_with("RUSTC")
            || name.starts_with("RUSTDOC")
            || matches!(
                name,
                "RUSTFLAGS"
                    | "TARGET"
                    | "HOST"
                    | "OUT_DIR"
                    | "PROFILE"
                    | "OPT_LEVEL"
                    | "DEBUG"
                    | "NUM_JOBS"
                    | "MAKEFLAGS"
                    | "MFLAGS"
            );
        if outer_setting {
            command.env_remove(name);
        }
    }
    let output = command
        .output()
        .unwrap_or_else(|err| panic!("cannot run cargo to build the policy components: {err}"));
    if !output.status.success() {
        let stderr = String::from_utf8_lossy(&output.stderr);
        let hint = if stderr.contains(TARGET) {
            format!("\nhint: install the component target with `rustup target add {TARGET}`")
        } else {
            String::new()
        };
        panic!("building the policy components failed:\n{stderr}{hint}");
    }
}
