//! `cordon policy check FILE [--settings F]`: validate a component (and its
//! settings) exactly as a host loading it would. `cordon policy test FILE
//! [CASES] [--settings F]`: check the settings, then run table-driven cases
//! against it with the test kit (nothing is spawned).

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use clap::{Args, Subcommand};
use cordon::policy::{Limits, Policy, PolicyEngine, builtin};
use cordon::registry::{self, PolicyRef, PrivateKey, PublicKey, RegistryOptions};
use cordon::testkit::{self, Kit};

use super::deploy::CacheArgs;
use super::exit;

/// `cordon policy …`
#[derive(Debug, Args)]
pub struct PolicyArgs {
    #[command(subcommand)]
    command: PolicyCommand,
}

#[derive(Debug, Subcommand)]
enum PolicyCommand {
    /// Check a component against the world this host supports (imports,
    /// exports, types) and show what it says about itself.
    Check {
        /// The component (.wasm), or builtin:NAME.
        file: PathBuf,
        /// Settings to check it with (TOML, or JSON for `.json`), as a host
        /// with them in [policy.settings] would at load.
        #[arg(long, value_name = "FILE")]
        settings: Option<PathBuf>,
        /// Print the result as JSON.
        #[arg(long)]
        json: bool,
        #[command(flatten)]
        cache: CacheArgs,
    },
    /// Run a case file (request in; expected spec, launch, facts or error
    /// out) against a component with a fake sandbox, and check its settings
    /// (a rule file's own examples); prints a diff for each failing case and
    /// exits 1 when any fails.
    Test {
        /// The component (.wasm), or builtin:NAME.
        file: PathBuf,
        /// The case file (.toml); see components/cases/ for the shipped contract.
        #[arg(required_unless_present = "settings")]
        cases: Option<PathBuf>,
        /// Settings for the component (TOML, or JSON for `.json`): checked
        /// first (`validate-settings`, which runs a rule file's examples),
        /// then given to every case that names none.
        #[arg(long, value_name = "FILE")]
        settings: Option<PathBuf>,
        /// Print one JSON report per case instead.
        #[arg(long)]
        json: bool,
        #[command(flatten)]
        cache: CacheArgs,
    },
    /// Push a component to an OCI registry as a Wasm component artifact
    /// (checked to load first) and print its pinned reference
    /// (oci://REGISTRY/REPO@sha256:…).
    Push {
        /// The component (.wasm), or builtin:NAME.
        file: PathBuf,
        /// Where: oci://REGISTRY/REPO[:TAG] (tag default: latest).
        reference: String,
        /// Push a whole policy: these settings (TOML, or JSON for `.json`;
        /// checked by the component first) as a layer of the same
        /// artifact, under the same digest and signature. A host that
        /// pulls it runs with them, and refuses settings of its own on
        /// top unless its operator allows overrides.
        #[arg(long, value_name = "FILE")]
        settings: Option<PathBuf>,
        /// Sign it with this ECDSA P-256 private key (PEM, unencrypted), in
        /// cosign's layout (tag sha256-<hex>.sig beside it).
        #[arg(long, value_name = "KEY.pem")]
        sign_key: Option<PathBuf>,
        #[command(flatten)]
        registry: RegistryArgs,
        #[command(flatten)]
        cache: CacheArgs,
    },
    /// Pull a component from an OCI registry, checking its digests (and
    /// signature, with a public key), into the component cache; print its
    /// pinned reference.
    Pull {
        /// oci://REGISTRY/REPO[:TAG][@sha256:…]
        reference: String,
        /// Also write the component to this file.
        #[arg(long, short = 'o', value_name = "FILE")]
        output: Option<PathBuf>,
        #[command(flatten)]
        registry: RegistryArgs,
        #[command(flatten)]
        cache: CacheArgs,
    },
    /// Write a policy component shipped inside this binary to a file
    /// (`--policy builtin:NAME` runs it without one); with no NAME, list
    /// them.
    Export {
        /// bash-sandbox, rules-policy, pwsh-sandbox or bash-local.
        name: Option<String>,
        /// The file to write (created 0644; replaced if it exists).
        #[arg(long, short = 'o', value_name = "FILE", requires = "name")]
        output: Option<PathBuf>,
    },
}

