//! Entry points for the fuzz targets (`fuzz/`), with the `fuzzing`
//! feature only: the host checks every request and every spec a component
//! returns go through, exactly as `prepare` sequences them, and the host
//! side of `plan` — what `sandbox.confine` builds for a component's argv on
//! every runner, what each runner's launcher reads back from it, and the
//! launch check — reachable from outside the crate without making them
//! part of the API.

use std::ffi::OsString;
use std::path::{Path, PathBuf};

use super::checks;
use crate::error::RunError;
use crate::model::{
    Deployment, Enforcement, ExecRequest, ExecSpec, LaunchFacts, SandboxFacts, SandboxMode,
    SandboxPolicy,
};
use crate::policy::Launch;
use crate::proxy::Place;
use crate::sandbox::launcher::{self, Mode};
use crate::sandbox::{Wrap, bwrap, grant, landlock, namespaces};

/// The checks of a request before the component sees it.
pub fn check_request(request: &ExecRequest, deployment: &Deployment) -> Result<(), RunError> {
    checks::request_within_ceiling(request, deployment.max_mode)?;
    checks::request_size(request)?;
    checks::limits(request.limits.as_ref(), &deployment.limits).map(drop)
}

/// The checks of a spec a component's `resolve` returned for `request`
/// (the component having declared `declared` as its default mode), in
/// `prepare`'s order; the spec as the host would go on with it.
pub fn check_spec(
    request: &ExecRequest,
    mut spec: ExecSpec,
    deployment: &Deployment,
    declared: SandboxMode,
) -> Result<ExecSpec, RunError> {
    checks::spec_size(&spec)?;
    checks::spec_env(&spec)?;
    checks::canonicalise(&mut spec)?;
    checks::spec_within_ceiling(&spec, deployment.max_mode)?;
    checks::spec_keeps_handed_policy(
        &spec,
        checks::handed_policy(request, deployment),
        None,
        declared,
    )?;
    checks::policy_within(&spec.policy, deployment)?;
    Ok(spec)
}

/// Whether a (canonical) policy is within the deployment's ceilings.
pub fn policy_within(policy: &SandboxPolicy, deployment: &Deployment) -> Result<(), RunError> {
    checks::policy_within(policy, deployment)
}

/// The check of the facts a component's `settle` stamped on a run.
pub fn check_stamp(
    spec: &ExecSpec,
    facts: &LaunchFacts,
    stamped: Option<&SandboxFacts>,
) -> Result<(), RunError> {
    checks::stamp(spec, facts, stamped)
}

/// Whether the host accepts `launch` — a wrap it issued for
/// `wrapped_for`, or else the bare `argv` — as the plan of `spec`.
pub fn check_launch(
    spec: &ExecSpec,
    wrapped_for: Option<SandboxPolicy>,
    argv: Vec<String>,
) -> Result<Vec<String>, RunError> {
    let launch = match wrapped_for {
        Some(policy) => Launch::Confined(Box::new(Wrap::new(argv, policy, bwrap::facts()))),
        None => Launch::Unconfined(argv),
    };
    checks::launch(launch, spec).map(|accepted| accepted.argv)
}

/// One runner's confinement of a command, as `sandbox.confine` builds it.
#[derive(Debug)]
pub struct Confined {
    /// The runner.
    pub runner: &'static str,
    /// The argv the host would spawn.
    pub argv: Vec<String>,
    /// What the runner reads back from `argv`: the command it would run
    /// and every host path it would let that command write.
    pub read_back: Result<(Vec<OsString>, Vec<PathBuf>), String>,
    /// The proxy's socket path or port (fresh for every wrap), when the
    /// grant's allow-list reaches one.
    pub proxy: Option<String>,
}

/// The wrap of `argv` for `policy` (a policy the host's checks accepted)
/// on every Linux runner — bubblewrap with and without cordon's init,
/// cordon's namespace runner, the Landlock launcher (unless Landlock must
/// refuse the layout, as the ladder does) — with `/cordon` standing in for
/// the host's executable.
pub fn confine_everywhere(argv: &[String], policy: &SandboxPolicy) -> Vec<Confined> {
    let host = Path::new("/cordon");
    let layout = grant::lay_out(
        policy,
        &[PathBuf::from("/etc/cordon/cordon.toml")],
        &[PathBuf::from("/var/lib/cordon/spill")],
    );
    let mut wraps = vec![
        (
            "bwrap",
            bwrap::Bwrap::at("/usr/bin/bwrap").wrap(argv, policy, &layout),
        ),
        (
            "bwrap+init",
            bwrap::Bwrap::at("/usr/bin/bwrap")
                .with_init(host)
                .wrap(argv, policy, &layout),
        ),
        (
            "namespaces",
            namespaces::Namespaces::at(host).wrap(argv, policy, &layout),
        ),
    ];
    if landlock::exposed_host_state(&layout).is_none() {
        let landlock = landlock::Landlock::at(host, Enforcement::Full);
        wraps.push(("landlock", landlock.wrap(argv, policy, &layout)));
    }
    wraps
        .into_iter()
        .map(|(runner, wrap)| Confined {
            runner,
            read_back: read_back(runner, wrap.argv()),
            proxy: wrap.proxy().map(|at| match at.place() {
                Place::Socket(path) => path.to_string_lossy().into_owned(),
                Place::Loopback(port) => port.to_string(),
            }),
            argv: wrap.argv().to_vec(),
        })
        .collect()
}

/// What `runner` reads back from the argv the host built for it.
fn read_back(runner: &str, argv: &[String]) -> Result<(Vec<OsString>, Vec<PathBuf>), String> {
    let args = |from: usize| argv[from..].iter().map(OsString::from).collect::<Vec<_>>();
    match runner {
        "namespaces" => launcher::read_back(Mode::Namespaces, args(2)),
        "landlock" => launcher::read_back(Mode::Landlock, args(2)),
        "bwrap+init" => read_back_bwrap(argv, true),
        _ => read_back_bwrap(argv, false),
    }
}

/// bubblewrap's own arguments read as bwrap reads them (the profile in the
/// dialect cordon's namespace runner shares), then cordon's init's, if any.
fn read_back_bwrap(argv: &[String], init: bool) -> Result<(Vec<OsString>, Vec<PathBuf>), String> {
    let mut args = argv[1..].iter().map(OsString::from);
    let mut plan = launcher::namespaces::Plan::default();
    loop {
        let flag = args.next().ok_or("bwrap: no -- before the command")?;
        let flag = flag
            .to_str()
            .ok_or("bwrap: a flag is not UTF-8")?
            .to_owned();
        match flag.as_str() {
            "--" => break,
            "--args" | "--json-status-fd" | "--cap-drop" => {
                args.next().ok_or(format!("bwrap: {flag} needs a value"))?;
            }
            // The hardening's flags without a value (`--cap-drop`'s is taken above).
            hardening if bwrap::HARDENING.contains(&hardening) => {}
            bwrap::AS_PID_1 if init => {}
            _ if plan.take(&flag, &mut args)? => {}
            other => return Err(format!("bwrap: unknown argument {other:?}")),
        }
    }
    let writable = plan.writable_sources().map(PathBuf::from).collect();
    let rest: Vec<OsString> = args.collect();
    let command = match init {
        true if rest.len() >= 2 && rest[1] == launcher::INIT_SUBCOMMAND => {
            launcher::read_back(Mode::Init, rest[2..].to_vec())?.0
        }
        true => return Err("bwrap: cordon's init does not follow --".into()),
        false => rest,
    };
    Ok((command, writable))
}
