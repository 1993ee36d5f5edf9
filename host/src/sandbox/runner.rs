//! An operator-configured runner command: the operator's own sandbox tool,
//! used instead of probing. cordon appends the command's argv to the
//! runner's; `{mode}` and `{workspace}` in the runner's arguments are
//! replaced by the run's mode and workspace root. It is never probed and
//! reports `full` enforcement; its failures are recognised by the
//! signatures the operator gives, its denials by both Linux dialects.

use crate::model::{Backend, Enforcement, SandboxPolicy, Signatures, WrapFacts};

use super::Wrap;
use super::grant::Layout;

/// A runner command and the stderr signatures of its own failures.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize)]
pub struct RunnerCommand {
    argv: Vec<String>,
    failure_signatures: Vec<String>,
}

impl RunnerCommand {
    /// Validate a runner command: a non-empty argv with a non-empty
    /// program, and at least one signature, each a non-empty single line.
    pub fn new(argv: Vec<String>, failure_signatures: Vec<String>) -> Result<Self, String> {
        if argv.first().is_none_or(|program| program.is_empty()) {
            return Err("runner_command must name a program".into());
        }
        if failure_signatures.is_empty() {
            return Err(
                "runner_command needs runner_failure_signatures (the stderr text of the \
                 runner's own failures), or remove both"
                    .into(),
            );
        }
        if let Some(bad) = failure_signatures
            .iter()
            .find(|s| s.trim().is_empty() || s.contains('\n') || s.contains('\r'))
        {
            return Err(format!(
                "runner_failure_signatures entries must be non-empty single lines, got {bad:?}"
            ));
        }
        Ok(RunnerCommand {
            argv,
            failure_signatures,
        })
    }

    /// The runner's program.
    pub fn program(&self) -> &str {
        &self.argv[0]
    }

    /// `runner ARGS… argv`, placeholders filled in. The runner is told the
    /// mode and the workspace root only: whatever else the grant says is
    /// reported as enforced in part.
    pub fn wrap(&self, argv: &[String], policy: &SandboxPolicy, layout: &Layout) -> Wrap {
        let root = policy.workspace_root.to_string_lossy();
        let mut full: Vec<String> = self
            .argv
            .iter()
            .map(|arg| {
                arg.replace("{mode}", policy.mode.as_str())
                    .replace("{workspace}", &root)
            })
            .collect();
        full.extend(argv.iter().cloned());
        let mut grant = layout.facts.clone();
        if layout.writable.len() > 1 {
            grant
                .partial
                .push("writable roots: the runner command is given the workspace root only".into());
        }
        if !layout.protected.is_empty() || !layout.facts.deny_read.is_empty() {
            grant
                .partial
                .push("protected and deny-read paths: the runner command is not told them".into());
        }
        if layout.network_closed() {
            // The runner is not told; what it closes is its own business.
            grant
                .unenforced
                .extend(["network".to_owned(), "sockets".to_owned()]);
        }
        Wrap::new(full, policy.clone(), self.facts()).granting(grant)
    }

    /// The runner's facts.
    pub fn facts(&self) -> WrapFacts {
        WrapFacts {
            backend: Backend::RunnerCommand,
            enforcement: Enforcement::Full,
            signatures: Signatures {
                runner_failure: self.failure_signatures.clone(),
                runner_failure_exit: None,
                runner_notices: vec![],
                denial: vec!["read-only file system".into(), "permission denied".into()],
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::SandboxMode;

    #[test]
    fn validation_names_the_problem() {
        assert!(RunnerCommand::new(vec![], vec!["x".into()]).is_err());
        assert!(
            RunnerCommand::new(vec!["r".into()], vec![])
                .unwrap_err()
                .contains("signatures")
        );
        assert!(RunnerCommand::new(vec!["r".into()], vec!["a\nb".into()]).is_err());
        assert!(RunnerCommand::new(vec!["r".into()], vec![" ".into()]).is_err());
        assert!(RunnerCommand::new(vec!["r".into()], vec!["r: ".into()]).is_ok());
    }

    #[test]
    fn placeholders_are_filled_and_the_argv_appended() {
        let runner = RunnerCommand::new(
            vec![
                "/opt/sb".into(),
                "--mode={mode}".into(),
                "{workspace}".into(),
            ],
            vec!["sb: ".into()],
        )
        .unwrap();
        let policy = SandboxPolicy::new(SandboxMode::WorkspaceWrite, "/w");
        let layout = crate::sandbox::grant::lay_out(&policy, &[], &[]);
        let wrap = runner.wrap(&["bash".into(), "-c".into(), "x".into()], &policy, &layout);
        assert_eq!(
            wrap.argv().join(" "),
            "/opt/sb --mode=workspace-write /w bash -c x"
        );
        assert_eq!(wrap.facts().signatures.runner_failure, ["sb: "]);
    }
}
