//! The library's floors: every `crate::` import in `host/src` points down
//! the table below or stays on its own floor, no modules import each other
//! round a loop, and nothing names an item through the crate root's
//! re-exports (which would make the root a hub every floor leans on).
//! `docs/architecture.md` prints the same table; this test keeps the two
//! the same. Unit-test modules at the end of a file are not counted: a
//! test may build its fixtures from any floor.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// The floors, top to bottom, and the modules on each. `launcher` is the
/// `cordon-launcher` crate (`crate::sandbox::launcher`), the code that runs
/// inside the sandbox.
const FLOORS: &[(&str, &[&str])] = &[
    (
        "surfaces",
        &["cli", "serve", "mcp", "doctor", "testkit", "config"],
    ),
    ("the façade", &["host"]),
    ("sessions", &["session"]),
    ("runs", &["run", "tasks", "audit"]),
    ("the registry", &["registry"]),
    ("the policy", &["policy"]),
    ("the sandbox, host side", &["sandbox"]),
    (
        "the proxy, processes, the kernel's denial records",
        &["proxy", "process", "denials"],
    ),
    ("the launcher, inside the sandbox", &["launcher"]),
    (
        "the ground",
        &[
            "model",
            "error",
            "admission",
            "reference",
            "places",
            "files",
            "text",
            "random",
            "credentials",
        ],
    ),
];

/// The floor of `module`, counted from the ground (0) up.
fn floor(module: &str) -> Option<usize> {
    FLOORS
        .iter()
        .rev()
        .position(|(_, modules)| modules.contains(&module))
}

/// The table as `docs/architecture.md` prints it.
fn table() -> String {
    let mut text = String::from("| floor | what | modules |\n|---|---|---|\n");
    for (at, (what, modules)) in FLOORS.iter().enumerate() {
        let modules: Vec<String> = modules.iter().map(|m| format!("`{m}`")).collect();
        text.push_str(&format!(
            "| {} | {what} | {} |\n",
            FLOORS.len() - at,
            modules.join(", ")
        ));
    }
    text
}

/// The module a source file belongs to (none for the crate root).
fn module_of(relative: &Path) -> Option<String> {
    let text = relative.to_str()?;
    if text == "lib.rs" || text == "main.rs" {
        return None;
    }
    if text.starts_with("sandbox/launcher/") {
        return Some("launcher".into());
    }
    let first = text.split('/').next()?;
    Some(first.trim_end_matches(".rs").to_owned())
}

/// The code of a file that counts: without comment lines and without the
/// unit-test module at its end.
fn counted(source: &str) -> String {
    let lines: Vec<&str> = source.lines().collect();
    let end = lines
        .windows(2)
        .position(|pair| {
            pair[0].trim_start().starts_with("#[cfg(")
                && pair[0].contains("test")
                && pair[1].trim_start().starts_with("mod tests")
        })
        .unwrap_or(lines.len());
    lines[..end]
        .iter()
        .filter(|line| !line.trim_start().starts_with("//"))
        .copied()
        .collect::<Vec<_>>()
        .join("\n")
}

/// The first segments (and the second, for `sandbox::launcher`) of every
/// path after `crate::` in `code`.
fn imported(code: &str) -> Vec<String> {
    let mut found = vec![];
    let mut rest = code;
    while let Some(at) = rest.find("crate::") {
        rest = &rest[at + "crate::".len()..];
        let items: Vec<String> = match rest.strip_prefix('{') {
            Some(group) => {
                let mut depth = 1;
                let end = group
                    .char_indices()
                    .find(|(_, c)| {
                        depth += match c {
                            '{' => 1,
                            '}' => -1,
                            _ => 0,
                        };
                        depth == 0
                    })
                    .map_or(group.len(), |(i, _)| i);
                let mut items = vec![];
                let (mut depth, mut item) = (0, String::new());
                for c in group[..end].chars() {
                    match c {
                        '{' => depth += 1,
                        '}' => depth -= 1,
                        ',' if depth == 0 => {
                            items.push(std::mem::take(&mut item));
                            continue;
                        }
                        _ => {}
                    }
                    item.push(c);
                }
                items.push(item);
                items
            }
            None => vec![
                rest.chars()
                    .take_while(|c| c.is_alphanumeric() || *c == '_' || *c == ':')
                    .collect(),
            ],
        };
        for item in items {
            let segments: Vec<&str> = item.split("::").map(str::trim).collect();
            match segments.as_slice() {
                ["sandbox", second, ..] if second.starts_with("launcher") => {
                    found.push("launcher".to_owned());
                }
                [first, ..] if !first.is_empty() => found.push((*first).to_owned()),
                _ => {}
            }
        }
    }
    found
}

/// Every `.rs` file under `dir`.
fn sources(dir: &Path) -> Vec<PathBuf> {
    let mut files = vec![];
    for entry in std::fs::read_dir(dir).unwrap().flatten() {
        let path = entry.path();
        if path.is_dir() {
            files.extend(sources(&path));
        } else if path.extension().is_some_and(|e| e == "rs") {
            files.push(path);
        }
    }
    files
}

