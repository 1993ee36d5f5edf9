//! cgroup v1: one mount per controller. A run gets a directory in each of
//! cordon's controllers that is mounted, under the host's own cgroup; a
//! thread of the host moves in to spawn the run's child (v1 `tasks` moves
//! one thread), and ending a run freezes the set, kills each member and
//! thaws.

#[allow(unused_imports, reason = "the parent module's names, as one scope")]
use super::*;

/// The v1 controllers cordon uses that are mounted, each with the host's
/// own cgroup in it (`None` when neither `pids` nor `memory` is: v1 then
/// bounds nothing worth a cgroup).
pub(super) fn find(mounts: &[(PathBuf, String, String)], system: &System) -> Option<Hierarchy> {
    let mut found = vec![];
    for controller in Controller::ALL {
        let Some((point, _, _)) = mounts.iter().find(|(_, fstype, options)| {
            fstype == "cgroup" && options.split(',').any(|o| o == controller.name())
        }) else {
            continue;
        };
        let Some(own) = layout::own_path(&system.cgroup, Some(controller.name())) else {
            continue;
        };
        let home = layout::under(point, &own);
        found.push(V1Controller {
            controller,
            parent: home.join(CORDON_DIR),
            home,
        });
    }
    bounds_something(&found).then_some(Hierarchy::V1(found))
}

/// Whether `controllers` include `pids` or `memory`.
fn bounds_something(controllers: &[V1Controller]) -> bool {
    controllers
        .iter()
        .any(|c| matches!(c.controller, Controller::Pids | Controller::Memory))
}

/// Make the `cordon` directory in each controller; keep those this user
/// may make runs in (an error when neither `pids` nor `memory` is left).
pub(super) fn prepare(controllers: &mut Vec<V1Controller>) -> Result<(), String> {
    let mut made = vec![];
    let mut why = vec![];
    for controller in controllers.drain(..) {
        match layout::make_writable(&controller.parent) {
            Ok(()) => made.push(controller),
            Err(err) => why.push(format!("{}: {err}", controller.parent.display())),
        }
    }
    if !bounds_something(&made) {
        return Err(format!(
            "cgroup v1: cannot make cordon's cgroups ({}); run as root or \
             delegate the pids and memory hierarchies",
            why.join("; ")
        ));
    }
    *controllers = made;
    Ok(())
}

/// The directory of `controller` among a run's `members`.
pub(super) fn member(members: &[Member], controller: Controller) -> Option<&Path> {
    members
        .iter()
        .find(|m| m.controller == controller)
        .map(|m| m.dir.as_path())
}

/// The files and values `limits` are written as.
pub(super) fn limit_files(members: &[Member], limits: &RunLimits) -> Vec<(PathBuf, String)> {
    let mut files = vec![];
    if let (Some(pids), Some(dir)) = (limits.pids, member(members, Controller::Pids)) {
        files.push((dir.join("pids.max"), pids.to_string()));
    }
    if let (Some(bytes), Some(dir)) = (limits.memory_bytes, member(members, Controller::Memory)) {
        files.push((dir.join("memory.limit_in_bytes"), bytes.to_string()));
        // With swap accounting, swap counts too (written after the memory
        // limit, which it may not be below).
        let swap = dir.join("memory.memsw.limit_in_bytes");
        if swap.exists() {
            files.push((swap, bytes.to_string()));
        }
    }
    if let (Some(weight), Some(dir)) = (limits.cpu_weight, member(members, Controller::Cpu)) {
        // cpu.shares 1024 is the default weight 100.
        files.push((
            dir.join("cpu.shares"),
            (weight * 1024 / 100).max(2).to_string(),
        ));
    }
    files
}

/// Run `spawn` with the run's child inside from its first instruction: by
/// the staged spawner thread already inside, else by the calling thread,
/// which moves in for the spawn and back.
pub(super) fn spawn_inside<T: Send + 'static>(
    members: &[Member],
    spawner: &std::sync::Mutex<Option<Staging>>,
    spawn: impl FnOnce(Option<std::os::fd::RawFd>) -> io::Result<T> + Send + 'static,
) -> io::Result<T> {
    // A staged spawner is used once; it stays (parked) with the run.
    let staged = spawner
        .lock()
        .ok()
        .and_then(|mut slot| slot.as_mut().and_then(Staging::take));
    if let Some(staged) = staged {
        let result = staged.run(move || spawn(None));
        if let Ok(mut slot) = spawner.lock() {
            *slot = Some(Staging::Used(staged));
        }
        return result?;
    }
    for member in members {
        fs::write(member.dir.join("tasks"), MOVE_THIS_THREAD)?;
    }
    let spawned = spawn(None);
    for member in members {
        // Back home; a thread left inside would be frozen and killed with
        // the run.
        let _ = fs::write(member.home.join("tasks"), MOVE_THIS_THREAD);
    }
    spawned
}

/// `SIGKILL` every member of `run` (v1) with nothing able to fork away:
/// freeze the set, kill each member, thaw. Never signals the host.
pub(super) fn kill(run: &RunCgroup, spawner: &std::sync::Mutex<Option<Staging>>) {
    let me = std::process::id() as i32;
    // The parked spawner goes first (a frozen host thread would stall the
    // host); its exit also ends a runner still alive.
    if let Ok(mut slot) = spawner.lock() {
        drop(slot.take());
    }
    // Nothing left (the supervisor swept its tree): nothing can fork into
    // an empty cgroup, so there is nothing to freeze. Freezing is not free
    // on v1: the first frozen cgroup turns a kernel static key on and the
    // thaw turns it off, each patching kernel text on every CPU.
    if run.members().is_empty() {
        return;
    }
    let freezer = run
        .member(Controller::Freezer)
        .filter(|dir| !holds_host_thread(dir));
    let Some(dir) = freezer else {
        run::kill_each(&run.members(), me);
        return;
    };
    let state = dir.join("freezer.state");
    if fs::write(&state, "FROZEN").is_ok() {
        let until = Instant::now() + Duration::from_millis(500);
        while fs::read_to_string(&state).is_ok_and(|s| s.trim() != "FROZEN")
            && Instant::now() < until
        {
            std::thread::sleep(Duration::from_millis(1));
        }
    }
    run::kill_each(&run.members(), me);
    let _ = fs::write(&state, "THAWED");
}

/// The counter files whose key counts the pids and memory limits reached.
pub(super) fn counters(members: &[Member]) -> [Option<(PathBuf, &'static str)>; 2] {
    [
        member(members, Controller::Pids).map(|d| (d.join("pids.events"), "max")),
        member(members, Controller::Memory).map(|d| (d.join("memory.oom_control"), "oom_kill")),
    ]
}
