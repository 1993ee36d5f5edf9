//! Which world a component was built against, checked before linking.
//!
//! Each binding layer describes its world ([`World`]); this module knows
//! the list of versions ([`Version::ALL`], newest first) and picks the one
//! whose executor interface a component exports. A component is refused,
//! with the offending import or export named, when an import is one no
//! supported world provides, when it exports no supported executor, or when
//! its imports belong to another version than its export.

use wasmtime::Engine;
use wasmtime::component::Component;

pub(super) use super::shared::World;
use super::{LoadError, v0_1_0, v0_2_0, v0_3_0};

/// One interface version this host binds. Adding a version adds a variant,
/// and every match over it (the binding dispatch in [`super::Policy`]) must
/// then say how that version is called.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Version {
    /// `cordon:sandbox@0.3.0`: `0.2.0` and a decision per HTTP request.
    V0_3_0,
    /// `cordon:sandbox@0.2.0`: the grant, settings and decisions.
    V0_2_0,
    /// `cordon:sandbox@0.1.0`.
    V0_1_0,
}

impl Version {
    /// Every version, newest first.
    pub const ALL: [Version; 3] = [Version::V0_3_0, Version::V0_2_0, Version::V0_1_0];

    /// The world this version binds.
    pub fn world(self) -> &'static World {
        match self {
            Version::V0_3_0 => &v0_3_0::WORLD,
            Version::V0_2_0 => &v0_2_0::WORLD,
            Version::V0_1_0 => &v0_1_0::WORLD,
        }
    }
}

/// The WASI families the deny-all context answers without granting
/// anything (a Rust guest's std imports some of them). No filesystem, no
/// sockets: those are refused by name.
const WASI_FAMILIES: &[&str] = &["wasi:cli/", "wasi:io/", "wasi:clocks/", "wasi:random/"];

fn is_wasi_answered(name: &str) -> bool {
    WASI_FAMILIES.iter().any(|family| name.starts_with(family))
}

/// The worlds this host loads, newest first, joined for a message.
fn supported() -> String {
    super::supported_worlds().join(", ")
}

/// The names `component` imports and exports.
pub(super) fn interfaces(engine: &Engine, component: &Component) -> super::Interfaces {
    let ty = component.component_type();
    super::Interfaces {
        imports: ty
            .imports(engine)
            .map(|(name, _)| name.to_owned())
            .collect(),
        exports: ty
            .exports(engine)
            .map(|(name, _)| name.to_owned())
            .collect(),
    }
}

/// Check `component`'s imports and exports, and say which version it is.
pub(super) fn check(engine: &Engine, component: &Component) -> Result<Version, LoadError> {
    let names = interfaces(engine, component);
    check_names(&names.imports, &names.exports)
}

