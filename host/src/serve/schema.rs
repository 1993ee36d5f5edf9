//! The protocol's JSON Schema, generated from the Rust types the server
//! reads and writes (`schemars`), so it cannot drift from them: the params
//! and result of every method, and the error object. `cordon serve
//! --schema` prints it; `docs/protocol.schema.json` is a copy, and a test
//! checks the copy is current and validates every example of
//! `docs/protocol.md` (and every reply of the e2e suite) against it.

use schemars::generate::SchemaSettings;
use schemars::{JsonSchema, SchemaGenerator};
use serde_json::{Map, Value, json};

use super::protocol::{
    AttachParams, AttachResult, DetachResult, Empty, KillResult, ListResult, NoParams, ProbeResult,
    ReleaseParams, ReleaseResult, ReloadParams, ReloadResult, RemoveResult, RpcError, RunParams,
    StartResult, TaskParams, WaitParams, WriteParams, WriteResult,
};
use crate::model::ExecResult;
use crate::tasks::{TaskRead, TaskSnapshot};

/// The schema document: `methods.<name>.params` / `.result`, `error`, and
/// the shared `$defs` they refer to (JSON Schema 2020-12).
pub fn document() -> Value {
    let mut generator = SchemaSettings::draft2020_12().into_generator();
    let mut methods = Map::new();
    let mut method = |name: &str, params: Value, result: Value| {
        methods.insert(name.into(), json!({ "params": params, "result": result }));
    };
    method(
        "run",
        sub::<RunParams>(&mut generator),
        sub::<ExecResult>(&mut generator),
    );
    method(
        "start",
        sub::<RunParams>(&mut generator),
        sub::<StartResult>(&mut generator),
    );
    method(
        "read",
        sub::<TaskParams>(&mut generator),
        sub::<TaskRead>(&mut generator),
    );
    method(
        "write",
        sub::<WriteParams>(&mut generator),
        sub::<WriteResult>(&mut generator),
    );
    method(
        "kill",
        sub::<TaskParams>(&mut generator),
        sub::<KillResult>(&mut generator),
    );
    method(
        "wait",
        sub::<WaitParams>(&mut generator),
        sub::<TaskSnapshot>(&mut generator),
    );
    method(
        "list",
        sub::<NoParams>(&mut generator),
        sub::<ListResult>(&mut generator),
    );
    method(
        "remove",
        sub::<TaskParams>(&mut generator),
        sub::<RemoveResult>(&mut generator),
    );
    method(
        "release",
        sub::<ReleaseParams>(&mut generator),
        sub::<ReleaseResult>(&mut generator),
    );
    method(
        "detach",
        sub::<NoParams>(&mut generator),
        sub::<DetachResult>(&mut generator),
    );
    method(
        "attach",
        sub::<AttachParams>(&mut generator),
        sub::<AttachResult>(&mut generator),
    );
    method(
        "probe",
        sub::<NoParams>(&mut generator),
        sub::<ProbeResult>(&mut generator),
    );
    method(
        "reload",
        sub::<ReloadParams>(&mut generator),
        sub::<ReloadResult>(&mut generator),
    );
    method(
        "shutdown",
        sub::<NoParams>(&mut generator),
        sub::<Empty>(&mut generator),
    );
    let error = sub::<RpcError>(&mut generator);
    json!({
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "title": "cordon serve: JSON-RPC 2.0 params, results and errors",
        "methods": methods,
        "error": error,
        "$defs": generator.take_definitions(true),
    })
}

fn sub<T: JsonSchema>(generator: &mut SchemaGenerator) -> Value {
    generator.subschema_for::<T>().to_value()
}

