//! Table-driven case files for policy components (`cordon policy test`).
//!
//! A case file is TOML. Each `[[case]]` is a request run through the
//! component as a host would — `resolve`, then `plan` (against a fake
//! sandbox) when the case expects a launch or gives an outcome, then
//! `settle` with the case's outcome — and checked against `expect`:
//!
//! ```toml
//! include = ["../cases/classify.toml"]   # more cases, paths relative to this file
//!
//! [defaults]                              # start of every case in this file
//! deployment = { policy = { mode = "read-only", workspaceRoot = "/ws" }, maxMode = "workspace-write", workdir = "/ws" }
//! sandbox = { backend = "bwrap" }         # the fake confine: backend, enforcement, runnerFailure, signatures, unavailable
//!
//! [[case]]
//! name = "a write to a read-only file system is a denial"
//! request = { command = "touch /etc/x" }
//! outcome = { exitCode = 1, stderrTail = "touch: cannot touch '/etc/x': Read-only file system" }
//! expect.facts = { mode = "read-only", denied = true, enforcement = "full" }
//! ```
//!
//! A case may also ask about one connection of the run (`connect = { host,
//! port }`, expecting `expect.connect`) and one HTTP request of it
//! (`httpRequest = { method, host, port, path, query, headers }`, expecting
//! `expect.request`: `"allow"`, `{ denied = REASON }`, `{ edits = […] }` or
//! `{ asked = REASON, edits = […] }`).
//!
//! Keys are camelCase, as in the JSON protocol. `expect` may hold `spec`,
//! `launch` (see [`super::PlannedLaunch`]), `facts` (`{mode, denied,
//! enforcement, runnerFailed}`, or `false` for "stamps nothing") and `error`
//! (`{code, contains}`, whichever stage raised it); an expected table matches
//! when every key it names matches (keys it leaves out are not checked),
//! anything else must be equal. A failure lists each differing path with
//! what was expected and what came back.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use serde::Deserialize;
use serde_json::{Value, json};

use super::{FakeSandbox, Kit, SandboxScript};
use crate::error::RunError;
use crate::model::{Deployment, ExecRequest, HttpRequest, Outcome, RequestVerdict};

/// Why a case file could not be used.
#[derive(Debug, thiserror::Error)]
pub enum CaseFileError {
    /// The file could not be read.
    #[error("cannot read case file {}: {source}", path.display())]
    Read {
        /// The file.
        path: PathBuf,
        /// The operating system's error.
        #[source]
        source: std::io::Error,
    },
    /// The file is not a valid case file; the message names the key.
    #[error("case file {}: {message}", path.display())]
    Invalid {
        /// The file.
        path: PathBuf,
        /// What is wrong, and where.
        message: String,
    },
}

#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct CaseFile {
    #[serde(default)]
    include: Vec<PathBuf>,
    #[serde(default)]
    defaults: Defaults,
    #[serde(default, rename = "case")]
    cases: Vec<CaseSpec>,
}

#[derive(Clone, Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct Defaults {
    #[serde(default)]
    deployment: Option<Deployment>,
    #[serde(default)]
    sandbox: Option<SandboxScript>,
    /// The component's settings (`[policy.settings]`), unless the
    /// deployment names its own.
    #[serde(default)]
    settings: Option<Value>,
    /// A settings file (TOML, or JSON for `.json`), relative to the case
    /// file: the settings when `settings` names none.
    #[serde(default)]
    settings_file: Option<PathBuf>,
}

impl Defaults {
    /// `self` with `inner`'s values laid over it.
    fn overlaid(&self, inner: &Defaults) -> Defaults {
        Defaults {
            deployment: inner.deployment.clone().or_else(|| self.deployment.clone()),
            sandbox: inner.sandbox.clone().or_else(|| self.sandbox.clone()),
            settings: inner.settings.clone().or_else(|| self.settings.clone()),
            settings_file: inner
                .settings_file
                .clone()
                .or_else(|| self.settings_file.clone()),
        }
    }
}

#[derive(Clone, Debug, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct CaseSpec {
    name: String,
    request: ExecRequest,
    #[serde(default)]
    deployment: Option<Deployment>,
    #[serde(default)]
    sandbox: Option<SandboxScript>,
    #[serde(default)]
    background: bool,
    #[serde(default)]
    outcome: Option<Outcome>,
    /// A connection to decide with the resolved spec (`connect`).
    #[serde(default)]
    connect: Option<Connection>,
    /// An HTTP request of the run to decide with the resolved spec
    /// (`request`, world `0.3.0`).
    #[serde(default)]
    http_request: Option<HttpCase>,
    expect: Expect,
}