/// Which modules each module imports, and where.
fn imports(src: &Path) -> BTreeMap<String, BTreeMap<String, String>> {
    let mut graph: BTreeMap<String, BTreeMap<String, String>> = BTreeMap::new();
    for file in sources(src) {
        let relative = file.strip_prefix(src).unwrap();
        let Some(module) = module_of(relative) else {
            continue;
        };
        let code = counted(&std::fs::read_to_string(&file).unwrap());
        for target in imported(&code) {
            if target != module {
                graph
                    .entry(module.clone())
                    .or_default()
                    .entry(target)
                    .or_insert_with(|| relative.display().to_string());
            }
        }
    }
    graph
}

/// The problems with `graph`: an upward import, a name through the root,
/// a module in no floor, a loop.
fn problems(graph: &BTreeMap<String, BTreeMap<String, String>>) -> Vec<String> {
    let mut found = vec![];
    for (module, targets) in graph {
        let Some(from) = floor(module) else {
            found.push(format!("{module} is on no floor: add it to FLOORS"));
            continue;
        };
        for (target, at) in targets {
            match floor(target) {
                None => found.push(format!(
                    "{at} names crate::{target}, which is on no floor: name the defining module \
                     rather than the root's re-export (crate::error::RunError), or add the \
                     module to FLOORS"
                )),
                Some(to) if to > from => {
                    found.push(format!(
                        "{at} ({module}) imports {target}, a floor above it"
                    ));
                }
                Some(_) => {}
            }
        }
    }
    // A loop: some module reaches itself.
    for start in graph.keys() {
        let mut seen = BTreeSet::new();
        let mut stack: Vec<(String, Vec<String>)> = vec![(start.clone(), vec![start.clone()])];
        while let Some((at, path)) = stack.pop() {
            for next in graph.get(&at).into_iter().flat_map(|t| t.keys()) {
                if next == start {
                    found.push(format!("a loop: {} -> {start}", path.join(" -> ")));
                } else if seen.insert(next.clone()) {
                    let mut longer = path.clone();
                    longer.push(next.clone());
                    stack.push((next.clone(), longer));
                }
            }
        }
    }
    found.sort();
    found.dedup();
    found
}

#[test]
fn imports_only_point_down_the_floors_and_close_no_loop() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let graph = imports(&src);
    assert!(graph.contains_key("run"), "the sources were not read");
    let found = problems(&graph);
    assert!(found.is_empty(), "{found:#?}");
}

#[test]
fn the_launcher_crate_depends_on_system_calls_only() {
    // What runs inside the sandbox: no async runtime, no wasmtime, no
    // policy, no host — by what its manifest may name.
    let manifest = Path::new(env!("CARGO_MANIFEST_DIR")).join("../launcher/Cargo.toml");
    let text = std::fs::read_to_string(manifest).unwrap();
    let allowed = ["nix", "seccompiler", "landlock", "tempfile"];
    let mut section = String::new();
    for line in text.lines().map(str::trim) {
        if line.starts_with('[') {
            section = line.to_owned();
            continue;
        }
        if !section.contains("dependencies") || line.is_empty() || line.starts_with('#') {
            continue;
        }
        let name = line.split(['=', ' ', '.']).next().unwrap_or_default();
        assert!(
            allowed.contains(&name),
            "the launcher crate depends on {name:?} ({section}): only system-call crates may run \
             inside the sandbox ({allowed:?})"
        );
    }
    // And the host dispatches to it through its re-export.
    let sandbox = Path::new(env!("CARGO_MANIFEST_DIR")).join("src/sandbox/mod.rs");
    let text = std::fs::read_to_string(sandbox).unwrap();
    assert!(text.contains("pub use cordon_launcher as launcher;"));
}

#[test]
fn the_architecture_page_prints_the_floors_this_test_keeps() {
    let docs = Path::new(env!("CARGO_MANIFEST_DIR")).join("../docs/architecture.md");
    let text = std::fs::read_to_string(docs).unwrap();
    let table = table();
    assert!(
        text.contains(&table),
        "docs/architecture.md lacks:\n{table}"
    );
}

#[test]
fn an_upward_import_a_root_name_and_a_loop_are_each_found() {
    type Graph = BTreeMap<String, BTreeMap<String, String>>;
    fn import(graph: &mut Graph, from: &str, to: &str) {
        graph
            .entry(from.into())
            .or_default()
            .insert(to.into(), format!("{from}.rs"));
    }
    let mut graph = Graph::new();
    import(&mut graph, "run", "policy");
    assert!(problems(&graph).is_empty());
    import(&mut graph, "sandbox", "host");
    import(&mut graph, "policy", "RunError");
    import(&mut graph, "run", "tasks");
    import(&mut graph, "tasks", "run");
    let found = problems(&graph).join("\n");
    assert!(
        found.contains("(sandbox) imports host, a floor above it"),
        "{found}"
    );
    assert!(found.contains("crate::RunError"), "{found}");
    assert!(found.contains("a loop: run -> tasks -> run"), "{found}");
    assert_eq!(
        imported("use crate::{error::RunError, sandbox::launcher::verify};\ncrate::model::X"),
        ["error", "launcher", "model"]
    );
}
