//! Policy components in OCI registries: `cordon policy push|pull` and
//! `--policy oci://…`.
//!
//! A component is stored as the Wasm OCI artifact the CNCF TAG Runtime
//! layout defines (`artifact.rs`), so registries and tools that already
//! keep Wasm components (wkg, oras, …) hold and show cordon's too. Every
//! pull is checked here, whatever the client library also checks: the
//! manifest hashes to the digest the reference is pinned to (a tag is
//! resolved and the digest reported), the `application/wasm` layer — and
//! the settings layer of a whole policy — hash to the digests the manifest
//! names, and — when the operator configured a public key — a cosign-style
//! signature over that manifest digest verifies (`signature.rs`), which so
//! covers the component and its settings together. Anything else is
//! refused with the reason, and nothing loads.
//!
//! A pulled component (and its settings) lands in the compiled-component
//! cache by its manifest digest (MAC'd like every cache entry), so a pinned reference
//! loads without the network after its first pull.
//!
//! The client (`oci-client`) is async; these functions are blocking and run
//! it on a thread of their own, so they can be called from anywhere —
//! including a thread inside another tokio runtime.

mod artifact;
/// Policy references, a ground module (the policy cache names them too).
pub use crate::reference;
pub mod signature;

use std::sync::Once;
use std::time::Duration;

use oci_client::client::{ClientConfig, ClientProtocol};
use oci_client::manifest::{OciDescriptor, OciImageManifest};
use oci_client::secrets::RegistryAuth;

use crate::policy::Interfaces;
use crate::policy::cache::ComponentCache;
pub use reference::{PolicyRef, RefError};
pub use signature::{PrivateKey, PublicKey, SignatureError};

/// The OCI image manifest media type.
const MANIFEST_MEDIA_TYPE: &str = "application/vnd.oci.image.manifest.v1+json";
/// The largest component (and manifest, config) cordon pulls.
pub const MAX_COMPONENT_BYTES: usize = crate::files::MAX_COMPONENT_BYTES as usize;

/// How long a connection to a registry may take unless the operator says.
pub const DEFAULT_CONNECT_TIMEOUT: Duration = Duration::from_secs(10);
/// How long a whole pull or push may take unless the operator says: a
/// registry that accepts and never answers (or trickles) fails then.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(120);

/// How cordon talks to registries.
#[derive(Clone, Debug, Default)]
pub struct RegistryOptions {
    /// Require a signature that verifies under this key for every pull.
    pub public_key: Option<PublicKey>,
    /// Registries (`HOST[:PORT]`) reached over plain HTTP besides loopback ones.
    pub insecure: Vec<String>,
    /// The bound on connecting (default [`DEFAULT_CONNECT_TIMEOUT`]).
    pub connect_timeout: Option<Duration>,
    /// The bound on a whole pull or push (default [`DEFAULT_TIMEOUT`]).
    pub timeout: Option<Duration>,
    /// Let the deployment's own settings replace those a pulled whole
    /// policy carries; without it a host given both refuses to load it.
    pub allow_settings_override: bool,
}

impl RegistryOptions {
    fn connect_timeout(&self) -> Duration {
        self.connect_timeout.unwrap_or(DEFAULT_CONNECT_TIMEOUT)
    }

    fn timeout(&self) -> Duration {
        self.timeout.unwrap_or(DEFAULT_TIMEOUT)
    }
}

