//! The operator's settings for a component (`[policy.settings]` in
//! `cordon.toml`), as the host hands them over: JSON text, checked once at
//! load by `validate-settings` and passed to every `resolve` as
//! `deployment.settings`.

/// Accept only "no settings" (`{}`, or nothing): for a component that
/// takes none, a setting is a mistake worth failing the load for.
pub fn expect_none(settings: &str) -> Result<(), String> {
    let trimmed: String = settings.chars().filter(|c| !c.is_whitespace()).collect();
    match trimmed.as_str() {
        "" | "{}" => Ok(()),
        _ => Err(format!(
            "this component takes no settings, got {}; remove [policy.settings]",
            if settings.len() > 80 {
                format!("{}…", &settings[..settings.floor_char_boundary(80)])
            } else {
                settings.to_owned()
            }
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_empty_settings_are_accepted_by_default() {
        assert_eq!(expect_none("{}"), Ok(()));
        assert_eq!(expect_none(" { } "), Ok(()));
        assert_eq!(expect_none(""), Ok(()));
        let err = expect_none(r#"{"rules": []}"#).unwrap_err();
        assert!(err.contains("takes no settings"), "{err}");
    }
}