/// An HTTP request a case asks the component about; a credential header's
/// value is withheld from it, as the host's proxy withholds it.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct HttpCase {
    method: String,
    #[serde(default = "https")]
    scheme: String,
    host: String,
    #[serde(default = "https_port")]
    port: u16,
    #[serde(default = "root")]
    path: String,
    #[serde(default)]
    query: Option<String>,
    /// Name and value pairs, in order.
    #[serde(default)]
    headers: Vec<(String, String)>,
}

fn https() -> String {
    "https".into()
}

fn https_port() -> u16 {
    443
}

fn root() -> String {
    "/".into()
}

impl HttpCase {
    /// The request as the host's proxy shows it.
    fn shown(&self) -> HttpRequest {
        let headers = (self.headers.iter())
            .map(|(name, value)| {
                let name = name.to_ascii_lowercase();
                let shown = crate::model::shown_header_value(&name, value.as_bytes());
                (name, shown)
            })
            .collect();
        HttpRequest {
            method: self.method.clone(),
            scheme: self.scheme.clone(),
            host: self.host.to_ascii_lowercase(),
            port: self.port,
            path: self.path.clone(),
            query: self.query.clone(),
            headers,
        }
    }
}

/// A connection a case asks the component about.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct Connection {
    host: String,
    port: u16,
}

#[derive(Clone, Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct Expect {
    #[serde(default)]
    spec: Option<Value>,
    #[serde(default)]
    launch: Option<Value>,
    #[serde(default)]
    facts: Option<Value>,
    /// `"allow"`, or `{ refused = "reason" }`.
    #[serde(default)]
    connect: Option<Value>,
    /// `"allow"`, `{ denied = "reason" }`, `{ edits = [{ set = [NAME,
    /// VALUE] }, { remove = NAME }, { attachCredential = NAME }] }`, or
    /// `{ asked = "reason", edits = […] }` (waits for a person).
    #[serde(default)]
    request: Option<Value>,
    #[serde(default)]
    error: Option<ExpectError>,
}

#[derive(Clone, Debug, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct ExpectError {
    code: String,
    #[serde(default)]
    contains: Option<String>,
    /// Fields of the error's details (`reason`, `policy`, `field`, …).
    #[serde(default)]
    details: Option<Value>,
}

/// One case, ready to run.
#[derive(Clone, Debug)]
pub struct Case {
    /// The case's name.
    pub name: String,
    /// The file it came from.
    pub file: PathBuf,
    spec: CaseSpec,
    deployment: Deployment,
    sandbox: SandboxScript,
}

impl Case {
    /// Give the case's component `settings` (JSON text) unless the case
    /// file gave it settings of its own.
    pub fn with_settings(&mut self, settings: &str) {
        if self.deployment.settings == "{}" {
            self.deployment.settings = settings.to_owned();
        }
    }

    /// The settings the case's component gets.
    pub fn settings(&self) -> &str {
        &self.deployment.settings
    }
}

/// What one case found.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CaseReport {
    /// The case's name.
    pub name: String,
    /// The file it came from.
    pub file: PathBuf,
    /// Each difference, as `path: expected X, got Y`; empty when it passed.
    pub failures: Vec<String>,
}

impl CaseReport {
    /// Whether the case passed.
    pub fn passed(&self) -> bool {
        self.failures.is_empty()
    }
}

/// Load a case file and everything it includes (cycles are an error).
pub fn load(path: &Path) -> Result<Vec<Case>, CaseFileError> {
    let mut cases = vec![];
    load_into(path, &Defaults::default(), &mut vec![], &mut cases)?;
    Ok(cases)
}

fn load_into(
    path: &Path,
    outer: &Defaults,
    seen: &mut Vec<PathBuf>,
    cases: &mut Vec<Case>,
) -> Result<(), CaseFileError> {
    let invalid = |message: String| CaseFileError::Invalid {
        path: path.to_path_buf(),
        message,
    };
    let canonical = std::fs::canonicalize(path).map_err(|source| CaseFileError::Read {
        path: path.to_path_buf(),
        source,
    })?;
    if seen.contains(&canonical) {
        return Err(invalid(
            "includes itself (directly or through another file)".into(),
        ));
    }
    let text = std::fs::read_to_string(path).map_err(|source| CaseFileError::Read {
        path: path.to_path_buf(),
        source,
    })?;
    let mut file: CaseFile = toml::from_str(&text).map_err(|err| invalid(err.to_string()))?;
    let dir = path.parent().unwrap_or(Path::new("."));
    if let Some(settings) = file.defaults.settings_file.take() {
        let read = crate::config::read_settings(&dir.join(settings))
            .map_err(|err| invalid(format!("defaults.settingsFile: {err}")))?;
        file.defaults.settings =
            Some(serde_json::from_str(&read).map_err(|err| invalid(err.to_string()))?);
    }
    let defaults = outer.overlaid(&file.defaults);
    seen.push(canonical);
    for include in &file.include {
        load_into(&dir.join(include), &defaults, seen, cases)?;
    }
    seen.pop();
    for spec in file.cases {
        let deployment = spec
            .deployment
            .clone()
            .or_else(|| defaults.deployment.clone())
            .unwrap_or_else(default_deployment);
        let sandbox = spec
            .sandbox
            .clone()
            .or_else(|| defaults.sandbox.clone())
            .unwrap_or_default();
        let mut deployment = deployment;
        if let Some(settings) = &defaults.settings
            && deployment.settings == "{}"
        {
            deployment.settings = settings.to_string();
        }
        cases.push(Case {
            name: spec.name.clone(),
            file: path.to_path_buf(),
            spec,
            deployment,
            sandbox,
        });
    }
    Ok(())
}