/// Why a registry operation failed.
#[derive(Debug, thiserror::Error)]
pub enum RegistryError {
    /// The reference is malformed.
    #[error(transparent)]
    Reference(#[from] RefError),
    /// The registry could not be reached or refused the request.
    #[error("registry {registry}: {message}")]
    Transport {
        /// The registry.
        registry: String,
        /// What went wrong, one line.
        message: String,
    },
    /// What the registry served is not the component the reference names.
    #[error("refusing {reference}: {reason}")]
    Refused {
        /// The reference.
        reference: String,
        /// Why.
        reason: String,
    },
    /// A signature was required and none verified.
    #[error("refusing {reference}: {reason}")]
    Unsigned {
        /// The reference.
        reference: String,
        /// Why.
        reason: String,
    },
}

/// A component pulled (or read back from the cache).
#[derive(Debug)]
pub struct Pulled {
    /// The reference pinned to the manifest digest that was pulled.
    pub pinned: PolicyRef,
    /// The component's bytes, checked against the manifest.
    pub bytes: Vec<u8>,
    /// The settings the artifact carries (JSON text, an object), checked
    /// against the manifest: a whole policy's.
    pub settings: Option<String>,
    /// The fingerprint of the key whose signature verified, if one was required.
    pub signed_by: Option<String>,
    /// Whether it came from the cache (no network).
    pub cached: bool,
}

/// Pull the component `reference` names, checking it as the module docs say.
pub fn pull(
    reference: &PolicyRef,
    options: &RegistryOptions,
    cache: Option<&ComponentCache>,
) -> Result<Pulled, RegistryError> {
    let fingerprint = options
        .public_key
        .as_ref()
        .map(|k| k.fingerprint().to_owned());
    if let (Some(digest), Some(cache)) = (reference.digest(), cache)
        && let Some((bytes, settings)) = cache.load_pulled(digest, fingerprint.as_deref())
    {
        return Ok(Pulled {
            pinned: reference.pinned(digest),
            bytes,
            settings,
            signed_by: fingerprint,
            cached: true,
        });
    }
    let pulled = blocking(reference, options, pull_async(reference, options))?;
    tracing::info!(%reference, pinned = %pulled.pinned, signed_by = ?pulled.signed_by, "policy component pulled");
    if let Some(cache) = cache {
        cache.store_pulled(
            pulled.pinned.digest().expect("pinned"),
            pulled.signed_by.as_deref(),
            &pulled.bytes,
            pulled.settings.as_deref(),
        );
    }
    Ok(pulled)
}

/// Push `bytes` (a policy component exporting and importing `interfaces`,
/// built against `world`) and the `settings` it runs with (JSON text, an
/// object: a whole policy) to `reference`, and sign it with `sign`.
/// Returns the reference pinned to the pushed manifest's digest.
pub fn push(
    bytes: &[u8],
    settings: Option<&str>,
    world: &str,
    interfaces: &Interfaces,
    reference: &PolicyRef,
    options: &RegistryOptions,
    sign: Option<&PrivateKey>,
) -> Result<PolicyRef, RegistryError> {
    if reference.digest().is_some() {
        return Err(RegistryError::Refused {
            reference: reference.to_string(),
            reason: "a push names a repository and a tag, not a digest (the digest is what the push makes)".into(),
        });
    }
    blocking(
        reference,
        options,
        push_async(bytes, settings, world, interfaces, reference, options, sign),
    )
}

/// Run `work` (an operation on `reference`'s registry) to completion on a
/// thread of its own with its own runtime, within the options' timeout.
fn blocking<T: Send>(
    reference: &PolicyRef,
    options: &RegistryOptions,
    work: impl Future<Output = Result<T, RegistryError>> + Send,
) -> Result<T, RegistryError> {
    let limit = options.timeout();
    let work = async move {
        match tokio::time::timeout(limit, work).await {
            Ok(done) => done,
            Err(_) => Err(RegistryError::Transport {
                registry: reference.registry().to_owned(),
                message: format!(
                    "no answer within {}s ([registry] timeout_secs); the registry is stalled \
                     or too slow — check it, or raise the timeout",
                    limit.as_secs()
                ),
            }),
        }
    };
    std::thread::scope(|scope| {
        scope
            .spawn(|| {
                let runtime = tokio::runtime::Builder::new_current_thread()
                    .enable_all()
                    .build()
                    .map_err(|err| RegistryError::Transport {
                        registry: String::new(),
                        message: format!("cannot start the async runtime: {err}"),
                    })?;
                runtime.block_on(work)
            })
            .join()
            .unwrap_or_else(|_| {
                Err(RegistryError::Transport {
                    registry: String::new(),
                    message: "the registry client panicked".into(),
                })
            })
    })
}

fn client(reference: &PolicyRef, options: &RegistryOptions) -> oci_client::Client {
    static PROVIDER: Once = Once::new();
    PROVIDER.call_once(|| {
        // The TLS stack's crypto: ring. Another part of an embedder's
        // process may have installed one first; either serves.
        let _ = rustls::crypto::ring::default_provider().install_default();
    });
    let plain = reference.is_loopback()
        || options
            .insecure
            .iter()
            .any(|registry| registry == reference.registry());
    oci_client::Client::new(ClientConfig {
        protocol: if plain {
            ClientProtocol::Http
        } else {
            ClientProtocol::Https
        },
        connect_timeout: Some(options.connect_timeout()),
        read_timeout: Some(options.timeout()),
        ..ClientConfig::default()
    })
}

/// Basic credentials from `CORDON_REGISTRY_USERNAME` and
/// `CORDON_REGISTRY_PASSWORD` (never handed to a command: every `CORDON_*`
/// variable is scrubbed), else anonymous.
fn auth() -> RegistryAuth {
    match (
        std::env::var("CORDON_REGISTRY_USERNAME"),
        std::env::var("CORDON_REGISTRY_PASSWORD"),
    ) {
        (Ok(user), Ok(password)) => RegistryAuth::Basic(user, password),
        _ => RegistryAuth::Anonymous,
    }
}

fn transport(
    reference: &PolicyRef,
) -> impl Fn(oci_client::errors::OciDistributionError) -> RegistryError + '_ {
    move |err| RegistryError::Transport {
        registry: reference.registry().to_owned(),
        message: crate::policy::bounded_text(&format!("{err}").replace('\n', " ")),
    }
}

