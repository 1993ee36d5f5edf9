//! A one-shot run's runner, started ahead of its plan.
//!
//! `cordon run` knows its request before it has loaded the policy
//! component, and its grant is usually the one the component keeps (the
//! request's, or the deployment's). So the host asks the sandbox to
//! confine that grant and starts cordon's own launcher for it at once —
//! the namespace runner, or the Landlock launcher on that rung — with
//! `--await-fd`: the runner builds its sandbox (the Landlock launcher
//! makes its ruleset) on the other CPU while the host builds its engine
//! and loads, resolves and plans. When the run's own checked launch has
//! the very same runner argv (and the same runner environment), the run
//! hands it the command instead of starting a runner of its own
//! ([`take`]); otherwise it is ended unused and the run spawns as always.
//!
//! Nothing here decides what runs or how it is confined: the waiting
//! runner is a confinement the sandbox issued, the command and its
//! environment come from the run's checked launch, and the runner itself
//! refuses a command when its sandbox is no longer the view it built (a
//! cover the host moved while it waited).

use std::sync::Arc;
use std::sync::mpsc::TryRecvError;
use std::task::Poll;

use crate::model::{Deployment, ExecRequest, ExecSpec, RunLimits};
use crate::process::{self, Cgroups, Waiting};
use crate::sandbox::{self, Confine};

use super::{Prepared, checks, netns};

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
    /// The host's cgroups come later, over `cgroups`, once the host has
    /// found them: the thread confines the grant meanwhile (none: no
    /// cgroups, and no runner).
    pub(crate) fn start(
        confiner: Arc<dyn Confine>,
        cgroups: std::sync::mpsc::Receiver<Option<Arc<Cgroups>>>,
        deployment: Deployment,
        request: ExecRequest,
    ) -> Ahead {
        let cgroups = move || cgroups.recv().ok().flatten();
        Ahead::on_thread(move || start(&confiner, cgroups, &deployment, &request))
    }

    /// The runner `start` starts on a thread of its own inside the current
    /// tokio runtime (which watches its exit); none outside one.
    fn on_thread(start: impl FnOnce() -> Option<Waiting> + Send + 'static) -> Ahead {
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
                    start()
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

    /// The runner when it is started by now, never waiting for it:
    /// `Pending` while its thread still starts it (it stays here), else
    /// taken (none: it failed to start, or none was).
    fn poll(&self) -> Poll<Option<Waiting>> {
        let Ok(mut started) = self.started.lock() else {
            return Poll::Ready(None);
        };
        let Some(receiver) = started.as_ref() else {
            return Poll::Ready(None);
        };
        let ready = match receiver.try_recv() {
            Err(TryRecvError::Empty) => return Poll::Pending,
            Ok(waiting) => waiting,
            Err(TryRecvError::Disconnected) => None,
        };
        *started = None;
        Poll::Ready(ready)
    }
}

/// A serving session's spare runner: started after each foreground run
/// for the grant that run was planned with, so that the session's next
/// run like it is handed a sandbox already built — the building done on
/// the host's other CPU while the client reads its reply and sends the
/// next request, not on the next run's time.
///
/// The spare is taken only when it has started by then (a run never waits
/// for it) and only when the run's own checked launch has the very same
/// runner argv and environment ([`taken`]); one that does not fit is
/// ended and the session starts one for the new grant. Nothing ties a
/// spare to the time it was built: the runner checks, when its command
/// comes, that every mount of its view still reaches what it attached,
/// the Landlock launcher that every rule's path still names what the rule
/// was made from (a directory moved or made on the host since refuses the
/// command, and the run is reported as not started), and a grant that has
/// placeholders or a proxy gets no spare. A session holds at most one
/// (a process and its cgroup, not counted against the run bounds), ended
/// with the session, and — run as root — up to three network namespaces
/// its spares join instead of making one each ([`netns`]), closed with
/// the session.
#[derive(Debug, Default)]
pub(crate) struct Spare {
    slot: std::sync::Mutex<Option<Ahead>>,
    /// The network namespaces its spares join ([`netns`]).
    networks: Arc<netns::Pool>,
}

impl Spare {
    /// The spare runner when it is started by now (taken), else none (a
    /// spare still starting stays for a later run); with the thread it
    /// was started from, which the run keeps until the runner has ended
    /// (where no staged cgroup had a spawner thread, that thread is the
    /// runner's parent: its end is the runner's parent-death signal).
    fn ready(&self) -> Option<(Waiting, Ahead)> {
        let mut slot = self.slot.lock().ok()?;
        match slot.as_ref()?.poll() {
            Poll::Pending => None,
            Poll::Ready(waiting) => {
                let thread = slot.take()?;
                Some((waiting?, thread))
            }
        }
    }

    /// Start a spare for a run planned like `prepared`, when none is kept
    /// and none is starting (on a thread of its own, as [`Ahead`]).
    pub(super) fn refill(&self, cx: &super::RunContext, prepared: &Prepared) {
        let Ok(mut slot) = self.slot.lock() else {
            return;
        };
        if slot.is_some() || !spares(cx, prepared) {
            return;
        }
        let (confiner, cgroups) = (cx.confiner.clone(), cx.cgroups.clone());
        let (spec, limits) = (prepared.spec.clone(), prepared.run_limits);
        let networks = self.networks.clone();
        *slot = Some(Ahead::on_thread(move || {
            start_runner(&confiner, || cgroups, &spec, &limits, Some(&networks))
        }));
    }
}