/// How to reach registries: the config's [registry] with flags over it.
#[derive(Debug, Args)]
struct RegistryArgs {
    /// The deployment config file, for its [registry] keys.
    #[arg(long, value_name = "FILE")]
    config: Option<PathBuf>,
    /// Require a signature that verifies under this public key (PEM);
    /// replaces [registry] public_key.
    #[arg(long, value_name = "KEY.pem")]
    public_key: Option<PathBuf>,
    /// Reach this registry (HOST[:PORT]) over plain HTTP (repeatable;
    /// loopback registries always are).
    #[arg(long = "insecure-registry", value_name = "HOST[:PORT]")]
    insecure: Vec<String>,
}

impl RegistryArgs {
    fn options(&self) -> Result<RegistryOptions, String> {
        let mut options = match &self.config {
            Some(path) => {
                cordon::config::Config::load(path)
                    .map_err(|e| e.to_string())?
                    .registry
            }
            None => RegistryOptions::default(),
        };
        if let Some(key) = &self.public_key {
            options.public_key = Some(PublicKey::read(key).map_err(|e| e.to_string())?);
        }
        options.insecure.extend(self.insecure.iter().cloned());
        Ok(options)
    }
}

/// Run the subcommand.
pub fn main(args: PolicyArgs) -> ExitCode {
    match args.command {
        PolicyCommand::Check {
            file,
            settings,
            json,
            cache,
        } => check(file, settings, json, cache),
        PolicyCommand::Test {
            file,
            cases,
            settings,
            json,
            cache,
        } => test(file, cases, settings, json, cache),
        PolicyCommand::Push {
            file,
            reference,
            settings,
            sign_key,
            registry,
            cache,
        } => push(file, &reference, settings, sign_key, registry, cache),
        PolicyCommand::Pull {
            reference,
            output,
            registry,
            cache,
        } => pull(&reference, output, registry, cache),
        PolicyCommand::Export { name, output } => export(name.as_deref(), output.as_deref()),
    }
}

/// Exit 0 having written the component (or listed them); 78 for a name
/// this binary does not ship, no `-o` (a component is not for a
/// terminal), or a file that cannot be written.
fn export(name: Option<&str>, output: Option<&Path>) -> ExitCode {
    let Some(name) = name else {
        for builtin in builtin::BUILTINS {
            println!("{}{}\t{}", builtin::PREFIX, builtin.name, builtin.about);
        }
        return ExitCode::SUCCESS;
    };
    let name = name.strip_prefix(builtin::PREFIX).unwrap_or(name);
    let written = builtin::named(name)
        .map_err(|err| err.to_string())
        .and_then(|builtin| {
            let output = output.ok_or("give the file to write with -o FILE")?;
            std::fs::write(output, builtin.bytes)
                .map_err(|err| format!("cannot write {}: {err}", output.display()))?;
            Ok((builtin, output))
        });
    match written {
        Ok((builtin, output)) => {
            eprintln!(
                "cordon: wrote {}{} ({}) to {}",
                builtin::PREFIX,
                builtin.name,
                cordon::registry::reference::digest_of(builtin.bytes),
                output.display()
            );
            ExitCode::SUCCESS
        }
        Err(message) => {
            eprintln!("cordon: {message}");
            ExitCode::from(exit::CONFIG)
        }
    }
}

