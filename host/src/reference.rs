//! `oci://REGISTRY/REPOSITORY[:TAG][@sha256:HEX]`: where a policy component
//! lives in an OCI registry.
//!
//! The registry must be spelled out (no implicit Docker Hub): a reference
//! an operator writes in a config file should say where it goes. A
//! reference with a digest is *pinned*: what is pulled must hash to it.

use std::fmt;

/// The scheme a policy reference starts with.
pub const SCHEME: &str = "oci://";

/// A parsed `oci://` policy reference.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PolicyRef {
    registry: String,
    repository: String,
    tag: Option<String>,
    digest: Option<String>,
}

/// Why a reference was refused.
#[derive(Debug, thiserror::Error)]
#[error(
    "invalid policy reference {reference:?}: {reason} (expected oci://REGISTRY/REPOSITORY[:TAG][@sha256:HEX])"
)]
pub struct RefError {
    reference: String,
    reason: String,
}

impl PolicyRef {
    /// Whether `text` is meant as a registry reference (starts with `oci://`).
    pub fn is_reference(text: &str) -> bool {
        text.starts_with(SCHEME)
    }

    /// Parse `oci://…`.
    pub fn parse(text: &str) -> Result<Self, RefError> {
        let fail = |reason: &str| RefError {
            reference: text.to_owned(),
            reason: reason.to_owned(),
        };
        let rest = text
            .strip_prefix(SCHEME)
            .ok_or_else(|| fail("it does not start with oci://"))?;
        let (name, digest) = match rest.split_once('@') {
            Some((name, digest)) => (name, Some(digest)),
            None => (rest, None),
        };
        if let Some(digest) = digest {
            check_digest(digest).map_err(|reason| fail(&reason))?;
        }
        let (registry, path) = name
            .split_once('/')
            .ok_or_else(|| fail("no repository after the registry"))?;
        if registry.is_empty()
            || !registry
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || ".-:[]".contains(c))
        {
            return Err(fail(
                "the registry must be a host name or address, with an optional :PORT",
            ));
        }
        // A tag is after the last ':' of the path (the registry's port was
        // split off above).
        let (repository, tag) = match path.rsplit_once(':') {
            Some((repository, tag)) => (repository, Some(tag)),
            None => (path, None),
        };
        let component_ok = |part: &str| {
            !part.is_empty()
                && part
                    .chars()
                    .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || "._-".contains(c))
                && part.starts_with(|c: char| c.is_ascii_alphanumeric())
        };
        if !repository.split('/').all(component_ok) {
            return Err(fail(
                "the repository must be lowercase path components of [a-z0-9._-]",
            ));
        }
        if let Some(tag) = tag
            && (tag.is_empty()
                || tag.len() > 128
                || !tag
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || "._-".contains(c))
                || tag.starts_with(['.', '-']))
        {
            return Err(fail("the tag must be 1 to 128 of [A-Za-z0-9._-]"));
        }
        Ok(Self {
            registry: registry.to_owned(),
            repository: repository.to_owned(),
            tag: tag.map(str::to_owned),
            digest: digest.map(str::to_owned),
        })
    }

    /// The registry, `HOST[:PORT]`.
    pub fn registry(&self) -> &str {
        &self.registry
    }

    /// The repository inside the registry.
    pub fn repository(&self) -> &str {
        &self.repository
    }

    /// The tag, if the reference names one.
    pub fn tag(&self) -> Option<&str> {
        self.tag.as_deref()
    }

    /// The manifest digest the reference is pinned to, if any.
    pub fn digest(&self) -> Option<&str> {
        self.digest.as_deref()
    }

    /// The same repository pinned to `digest` (the tag dropped).
    pub fn pinned(&self, digest: &str) -> Self {
        Self {
            registry: self.registry.clone(),
            repository: self.repository.clone(),
            tag: None,
            digest: Some(digest.to_owned()),
        }
    }

    /// The same repository at `tag`.
    pub fn at_tag(&self, tag: &str) -> Self {
        Self {
            registry: self.registry.clone(),
            repository: self.repository.clone(),
            tag: Some(tag.to_owned()),
            digest: None,
        }
    }

    /// `REGISTRY/REPOSITORY`: what a signature names as the image.
    pub fn name(&self) -> String {
        format!("{}/{}", self.registry, self.repository)
    }

    /// Whether the registry is on this machine's loopback (reached over
    /// plain HTTP, as container tools do for `localhost` registries).
    pub fn is_loopback(&self) -> bool {
        let host = match self.registry.rsplit_once(':') {
            Some((host, port)) if port.chars().all(|c| c.is_ascii_digit()) => host,
            _ => &self.registry,
        };
        let host = host.trim_start_matches('[').trim_end_matches(']');
        host == "localhost"
            || host
                .parse::<std::net::IpAddr>()
                .is_ok_and(|ip| ip.is_loopback())
    }

    /// The reference as the OCI client takes it.
    pub(super) fn to_oci(&self) -> oci_client::Reference {
        match (&self.tag, &self.digest) {
            (Some(tag), Some(digest)) => oci_client::Reference::with_tag_and_digest(
                self.registry.clone(),
                self.repository.clone(),
                tag.clone(),
                digest.clone(),
            ),
            (None, Some(digest)) => oci_client::Reference::with_digest(
                self.registry.clone(),
                self.repository.clone(),
                digest.clone(),
            ),
            (tag, None) => oci_client::Reference::with_tag(
                self.registry.clone(),
                self.repository.clone(),
                tag.clone().unwrap_or_else(|| "latest".to_owned()),
            ),
        }
    }
}

