//! The import graph of `src/` has no cycle: between the top-level modules (`cli`, `config`,
//! `engine`, …) and between the modules inside each (`mock/conn`, `mock/endpoints`, …), so
//! the code reads top-down and a change to a lower layer never needs the one above it.
//!
//! Read from the source text: every `crate::NAME` (and, inside a module, `super::NAME` and
//! `crate::MODULE::NAME`) outside comments and `#[cfg(test)]` code is an edge.
//!
//! It also holds the code to what docs/architecture.md states: its floor table (parsed
//! here) lists every module once, every import points down it, `modes` has no socket code
//! or system calls, and nothing below `app` prints.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

type Graph = BTreeMap<String, BTreeSet<String>>;

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).expect("read src/") {
        let path = entry.expect("dir entry").path();
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

/// The code of a file without its tests and comment lines.
fn code(text: &str) -> String {
    let text = text.split("#[cfg(test)]").next().unwrap_or("");
    text.lines()
        .filter(|l| !l.trim_start().starts_with("//"))
        .collect::<Vec<_>>()
        .join("\n")
}

/// Every identifier that follows `prefix` in `code`.
fn names_after<'a>(code: &'a str, prefix: &str) -> Vec<&'a str> {
    code.match_indices(prefix)
        .filter(|(i, _)| {
            // A whole path segment: not `xcrate::` or `my_super::`.
            !code[..*i]
                .chars()
                .next_back()
                .is_some_and(|c| c.is_alphanumeric() || c == '_')
        })
        .map(|(i, _)| {
            let rest = &code[i + prefix.len()..];
            let end = rest
                .find(|c: char| !(c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_'))
                .unwrap_or(rest.len());
            &rest[..end]
        })
        .filter(|n| !n.is_empty())
        .collect()
}

/// The top-level and the second-level graphs.
fn graphs(src: &Path) -> (Graph, Graph) {
    let mut files = Vec::new();
    rust_files(src, &mut files);
    let (mut top, mut inner) = (Graph::new(), Graph::new());
    for file in files {
        let rel = file.strip_prefix(src).unwrap().with_extension("");
        let mut parts: Vec<String> = rel.iter().map(|p| p.to_string_lossy().into()).collect();
        if parts.last().is_some_and(|p| p == "mod") {
            parts.pop();
        }
        if matches!(parts[0].as_str(), "lib" | "main" | "bin") {
            continue;
        }
        let code = code(&std::fs::read_to_string(&file).unwrap());
        let me = &parts[0];
        for name in names_after(&code, "crate::") {
            if name != me {
                top.entry(me.clone()).or_default().insert(name.into());
            }
        }
        if parts.len() < 2 {
            continue;
        }
        let sub = format!("{me}/{}", parts[1]);
        let mut targets: Vec<&str> = names_after(&code, &format!("crate::{me}::"));
        if parts.len() == 2 {
            targets.extend(names_after(&code, "super::"));
        }
        for name in targets {
            let to = format!("{me}/{name}");
            let exists = src.join(format!("{to}.rs")).exists() || src.join(&to).is_dir();
            if to != sub && exists {
                inner.entry(sub.clone()).or_default().insert(to);
            }
        }
    }
    (top, inner)
}

/// A cycle of `g` as a path `a -> b -> … -> a`, if there is one.
fn find_cycle(g: &Graph) -> Option<Vec<String>> {
    fn visit(
        g: &Graph,
        node: &str,
        path: &mut Vec<String>,
        done: &mut BTreeSet<String>,
    ) -> Option<Vec<String>> {
        if let Some(at) = path.iter().position(|n| n == node) {
            let mut cycle = path[at..].to_vec();
            cycle.push(node.to_string());
            return Some(cycle);
        }
        if done.contains(node) {
            return None;
        }
        path.push(node.to_string());
        for next in g.get(node).into_iter().flatten() {
            if let Some(c) = visit(g, next, path, done) {
                return Some(c);
            }
        }
        path.pop();
        done.insert(node.to_string());
        None
    }
    let mut done = BTreeSet::new();
    g.keys()
        .find_map(|n| visit(g, n, &mut Vec::new(), &mut done))
}

#[test]
fn src_has_no_import_cycle() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let (top, inner) = graphs(&src);
    assert!(
        top.contains_key("engine") && inner.contains_key("mock/conn"),
        "graph read"
    );
    for (what, g) in [("top-level modules", &top), ("modules inside one", &inner)] {
        if let Some(cycle) = find_cycle(g) {
            panic!("import cycle between {what}: {}", cycle.join(" -> "));
        }
    }
}