async fn pull_async(
    reference: &PolicyRef,
    options: &RegistryOptions,
) -> Result<Pulled, RegistryError> {
    let refused = |reason: String| RegistryError::Refused {
        reference: reference.to_string(),
        reason,
    };
    let client = client(reference, options);
    let auth = auth();
    let (manifest_bytes, _) = client
        .pull_manifest_raw(&reference.to_oci(), &auth, &[MANIFEST_MEDIA_TYPE])
        .await
        .map_err(transport(reference))?;
    if manifest_bytes.len() > MAX_COMPONENT_BYTES {
        return Err(refused("the manifest is too large".into()));
    }
    // The digest is the one of the bytes we hold, not the one the
    // registry says.
    let digest = reference::digest_of(&manifest_bytes);
    if let Some(pinned) = reference.digest()
        && pinned != digest
    {
        return Err(refused(format!(
            "the registry served a manifest whose digest is {digest}"
        )));
    }
    let pinned = reference.pinned(&digest);
    let manifest: OciImageManifest = serde_json::from_slice(&manifest_bytes)
        .map_err(|err| refused(format!("the manifest is not an OCI image manifest: {err}")))?;
    let layers = artifact::layers(&manifest).map_err(refused)?;

    let config = fetch_blob(&client, &pinned, &manifest.config).await?;
    artifact::check_config(&config, &layers).map_err(refused)?;
    let bytes = fetch_blob(&client, &pinned, layers.component).await?;
    let settings = match layers.settings {
        Some(layer) => Some(
            artifact::settings_text(fetch_blob(&client, &pinned, layer).await?).map_err(refused)?,
        ),
        None => None,
    };

    let signed_by = match &options.public_key {
        None => None,
        Some(key) => {
            verify_signature(&client, &pinned, key)
                .await
                .map_err(|reason| RegistryError::Unsigned {
                    reference: pinned.to_string(),
                    reason,
                })?;
            Some(key.fingerprint().to_owned())
        }
    };
    Ok(Pulled {
        pinned,
        bytes,
        settings,
        signed_by,
        cached: false,
    })
}

/// A blob the manifest names, checked against its descriptor's size and digest.
async fn fetch_blob(
    client: &oci_client::Client,
    reference: &PolicyRef,
    descriptor: &OciDescriptor,
) -> Result<Vec<u8>, RegistryError> {
    let refused = |reason: String| RegistryError::Refused {
        reference: reference.to_string(),
        reason,
    };
    reference::check_digest(&descriptor.digest).map_err(refused)?;
    if descriptor.size < 0 || descriptor.size as u64 > MAX_COMPONENT_BYTES as u64 {
        return Err(refused(format!(
            "blob {} declares {} bytes (at most {MAX_COMPONENT_BYTES})",
            descriptor.digest, descriptor.size
        )));
    }
    let mut bytes = Vec::new();
    client
        .pull_blob(&reference.to_oci(), descriptor, &mut bytes)
        .await
        .map_err(|err| match err {
            oci_client::errors::OciDistributionError::DigestError(_) => {
                refused(format!("blob {}: {err}", descriptor.digest))
            }
            other => transport(reference)(other),
        })?;
    let actual = reference::digest_of(&bytes);
    if actual != descriptor.digest || bytes.len() as i64 != descriptor.size {
        return Err(refused(format!(
            "blob {} hashes to {actual} ({} bytes): it was altered",
            descriptor.digest,
            bytes.len()
        )));
    }
    Ok(bytes)
}

