//! What the model reads of a finished run, a job's output, or a refusal:
//! the output (head and tail, [`super::output`]), one exit line, the
//! markers, and the guidance that keeps a model from retrying around a
//! denial.
//!
//! This text is what a model reads in every client: the agents cordon is
//! tested in forward a tool result's text (or, when a result carries
//! structured content, that instead — so cordon sends the facts only when
//! the operator asks for them). What the command printed is made inert
//! first ([`crate::text`]): an escape sequence in its output reaches the
//! model, and the client that shows it, escaped. A policy component's
//! `render` export replaces these texts where it has one.

use crate::error::RunError;
use crate::model::{ExecResult, GrantFacts, SandboxFacts};
use crate::tasks::{TaskRead, TaskSnapshot, TaskStatus};

use super::output;

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
/// The marker of a run the client cancelled (it was killed).
pub const CANCELLED: &str = "[cancelled]";
/// The marker of a failed run without network whose output reads like a
/// network access that failed.
pub const NETWORK_NONE: &str = "[network: none]";

const DENIAL_GUIDANCE: &str = "The sandbox blocked an operation of this command (a write outside \
    the writable roots, a protected path, or the network). This is the deployment's policy, not \
    a transient error: do not retry it another way; do what the task needs inside the workspace, \
    or ask the user.";

const NETWORK_GUIDANCE: &str = "The deployment's policy keeps this run off the network there. \
    Do not retry it another way (another tool, mirror or proxy); work offline, or ask the user.";

const OFFLINE_GUIDANCE: &str = "This run has no network: the deployment's policy closes it, so \
    the failure above is that, not a transient error. Do not retry it another way (another tool, \
    mirror or proxy); work offline, or ask the user.";

/// What programs print when a name does not resolve or a connection cannot
/// be made: with the network closed, a run has no resolver and no route, so
/// a failed command that printed one of these met the policy. Matched in
/// lower case.
const OFFLINE_SIGNS: &[&str] = &[
    "could not resolve host",
    "temporary failure in name resolution",
    "name or service not known",
    "no address associated with hostname",
    "network is unreachable",
    "getaddrinfo",
    "enotfound",
    "eai_again",
    "failed to establish a new connection",
    "could not resolve proxy",
    "unable to resolve host",
    "name resolution",
];

const RUNNER_FAILED_TEXT: &str = "the sandbox itself failed; the command did not run (or its \
    result is void). This is not the command's fault and retrying will not help: tell the user \
    the host's sandbox needs attention (`cordon doctor`).";

/// A foreground result, for the model, its output cut to `budget` bytes.
pub fn result(result: &ExecResult, budget: usize) -> String {
    let mut text = String::new();
    let both = !result.stdout.text.is_empty() && !result.stderr.text.is_empty();
    let (out_budget, err_budget) = match both {
        true => (budget * 5 / 8, budget * 3 / 8),
        false => (budget, budget),
    };
    section(&mut text, None, &output::stream(&result.stdout, out_budget));
    section(
        &mut text,
        Some("[stderr]"),
        &output::stream(&result.stderr, err_budget),
    );
    if result.aborted {
        text.push_str(&format!(
            "{CANCELLED} the run was stopped: its processes were killed"
        ));
    } else {
        text.push_str(&exit_line(
            result.exit_code,
            result.signal,
            result.timed_out,
            result.timeout_ms,
        ));
    }
    markers(&mut text, result.sandbox.as_ref(), result.grant.as_ref());
    if result.exit_code.is_some_and(|code| code != 0)
        && !sandbox_failed(result.sandbox.as_ref(), result.grant.as_ref())
    {
        offline(
            &mut text,
            result.grant.as_ref(),
            &[&result.stdout.text, &result.stderr.text],
        );
    }
    text
}

/// The closed-network note: a run whose network the grant closed failed
/// and printed what a failed network access prints. The runner sees no
/// connection it could refuse (there is no route to attempt one), so the
/// output is what the host has.
fn offline(text: &mut String, grant: Option<&GrantFacts>, output: &[&str]) {
    if !grant.is_some_and(|g| g.network == crate::model::Network::None) {
        return;
    }
    let met = output.iter().any(|stream| {
        let lower = stream.to_ascii_lowercase();
        OFFLINE_SIGNS.iter().any(|sign| lower.contains(sign))
    });
    if met {
        text.push_str(&format!("\n{NETWORK_NONE} {OFFLINE_GUIDANCE}"));
    }
}