/// Exit 0 with the pinned reference on stdout; 70 when the component does
/// not load or the registry fails or refuses it, 78 for a bad reference,
/// key or config.
fn push(
    file: PathBuf,
    reference: &str,
    settings_file: Option<PathBuf>,
    sign_key: Option<PathBuf>,
    registry: RegistryArgs,
    cache: CacheArgs,
) -> ExitCode {
    let setup = || -> Result<_, String> {
        let reference = PolicyRef::parse(reference).map_err(|e| e.to_string())?;
        let key = sign_key
            .as_deref()
            .map(PrivateKey::read)
            .transpose()
            .map_err(|e| e.to_string())?;
        let settings = settings_file
            .as_deref()
            .map(cordon::config::read_settings)
            .transpose()
            .map_err(|e| e.to_string())?;
        Ok((reference, key, settings, registry.options()?))
    };
    let (reference, key, settings, options) = match setup() {
        Ok(setup) => setup,
        Err(message) => {
            eprintln!("cordon: {message}");
            return ExitCode::from(exit::CONFIG);
        }
    };
    let loaded = read_component(&file).and_then(|bytes| {
        let policy =
            Policy::load(&engine(&cache)?, &bytes, Limits::default()).map_err(|e| e.to_string())?;
        if let Some(settings) = &settings {
            policy
                .validate_settings(settings)
                .map_err(|e| e.to_string())?;
        }
        Ok((bytes, policy))
    });
    let (bytes, policy) = match loaded {
        Ok(loaded) => loaded,
        Err(message) => {
            eprintln!("cordon: POLICY_FAILED: {}: {message}", file.display());
            return ExitCode::from(exit::POLICY_FAILED);
        }
    };
    match registry::push(
        &bytes,
        settings.as_deref(),
        policy.world(),
        policy.interfaces(),
        &reference,
        &options,
        key.as_ref(),
    ) {
        Ok(pinned) => {
            println!("{pinned}");
            ExitCode::SUCCESS
        }
        Err(err) => {
            eprintln!("cordon: {err}");
            ExitCode::from(exit::POLICY_FAILED)
        }
    }
}

/// Exit 0 with the pinned reference on stdout; 78 for a bad reference,
/// key or config; 70 when the registry fails or what it served is refused.
fn pull(
    reference: &str,
    output: Option<PathBuf>,
    registry: RegistryArgs,
    cache: CacheArgs,
) -> ExitCode {
    let setup = PolicyRef::parse(reference)
        .map_err(|e| e.to_string())
        .and_then(|reference| Ok((reference, registry.options()?)));
    let (reference, options) = match setup {
        Ok(setup) => setup,
        Err(message) => {
            eprintln!("cordon: {message}");
            return ExitCode::from(exit::CONFIG);
        }
    };
    let pulled = match registry::pull(&reference, &options, cache.open().as_ref()) {
        Ok(pulled) => pulled,
        Err(err) => {
            eprintln!("cordon: {err}");
            return ExitCode::from(exit::POLICY_FAILED);
        }
    };
    if let Some(path) = output
        && let Err(err) = std::fs::write(&path, &pulled.bytes)
    {
        eprintln!("cordon: cannot write {}: {err}", path.display());
        return ExitCode::from(exit::CONFIG);
    }
    if let Some(settings) = &pulled.settings {
        eprintln!(
            "cordon: {} carries its settings ({}): a host running it runs with them",
            pulled.pinned,
            cordon::registry::reference::digest_of(settings.as_bytes())
        );
    }
    println!("{}", pulled.pinned);
    ExitCode::SUCCESS
}

/// A policy engine with the compiled-component cache the flags ask for.
fn engine(cache: &CacheArgs) -> Result<PolicyEngine, String> {
    let mut engine = PolicyEngine::new().map_err(|e| e.to_string())?;
    if let Some(cache) = cache.open() {
        engine = engine.with_cache(cache);
    }
    Ok(engine)
}

/// A component file's bytes, or a builtin's for `builtin:NAME`.
fn read_component(file: &Path) -> Result<Vec<u8>, String> {
    match file.to_str().and_then(|f| f.strip_prefix(builtin::PREFIX)) {
        Some(name) => Ok(builtin::named(name)
            .map_err(|err| err.to_string())?
            .bytes
            .to_vec()),
        None => read(file),
    }
}

fn read(file: &Path) -> Result<Vec<u8>, String> {
    cordon::files::read_regular(file, cordon::files::MAX_COMPONENT_BYTES)
        .map_err(|err| format!("cannot read {}: {err}", file.display()))
}

/// Read `--settings`, or say why not (exit 78).
fn settings(path: Option<&Path>) -> Result<Option<String>, ExitCode> {
    path.map(cordon::config::read_settings)
        .transpose()
        .map_err(|err| {
            eprintln!("cordon: {err}");
            ExitCode::from(exit::CONFIG)
        })
}

