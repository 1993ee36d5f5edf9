//! The Wasm OCI artifact layout (CNCF TAG Runtime): what a policy
//! component looks like in a registry, and what cordon accepts back.
//!
//! * an OCI image manifest whose config has the media type
//!   `application/vnd.wasm.config.v0+json`;
//! * the config: `architecture: "wasm"`, `os: "wasip2"` (a component),
//!   `layerDigests` (the layers' digests, in order) and `component`
//!   (`exports`, `imports`, `target`: the world it was built against);
//! * exactly one layer, `application/wasm`: the component's bytes.

use std::collections::BTreeMap;

use oci_client::manifest::{OciDescriptor, OciImageManifest};
use serde::Deserialize;

use super::reference::digest_of;
use super::signature;
use crate::policy::Interfaces;

/// The config's media type.
pub const CONFIG_MEDIA_TYPE: &str = "application/vnd.wasm.config.v0+json";
/// The component layer's media type.
pub const LAYER_MEDIA_TYPE: &str = "application/wasm";
/// The manifest's `artifactType` for a Wasm component.
pub const ARTIFACT_TYPE: &str = "application/vnd.wasm.component.v1+wasm";
/// The config of a signature manifest (cosign writes an image config).
pub const SIGNATURE_CONFIG: &str =
    r#"{"architecture":"","os":"","config":{},"rootfs":{"type":"layers","diff_ids":[]}}"#;
const SIGNATURE_CONFIG_MEDIA_TYPE: &str = "application/vnd.oci.image.config.v1+json";

/// A component ready to push: its config blob and the manifest.
pub struct Artifact {
    /// The config blob.
    pub config: Vec<u8>,
    /// The manifest (the component's layer first and only).
    pub manifest: OciImageManifest,
}

/// The artifact for `bytes`.
pub fn build(bytes: &[u8], world: &str, interfaces: &Interfaces) -> Artifact {
    let layer_digest = digest_of(bytes);
    // No creation time: the same component pushes as the same manifest,
    // whoever pushes it when (reproducible digests).
    let config = serde_json::to_vec(&serde_json::json!({
        "created": "1970-01-01T00:00:00Z",
        "architecture": "wasm",
        "os": "wasip2",
        "layerDigests": [layer_digest],
        "component": {
            "exports": interfaces.exports,
            "imports": interfaces.imports,
            "target": world,
        },
    }))
    .expect("JSON serializes");
    let manifest = OciImageManifest {
        schema_version: 2,
        media_type: Some(super::MANIFEST_MEDIA_TYPE.to_owned()),
        artifact_type: Some(ARTIFACT_TYPE.to_owned()),
        config: descriptor(CONFIG_MEDIA_TYPE, &config, None),
        layers: vec![descriptor(LAYER_MEDIA_TYPE, bytes, None)],
        ..OciImageManifest::default()
    };
    Artifact { config, manifest }
}

fn descriptor(
    media_type: &str,
    blob: &[u8],
    annotations: Option<BTreeMap<String, String>>,
) -> OciDescriptor {
    OciDescriptor {
        media_type: media_type.to_owned(),
        digest: digest_of(blob),
        size: blob.len() as i64,
        annotations,
        ..OciDescriptor::default()
    }
}

/// The component's layer, or why the manifest is not a Wasm component artifact.
pub fn component_layer(manifest: &OciImageManifest) -> Result<&OciDescriptor, String> {
    if manifest.config.media_type != CONFIG_MEDIA_TYPE {
        return Err(format!(
            "its config has the media type {:?}, not {CONFIG_MEDIA_TYPE:?}: not a Wasm component artifact",
            manifest.config.media_type
        ));
    }
    match manifest.layers.as_slice() {
        [layer] if layer.media_type == LAYER_MEDIA_TYPE => Ok(layer),
        [layer] => Err(format!(
            "its layer has the media type {:?}, not {LAYER_MEDIA_TYPE:?}",
            layer.media_type
        )),
        layers => Err(format!(
            "it has {} layers; a policy component artifact has exactly one",
            layers.len()
        )),
    }
}

