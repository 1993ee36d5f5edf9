//! A one-shot run's runner, started ahead of its plan.
//!
//! `cordon run` knows its request before it has loaded the policy
//! component, and its grant is usually the one the component keeps (the
//! request's, or the deployment's). So the host asks the sandbox to
//! confine that grant and starts cordon's namespace runner for it at once,
//! with `--await-fd`: the runner builds its sandbox on the other CPU while
//! the host builds its engine and loads, resolves and plans. When the
//! run's own checked launch has the very same runner argv (and the same
//! runner environment), the run hands it the command instead of starting
//! a runner of its own ([`take`]); otherwise it is ended unused and the run
//! spawns as always.
//!
//! Nothing here decides what runs or how it is confined: the waiting
//! runner is a confinement the sandbox issued, the command and its
//! environment come from the run's checked launch, and the runner itself
//! refuses a command when its sandbox is no longer the view it built (a
//! cover the host moved while it waited).

use std::sync::Arc;

use crate::model::{Deployment, ExecRequest, ExecSpec};
use crate::process::{self, Cgroups, Waiting};
use crate::sandbox::{self, Confine};

use super::{Prepared, checks};

/// A runner being started ahead of a run's plan, on a thread of its own
/// (making the run's cgroup and laying out the grant take that thread's
/// time, not the host's), or none.
///
/// The thread lives as long as this does: a child started from it (on
/// cgroup v2 it is started from that very thread) gets its parent-death
/// signal when the thread that made it ends, not the process.
#[derive(Debug, Default)]
pub(crate) struct Ahead {
    started: std::sync::Mutex<Option<std::sync::mpsc::Receiver<Option<Waiting>>>>,
    /// Dropped with this: the thread may end.
    _release: Option<std::sync::mpsc::Sender<()>>,
}

impl Ahead {
    /// Start the runner for `request` (see [`start`]) on a thread inside
    /// the current tokio runtime, which watches its exit; none outside one.
    pub(crate) fn start(
        confiner: Arc<dyn Confine>,
        cgroups: Option<Arc<Cgroups>>,
        deployment: Deployment,
        request: ExecRequest,
    ) -> Ahead {
        let Ok(runtime) = tokio::runtime::Handle::try_current() else {
            return Ahead::default();
        };
        let (deliver, started) = std::sync::mpsc::sync_channel(1);
        let (release, released) = std::sync::mpsc::channel::<()>();
        let spawned = std::thread::Builder::new()
            .name("cordon-ahead".into())
            .spawn(move || {
                let waiting = {
                    let _inside = runtime.enter();
                    start(&confiner, cgroups.as_deref(), &deployment, &request)
                };
                let _ = deliver.send(waiting);
                // Outlive the runner (its parent-death signal): until the
                // host lets go.
                let _ = released.recv();
            });
        match spawned {
            Ok(_) => Ahead {
                started: std::sync::Mutex::new(Some(started)),
                _release: Some(release),
            },
            Err(_) => Ahead::default(),
        }
    }

    /// The runner, once started (none: none was, or it is taken).
    fn take(&self) -> Option<Waiting> {
        let started = self.started.lock().ok()?.take()?;
        started.recv().ok().flatten()
    }
}

/// Start the runner `request` will most likely be planned with; none
/// when the guess cannot be made or the run could not take it (no
/// cgroup, stdin bytes or a terminal, a grant with an allow-list proxy or placeholders,
/// another runner than cordon's own).
fn start(
    confiner: &Arc<dyn Confine>,
    cgroups: Option<&Cgroups>,
    deployment: &Deployment,
    request: &ExecRequest,
) -> Option<Waiting> {
    let cgroups = cgroups?;
    if request.stdin.is_some() || request.stdin_stream.is_some() || request.tty.is_some() {
        return None;
    }
    let mut spec = ExecSpec {
        command: String::new(),
        workdir: request
            .workdir
            .clone()
            .unwrap_or_else(|| deployment.workdir.clone()),
        timeout_ms: 1,
        env: vec![],
        policy: request
            .policy
            .clone()
            .unwrap_or_else(|| deployment.policy.clone()),
    };
    checks::canonicalise(&mut spec).ok()?;
    if !spec.policy.mode.is_confined() {
        return None;
    }
    let limits = checks::limits(request.limits.as_ref(), &deployment.limits).ok()?;
    confiner.prepare();
    let wrap = confiner.confine(&["true".into()], &spec.policy).ok()?;
    if wrap.proxy().is_some() || !wrap.placeholders().is_empty() {
        return None;
    }
    let (argv, _) = sandbox::namespaces::awaiting(wrap.argv())?;
    let (env, _, _) = wrap.handover().split(vec![], &[]);
    let launch = process::SpawnRequest {
        argv,
        env,
        workdir: "/".into(),
        stdin: None,
        tty: None,
        tail_bytes: 0,
        spill_limit: 0,
        status_pipe: wrap.report().needs_pipe(),
        handover: None,
        init_pipe: false,
        init_env: None,
        supervisor: wrap.supervision().process(),
    };
    let cgroup = cgroups.create(&limits).ok()?;
    process::start_waiting_unchecked(&launch, Some(cgroup)).ok()
}

/// The waiting runner of `cx`, with the message that hands it `prepared`'s
/// command, when `prepared` is a launch it can take: the same runner argv
/// and environment, no stdin bytes, no placeholders, no proxy, and a
/// cgroup, now holding `prepared`'s limits. Taken either way: one that
/// does not fit is ended here.
pub(super) fn take(
    ahead: &Ahead,
    cgroups: Option<&Cgroups>,
    prepared: &Prepared,
) -> Option<(Waiting, Vec<u8>)> {
    let waiting = ahead.take()?;
    let launch = &prepared.launch;
    let (argv, command) = sandbox::namespaces::awaiting(&launch.argv)?;
    let fits = argv == waiting.argv()
        && launch.env == waiting.env()
        && launch.stdin.is_none()
        && !launch.init_pipe
        && prepared.placeholders.is_empty()
        && prepared.proxy.is_none();
    if !fits {
        return None;
    }
    let (cgroups, cgroup) = (cgroups?, waiting.cgroup()?);
    cgroups.limit(cgroup, &prepared.run_limits).ok()?;
    let message = message(launch, command)?;
    Some((waiting, message))
}

/// The runner's message handing it `command` with `launch`'s working
/// directory and environment.
#[cfg(target_os = "linux")]
fn message(launch: &process::SpawnRequest, command: &[String]) -> Option<Vec<u8>> {
    let argv: Vec<&[u8]> = command.iter().map(|arg| arg.as_bytes()).collect();
    Some(sandbox::launcher::namespaces::message(
        &launch.workdir,
        &argv,
        launch.handover.as_deref().unwrap_or_default(),
    ))
}

/// No runner waits off Linux.
#[cfg(not(target_os = "linux"))]
fn message(_launch: &process::SpawnRequest, _command: &[String]) -> Option<Vec<u8>> {
    None
}