/// Exit 0 when the settings are accepted and the cases all pass, 1 when
/// the component refuses the settings or a case fails, 70 when the
/// component does not load, 78 when the case or settings file is unusable.
fn test(
    file: PathBuf,
    cases: Option<PathBuf>,
    settings_file: Option<PathBuf>,
    json: bool,
    cache: CacheArgs,
) -> ExitCode {
    let settings = match settings(settings_file.as_deref()) {
        Ok(settings) => settings,
        Err(code) => return code,
    };
    let mut cases = match cases.as_deref().map(testkit::cases::load).transpose() {
        Ok(cases) => cases.unwrap_or_default(),
        Err(err) => {
            eprintln!("cordon: {err}");
            return ExitCode::from(exit::CONFIG);
        }
    };
    let kit = match read_component(&file)
        .and_then(|bytes| Kit::load_with(engine(&cache)?, &bytes).map_err(|e| e.to_string()))
    {
        Ok(kit) => kit,
        Err(message) => {
            eprintln!("cordon: POLICY_FAILED: {}: {message}", file.display());
            return ExitCode::from(exit::POLICY_FAILED);
        }
    };
    if let Some(settings) = &settings {
        let checked = kit.validate_settings(settings);
        let name = settings_file.as_deref().unwrap_or(Path::new("")).display();
        match (&checked, json) {
            (Ok(()), false) => println!("ok   settings {name} (the component accepts them)"),
            (Err(err), false) => println!("FAIL settings {name}\n       {err}"),
            (_, true) => println!(
                "{}",
                serde_json::json!({
                    "settings": name.to_string(),
                    "passed": checked.is_ok(),
                    "failures": checked.as_ref().err().map(|e| vec![e.to_string()]).unwrap_or_default(),
                })
            ),
        }
        if checked.is_err() {
            return ExitCode::FAILURE;
        }
        for case in &mut cases {
            case.with_settings(settings);
        }
    }
    let reports: Vec<_> = cases
        .iter()
        .map(|case| testkit::cases::run(&kit, case))
        .collect();
    for report in &reports {
        if json {
            println!("{}", testkit::cases::report_json(report));
        } else if report.passed() {
            println!("ok   {}", report.name);
        } else {
            println!("FAIL {}  ({})", report.name, report.file.display());
            for failure in &report.failures {
                println!("       {failure}");
            }
        }
    }
    if !json {
        println!("{}: {}", kit.info().name, testkit::cases::summary(&reports));
    }
    if reports.iter().all(|r| r.passed()) {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    }
}

/// Exit 0 when the component loads (and accepts the settings), 70 when
/// not, 78 when the settings file is unusable.
fn check(file: PathBuf, settings_file: Option<PathBuf>, json: bool, cache: CacheArgs) -> ExitCode {
    let settings = match settings(settings_file.as_deref()) {
        Ok(settings) => settings,
        Err(code) => return code,
    };
    let loaded = read_component(&file).and_then(|bytes| {
        let policy =
            Policy::load(&engine(&cache)?, &bytes, Limits::default()).map_err(|e| e.to_string())?;
        policy
            .validate_settings(settings.as_deref().unwrap_or("{}"))
            .map_err(|e| e.to_string())?;
        Ok(policy)
    });
    match (loaded, json) {
        (Ok(policy), false) => {
            let info = policy.info();
            println!(
                "ok: {} {} (shell {}, default mode {}) implements {} ({})",
                info.name,
                info.version,
                info.shell,
                info.default_mode,
                policy.world(),
                if policy.compiled() {
                    "compiled"
                } else {
                    "from the compiled-component cache"
                }
            );
            ExitCode::SUCCESS
        }
        (Ok(policy), true) => {
            let body = serde_json::json!({
                "ok": true,
                "world": policy.world(),
                "info": policy.info(),
                "compiled": policy.compiled(),
            });
            println!("{body}");
            ExitCode::SUCCESS
        }
        (Err(message), false) => {
            eprintln!("cordon: POLICY_FAILED: {}: {message}", file.display());
            ExitCode::from(exit::POLICY_FAILED)
        }
        (Err(message), true) => {
            println!("{}", serde_json::json!({"ok": false, "error": message}));
            ExitCode::from(exit::POLICY_FAILED)
        }
    }
}
