//! Classification of a finished run (SPEC.md §7) and the facts stamped on it (§2).
//!
//! Order matters: a runner failure is decided first — by the runner's
//! out-of-band status where the host knows it, else by the wrap's text
//! signatures — because a runner's own error text can contain denial words.
//! Only then is a denial looked for. Neither is ever concluded from a run
//! that exited 0 or died by a signal, and each run is read with its own
//! backend's dialect only (the signatures in its wrap facts).

use crate::{
    ExecError, ExecSpec, LaunchFacts, Outcome, RunnerStatus, SandboxFacts, Signatures, Unavailable,
};

/// The facts to stamp on a finished run, or the error that replaces it.
///
/// * unconfined: `{mode, denied: false}` in the foreground; nothing for a
///   background task;
/// * runner failure: the `sandbox-unavailable` error in the foreground (its
///   detail is the runner's first failure line); `{runner-failed: true}` on a
///   background task;
/// * otherwise `{mode, denied, enforcement}`.
pub fn settle(
    spec: &ExecSpec,
    facts: &LaunchFacts,
    outcome: &Outcome,
) -> Result<Option<SandboxFacts>, ExecError> {
    let mode = spec.policy.mode;
    let Some(wrap) = &facts.wrap else {
        return Ok((!facts.background).then_some(SandboxFacts {
            mode,
            denied: false,
            enforcement: None,
            runner_failed: false,
        }));
    };
    if let Some(detail) = runner_failure(&wrap.signatures, outcome) {
        if facts.background {
            return Ok(Some(SandboxFacts {
                mode,
                denied: false,
                enforcement: Some(wrap.enforcement),
                runner_failed: true,
            }));
        }
        return Err(ExecError::SandboxUnavailable(Unavailable {
            mode,
            detail: Some(detail),
        }));
    }
    Ok(Some(SandboxFacts {
        mode,
        denied: is_denial(&wrap.signatures, outcome),
        enforcement: Some(wrap.enforcement),
        runner_failed: false,
    }))
}

/// The runner's failure detail, if the runner (not the command) failed.
///
/// An out-of-band status outranks text: `launched` means the command ran,
/// whatever it printed. With no such status the rule is textual: a nonzero
/// exit (the runner's own exit code, when its dialect has one) and a stderr
/// line carrying a failure signature that is not an informational notice.
pub fn runner_failure(signatures: &Signatures, outcome: &Outcome) -> Option<String> {
    match &outcome.runner_status {
        RunnerStatus::Launched => return None,
        RunnerStatus::Failed(detail) => return Some(detail.clone()),
        RunnerStatus::Unknown => {}
    }
    let code = failed_exit(outcome)?;
    if signatures
        .runner_failure_exit
        .is_some_and(|want| want != code)
    {
        return None;
    }
    outcome
        .stderr_tail
        .lines()
        .find(|line| contains_any(line, &signatures.runner_failure) && !is_notice(line, signatures))
        .map(|line| line.trim().to_owned())
}

/// Whether `line` is exactly one of the runner's informational notices
/// (a failure signature followed by the notice, nothing else): a line that
/// merely contains a notice's words is not one.
fn is_notice(line: &str, signatures: &Signatures) -> bool {
    let line = line.trim().to_lowercase();
    signatures.runner_failure.iter().any(|signature| {
        signatures.runner_notices.iter().any(|notice| {
            line == format!("{}{}", signature.to_lowercase(), notice.to_lowercase()).trim()
        })
    })
}

/// Whether the sandbox denied a write: a nonzero exit and a stderr line
/// carrying one of the backend's denial signatures.
pub fn is_denial(signatures: &Signatures, outcome: &Outcome) -> bool {
    failed_exit(outcome).is_some()
        && outcome
            .stderr_tail
            .lines()
            .any(|line| contains_any(line, &signatures.denial))
}