/// [`check`] over the names alone.
fn check_names(imports: &[String], exports: &[String]) -> Result<Version, LoadError> {
    let newest = Version::ALL[0].world();
    let provided_by_any = |name: &str| {
        is_wasi_answered(name)
            || Version::ALL
                .iter()
                .any(|version| version.world().imports.contains(&name))
    };
    if let Some(name) = imports.iter().find(|name| !provided_by_any(name)) {
        let hint = if name.starts_with("cordon:sandbox/") {
            format!("; this host supports {}", supported())
        } else {
            "; policy components get no files, sockets or other host authority".to_owned()
        };
        return Err(LoadError::World(format!(
            "the component imports {name}, which the world {} does not provide{hint}",
            newest.name
        )));
    }
    let Some(version) = Version::ALL
        .into_iter()
        .find(|version| exports.iter().any(|name| name == version.world().export))
    else {
        let mut executors: Vec<&str> = (Version::ALL.iter())
            .flat_map(|version| {
                std::iter::once(&version.world().export).chain(version.world().also_exports)
            })
            .filter(|name| name.contains("/executor@"))
            .copied()
            .collect();
        executors.dedup();
        return Err(LoadError::World(format!(
            "the component does not export {} (this host supports {}); it exports [{}]",
            executors.join(" or "),
            supported(),
            exports.join(", ")
        )));
    };
    let world = version.world();
    if let Some(missing) =
        (world.also_exports.iter()).find(|name| !exports.iter().any(|e| e == *name))
    {
        return Err(LoadError::World(format!(
            "the component exports {} but not {missing}, which the world {} needs too",
            world.export, world.name
        )));
    }
    if let Some(name) = imports
        .iter()
        .find(|name| !is_wasi_answered(name) && !world.imports.contains(&name.as_str()))
    {
        return Err(LoadError::World(format!(
            "the component exports {} but imports {name}, which belongs to another world; \
             build it against one version of cordon:sandbox",
            world.export
        )));
    }
    Ok(version)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names(list: &[&str]) -> Vec<String> {
        list.iter().map(|s| (*s).to_owned()).collect()
    }

    #[test]
    fn a_component_of_a_supported_world_is_recognised() {
        let version = check_names(
            &names(&[
                "cordon:sandbox/types@0.1.0",
                "cordon:sandbox/sandbox@0.1.0",
                "wasi:cli/stderr@0.2.6",
            ]),
            &names(&["cordon:sandbox/executor@0.1.0"]),
        )
        .unwrap();
        assert_eq!(version, Version::V0_1_0);
        let version = check_names(
            &names(&["cordon:sandbox/sandbox@0.2.0"]),
            &names(&["cordon:sandbox/executor@0.2.0"]),
        )
        .unwrap();
        assert_eq!(version, Version::V0_2_0);
    }

    #[test]
    fn a_component_mixing_versions_is_refused() {
        let err = check_names(
            &names(&["cordon:sandbox/sandbox@0.1.0"]),
            &names(&["cordon:sandbox/executor@0.2.0"]),
        )
        .unwrap_err()
        .to_string();
        assert!(err.contains("belongs to another world"), "{err}");
    }

    #[test]
    fn an_unprovided_import_is_named_with_the_supported_worlds() {
        let err = check_names(
            &names(&["cordon:sandbox/sandbox@9.0.0"]),
            &names(&["cordon:sandbox/executor@0.1.0"]),
        )
        .unwrap_err()
        .to_string();
        assert!(
            err.contains("imports cordon:sandbox/sandbox@9.0.0"),
            "{err}"
        );
        assert!(err.contains(
            "this host supports cordon:sandbox/executor-policy@0.3.0, \
             cordon:sandbox/executor-policy@0.2.0, cordon:sandbox/executor-policy@0.1.0"
        ));
        let err = check_names(&names(&["wasi:filesystem/preopens@0.2.6"]), &[])
            .unwrap_err()
            .to_string();
        assert!(err.contains("no files, sockets"), "{err}");
    }

    #[test]
    fn a_missing_executor_export_is_named() {
        let err = check_names(&[], &names(&["other:thing/x@1.0.0"]))
            .unwrap_err()
            .to_string();
        assert!(
            err.contains(
                "does not export cordon:sandbox/executor@0.2.0 or cordon:sandbox/executor@0.1.0"
            ),
            "{err}"
        );
        assert!(err.contains("[other:thing/x@1.0.0]"), "{err}");
    }

    #[test]
    fn every_version_names_a_world_of_its_own_version() {
        for version in Version::ALL {
            let world = version.world();
            let at = world.name.rsplit_once('@').unwrap().1;
            assert!(world.export.ends_with(&format!("@{at}")), "{world:?}");
            // A world that includes an older one imports that one's interfaces.
            let older = |name: &&str| !name.ends_with(&format!("@{at}"));
            let included = world.also_exports.iter().all(|name| {
                Version::ALL
                    .iter()
                    .any(|v| v.world().export == *name && v != &version)
            });
            assert!(included, "{world:?}");
            if world.also_exports.is_empty() {
                assert!(!world.imports.iter().any(older), "{world:?}");
            }
        }
    }

    #[test]
    fn a_component_of_world_0_3_0_exports_the_executor_too() {
        let imports = names(&["cordon:sandbox/types@0.2.0", "cordon:sandbox/sandbox@0.2.0"]);
        let version = check_names(
            &imports,
            &names(&[
                "cordon:sandbox/executor@0.2.0",
                "cordon:sandbox/requests@0.3.0",
            ]),
        )
        .unwrap();
        assert_eq!(version, Version::V0_3_0);
        let err = check_names(&imports, &names(&["cordon:sandbox/requests@0.3.0"]))
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("but not cordon:sandbox/executor@0.2.0, which the world cordon:sandbox/executor-policy@0.3.0 needs too"),
            "{err}"
        );
    }
}