/// Check the config blob names `layer` and is a component's.
pub fn check_config(config: &[u8], layer: &OciDescriptor) -> Result<(), String> {
    #[derive(Deserialize)]
    #[serde(rename_all = "camelCase")]
    struct Config {
        architecture: String,
        os: String,
        #[serde(default)]
        layer_digests: Vec<String>,
    }
    let config: Config = serde_json::from_slice(config)
        .map_err(|err| format!("its config is not a Wasm config: {err}"))?;
    if config.architecture != "wasm" || config.os != "wasip2" {
        return Err(format!(
            "its config says {}/{}, not wasm/wasip2 (a component)",
            config.architecture, config.os
        ));
    }
    if !config.layer_digests.is_empty() && config.layer_digests != [layer.digest.clone()] {
        return Err("its config's layerDigests do not name its layer".to_owned());
    }
    Ok(())
}

/// An empty signature manifest (cosign's layout), to add layers to.
pub fn signature_manifest() -> OciImageManifest {
    OciImageManifest {
        schema_version: 2,
        media_type: Some(super::MANIFEST_MEDIA_TYPE.to_owned()),
        config: descriptor(
            SIGNATURE_CONFIG_MEDIA_TYPE,
            SIGNATURE_CONFIG.as_bytes(),
            None,
        ),
        layers: Vec::new(),
        ..OciImageManifest::default()
    }
}

/// One signature layer: the payload, with the signature in its annotation.
pub fn signature_layer(payload: &[u8], signed: &str) -> OciDescriptor {
    let annotations = BTreeMap::from([(
        signature::SIGNATURE_ANNOTATION.to_owned(),
        signed.to_owned(),
    )]);
    descriptor(signature::PAYLOAD_MEDIA_TYPE, payload, Some(annotations))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_artifact_is_what_the_layout_says_and_is_accepted_back() {
        let interfaces = Interfaces {
            imports: vec!["cordon:sandbox/sandbox@0.2.0".into()],
            exports: vec!["cordon:sandbox/executor@0.2.0".into()],
        };
        let artifact = build(
            b"\0asm",
            "cordon:sandbox/executor-policy@0.2.0",
            &interfaces,
        );
        let layer = component_layer(&artifact.manifest).unwrap();
        assert_eq!(layer.digest, digest_of(b"\0asm"));
        check_config(&artifact.config, layer).unwrap();
        let config: serde_json::Value = serde_json::from_slice(&artifact.config).unwrap();
        assert_eq!(
            config["component"]["target"],
            "cordon:sandbox/executor-policy@0.2.0"
        );
        // Reproducible: the same component, the same manifest.
        let again = build(
            b"\0asm",
            "cordon:sandbox/executor-policy@0.2.0",
            &interfaces,
        );
        assert_eq!(
            serde_json::to_vec(&again.manifest).unwrap(),
            serde_json::to_vec(&artifact.manifest).unwrap()
        );
    }

    #[test]
    fn other_artifacts_are_refused_with_the_reason() {
        let mut manifest = build(b"x", "w", &Interfaces::default()).manifest;
        manifest.layers.push(manifest.layers[0].clone());
        assert!(component_layer(&manifest).unwrap_err().contains("2 layers"));
        manifest.config.media_type = "application/vnd.oci.image.config.v1+json".into();
        assert!(
            component_layer(&manifest)
                .unwrap_err()
                .contains("not a Wasm")
        );
        let layer = descriptor(LAYER_MEDIA_TYPE, b"x", None);
        let module = br#"{"architecture":"wasm","os":"wasip1","layerDigests":[]}"#;
        assert!(check_config(module, &layer).unwrap_err().contains("wasip1"));
        let other = format!(
            r#"{{"architecture":"wasm","os":"wasip2","layerDigests":["{}"]}}"#,
            digest_of(b"y")
        );
        assert!(check_config(other.as_bytes(), &layer).is_err());
    }
}
