//! Detached signatures for policy components, in cosign's key-based
//! layout so the signatures interoperate with the sigstore tooling:
//!
//! * the signed payload is cosign's "simple signing" JSON naming the
//!   repository and the **manifest digest** (so a signature cannot be
//!   moved to another component);
//! * the signature is ECDSA P-256 over SHA-256 of the payload, DER,
//!   base64 — what `cosign sign --key` makes and `cosign verify --key`
//!   (without a transparency log) checks;
//! * it is stored in the same repository under the tag
//!   `sha256-<hex>.sig`, one layer per signature, the payload as the layer
//!   and the signature in its `dev.cosignproject.cosign/signature`
//!   annotation.
//!
//! Keys are PEM: a `PUBLIC KEY` (SubjectPublicKeyInfo, as `cosign
//! public-key` prints it) to verify, and an unencrypted PKCS#8 `PRIVATE
//! KEY` or SEC1 `EC PRIVATE KEY` (as `openssl` makes them) to sign.

use std::path::Path;

use base64::Engine as _;
use p256::ecdsa::signature::{Signer, Verifier};
use p256::ecdsa::{Signature, SigningKey, VerifyingKey};
use p256::pkcs8::{DecodePrivateKey, DecodePublicKey};
use serde::Deserialize;

/// The media type of a signature layer (its payload).
pub const PAYLOAD_MEDIA_TYPE: &str = "application/vnd.dev.cosign.simplesigning.v1+json";
/// The layer annotation that holds the base64 signature.
pub const SIGNATURE_ANNOTATION: &str = "dev.cosignproject.cosign/signature";
/// The `type` a simple-signing payload must carry.
const PAYLOAD_TYPE: &str = "cosign container image signature";

/// Why a key could not be used or a signature did not verify.
#[derive(Debug, thiserror::Error)]
pub enum SignatureError {
    /// The key file could not be read.
    #[error("cannot read key {path}: {source}")]
    ReadKey {
        /// The key file.
        path: String,
        /// The operating system's error.
        #[source]
        source: std::io::Error,
    },
    /// The key file is not a key of the kind expected.
    #[error("{path} is not {expected}: {reason}")]
    BadKey {
        /// The key file.
        path: String,
        /// What was expected.
        expected: &'static str,
        /// What the parser said.
        reason: String,
    },
    /// No signature verified under the key.
    #[error("{0}")]
    Refused(String),
}

/// A public key signatures are checked against.
#[derive(Clone, Debug)]
pub struct PublicKey {
    key: VerifyingKey,
    /// `sha256:…` of the key's DER encoding: names which key verified a
    /// cached pull.
    fingerprint: String,
}

/// A key file's text: a regular file of at most 64 KiB (never a device or
/// a FIFO read without end).
fn read_key(path: &Path) -> Result<String, SignatureError> {
    let fail = |source| SignatureError::ReadKey {
        path: path.display().to_string(),
        source,
    };
    let bytes = crate::files::read_regular(path, 64 << 10).map_err(fail)?;
    String::from_utf8(bytes).map_err(|_| {
        fail(std::io::Error::new(
            std::io::ErrorKind::InvalidData,
            "not UTF-8 text",
        ))
    })
}

impl PublicKey {
    /// Read a PEM `PUBLIC KEY` (ECDSA P-256).
    pub fn read(path: &Path) -> Result<Self, SignatureError> {
        let pem = read_key(path)?;
        Self::from_pem(&pem).map_err(|reason| SignatureError::BadKey {
            path: path.display().to_string(),
            expected: "a PEM ECDSA P-256 public key (-----BEGIN PUBLIC KEY-----)",
            reason,
        })
    }

    /// Parse a PEM `PUBLIC KEY`.
    pub fn from_pem(pem: &str) -> Result<Self, String> {
        let key = VerifyingKey::from_public_key_pem(pem.trim()).map_err(|e| e.to_string())?;
        let der =
            p256::pkcs8::EncodePublicKey::to_public_key_der(&key).map_err(|e| e.to_string())?;
        Ok(Self {
            key,
            fingerprint: super::reference::digest_of(der.as_bytes()),
        })
    }

    /// `sha256:…` of the key.
    pub fn fingerprint(&self) -> &str {
        &self.fingerprint
    }

    /// Check `signature` (base64 DER) over `payload`.
    pub fn verify(&self, payload: &[u8], signature: &str) -> Result<(), String> {
        let der = base64::engine::general_purpose::STANDARD
            .decode(signature.trim())
            .map_err(|e| format!("the signature is not base64: {e}"))?;
        let signature = Signature::from_der(&der)
            .map_err(|e| format!("the signature is not DER ECDSA: {e}"))?;
        let signature = signature.normalize_s().unwrap_or(signature);
        self.key
            .verify(payload, &signature)
            .map_err(|_| "the signature does not verify under the key".to_owned())
    }
}

/// A private key to sign with.
pub struct PrivateKey(SigningKey);

impl std::fmt::Debug for PrivateKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("PrivateKey(..)")
    }
}

