//! The Python client (clients/python, stdlib only) against the real
//! `cordon serve`: its own unittest suite, run here so `cargo test` and CI
//! run it. Skips loudly without `python3`; with
//! `CORDON_E2E_REQUIRE_PYTHON=1` (set by scripts/test.sh on CI) that fails.

use crate::common;
use std::process::Command;

#[test]
fn the_python_client_drives_cordon_serve() {
    let test = "the_python_client_drives_cordon_serve";
    if common::python_usable(test) {
        common::python_suite(test, "clients/python", "test_cordon_client", 7);
    }
}

/// The client as a package: the wheel built from clients/python (no
/// network: the build backend is the interpreter's own setuptools),
/// installed into a fresh virtual environment, drives a real `cordon serve`
/// sync and asyncio, over a socket and stdio (clients/python/test_installed.py,
/// run from outside the source tree so the installed package is the one imported).
#[test]
fn the_python_wheel_installs_into_a_fresh_venv_and_drives_cordon_serve() {
    let test = "the_python_wheel_installs_into_a_fresh_venv_and_drives_cordon_serve";
    if !common::python_usable(test) {
        return;
    }
    let confined = common::ladder_confines(&format!("{test} (confined checks)"));
    let scratch = common::workspace();
    let source = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../clients/python");
    // Built from a copy: a build writes beside its sources, which a
    // profile's user may not.
    let copy = scratch.path().join("source");
    std::fs::create_dir_all(copy.join("cordon_client")).unwrap();
    for file in [
        "pyproject.toml",
        "README.md",
        "cordon_client/__init__.py",
        "cordon_client/aio.py",
        "cordon_client/py.typed",
    ] {
        std::fs::copy(source.join(file), copy.join(file)).unwrap();
    }
    let python = |program: &std::path::Path, args: &[&std::ffi::OsStr]| {
        let output = Command::new(program)
            .args(args)
            .current_dir(scratch.path())
            .env("PIP_DISABLE_PIP_VERSION_CHECK", "1")
            .env("PYTHONDONTWRITEBYTECODE", "1")
            .output()
            .expect("run python");
        let report = format!(
            "{}{}",
            String::from_utf8_lossy(&output.stdout),
            String::from_utf8_lossy(&output.stderr)
        );
        assert!(output.status.success(), "{program:?} {args:?}:\n{report}");
        report
    };
    let wheels = scratch.path().join("wheels");
    let python3 = std::path::Path::new("python3");
    let os = |s: &'static str| std::ffi::OsStr::new(s);
    python(
        python3,
        &[
            os("-m"),
            os("pip"),
            os("wheel"),
            os("--no-deps"),
            os("--no-build-isolation"),
            os("--wheel-dir"),
            wheels.as_os_str(),
            copy.as_os_str(),
        ],
    );
    let wheel = std::fs::read_dir(&wheels)
        .unwrap()
        .map(|entry| entry.unwrap().path())
        .find(|path| path.extension().is_some_and(|e| e == "whl"))
        .expect("a wheel was built");
    let venv = scratch.path().join("venv");
    python(python3, &[os("-m"), os("venv"), venv.as_os_str()]);
    let installed = venv.join("bin/python");
    python(
        &installed,
        &[
            os("-m"),
            os("pip"),
            os("install"),
            os("--no-index"),
            wheel.as_os_str(),
        ],
    );
    let run = scratch.path().join("run");
    std::fs::create_dir(&run).unwrap();
    std::fs::copy(
        source.join("test_installed.py"),
        run.join("test_installed.py"),
    )
    .unwrap();
    let output = Command::new(&installed)
        .args(["-m", "unittest", "-v", "test_installed"])
        .current_dir(&run)
        .env("CORDON_BIN", env!("CARGO_BIN_EXE_cordon"))
        .env("CORDON_TEST_DIR", scratch.path())
        .env("CORDON_TEST_CONFINED", if confined { "1" } else { "0" })
        .env("CORDON_VENV", &venv)
        .env("PYTHONDONTWRITEBYTECODE", "1")
        .output()
        .expect("run the installed suite");
    let report = String::from_utf8_lossy(&output.stderr);
    eprintln!("{report}");
    assert!(output.status.success(), "test_installed failed:\n{report}");
    assert!(report.contains("Ran 4 tests"), "{report}");
}
