//! The policy components shipped inside the binary, by name:
//! `--policy builtin:NAME` and `cordon policy export NAME`.
//!
//! The shipped components are the ones the repository builds and tests
//! (`components/`); a deployment that wants one should not have to build
//! it, find it inside `target/`, or trust a copy fetched from elsewhere.
//! They are the bytes this binary's build script built (or, for a packaged
//! crate, the bytes `scripts/package.sh` built twice, checked identical and
//! shipped beside their digests, which the packaged build checks), so a
//! builtin is exactly as trusted as the binary holding it.

/// The prefix that names a builtin component: `builtin:rules-policy`.
pub const PREFIX: &str = "builtin:";

/// A component shipped inside the binary.
pub struct Builtin {
    /// Its name after `builtin:` (its folder in `components/`).
    pub name: &'static str,
    /// What it is for, one line.
    pub about: &'static str,
    /// Its bytes.
    pub bytes: &'static [u8],
}

/// Every component shipped inside the binary; the first is the default.
pub static BUILTINS: &[Builtin] = &[
    Builtin {
        name: "bash-sandbox",
        about: "the default: bash under the sandbox the request asks for, within the ceiling",
        bytes: super::EMBEDDED_DEFAULT,
    },
    Builtin {
        name: "rules-policy",
        about: "allow, deny or ask by what a command line runs, from a rule file \
                (--settings; components/rules-policy/rules.toml, docs/authoring.md)",
        bytes: include_bytes!(concat!(env!("OUT_DIR"), "/rules-policy.wasm")),
    },
    Builtin {
        name: "pwsh-sandbox",
        about: "PowerShell (pwsh) under the sandbox",
        bytes: include_bytes!(concat!(env!("OUT_DIR"), "/pwsh-sandbox.wasm")),
    },
    Builtin {
        name: "bash-local",
        about: "bash with no sandbox (danger-full-access): loads only under a ceiling that allows it",
        bytes: include_bytes!(concat!(env!("OUT_DIR"), "/bash-local.wasm")),
    },
];

impl std::fmt::Debug for Builtin {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Builtin")
            .field("name", &self.name)
            .field("bytes", &self.bytes.len())
            .finish()
    }
}

/// The builtin called `name`.
pub fn find(name: &str) -> Option<&'static Builtin> {
    BUILTINS.iter().find(|builtin| builtin.name == name)
}

/// Why `builtin:NAME` names no component.
#[derive(Debug, thiserror::Error)]
#[error("no builtin policy component {name:?}; this binary ships {}", known())]
pub struct UnknownBuiltin {
    /// The name asked for.
    pub name: String,
}

/// The builtin called `name`, or why there is none.
pub fn named(name: &str) -> Result<&'static Builtin, UnknownBuiltin> {
    find(name).ok_or_else(|| UnknownBuiltin {
        name: name.chars().take(64).collect(),
    })
}

fn known() -> String {
    BUILTINS
        .iter()
        .map(|b| format!("{PREFIX}{}", b.name))
        .collect::<Vec<_>>()
        .join(", ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_builtin_is_a_distinct_component_and_the_first_is_the_default() {
        assert_eq!(BUILTINS[0].bytes, super::super::EMBEDDED_DEFAULT);
        for (i, builtin) in BUILTINS.iter().enumerate() {
            assert!(builtin.bytes.starts_with(b"\0asm"), "{}", builtin.name);
            for other in &BUILTINS[i + 1..] {
                assert_ne!(
                    builtin.bytes, other.bytes,
                    "{} = {}",
                    builtin.name, other.name
                );
            }
        }
        let err = named("rules").unwrap_err().to_string();
        assert!(err.contains("builtin:rules-policy"), "{err}");
    }
}