#[test]
fn a_cycle_is_found_and_named() {
    let mut g = Graph::new();
    for (a, b) in [("cli", "config"), ("config", "metrics"), ("metrics", "cli")] {
        g.entry(a.into()).or_default().insert(b.into());
    }
    assert_eq!(
        find_cycle(&g).unwrap().join(" -> "),
        "cli -> config -> metrics -> cli"
    );
    g.get_mut("metrics").unwrap().clear();
    assert_eq!(find_cycle(&g), None);
    assert_eq!(
        names_after("use crate::cli::Backend; xcrate::no", "crate::"),
        ["cli"]
    );
}

/// The command line is read by `config` (which resolves it) and `app` (which runs it); every
/// layer below names the shared vocabulary from `crate::types`, so a flag's clap spelling can
/// change without touching the engine, metrics, output or modes.
#[test]
fn nothing_below_config_and_app_imports_cli() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let (top, _) = graphs(&src);
    assert!(
        top.get("config").is_some_and(|to| to.contains("cli")),
        "graph read"
    );
    let below: Vec<&str> = top
        .iter()
        .filter(|(from, to)| to.contains("cli") && !matches!(from.as_str(), "config" | "app"))
        .map(|(from, _)| from.as_str())
        .collect();
    assert!(
        below.is_empty(),
        "these modules import crate::cli; import the shared types from crate::types instead: {}",
        below.join(", ")
    );
    let types = top
        .get("types")
        .map(|to| to.iter().cloned().collect::<Vec<_>>());
    assert_eq!(
        types, None,
        "crate::types is the bottom floor: it imports nothing of the crate"
    );
}

/// The floors of docs/architecture.md's table (`| N | `a`, `b` | ... |`): module → floor.
fn floors(table: &str) -> BTreeMap<String, u32> {
    let mut out = BTreeMap::new();
    for line in table.lines() {
        let cells: Vec<&str> = line.split('|').map(str::trim).collect();
        let Some(floor) = cells.get(1).and_then(|c| c.parse::<u32>().ok()) else {
            continue;
        };
        for name in cells[2].split(',') {
            out.insert(name.trim().trim_matches('`').to_string(), floor);
        }
    }
    out
}

/// docs/architecture.md states the floors every import points down; this holds the code to
/// them: every top-level module has a floor, and none imports one on a higher floor.
#[test]
fn every_import_points_down_the_documented_floors() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let doc = std::fs::read_to_string(root.join("docs/architecture.md")).unwrap();
    let floor = floors(&doc);
    assert!(
        floor.get("types") == Some(&0) && floor.get("app") == Some(&7),
        "{floor:?}"
    );
    let src = root.join("src");
    let (top, _) = graphs(&src);
    let module = |name: &str| src.join(format!("{name}.rs")).exists() || src.join(name).is_dir();
    let mut wrong = Vec::new();
    for (from, to) in &top {
        let Some(&mine) = floor.get(from) else {
            wrong.push(format!("{from} has no floor in docs/architecture.md"));
            continue;
        };
        for name in to.iter().filter(|n| module(n)) {
            match floor.get(name) {
                Some(&theirs) if theirs > mine => wrong.push(format!(
                    "{from} (floor {mine}) imports {name} (floor {theirs})"
                )),
                Some(_) => {}
                None => wrong.push(format!("{name} has no floor in docs/architecture.md")),
            }
        }
    }
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}

