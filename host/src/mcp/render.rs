//! What the model reads of a finished run, a task's output, or a refusal:
//! the output tails, one exit line, the markers, and the guidance text that
//! keeps a model from retrying around a denial.
//!
//! The text is for a model; the facts go beside it as MCP structured
//! content (the same `ExecResult` every surface returns). What the command
//! printed is made inert first ([`crate::text`]): an escape sequence in
//! its output reaches the model, and the client that shows it, escaped. These are the
//! shipped default texts; a policy component's `render` export replacing
//! them is the next step of issue 17.

use crate::error::RunError;
use crate::model::ExecResult;
use crate::tasks::{TaskRead, TaskSnapshot, TaskStatus};

/// The marker of a run the sandbox denied something.
pub const DENIED: &str = "[sandbox: denied]";
/// The marker of a run whose sandbox runner failed (not the command).
pub const RUNNER_FAILED: &str = "[sandbox: runner failed]";
/// The marker of a run killed at its timeout.
pub const TIMED_OUT: &str = "[timed out]";
/// The marker of a command the policy refused before it ran.
pub const REFUSED: &str = "[refused by policy]";
/// The marker of a command that waits for a person's approval.
pub const NEEDS_APPROVAL: &str = "[needs approval]";
/// The marker of a network connection the sandbox refused.
pub const NETWORK_REFUSED: &str = "[network: refused]";

const DENIAL_GUIDANCE: &str = "The sandbox blocked an operation of this command (a write outside \
    the writable roots, a protected path, or the network). This is the deployment's policy, not \
    a transient error: do not retry it another way; do what the task needs inside the workspace, \
    or ask the user.";

/// A foreground result, for the model.
pub fn result(result: &ExecResult) -> String {
    let mut text = String::new();
    stream(
        &mut text,
        "stdout",
        &result.stdout.text,
        result.stdout.truncated,
    );
    stream(
        &mut text,
        "stderr",
        &result.stderr.text,
        result.stderr.truncated,
    );
    text.push_str(&exit_line(
        result.exit_code,
        result.signal,
        result.timed_out,
        result.timeout_ms,
    ));
    let sandbox = result.sandbox.as_ref();
    if sandbox.is_some_and(|s| s.runner_failed) {
        text.push_str(&format!(
            "\n{RUNNER_FAILED} the sandbox itself failed; the command's result is void. Tell the \
             user: the host's sandbox needs attention."
        ));
    } else if sandbox.is_some_and(|s| s.denied) {
        text.push_str(&format!("\n{DENIED} {DENIAL_GUIDANCE}"));
    }
    for refused in result.grant.iter().flat_map(|g| &g.refused) {
        text.push_str(&format!(
            "\n{NETWORK_REFUSED} {}:{} — {}",
            refused.host, refused.port, refused.reason
        ));
    }
    text
}

/// A run that produced no result: the error, for the model.
pub fn error(error: &RunError) -> String {
    match error {
        RunError::Denied { reason } => format!(
            "{REFUSED} {reason}\nThe policy refused this command before it ran. Do not try to \
             reach the same effect another way; ask the user if it is needed."
        ),
        RunError::ApprovalRequired { reason, .. } => needs_approval(reason),
        RunError::Busy { .. } => format!("[busy] {error}"),
        other => format!("[cordon: {}] {other}", other.code()),
    }
}

/// An ask nobody could approve here (the policy's `reason`), for the model.
pub fn needs_approval(reason: &str) -> String {
    format!(
        "{NEEDS_APPROVAL} {reason}\nThe command did not run: it needs a person's approval, and \
         none was given. Ask the user."
    )
}

/// An ask a person declined (the policy's `reason`), for the model.
pub fn declined(reason: &str) -> String {
    format!(
        "{NEEDS_APPROVAL} {reason}\nThe user declined: the command did not run. Do not try it \
         another way."
    )
}

/// A consuming read of a job, for the model.
pub fn read(read: &TaskRead, settled: Option<&TaskSnapshot>) -> String {
    let mut text = crate::text::inert(&read.text).into_owned();
    if !text.is_empty() && !text.ends_with('\n') {
        text.push('\n');
    }
    if read.lossy {
        text.push_str("(output was dropped from the front: only its last part is shown)\n");
    }
    match settled {
        None => text.push_str("[running] call shell_output again for more"),
        Some(done) => {
            text.push_str(&exit_line(done.exit_code, done.signal, done.timed_out, 0));
            if done.sandbox.as_ref().is_some_and(|s| s.denied) {
                text.push_str(&format!("\n{DENIED} {DENIAL_GUIDANCE}"));
            }
        }
    }
    text
}

/// One line per job.
pub fn list(tasks: &[TaskSnapshot]) -> String {
    if tasks.is_empty() {
        return "no jobs".to_owned();
    }
    tasks
        .iter()
        .map(|task| {
            let status = match task.status {
                TaskStatus::Running => "running".to_owned(),
                TaskStatus::Completed => format!("exited {}", task.exit_code.unwrap_or_default()),
                TaskStatus::Killed => "killed".to_owned(),
            };
            let command = crate::text::quoted_command(&task.command, 200);
            format!("{} {status}: {command}", task.id)
        })
        .collect::<Vec<_>>()
        .join("\n")
}

fn stream(text: &mut String, name: &str, body: &str, truncated: bool) {
    if body.is_empty() {
        return;
    }
    if truncated {
        text.push_str(&format!(
            "[{name}: the start was cut; its last part follows]\n"
        ));
    } else if name == "stderr" {
        text.push_str("[stderr]\n");
    }
    text.push_str(&crate::text::inert(body));
    if !body.ends_with('\n') {
        text.push('\n');
    }
}

fn exit_line(
    exit_code: Option<i32>,
    signal: Option<i32>,
    timed_out: bool,
    timeout_ms: u64,
) -> String {
    if timed_out {
        return format!("{TIMED_OUT} killed after {timeout_ms} ms");
    }
    match (exit_code, signal) {
        (Some(code), _) => format!("exit code {code}"),
        (None, Some(signal)) => format!("killed by {}", crate::model::signal_name::of(signal)),
        (None, None) => "ended without an exit code".to_owned(),
    }
}