impl fmt::Display for PolicyRef {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{SCHEME}{}/{}", self.registry, self.repository)?;
        if let Some(tag) = &self.tag {
            write!(f, ":{tag}")?;
        }
        if let Some(digest) = &self.digest {
            write!(f, "@{digest}")?;
        }
        Ok(())
    }
}

/// `sha256:` and 64 lowercase hex digits, or why not.
pub fn check_digest(digest: &str) -> Result<(), String> {
    let Some(hex) = digest.strip_prefix("sha256:") else {
        return Err(format!("digest {digest:?} is not sha256:HEX"));
    };
    if hex.len() != 64
        || !hex
            .chars()
            .all(|c| c.is_ascii_digit() || ('a'..='f').contains(&c))
    {
        return Err(format!("digest {digest:?} is not 64 lowercase hex digits"));
    }
    Ok(())
}

/// `sha256:HEX` of `bytes`.
pub fn digest_of(bytes: &[u8]) -> String {
    use sha2::Digest;
    let hash = sha2::Sha256::digest(bytes);
    let hex: String = hash.iter().map(|b| format!("{b:02x}")).collect();
    format!("sha256:{hex}")
}

#[cfg(test)]
mod tests {
    use super::*;

    const D: &str = "sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef";

    #[test]
    fn parses_tags_digests_and_ports() {
        let r = PolicyRef::parse(&format!("oci://127.0.0.1:5000/policies/bash:v1@{D}")).unwrap();
        assert_eq!(r.registry(), "127.0.0.1:5000");
        assert_eq!(r.repository(), "policies/bash");
        assert_eq!(r.tag(), Some("v1"));
        assert_eq!(r.digest(), Some(D));
        assert!(r.is_loopback());
        assert_eq!(
            r.to_string(),
            format!("oci://127.0.0.1:5000/policies/bash:v1@{D}")
        );
        assert_eq!(
            r.pinned(D).to_string(),
            format!("oci://127.0.0.1:5000/policies/bash@{D}")
        );
        let r = PolicyRef::parse("oci://registry.example/org/policy").unwrap();
        assert_eq!((r.tag(), r.digest()), (None, None));
        assert!(!r.is_loopback());
        assert!(
            PolicyRef::parse("oci://[::1]:5000/p:t")
                .unwrap()
                .is_loopback()
        );
        assert!(PolicyRef::parse("oci://localhost/p").unwrap().is_loopback());
    }

    #[test]
    fn refuses_malformed_references_naming_the_part() {
        for (text, part) in [
            ("https://r/p", "oci://"),
            ("oci://registry", "no repository"),
            ("oci://r/Upper", "lowercase"),
            ("oci://r/p:", "tag"),
            ("oci://r/p@sha256:abc", "64 lowercase hex"),
            ("oci://r/p@md5:abc", "sha256:HEX"),
            ("oci:///p", "registry"),
            ("oci://r//p", "lowercase"),
        ] {
            let err = PolicyRef::parse(text).unwrap_err().to_string();
            assert!(err.contains(part), "{text}: {err}");
        }
    }

    #[test]
    fn digests_are_sha256_hex() {
        assert_eq!(
            digest_of(b""),
            "sha256:e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
        );
        assert!(check_digest(&digest_of(b"x")).is_ok());
    }
}