/// Find a signature over `pinned`'s digest that verifies under `key`.
async fn verify_signature(
    client: &oci_client::Client,
    pinned: &PolicyRef,
    key: &PublicKey,
) -> Result<(), String> {
    let digest = pinned.digest().expect("pinned");
    let tag = signature::signature_tag(digest);
    let at = pinned.at_tag(&tag);
    let manifest = match client
        .pull_manifest_raw(&at.to_oci(), &auth(), &[MANIFEST_MEDIA_TYPE])
        .await
    {
        Ok((bytes, _)) => bytes,
        Err(err) => {
            return Err(format!(
                "a signature is required (the configured public key) and none was found at tag {tag}: {}",
                crate::policy::bounded_text(&err.to_string().replace('\n', " "))
            ));
        }
    };
    let manifest: OciImageManifest = serde_json::from_slice(&manifest)
        .map_err(|err| format!("the signature manifest at {tag} is malformed: {err}"))?;
    let mut reasons = Vec::new();
    for layer in &manifest.layers {
        if layer.media_type != signature::PAYLOAD_MEDIA_TYPE {
            continue;
        }
        let Some(sig) = layer
            .annotations
            .as_ref()
            .and_then(|a| a.get(signature::SIGNATURE_ANNOTATION))
        else {
            reasons.push("a signature layer carries no signature".to_owned());
            continue;
        };
        let payload = match fetch_blob(client, &at, layer).await {
            Ok(payload) => payload,
            Err(err) => {
                reasons.push(err.to_string());
                continue;
            }
        };
        match key
            .verify(&payload, sig)
            .and_then(|()| signature::check_payload(&payload, digest))
        {
            Ok(()) => return Ok(()),
            Err(reason) => reasons.push(reason),
        }
    }
    if reasons.is_empty() {
        reasons.push(format!("the manifest at {tag} holds no signature"));
    }
    Err(format!(
        "no signature verifies under the configured public key ({}): {}",
        key.fingerprint(),
        reasons.join("; ")
    ))
}

async fn push_async(
    bytes: &[u8],
    settings: Option<&str>,
    world: &str,
    interfaces: &Interfaces,
    reference: &PolicyRef,
    options: &RegistryOptions,
    sign: Option<&PrivateKey>,
) -> Result<PolicyRef, RegistryError> {
    let client = client(reference, options);
    let auth = auth();
    let oci = reference.to_oci();
    client
        .store_auth_if_needed(oci.resolve_registry(), &auth)
        .await;
    let artifact = artifact::build(bytes, settings, world, interfaces);
    let blobs = [Some(bytes), settings.map(str::as_bytes)];
    let layers = artifact
        .manifest
        .layers
        .iter()
        .zip(blobs.into_iter().flatten());
    for (blob, descriptor) in
        std::iter::once((artifact.config.as_slice(), &artifact.manifest.config))
            .chain(layers.map(|(descriptor, blob)| (blob, descriptor)))
    {
        client
            .push_blob(&oci, blob.to_vec(), &descriptor.digest)
            .await
            .map_err(transport(reference))?;
    }
    let manifest = serde_json::to_vec(&artifact.manifest).expect("JSON serializes");
    let digest = reference::digest_of(&manifest);
    client
        .push_manifest_raw(
            &oci,
            manifest,
            http::HeaderValue::from_static(MANIFEST_MEDIA_TYPE),
        )
        .await
        .map_err(transport(reference))?;
    let pinned = reference.pinned(&digest);
    if let Some(key) = sign {
        push_signature(&client, &pinned, key).await?;
    }
    Ok(pinned)
}

/// Store a signature over `pinned`'s digest beside it, keeping any
/// signatures already there.
async fn push_signature(
    client: &oci_client::Client,
    pinned: &PolicyRef,
    key: &PrivateKey,
) -> Result<(), RegistryError> {
    let digest = pinned.digest().expect("pinned");
    let at = pinned.at_tag(&signature::signature_tag(digest));
    let oci = at.to_oci();
    let payload = signature::payload(&pinned.name(), digest);
    let signed = key.sign(&payload);
    let mut manifest = match client
        .pull_manifest_raw(&oci, &auth(), &[MANIFEST_MEDIA_TYPE])
        .await
    {
        Ok((bytes, _)) => serde_json::from_slice::<OciImageManifest>(&bytes).ok(),
        Err(_) => None,
    }
    .unwrap_or_else(artifact::signature_manifest);
    let layer = artifact::signature_layer(&payload, &signed);
    if !manifest
        .layers
        .iter()
        .any(|l| l.digest == layer.digest && l.annotations == layer.annotations)
    {
        manifest.layers.push(layer);
    }
    let payload_digest = reference::digest_of(&payload);
    for (blob, digest) in [
        (
            artifact::SIGNATURE_CONFIG.as_bytes().to_vec(),
            manifest.config.digest.clone(),
        ),
        (payload, payload_digest),
    ] {
        client
            .push_blob(&oci, blob, &digest)
            .await
            .map_err(transport(pinned))?;
    }
    let body = serde_json::to_vec(&manifest).expect("JSON serializes");
    client
        .push_manifest_raw(
            &oci,
            body,
            http::HeaderValue::from_static(MANIFEST_MEDIA_TYPE),
        )
        .await
        .map_err(transport(pinned))?;
    Ok(())
}