/// Whether a model should read `result` as a failure: a nonzero exit, a
/// timeout, a stop, a denial (even when the command's last step exited 0),
/// a failed runner, a refused connection.
pub fn failed(result: &ExecResult) -> bool {
    result.exit_code != Some(0)
        || result.timed_out
        || result.aborted
        || sandbox_failed(result.sandbox.as_ref(), result.grant.as_ref())
}

fn sandbox_failed(sandbox: Option<&SandboxFacts>, grant: Option<&GrantFacts>) -> bool {
    sandbox.is_some_and(|s| s.denied || s.runner_failed)
        || grant.is_some_and(|g| !g.refused.is_empty())
}

/// The sandbox's markers of a run: a failed runner, a denial, each refused
/// connection, with the guidance once.
fn markers(text: &mut String, sandbox: Option<&SandboxFacts>, grant: Option<&GrantFacts>) {
    if sandbox.is_some_and(|s| s.runner_failed) {
        text.push_str(&format!("\n{RUNNER_FAILED} {RUNNER_FAILED_TEXT}"));
        return;
    }
    let refused = grant.map(|g| g.refused.as_slice()).unwrap_or_default();
    for connection in refused.iter().take(8) {
        text.push_str(&format!(
            "\n{NETWORK_REFUSED} {}:{} — {}",
            crate::text::inert(&connection.host),
            connection.port,
            crate::text::inert(&connection.reason)
        ));
    }
    if refused.len() > 8 {
        text.push_str(&format!(
            "\n… and {} more refused connections",
            refused.len() - 8
        ));
    }
    let denials = sandbox.map(|s| s.denials.as_slice()).unwrap_or_default();
    // The proxy's refusals make a run denied too; the network's guidance
    // fits them unless the kernel refused something else.
    if !denials.is_empty() || (refused.is_empty() && sandbox.is_some_and(|s| s.denied)) {
        text.push_str(&format!("\n{DENIED} {DENIAL_GUIDANCE}"));
    } else if !refused.is_empty() {
        text.push_str(&format!("\n{NETWORK_GUIDANCE}"));
    }
    for denial in denials.iter().take(8) {
        text.push_str(&format!("\nrefused by the kernel: {}", denial_line(denial)));
    }
    if denials.len() > 8 {
        text.push_str(&format!(
            "\n… and {} more refused accesses",
            denials.len() - 8
        ));
    }
}

/// One kernel denial, for a model: the rights, then the path or address
/// (bounded, inert).
fn denial_line(denial: &crate::model::Denial) -> String {
    let rights = crate::text::quoted_command(&denial.blockers.join(", "), 120);
    match denial.path.as_deref().or(denial.address.as_deref()) {
        Some(place) => format!("{rights} on {}", crate::text::quoted_command(place, 240)),
        None => rights,
    }
}

/// A run that produced no result: the error, for the model.
pub fn error(error: &RunError) -> String {
    match error {
        RunError::Denied { reason } => format!(
            "{REFUSED} {reason}\nThe policy refused this command before it ran. Do not try to \
             reach the same effect another way; ask the user if it is needed."
        ),
        RunError::ApprovalRequired { reason, .. } => {
            not_approved(reason, &super::approval::Answer::Unavailable(String::new()))
        }
        RunError::SandboxUnavailable { .. } => {
            format!("{RUNNER_FAILED} {RUNNER_FAILED_TEXT}\n{error}")
        }
        RunError::Busy { .. } => format!("[busy] {error}"),
        other => format!("[cordon: {}] {other}", other.code()),
    }
}

/// An ask (the policy's `reason`) that did not become a run, for the
/// model: which of declined, dismissed or nobody-asked it was, truthfully.
pub fn not_approved(reason: &str, answer: &super::approval::Answer) -> String {
    use super::approval::Answer;
    let why = match answer {
        Answer::Declined => {
            "The approval request was declined (by the user, or by the client \
            on their behalf: clients that run without a person decline every request). The \
            command did not run. Do not try it another way."
        }
        Answer::Cancelled => {
            "The approval request was dismissed or cancelled without an \
            answer. The command did not run. Ask the user whether it should."
        }
        Answer::Unavailable(_) | Answer::Accepted => {
            "No person could be asked here (the \
            client cannot show approval requests). The command did not run. Ask the user; they \
            can approve it from a client with MCP elicitation, or change the policy."
        }
    };
    let mut text = format!("{NEEDS_APPROVAL} {reason}\n{why}");
    if let Answer::Unavailable(detail) = answer
        && !detail.is_empty()
    {
        text.push_str(&format!(" ({})", crate::text::inert(detail)));
    }
    text
}