impl PrivateKey {
    /// Read an unencrypted PEM PKCS#8 `PRIVATE KEY` or SEC1 `EC PRIVATE KEY`
    /// (ECDSA P-256).
    pub fn read(path: &Path) -> Result<Self, SignatureError> {
        let pem = read_key(path)?;
        let pem = pem.trim();
        let key = SigningKey::from_pkcs8_pem(pem)
            .map_err(|e| e.to_string())
            .or_else(|pkcs8| {
                p256::SecretKey::from_sec1_pem(pem)
                    .map(SigningKey::from)
                    .map_err(|sec1| format!("as PKCS#8: {pkcs8}; as SEC1: {sec1}"))
            })
            .map_err(|reason| SignatureError::BadKey {
                path: path.display().to_string(),
                expected: "an unencrypted PEM ECDSA P-256 private key",
                reason,
            })?;
        Ok(Self(key))
    }

    /// The matching public key.
    pub fn public(&self) -> PublicKey {
        let pem = p256::pkcs8::EncodePublicKey::to_public_key_pem(
            self.0.verifying_key(),
            p256::pkcs8::LineEnding::LF,
        )
        .expect("a P-256 key encodes");
        PublicKey::from_pem(&pem).expect("a P-256 key decodes")
    }

    /// Sign `payload`: base64 of the DER signature.
    pub fn sign(&self, payload: &[u8]) -> String {
        let signature: Signature = self.0.sign(payload);
        base64::engine::general_purpose::STANDARD.encode(signature.to_der().as_bytes())
    }
}

/// The simple-signing payload for the manifest `digest` of `name`
/// (`REGISTRY/REPOSITORY`).
pub fn payload(name: &str, digest: &str) -> Vec<u8> {
    serde_json::to_vec(&serde_json::json!({
        "critical": {
            "identity": { "docker-reference": name },
            "image": { "docker-manifest-digest": digest },
            "type": PAYLOAD_TYPE,
        },
        "optional": null,
    }))
    .expect("JSON serializes")
}

/// Check that a verified payload is about the manifest `digest`.
pub fn check_payload(payload: &[u8], digest: &str) -> Result<(), String> {
    #[derive(Deserialize)]
    struct Payload {
        critical: Critical,
    }
    #[derive(Deserialize)]
    struct Critical {
        image: Image,
        #[serde(rename = "type")]
        kind: String,
    }
    #[derive(Deserialize)]
    struct Image {
        #[serde(rename = "docker-manifest-digest")]
        digest: String,
    }
    let payload: Payload = serde_json::from_slice(payload)
        .map_err(|e| format!("the signed payload is not a simple-signing document: {e}"))?;
    if payload.critical.kind != PAYLOAD_TYPE {
        return Err(format!(
            "the signed payload's type is {:?}, not {PAYLOAD_TYPE:?}",
            payload.critical.kind
        ));
    }
    if payload.critical.image.digest != digest {
        return Err(format!(
            "the signature is for {}, not {digest}",
            payload.critical.image.digest
        ));
    }
    Ok(())
}

/// The tag a manifest's signatures are stored under.
pub fn signature_tag(digest: &str) -> String {
    digest.replacen(':', "-", 1) + ".sig"
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key() -> PrivateKey {
        PrivateKey(SigningKey::from_slice(&[7u8; 32]).unwrap())
    }

    const D: &str = "sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef";

    #[test]
    fn a_signature_verifies_under_its_key_only() {
        let payload = payload("127.0.0.1:5000/p", D);
        let signature = key().sign(&payload);
        key().public().verify(&payload, &signature).unwrap();
        check_payload(&payload, D).unwrap();
        let other = PrivateKey(SigningKey::from_slice(&[9u8; 32]).unwrap()).public();
        assert!(other.verify(&payload, &signature).is_err());
        let mut tampered = payload.clone();
        tampered[10] ^= 1;
        assert!(key().public().verify(&tampered, &signature).is_err());
        assert!(key().public().verify(&payload, "not base64!").is_err());
    }

    #[test]
    fn a_payload_names_its_digest() {
        let other = D.replace("0123", "3210");
        let err = check_payload(&payload("r/p", D), &other).unwrap_err();
        assert!(err.contains("is for"), "{err}");
        assert!(check_payload(b"{}", D).is_err());
        assert_eq!(
            signature_tag(D),
            format!("sha256-{}.sig", D.strip_prefix("sha256:").unwrap())
        );
    }

    #[test]
    fn keys_round_trip_through_pem() {
        let public = key().public();
        let pem = p256::pkcs8::EncodePublicKey::to_public_key_pem(
            &public.key,
            p256::pkcs8::LineEnding::LF,
        )
        .unwrap();
        let again = PublicKey::from_pem(&pem).unwrap();
        assert_eq!(again.fingerprint(), public.fingerprint());
        assert!(
            PublicKey::from_pem("-----BEGIN PUBLIC KEY-----\nAAAA\n-----END PUBLIC KEY-----")
                .is_err()
        );
    }
}