/// Whether a run like `prepared` in `cx` could take a spare: confined by
/// cordon's own launcher (the namespace runner, the Landlock launcher)
/// with a cgroup, no stdin or terminal, no placeholders, no proxy, as the
/// host's own user.
fn spares(cx: &super::RunContext, prepared: &Prepared) -> bool {
    let launch = &prepared.launch;
    cx.cgroups.is_some()
        && cx.identity.is_none()
        && launch.stdin.is_none()
        && launch.tty.is_none()
        && prepared.placeholders.is_empty()
        && prepared.proxy.is_none()
        && sandbox::awaiting(&launch.argv).is_some()
}

/// Start the runner `request` will most likely be planned with; none
/// when the guess cannot be made or the run could not take it (no
/// cgroup, stdin bytes or a terminal, a grant with an allow-list proxy or
/// placeholders, another runner than cordon's own launcher). A grant that
/// lacks a protected name is not even laid out: it has placeholders.
fn start(
    confiner: &Arc<dyn Confine>,
    cgroups: impl FnOnce() -> Option<Arc<Cgroups>>,
    deployment: &Deployment,
    request: &ExecRequest,
) -> Option<Waiting> {
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
    // Most workspaces lack a protected name (`.zshrc`, …): the grant then
    // has placeholders, and its runner could not be taken. Not laid out.
    if sandbox::grant::lacks_a_protected_name(&spec.policy) {
        return None;
    }
    let limits = checks::limits(request.limits.as_ref(), &deployment.limits).ok()?;
    start_runner(confiner, cgroups, &spec, &limits, None)
}

/// Start cordon's own launcher (the namespace runner, the Landlock
/// launcher) waiting for a command run under `spec`'s grant, in a cgroup
/// of `cgroups` (asked for once the grant is confined: the host may still
/// be finding them) with `limits`, and joining a network namespace of
/// `networks` where it would make one (as root); none when that grant is
/// not confined by it, or has placeholders or a proxy, or there are no
/// cgroups.
fn start_runner(
    confiner: &Arc<dyn Confine>,
    cgroups: impl FnOnce() -> Option<Arc<Cgroups>>,
    spec: &ExecSpec,
    limits: &RunLimits,
    networks: Option<&netns::Pool>,
) -> Option<Waiting> {
    if !spec.policy.mode.is_confined() {
        return None;
    }
    confiner.prepare();
    let wrap = confiner.confine(&["true".into()], &spec.policy).ok()?;
    if wrap.proxy().is_some() || !wrap.placeholders().is_empty() {
        return None;
    }
    let (argv, _) = sandbox::awaiting(wrap.argv())?;
    let (env, _, _) = wrap.handover().split(vec![], &[]);
    let mut launch = process::SpawnRequest {
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
    let cgroup = cgroups()?.create(limits).ok()?;
    let lent = networks.and_then(|pool| lend_network(pool, &mut launch, &cgroup));
    process::start_waiting_unchecked(&launch, Some(cgroup), lent.as_ref()).ok()
}

/// A network namespace of `pool` for `launch`'s runner (in `cgroup`) to
/// join instead of making one, its argv told where it is; none (`launch`
/// unchanged) when it makes none or the host is not root.
fn lend_network(
    pool: &netns::Pool,
    launch: &mut process::SpawnRequest,
    cgroup: &process::RunCgroup,
) -> Option<std::os::fd::OwnedFd> {
    if !nix::unistd::geteuid().is_root() {
        return None;
    }
    let joining = sandbox::joining_network(&launch.argv, process::passed_slot(launch))?;
    let lent = pool.lend(cgroup.directories())?;
    launch.argv = joining;
    Some(lent)
}

/// A runner already waiting for `prepared`'s command — the one started
/// ahead of `cx`'s plan, else the session's spare when it is started by
/// now — with the message that hands it that command, when `prepared` is
/// a launch it can take ([`fit`]); and a spare's thread, which the run
/// keeps until its runner has ended (its parent-death signal may be tied
/// to it). Taken either way: one that does not fit is ended here.
pub(super) fn taken(
    cx: &super::RunContext,
    prepared: &Prepared,
) -> (Option<(Waiting, Vec<u8>)>, Option<Ahead>) {
    let cgroups = cx.cgroups.as_deref();
    if let Some(waiting) = cx.ahead.take() {
        return (fit(waiting, cgroups, prepared), None);
    }
    let Some((waiting, thread)) = cx.spare.as_deref().and_then(Spare::ready) else {
        return (None, None);
    };
    match fit(waiting, cgroups, prepared) {
        Some(fits) => (Some(fits), Some(thread)),
        None => (None, None),
    }
}

/// `waiting` with the message that hands it `prepared`'s command, when it
/// fits — the same runner argv (a spare's lent network namespace aside:
/// it confines as a fresh one does) and environment, no stdin bytes, no
/// placeholders, no proxy, and a cgroup, now holding `prepared`'s limits;
/// ended (dropped) when not.
fn fit(
    waiting: Waiting,
    cgroups: Option<&Cgroups>,
    prepared: &Prepared,
) -> Option<(Waiting, Vec<u8>)> {
    let launch = &prepared.launch;
    let (argv, command) = sandbox::awaiting(&launch.argv)?;
    let fits = argv[..] == *sandbox::without_lent_network(waiting.argv())
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
    Some(sandbox::launcher::command::message(
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