/// The deployment a case gets when neither it nor its file names one.
fn default_deployment() -> Deployment {
    Deployment::in_dir("/workspace")
}

/// Run one case against `kit`.
pub fn run(kit: &Kit, case: &Case) -> CaseReport {
    let mut failures = vec![];
    let expect = &case.spec.expect;
    let outcome = run_stages(kit, case);
    match (outcome, &expect.error) {
        (Ok(got), None) => {
            compare_opt("spec", expect.spec.as_ref(), Some(&got.spec), &mut failures);
            compare_opt(
                "launch",
                expect.launch.as_ref(),
                got.launch.as_ref(),
                &mut failures,
            );
            compare_opt(
                "facts",
                expect.facts.as_ref(),
                got.facts.as_ref(),
                &mut failures,
            );
            compare_opt(
                "connect",
                expect.connect.as_ref(),
                got.connect.as_ref(),
                &mut failures,
            );
            compare_opt(
                "request",
                expect.request.as_ref(),
                got.request.as_ref(),
                &mut failures,
            );
        }
        (Ok(got), Some(wanted)) => failures.push(format!(
            "error: expected {} error, got success ({})",
            wanted.code,
            got.last()
        )),
        (Err(error), None) => failures.push(format!(
            "expected success, got {} error: {error}",
            error.code()
        )),
        (Err(error), Some(wanted)) => {
            if error.code().as_str() != wanted.code {
                failures.push(format!(
                    "error.code: expected {}, got {} ({error})",
                    wanted.code,
                    error.code()
                ));
            }
            if let Some(text) = &wanted.contains
                && !error.to_string().contains(text.as_str())
            {
                failures.push(format!(
                    "error.message: expected it to contain {text:?}, got {:?}",
                    error.to_string()
                ));
            }
            let details = Value::Object(error.details());
            compare_opt(
                "error.details",
                wanted.details.as_ref(),
                Some(&details),
                &mut failures,
            );
        }
    }
    CaseReport {
        name: case.name.clone(),
        file: case.file.clone(),
        failures,
    }
}

/// What each stage returned, as JSON.
struct Stages {
    spec: Value,
    launch: Option<Value>,
    facts: Option<Value>,
    connect: Option<Value>,
    request: Option<Value>,
}

impl Stages {
    fn last(&self) -> String {
        self.facts
            .as_ref()
            .or(self.launch.as_ref())
            .unwrap_or(&self.spec)
            .to_string()
    }
}

fn run_stages(kit: &Kit, case: &Case) -> Result<Stages, RunError> {
    let expect = &case.spec.expect;
    let spec = kit.resolve(&case.spec.request, &case.deployment)?;
    let mut stages = Stages {
        spec: json(&spec),
        launch: None,
        facts: None,
        connect: None,
        request: None,
    };
    if let Some(connection) = &case.spec.connect {
        stages.connect = Some(
            match kit.connect(&spec, &connection.host, connection.port)? {
                Ok(()) => json!("allow"),
                Err(reason) => json!({ "refused": reason }),
            },
        );
    }
    if let Some(request) = &case.spec.http_request {
        let verdict = kit.request(&spec, &case.deployment.settings, &request.shown())?;
        stages.request = Some(match verdict {
            RequestVerdict::Allow => json!("allow"),
            RequestVerdict::Deny(reason) => json!({ "denied": reason }),
            RequestVerdict::Edit(edits) => json!({ "edits": edits }),
            RequestVerdict::Ask { reason, edits } => json!({ "asked": reason, "edits": edits }),
        });
    }
    // An expected error may come from plan (no usable sandbox) too.
    let wants_plan =
        expect.launch.is_some() || expect.error.is_some() || case.spec.outcome.is_some();
    if !wants_plan {
        return Ok(stages);
    }
    let sandbox = Arc::new(FakeSandbox::new(case.sandbox.clone()));
    let planned = kit.plan(&spec, &sandbox)?;
    stages.launch = Some(json(&planned));
    if let Some(outcome) = &case.spec.outcome {
        let facts = kit.settle(&spec, &planned.facts(case.spec.background), outcome)?;
        // Every field, so `runnerFailed = false` can be expected too.
        stages.facts = Some(match facts {
            Some(facts) => json!({
                "mode": facts.mode,
                "denied": facts.denied,
                "enforcement": facts.enforcement,
                "runnerFailed": facts.runner_failed,
            }),
            None => Value::Bool(false),
        });
    }
    Ok(stages)
}

