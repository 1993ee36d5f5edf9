//! The launcher's own executable (`src/bin/cordon-launcher.rs`): it holds
//! this build's identity in its section, as a host reads it before it
//! uses it, and answers `--version` (what the Landlock probe runs
//! confined). Being an integration test of this package, this also makes
//! `cargo test --workspace` build the executable, which cordon's end-to-end
//! suite then finds beside cordon and runs its sandboxes through.

#[test]
fn the_executable_carries_this_build_in_its_section_and_answers_its_version() {
    let executable = env!("CARGO_BIN_EXE_cordon-launcher");
    let bytes = std::fs::read(executable).unwrap();
    let build = cordon_launcher::BUILD.as_bytes();
    assert!(
        bytes.windows(build.len()).any(|window| window == build),
        "{executable} holds {}",
        cordon_launcher::BUILD
    );
    let readelf = std::process::Command::new("readelf")
        .args(["-p", cordon_launcher::BUILD_SECTION, executable])
        .output();
    if let Ok(readelf) = readelf {
        assert!(
            String::from_utf8_lossy(&readelf.stdout).contains(cordon_launcher::BUILD),
            "the section {} holds the build: {}",
            cordon_launcher::BUILD_SECTION,
            String::from_utf8_lossy(&readelf.stdout)
        );
    }
    let version = std::process::Command::new(executable)
        .arg("--version")
        .output()
        .unwrap();
    assert!(version.status.success());
    assert!(String::from_utf8_lossy(&version.stdout).contains(cordon_launcher::BUILD));
    let nothing = std::process::Command::new(executable).output().unwrap();
    assert_eq!(
        nothing.status.code(),
        Some(2),
        "no mode, no command of its own"
    );
}
