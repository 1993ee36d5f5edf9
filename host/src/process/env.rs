//! The child's environment (SPEC.md §3): the host's environment with
//! credentials scrubbed, then the spec's entries in order (later wins).
//!
//! The scrub drops every variable whose name contains `KEY`, `PASSWORD`,
//! `SECRET` or `TOKEN` (any case) and every `CORDON_*` variable: an agent's
//! command has no business reading the operator's credentials. An entry the
//! request names explicitly is the caller's choice and survives.

use std::ffi::OsString;

/// Substrings (upper case) that mark a variable name as a credential.
const CREDENTIAL_MARKERS: &[&str] = &["KEY", "PASSWORD", "SECRET", "TOKEN"];

/// Whether the host variable `name` is withheld from commands.
pub fn is_scrubbed(name: &str) -> bool {
    let upper = name.to_ascii_uppercase();
    upper.starts_with("CORDON_") || CREDENTIAL_MARKERS.iter().any(|m| upper.contains(m))
}

/// The complete environment for a child: `host` scrubbed, then `overlay`.
pub fn child_env(
    host: impl IntoIterator<Item = (OsString, OsString)>,
    overlay: &[(String, String)],
) -> Vec<(OsString, OsString)> {
    let mut env: Vec<(OsString, OsString)> = host
        .into_iter()
        .filter(|(name, _)| !name.to_str().is_some_and(is_scrubbed) && name.to_str().is_some())
        .collect();
    for (name, value) in overlay {
        env.retain(|(existing, _)| existing != name.as_str());
        env.push((name.into(), value.into()));
    }
    env
}

#[cfg(test)]
mod tests {
    use super::*;

    fn os(pairs: &[(&str, &str)]) -> Vec<(OsString, OsString)> {
        pairs.iter().map(|(k, v)| (k.into(), v.into())).collect()
    }

    #[test]
    fn credentials_and_cordon_variables_are_scrubbed() {
        for name in [
            "AWS_SECRET_ACCESS_KEY",
            "GITHUB_TOKEN",
            "db_password",
            "CORDON_X",
            "api_key",
        ] {
            assert!(is_scrubbed(name), "{name}");
        }
        for name in ["PATH", "HOME", "LANG", "TERM"] {
            assert!(!is_scrubbed(name), "{name}");
        }
    }

    #[test]
    fn overlay_wins_and_survives_the_scrub() {
        let env = child_env(
            os(&[("PATH", "/bin"), ("TERM", "xterm"), ("MY_TOKEN", "t")]),
            &[
                ("TERM".into(), "dumb".into()),
                ("EXPLICIT_OVERRIDE_PASSWORD".into(), "1".into()),
            ],
        );
        assert_eq!(
            env,
            os(&[
                ("PATH", "/bin"),
                ("TERM", "dumb"),
                ("EXPLICIT_OVERRIDE_PASSWORD", "1")
            ])
        );
    }
}
