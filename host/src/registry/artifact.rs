//! The Wasm OCI artifact layout (CNCF TAG Runtime): what a policy
//! component looks like in a registry, and what cordon accepts back.
//!
//! * an OCI image manifest whose config has the media type
//!   `application/vnd.wasm.config.v0+json`;
//! * the config: `architecture: "wasm"`, `os: "wasip2"` (a component),
//!   `layerDigests` (the layers' digests, in order) and `component`
//!   (`exports`, `imports`, `target`: the world it was built against);
//! * the component's layer, `application/wasm`: its bytes; and, for a
//!   whole policy, a second layer of the settings it runs with
//!   (`application/vnd.cordon.policy.settings.v1+json`, a JSON object).
//!   Both are named by the manifest, so a signature over the manifest's
//!   digest covers the component and its settings together.

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
/// The settings layer's media type: the JSON object the component is
/// handed as its settings (`validate-settings`, and every `resolve`).
pub const SETTINGS_MEDIA_TYPE: &str = "application/vnd.cordon.policy.settings.v1+json";
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

/// The layers a policy artifact holds: the component's, and its
/// settings' when it carries them.
#[derive(Debug)]
pub struct Layers<'a> {
    /// The component's layer.
    pub component: &'a OciDescriptor,
    /// The settings' layer.
    pub settings: Option<&'a OciDescriptor>,
}

/// The artifact for `bytes`, with `settings` (JSON text) as a second layer.
pub fn build(
    bytes: &[u8],
    settings: Option<&str>,
    world: &str,
    interfaces: &Interfaces,
) -> Artifact {
    let mut layers = vec![descriptor(LAYER_MEDIA_TYPE, bytes, None)];
    layers.extend(settings.map(|json| descriptor(SETTINGS_MEDIA_TYPE, json.as_bytes(), None)));
    let layer_digests: Vec<&str> = layers.iter().map(|l| l.digest.as_str()).collect();
    // No creation time: the same component pushes as the same manifest,
    // whoever pushes it when (reproducible digests).
    let config = serde_json::to_vec(&serde_json::json!({
        "created": "1970-01-01T00:00:00Z",
        "architecture": "wasm",
        "os": "wasip2",
        "layerDigests": layer_digests,
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
        layers,
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

/// The artifact's layers, or why the manifest is not a policy artifact.
pub fn layers(manifest: &OciImageManifest) -> Result<Layers<'_>, String> {
    if manifest.config.media_type != CONFIG_MEDIA_TYPE {
        return Err(format!(
            "its config has the media type {:?}, not {CONFIG_MEDIA_TYPE:?}: not a Wasm component artifact",
            manifest.config.media_type
        ));
    }
    let (component, settings) = match manifest.layers.as_slice() {
        [component] => (component, None),
        [component, settings] => (component, Some(settings)),
        layers => {
            return Err(format!(
                "it has {} layers; a policy artifact has a component and at most its settings",
                layers.len()
            ));
        }
    };
    if component.media_type != LAYER_MEDIA_TYPE {
        return Err(format!(
            "its first layer has the media type {:?}, not {LAYER_MEDIA_TYPE:?}",
            component.media_type
        ));
    }
    if let Some(settings) = settings
        && settings.media_type != SETTINGS_MEDIA_TYPE
    {
        return Err(format!(
            "its second layer has the media type {:?}, not {SETTINGS_MEDIA_TYPE:?}",
            settings.media_type
        ));
    }
    Ok(Layers {
        component,
        settings,
    })
}

/// The settings layer's bytes as the settings' JSON text: an object.
pub fn settings_text(bytes: Vec<u8>) -> Result<String, String> {
    let text = String::from_utf8(bytes).map_err(|_| "its settings are not UTF-8".to_owned())?;
    match serde_json::from_str::<serde_json::Value>(&text) {
        Ok(value) if value.is_object() => Ok(text),
        Ok(_) => Err("its settings are not a JSON object".to_owned()),
        Err(err) => Err(format!("its settings are not JSON: {err}")),
    }
}

/// Check the config blob names the artifact's layers and is a component's.
pub fn check_config(config: &[u8], layers: &Layers<'_>) -> Result<(), String> {
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
    let named: Vec<&str> = std::iter::once(layers.component)
        .chain(layers.settings)
        .map(|layer| layer.digest.as_str())
        .collect();
    if !config.layer_digests.is_empty() && config.layer_digests != named {
        return Err("its config's layerDigests do not name its layers".to_owned());
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
        let world = "cordon:sandbox/executor-policy@0.2.0";
        let artifact = build(b"\0asm", None, world, &interfaces);
        let only = layers(&artifact.manifest).unwrap();
        assert_eq!(only.component.digest, digest_of(b"\0asm"));
        assert!(only.settings.is_none());
        check_config(&artifact.config, &only).unwrap();
        let config: serde_json::Value = serde_json::from_slice(&artifact.config).unwrap();
        assert_eq!(config["component"]["target"], world);
        // Reproducible: the same component, the same manifest.
        let again = build(b"\0asm", None, world, &interfaces);
        assert_eq!(
            serde_json::to_vec(&again.manifest).unwrap(),
            serde_json::to_vec(&artifact.manifest).unwrap()
        );
        // A whole policy: the settings are a second layer the config names.
        let whole = build(b"\0asm", Some(r#"{"a":1}"#), world, &interfaces);
        let both = layers(&whole.manifest).unwrap();
        assert_eq!(both.settings.unwrap().digest, digest_of(br#"{"a":1}"#));
        check_config(&whole.config, &both).unwrap();
        assert!(check_config(&artifact.config, &both).is_err());
    }

    #[test]
    fn other_artifacts_are_refused_with_the_reason() {
        let mut manifest = build(b"x", None, "w", &Interfaces::default()).manifest;
        manifest.layers.push(manifest.layers[0].clone());
        assert!(layers(&manifest).unwrap_err().contains("second layer"));
        manifest.layers.push(manifest.layers[0].clone());
        assert!(layers(&manifest).unwrap_err().contains("3 layers"));
        manifest.config.media_type = "application/vnd.oci.image.config.v1+json".into();
        assert!(layers(&manifest).unwrap_err().contains("not a Wasm"));
        let layer = descriptor(LAYER_MEDIA_TYPE, b"x", None);
        let one = Layers {
            component: &layer,
            settings: None,
        };
        let module = br#"{"architecture":"wasm","os":"wasip1","layerDigests":[]}"#;
        assert!(check_config(module, &one).unwrap_err().contains("wasip1"));
        let other = format!(
            r#"{{"architecture":"wasm","os":"wasip2","layerDigests":["{}"]}}"#,
            digest_of(b"y")
        );
        assert!(check_config(other.as_bytes(), &one).is_err());
        assert!(
            settings_text(b"[1]".to_vec())
                .unwrap_err()
                .contains("object")
        );
        assert!(
            settings_text(b"{".to_vec())
                .unwrap_err()
                .contains("not JSON")
        );
        assert!(settings_text(vec![0xff]).unwrap_err().contains("UTF-8"));
    }
}