/// A schema for one part of [`document`] (`pointer`, e.g.
/// `/methods/run/params`) that resolves the document's `$defs`: what a
/// validator is given.
pub fn part(document: &Value, pointer: &str) -> Option<Value> {
    let mut schema = document.pointer(pointer)?.clone();
    let object = schema.as_object_mut()?;
    object.insert("$schema".into(), document["$schema"].clone());
    object.insert("$defs".into(), document["$defs"].clone());
    Some(schema)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_method_has_params_and_a_result() {
        let document = document();
        for method in super::super::protocol::METHODS {
            assert!(
                part(&document, &format!("/methods/{method}/params")).is_some(),
                "{method}"
            );
            assert!(part(&document, &format!("/methods/{method}/result")).is_some());
        }
        assert!(document["$defs"]["ExecResult"].is_object());
    }

    fn docs(name: &str) -> std::path::PathBuf {
        std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../docs")
            .join(name)
    }

    #[test]
    fn the_committed_schema_is_the_generated_one() {
        let committed: Value =
            serde_json::from_str(&std::fs::read_to_string(docs("protocol.schema.json")).unwrap())
                .unwrap();
        assert!(
            committed == document(),
            "docs/protocol.schema.json is stale: regenerate it with \
             `cordon serve --schema > docs/protocol.schema.json`"
        );
    }

    /// Every ```json block of the text, parsed.
    fn json_blocks(text: &str) -> Vec<Value> {
        let mut blocks = vec![];
        let mut rest = text;
        while let Some(start) = rest.find("```json\n") {
            let body = &rest[start + 8..];
            let end = body.find("```").expect("a closed block");
            let value = serde_json::from_str(&body[..end]).unwrap_or_else(|e| {
                panic!("a json block that is not JSON ({e}):\n{}", &body[..end])
            });
            blocks.push(value);
            rest = &body[end + 3..];
        }
        blocks
    }

    #[test]
    fn every_example_of_the_protocol_docs_is_valid_against_the_schema() {
        let document = document();
        let check = |pointer: &str, instance: &Value| {
            let part = part(&document, pointer).unwrap_or_else(|| panic!("no {pointer}"));
            let validator = jsonschema::validator_for(&part).expect("the schema compiles");
            let errors: Vec<String> = validator
                .iter_errors(instance)
                .map(|e| format!("{e} at {}", e.instance_path()))
                .collect();
            assert!(errors.is_empty(), "{pointer}: {errors:?}\n{instance}");
        };
        let text = std::fs::read_to_string(docs("protocol.md")).unwrap();
        // Params are checked once the reply is seen: an example whose
        // reply is INVALID_PARAMS sends wrong params on purpose.
        let mut sent: std::collections::HashMap<String, (String, Value)> = Default::default();
        let mut shown: Vec<String> = vec![];
        let (mut requests, mut results, mut errors) = (0, 0, 0);
        for block in json_blocks(&text) {
            let messages = match block {
                Value::Array(items) => items,
                one => vec![one],
            };
            for message in messages {
                let id = message.get("id").map(Value::to_string);
                if let Some(Value::String(method)) = message.get("method") {
                    let params = message.get("params").cloned().unwrap_or(json!({}));
                    shown.push(method.clone());
                    match id {
                        Some(id) => {
                            sent.insert(id, (method.clone(), params));
                        }
                        None => check(&format!("/methods/{method}/params"), &params),
                    }
                    requests += 1;
                    continue;
                }
                let request = id.as_ref().and_then(|id| sent.remove(id));
                if let Some(error) = message.get("error") {
                    check("/error", error);
                    let on_purpose = ["INVALID_PARAMS", "METHOD_NOT_FOUND"]
                        .contains(&error["data"]["code"].as_str().unwrap_or_default());
                    if let (Some((method, params)), false) = (&request, on_purpose) {
                        check(&format!("/methods/{method}/params"), params);
                    }
                    errors += 1;
                } else if let Some(result) = message.get("result") {
                    let (method, params) = request
                        .unwrap_or_else(|| panic!("no request shown before the reply {message}"));
                    check(&format!("/methods/{method}/params"), &params);
                    check(&format!("/methods/{method}/result"), result);
                    results += 1;
                } else {
                    panic!("an example that is neither a request nor a reply: {message}");
                }
            }
        }
        for (method, params) in sent.values() {
            check(&format!("/methods/{method}/params"), params);
        }
        assert!(
            requests >= 15 && results >= 14 && errors >= 3,
            "{requests} {results} {errors}"
        );
        for method in super::super::protocol::METHODS {
            assert!(
                shown.iter().any(|m| m == method),
                "docs/protocol.md shows no {method} request"
            );
        }
    }
}