/// The exit code of a run that exited nonzero by itself; none for exit 0,
/// a signal death or a timeout.
fn failed_exit(outcome: &Outcome) -> Option<i32> {
    if outcome.signal.is_some() || outcome.timed_out || outcome.aborted {
        return None;
    }
    outcome.exit_code.filter(|&code| code != 0)
}

/// Case-insensitive substring match of any non-empty needle.
fn contains_any(line: &str, needles: &[String]) -> bool {
    let line = line.to_lowercase();
    needles
        .iter()
        .filter(|needle| !needle.is_empty())
        .any(|needle| line.contains(&needle.to_lowercase()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{Backend, Enforcement, SandboxMode, WrapFacts};

    fn bwrap() -> Signatures {
        Signatures {
            runner_failure: vec!["bwrap: ".into()],
            runner_failure_exit: None,
            runner_notices: vec![],
            denial: vec!["read-only file system".into()],
        }
    }

    fn landlock() -> Signatures {
        Signatures {
            runner_failure: vec!["cordon-landlock: ".into()],
            runner_failure_exit: Some(125),
            runner_notices: vec!["partially enforced (older ABI)".into()],
            denial: vec!["permission denied".into()],
        }
    }

    fn spec(mode: SandboxMode) -> ExecSpec {
        ExecSpec {
            command: "x".into(),
            workdir: "/".into(),
            timeout_ms: 1000,
            env: vec![],
            policy: crate::sandbox_policy(mode, "/ws"),
        }
    }

    fn confined(signatures: Signatures, background: bool) -> LaunchFacts {
        LaunchFacts {
            background,
            wrap: Some(WrapFacts {
                backend: Backend::Bwrap,
                enforcement: Enforcement::Full,
                signatures,
            }),
        }
    }

    fn exited(code: i32, stderr: &str) -> Outcome {
        Outcome {
            exit_code: Some(code),
            signal: None,
            timed_out: false,
            aborted: false,
            stderr_tail: stderr.into(),
            runner_status: RunnerStatus::Unknown,
        }
    }

    fn signalled(signal: i32, stderr: &str) -> Outcome {
        Outcome {
            exit_code: None,
            signal: Some(signal),
            ..exited(0, stderr)
        }
    }

    fn facts(mode: SandboxMode, denied: bool) -> Option<SandboxFacts> {
        Some(SandboxFacts {
            mode,
            denied,
            enforcement: Some(Enforcement::Full),
            runner_failed: false,
        })
    }

    const RO: SandboxMode = SandboxMode::ReadOnly;

    #[test]
    fn denial_needs_a_nonzero_exit_and_the_backend_dialect() {
        let launch = confined(bwrap(), false);
        let denied = exited(1, "bash: /ws/x: Read-only file system\n");
        assert_eq!(settle(&spec(RO), &launch, &denied), Ok(facts(RO, true)));
        let ok = exited(0, "bash: /ws/x: Read-only file system\n");
        assert_eq!(settle(&spec(RO), &launch, &ok), Ok(facts(RO, false)));
        let plain = exited(2, "ls: cannot access 'nope'\n");
        assert_eq!(settle(&spec(RO), &launch, &plain), Ok(facts(RO, false)));
    }

    #[test]
    fn a_signal_death_is_never_a_denial_nor_a_runner_failure() {
        let launch = confined(bwrap(), false);
        let killed = signalled(9, "bwrap: oops\nRead-only file system\n");
        assert_eq!(settle(&spec(RO), &launch, &killed), Ok(facts(RO, false)));
        let mut timed_out = exited(1, "Read-only file system");
        timed_out.timed_out = true;
        assert_eq!(settle(&spec(RO), &launch, &timed_out), Ok(facts(RO, false)));
    }

    #[test]
    fn another_backends_dialect_is_ignored() {
        let bwrap_run = exited(1, "touch: cannot touch 'x': Permission denied\n");
        assert_eq!(
            settle(&spec(RO), &confined(bwrap(), false), &bwrap_run),
            Ok(facts(RO, false))
        );
        let landlock_run = exited(1, "touch: x: Read-only file system\n");
        assert_eq!(
            settle(&spec(RO), &confined(landlock(), false), &landlock_run),
            Ok(facts(RO, false))
        );
    }

    #[test]
    fn a_runner_line_outranks_a_denial_word() {
        let outcome = exited(1, "bwrap: Can't bind mount /ws: Read-only file system\n");
        let err = settle(&spec(RO), &confined(bwrap(), false), &outcome).unwrap_err();
        assert_eq!(
            err,
            ExecError::SandboxUnavailable(Unavailable {
                mode: RO,
                detail: Some("bwrap: Can't bind mount /ws: Read-only file system".into()),
            })
        );
    }

    #[test]
    fn a_background_runner_failure_is_stamped_not_raised() {
        let outcome = exited(1, "bwrap: No permissions to create new namespace\n");
        let stamped = settle(&spec(RO), &confined(bwrap(), true), &outcome);
        assert_eq!(
            stamped,
            Ok(Some(SandboxFacts {
                mode: RO,
                denied: false,
                enforcement: Some(Enforcement::Full),
                runner_failed: true,
            }))
        );
    }

    #[test]
    fn landlock_runner_failure_needs_its_exit_code_and_skips_the_notice() {
        let launch = confined(landlock(), false);
        let notice = "cordon-landlock: partially enforced (older ABI)\n";
        for code in [1, 2, 125] {
            assert_eq!(
                settle(&spec(RO), &launch, &exited(code, notice)),
                Ok(facts(RO, false)),
                "notice alone at exit {code}"
            );
        }
        // A failure line that merely mentions the notice's words is a failure.
        let lookalike = "cordon-landlock: ruleset error: partially enforced (older ABI) refused\n";
        assert!(matches!(
            settle(&spec(RO), &launch, &exited(125, lookalike)),
            Err(ExecError::SandboxUnavailable(Unavailable { detail: Some(d), .. }))
                if d == lookalike.trim()
        ));
        let fatal = format!("{notice}cordon-landlock: cannot open /nope: Permission denied\n");
        assert!(matches!(
            settle(&spec(RO), &launch, &exited(125, &fatal)),
            Err(ExecError::SandboxUnavailable(Unavailable { detail: Some(d), .. }))
                if d == "cordon-landlock: cannot open /nope: Permission denied"
        ));
        // The same line at another exit code is the command's own text.
        assert_eq!(
            settle(&spec(RO), &launch, &exited(1, &fatal)),
            Ok(facts(RO, true))
        );
    }

    #[test]
    fn out_of_band_status_outranks_text() {
        let launch = confined(bwrap(), false);
        let mut spoofed = exited(1, "bwrap: x\n");
        spoofed.runner_status = RunnerStatus::Launched;
        assert_eq!(settle(&spec(RO), &launch, &spoofed), Ok(facts(RO, false)));
        let mut failed = exited(1, "");
        failed.runner_status = RunnerStatus::Failed("setting up uid map: denied".into());
        assert!(matches!(
            settle(&spec(RO), &launch, &failed),
            Err(ExecError::SandboxUnavailable(Unavailable { detail: Some(d), .. }))
                if d == "setting up uid map: denied"
        ));
    }

    #[test]
    fn unconfined_runs_carry_mode_only_in_the_foreground() {
        let danger = SandboxMode::DangerFullAccess;
        let fg = LaunchFacts {
            background: false,
            wrap: None,
        };
        let outcome = exited(1, "Read-only file system\nbwrap: x\n");
        assert_eq!(
            settle(&spec(danger), &fg, &outcome),
            Ok(Some(SandboxFacts {
                mode: danger,
                denied: false,
                enforcement: None,
                runner_failed: false,
            }))
        );
        let bg = LaunchFacts {
            background: true,
            wrap: None,
        };
        assert_eq!(settle(&spec(danger), &bg, &outcome), Ok(None));
    }
}