fn json(value: &impl serde::Serialize) -> Value {
    serde_json::to_value(value).expect("model types serialize")
}

fn compare_opt(path: &str, expected: Option<&Value>, got: Option<&Value>, out: &mut Vec<String>) {
    match (expected, got) {
        (None, _) => {}
        (Some(expected), None) => out.push(format!(
            "{path}: expected {expected}, but the case never reached that stage (give an outcome?)"
        )),
        (Some(expected), Some(got)) => compare(path, expected, got, out),
    }
}

/// Subset match: every key of an expected object must match; anything
/// else must be equal.
fn compare(path: &str, expected: &Value, got: &Value, out: &mut Vec<String>) {
    match (expected, got) {
        (Value::Object(expected), Value::Object(got)) => {
            for (key, want) in expected {
                let here = format!("{path}.{key}");
                match got.get(key) {
                    Some(have) => compare(&here, want, have, out),
                    None if want.is_null() => {}
                    None => out.push(format!("{here}: expected {want}, got nothing")),
                }
            }
        }
        (Value::Number(a), Value::Number(b)) if a.as_f64() == b.as_f64() => {}
        (expected, got) if expected == got => {}
        (expected, got) => out.push(format!("{path}: expected {expected}, got {got}")),
    }
}

/// A summary line: `N passed, M failed`.
pub fn summary(reports: &[CaseReport]) -> String {
    let failed = reports.iter().filter(|r| !r.passed()).count();
    format!("{} passed, {failed} failed", reports.len() - failed)
}

/// The JSON shape of a report, for machines.
pub fn report_json(report: &CaseReport) -> Value {
    json!({
        "name": report.name,
        "file": report.file,
        "passed": report.passed(),
        "failures": report.failures,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn diff(expected: Value, got: Value) -> Vec<String> {
        let mut out = vec![];
        compare("facts", &expected, &got, &mut out);
        out
    }

    #[test]
    fn an_expected_table_checks_only_the_keys_it_names() {
        assert!(
            diff(
                json!({"denied": true}),
                json!({"denied": true, "mode": "read-only"})
            )
            .is_empty()
        );
        assert_eq!(
            diff(
                json!({"denied": true, "mode": "read-only"}),
                json!({"denied": false, "mode": "read-only"})
            ),
            vec!["facts.denied: expected true, got false"]
        );
        assert_eq!(
            diff(json!({"enforcement": "full"}), json!({"denied": false})),
            vec!["facts.enforcement: expected \"full\", got nothing"]
        );
        assert!(diff(json!({"enforcement": null}), json!({"denied": false})).is_empty());
    }

    #[test]
    fn lists_and_scalars_must_be_equal() {
        assert_eq!(
            diff(json!(["bash", "-c", "ls"]), json!(["bash", "-c", "ls -l"])),
            vec![r#"facts: expected ["bash","-c","ls"], got ["bash","-c","ls -l"]"#]
        );
        assert!(diff(json!(120000), json!(120000)).is_empty());
    }

    #[test]
    fn includes_resolve_relative_and_cycles_are_refused() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir(dir.path().join("shared")).unwrap();
        std::fs::write(
            dir.path().join("shared/one.toml"),
            "[[case]]\nname = \"one\"\nrequest = { command = \"ls\" }\nexpect.spec = { command = \"ls\" }\n",
        )
        .unwrap();
        std::fs::write(
            dir.path().join("main.toml"),
            "include = [\"shared/one.toml\"]\n[defaults]\nsandbox = { backend = \"landlock\" }\n",
        )
        .unwrap();
        let cases = load(&dir.path().join("main.toml")).unwrap();
        assert_eq!(cases.len(), 1);
        assert_eq!(
            cases[0].sandbox.backend,
            Some(crate::model::Backend::Landlock)
        );

        std::fs::write(dir.path().join("loop.toml"), "include = [\"loop.toml\"]\n").unwrap();
        let err = load(&dir.path().join("loop.toml")).unwrap_err();
        assert!(err.to_string().contains("includes itself"), "{err}");
    }

    #[test]
    fn a_bad_key_is_named() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("bad.toml");
        std::fs::write(
            &path,
            "[[case]]\nname = \"x\"\nrequest = { command = \"ls\" }\nexpect.spek = {}\n",
        )
        .unwrap();
        let err = load(&path).unwrap_err().to_string();
        assert!(err.contains("unknown field `spek`"), "{err}");
    }
}