/// A consuming read of a job, for the model, cut to `budget` bytes.
pub fn read(read: &TaskRead, settled: Option<&TaskSnapshot>, budget: usize) -> String {
    let body = output::head_and_tail(&read.text, None, read.text.len() as u64, budget);
    let mut text = crate::text::inert(&body).into_owned();
    if !text.is_empty() && !text.ends_with('\n') {
        text.push('\n');
    }
    if read.lossy {
        text.push_str("(output was dropped from the front: only its last part is shown)\n");
    }
    match settled {
        None if read.awaiting_input => text.push_str(
            "[running, waiting for input] answer it with shell_write, then call shell_output",
        ),
        None => text.push_str(
            "[running] call shell_output again for more (waitMs waits for the job to end)",
        ),
        Some(done) => {
            text.push_str(&job_end(done));
            markers(&mut text, done.sandbox.as_ref(), done.grant.as_ref());
            if done.exit_code.is_some_and(|code| code != 0)
                && !sandbox_failed(done.sandbox.as_ref(), done.grant.as_ref())
            {
                offline(&mut text, done.grant.as_ref(), &[&read.text]);
            }
        }
    }
    text
}

/// Whether a model should read a settled job as a failure.
pub fn job_failed(done: &TaskSnapshot) -> bool {
    done.status == TaskStatus::Killed
        || done.exit_code != Some(0)
        || done.timed_out
        || sandbox_failed(done.sandbox.as_ref(), done.grant.as_ref())
}

fn job_end(done: &TaskSnapshot) -> String {
    match done.status {
        TaskStatus::Killed if done.signal.is_none() && !done.timed_out => {
            "killed (it never ran to an end)".to_owned()
        }
        _ => exit_line(done.exit_code, done.signal, done.timed_out, 0),
    }
}

/// One line per job (`ids` gives each its short id).
pub fn list(tasks: &[(String, TaskSnapshot)]) -> String {
    if tasks.is_empty() {
        return "no jobs".to_owned();
    }
    tasks
        .iter()
        .map(|(id, task)| {
            let status = match task.status {
                TaskStatus::Running => "running".to_owned(),
                TaskStatus::Completed => format!("exited {}", task.exit_code.unwrap_or_default()),
                TaskStatus::Killed => "killed".to_owned(),
            };
            let command = crate::text::quoted_command(&task.command, 200);
            format!("job {id} {status}: {command}")
        })
        .collect::<Vec<_>>()
        .join("\n")
}

fn section(text: &mut String, title: Option<&str>, body: &str) {
    if body.is_empty() {
        return;
    }
    if let Some(title) = title {
        text.push_str(title);
        text.push('\n');
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
        return match timeout_ms {
            0 => format!("{TIMED_OUT} killed at its timeout"),
            ms => format!("{TIMED_OUT} killed after {ms} ms"),
        };
    }
    match (exit_code, signal) {
        (Some(code), _) => format!("exit code {code}"),
        (None, Some(signal)) => format!("killed by {}", crate::model::signal_name::of(signal)),
        (None, None) => "ended without an exit code".to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{Denial, Enforcement, Evidence, SandboxMode};

    #[test]
    fn the_kernels_denials_are_each_named_with_the_guidance_once() {
        let denial = |path: &str| Denial {
            blockers: vec!["fs.make_reg".into()],
            path: Some(path.into()),
            address: None,
            by: "landlock".into(),
        };
        let sandbox = SandboxFacts {
            mode: SandboxMode::WorkspaceWrite,
            denied: true,
            enforcement: Some(Enforcement::Full),
            runner_failed: false,
            evidence: Some(Evidence::Kernel),
            denials: vec![denial("/etc"), denial("/usr/\u{1b}[31mx\nfake line")],
        };
        let mut text = String::new();
        markers(&mut text, Some(&sandbox), None);
        assert_eq!(text.matches(DENIED).count(), 1, "{text}");
        assert!(
            text.contains("refused by the kernel: fs.make_reg on /etc\n"),
            "{text}"
        );
        // A path is one inert line: no escape reaches the model or a terminal.
        assert!(!text.contains('\u{1b}'), "{text}");
        assert!(!text.contains("\nfake line"), "{text}");
    }
}