/// The top-level modules of `src/` (`lib.rs`, `main.rs` and `bin/` are the crate's roots,
/// not modules).
fn top_level_modules(src: &Path) -> BTreeSet<String> {
    std::fs::read_dir(src)
        .expect("read src/")
        .map(|e| e.expect("dir entry").path())
        .filter_map(|p| {
            let name = p.file_stem()?.to_string_lossy().into_owned();
            let module = p.is_dir() || p.extension().is_some_and(|e| e == "rs");
            (module && !matches!(name.as_str(), "lib" | "main" | "bin")).then_some(name)
        })
        .collect()
}

/// docs/architecture.md's floor table is the whole list: every module of `src/` is on it
/// once (one that imports nothing of the crate too), and it names no module that is gone.
#[test]
fn the_floor_table_lists_every_module_once_and_nothing_else() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let doc = std::fs::read_to_string(root.join("docs/architecture.md")).unwrap();
    let listed: Vec<String> = doc
        .lines()
        .filter(|l| floors(l).values().next().is_some())
        .flat_map(|l| floors(l).into_keys())
        .collect();
    let unique: BTreeSet<String> = listed.iter().cloned().collect();
    assert_eq!(
        listed.len(),
        unique.len(),
        "a module on two floors: {listed:?}"
    );
    let modules = top_level_modules(&root.join("src"));
    assert!(
        modules.contains("types") && modules.contains("modes"),
        "{modules:?}"
    );
    let missing: Vec<_> = modules.difference(&unique).collect();
    let stale: Vec<_> = unique.difference(&modules).collect();
    assert!(
        missing.is_empty() && stale.is_empty(),
        "docs/architecture.md's floors: modules without a floor {missing:?}; floors naming \
         no module {stale:?}"
    );
}

/// `(file, needle)` for each of `needles` the non-test code of `path` (a file, or every file
/// under a directory) names.
fn code_naming(path: &Path, needles: &[&str]) -> Vec<(String, String)> {
    let mut files = Vec::new();
    if path.is_dir() {
        rust_files(path, &mut files);
    } else {
        files.push(path.to_path_buf());
    }
    let mut found = Vec::new();
    for file in files {
        let code = code(&std::fs::read_to_string(&file).unwrap());
        for n in needles.iter().filter(|n| code.contains(*n)) {
            found.push((file.display().to_string(), n.to_string()));
        }
    }
    found
}

/// The table's floor 6: `modes` orchestrates, with no socket code and no system calls of its
/// own (sockets are `http`'s and `mock`'s, the host's clock `runtime`'s).
#[test]
fn modes_holds_no_socket_code_or_system_calls() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let needles = [
        "std::net",
        "monoio::net",
        "TcpStream",
        "TcpListener",
        "UdpSocket",
        "libc::",
        "nix::",
    ];
    let found = code_naming(&src.join("modes"), &needles);
    assert!(found.is_empty(), "{found:?}");
    // The check reads what it means to: a lower floor does name them.
    assert!(!code_naming(&src.join("http"), &needles).is_empty());
}

/// "Nothing below `app` prints": every line goes through the console `app` made
/// (`output::stdio::Console`); the binaries' roots print their own.
#[test]
fn nothing_below_app_prints() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let needles = ["print!(", "println!(", "eprint!(", "eprintln!("];
    let found: Vec<_> = top_level_modules(&src)
        .into_iter()
        .filter(|m| m != "app")
        .flat_map(|m| {
            // A module's file, and its directory when it has one.
            let file = src.join(format!("{m}.rs"));
            let dir = src.join(&m);
            [file, dir]
                .into_iter()
                .filter(|p| p.exists())
                .flat_map(|p| code_naming(&p, &needles))
                .collect::<Vec<_>>()
        })
        .collect();
    assert!(found.is_empty(), "{found:?}");
    // The check reads what it means to: the mock's own binary prints its address.
    assert!(!code_naming(&src.join("bin"), &needles).is_empty());
}
