//! `cargo xtask tidy`: the structure checks that keep the code base what ARCHITECTURE.md says it
//! is. Each prints every offence with its file and fails when there is any:
//!
//! - no source file over 500 lines outside `tests/`;
//! - SQL only in the Durable Objects' `store.rs` (or `store/`) files;
//! - no HTML built from string literals (pages are written with `maud`);
//! - the Worker's layers only point down (domain → infrastructure → Durable Object APIs → their
//!   implementations → adapters → `lib.rs`), no object's implementation reaches into another's,
//!   and no two source files import each other, directly or round about;
//! - the daemon's files form no import cycle either, and it knows nothing of MCP.

mod graph;

use crate::{root, Result};
use graph::{modules, strongly_connected, Graph};
use std::fs;
use std::path::{Path, PathBuf};

/// Longest source file allowed outside the test crate.
const MAX_LINES: usize = 500;

/// The Worker's layers, lowest first; every module (by its path under `src/`) is in one.
const LAYERS: &[(&str, &[&str])] = &[
    (
        "domain",
        &[
            "artifacts",
            "budget",
            "callbacks",
            "diff",
            "error",
            "ids",
            "names",
            "principal",
            "repository",
            "run_views",
            "runs",
            "sandboxes",
            "suggest",
            "templates",
            "json_cost",
            "time",
            "transcript",
            "urls",
            "workers",
        ],
    ),
    (
        "infrastructure",
        &[
            "config",
            "cookies",
            "forge",
            "html",
            "http",
            "json_path",
            "jwt",
            "links",
            "mac",
            "markdown",
            "mcp_session_ids",
            "recent",
            "rpc",
            "seal",
            "tokens",
        ],
    ),
    (
        "object api",
        &[
            "authstore::api",
            "ledger::api",
            "registry::api",
            "sandbox::api",
            "session::api",
        ],
    ),
    (
        "object",
        &["authstore", "ledger", "registry", "sandbox", "session"],
    ),
    (
        "adapter",
        &[
            "auth", "hooks", "mcp", "oauth", "outputs", "page", "preview", "proxy", "tools",
            // Tests only: fuzzes the parsers of every layer up to the adapters.
            "fuzz",
        ],
    ),
    ("entry", &["crate"]),
];

/// The Durable Objects: their implementations may use each other's `api` only.
const OBJECTS: &[&str] = &["authstore", "ledger", "registry", "sandbox", "session"];

pub fn run() -> Result {
    let root = root();
    let mut problems = Vec::new();
    problems.extend(long_files(&root));
    problems.extend(sql_outside_stores(&root));
    problems.extend(markup_in_strings(&root));
    let worker = modules(&root.join("src"));
    problems.extend(layer_violations(&worker));
    problems.extend(cycles(&worker, "the Worker"));
    let daemon = modules(&root.join("container/src"));
    problems.extend(cycles(&daemon, "the sandbox daemon"));
    problems.extend(daemon_knows_no_mcp(&root));
    if problems.is_empty() {
        println!("xtask tidy: structure checks passed");
        return Ok(());
    }
    for p in &problems {
        eprintln!("tidy: {p}");
    }
    Err(format!(
        "{} structure problem(s); see above",
        problems.len()
    ))
}

/// Every `.rs` file under `dir`.
pub(crate) fn rust_files(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        let Ok(entries) = fs::read_dir(&d) else {
            continue;
        };
        for entry in entries.flatten() {
            let path = entry.path();
            if path.is_dir() {
                stack.push(path);
            } else if path.extension().is_some_and(|e| e == "rs") {
                out.push(path);
            }
        }
    }
    out.sort();
    out
}

const SOURCE_DIRS: &[&str] = &[
    "src",
    "container/src",
    "sidecar/src",
    "wire/src",
    "xtask/src",
];

fn long_files(root: &Path) -> Vec<String> {
    let mut out = Vec::new();
    for dir in SOURCE_DIRS {
        for file in rust_files(&root.join(dir)) {
            let lines = fs::read_to_string(&file).map_or(0, |t| t.lines().count());
            if lines > MAX_LINES {
                out.push(format!(
                    "{} has {lines} lines (at most {MAX_LINES}): split it by responsibility",
                    relative(root, &file)
                ));
            }
        }
    }
    out
}

/// Whether a file may hold SQL: a Durable Object's `store.rs` or a file under its `store/`.
fn is_store(path: &Path) -> bool {
    path.file_name().is_some_and(|n| n == "store.rs")
        || path.components().any(|c| c.as_os_str() == "store")
}

fn sql_outside_stores(root: &Path) -> Vec<String> {
    let mut out = Vec::new();
    for file in rust_files(&root.join("src")) {
        if is_store(&file) {
            continue;
        }
        let text = fs::read_to_string(&file).unwrap_or_default();
        if let Some(what) = sql_in(&production(&text)) {
            out.push(format!(
                "{} runs SQL ({what}); SQL lives in the object's store.rs",
                relative(root, &file)
            ));
        }
    }
    out
}

/// HTML is written with `maud` (which escapes what it splices), never as string literals.
fn markup_in_strings(root: &Path) -> Vec<String> {
    let mut out = Vec::new();
    for file in rust_files(&root.join("src")) {
        let text = production(&fs::read_to_string(&file).unwrap_or_default());
        if let Some(line) = text.lines().find(|l| has_markup_literal(l)) {
            out.push(format!(
                "{} builds HTML from a string ({}); write it with maud's html!",
                relative(root, &file),
                line.trim()
            ));
        }
    }
    out
}

/// Whether a line holds a string literal that starts with an HTML tag.
fn has_markup_literal(line: &str) -> bool {
    line.match_indices("\"<").any(|(at, _)| {
        line[at + 2..]
            .chars()
            .next()
            .is_some_and(|c| c.is_ascii_lowercase() || c == '/' || c == '!')
    })
}

/// The first sign of SQL in `text`, if any.
fn sql_in(text: &str) -> Option<&'static str> {
    const SIGNS: &[&str] = &[
        ".exec(\"",
        "SqlStorage::exec",
        "SELECT ",
        "INSERT ",
        "UPDATE ",
        "DELETE FROM",
        "CREATE TABLE",
    ];
    SIGNS.iter().copied().find(|sign| text.contains(sign))
}

/// `text` without its `#[cfg(test)]` module (tests may do what production code may not).
pub(crate) fn production(text: &str) -> String {
    match text.find("#[cfg(test)]") {
        Some(at) => text[..at].to_string(),
        None => text.to_string(),
    }
}

/// The layer of a Worker module and the name of its family (the top-level module).
fn layer_of(module: &str) -> Option<(usize, &'static str)> {
    let mut best: Option<(usize, usize, &'static str)> = None;
    for (rank, (_, members)) in LAYERS.iter().enumerate() {
        for member in members.iter() {
            let matches = module == *member || module.starts_with(&format!("{member}::"));
            if matches && best.is_none_or(|(_, len, _)| member.len() > len) {
                best = Some((rank, member.len(), member));
            }
        }
    }
    best.map(|(rank, _, member)| (rank, member))
}

fn family(module: &str) -> &str {
    module.split("::").next().unwrap_or(module)
}

fn layer_violations(graph: &Graph) -> Vec<String> {
    let mut out = Vec::new();
    for (from, uses) in graph {
        let Some((from_rank, _)) = layer_of(from) else {
            out.push(format!(
                "src module {from} is in no layer (xtask/src/tidy/mod.rs)"
            ));
            continue;
        };
        for to in uses {
            let Some((to_rank, _)) = layer_of(to) else {
                continue;
            };
            let same_family = family(from) == family(to) && from_rank == to_rank;
            let allowed = to_rank < from_rank
                || same_family
                // The domain, infrastructure and adapters may use their own layer (cycles are caught
                // below); objects and their APIs may not use each other's.
                || (to_rank == from_rank && matches!(LAYERS[from_rank].0, "domain" | "infrastructure" | "adapter"));
            if !allowed {
                out.push(format!(
                    "{from} ({}) uses {to} ({}): layers only point down",
                    LAYERS[from_rank].0, LAYERS[to_rank].0
                ));
            }
            if OBJECTS.contains(&family(to))
                && family(from) != family(to)
                && LAYERS[to_rank].0 == "object"
            {
                out.push(format!(
                    "{from} uses {to}: other objects are reached through their api only"
                ));
            }
        }
    }
    out
}

/// Import cycles between files, each reported once with its members.
fn cycles(graph: &Graph, what: &str) -> Vec<String> {
    let mut out = Vec::new();
    for component in strongly_connected(graph) {
        if component.len() > 1 {
            out.push(format!(
                "{what}: these files import each other round about: {}",
                component.join(", ")
            ));
        }
    }
    out
}

/// The daemon serves sandboxes to the Worker: no MCP, users or accounts in its code.
fn daemon_knows_no_mcp(root: &Path) -> Vec<String> {
    let mut out = Vec::new();
    for file in rust_files(&root.join("container/src")) {
        let text = production(&fs::read_to_string(&file).unwrap_or_default());
        if text.contains("rmcp") || text.contains("jsonrpc") {
            out.push(format!(
                "{} mentions MCP; the daemon knows only sandboxes",
                relative(root, &file)
            ));
        }
    }
    out
}

fn relative(root: &Path, file: &Path) -> String {
    file.strip_prefix(root)
        .unwrap_or(file)
        .display()
        .to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn graph(edges: &[(&str, &[&str])]) -> Graph {
        edges
            .iter()
            .map(|(from, to)| (from.to_string(), to.iter().map(|t| t.to_string()).collect()))
            .collect()
    }

    #[test]
    fn an_upward_import_and_an_object_reaching_into_another_are_refused() {
        let g = graph(&[
            ("runs", &["tools"]),
            ("session::driver", &["ledger::api", "sandbox::daemon"]),
            ("ledger::api", &["sandboxes"]),
            ("tools", &["ledger::api", "auth"]),
            ("auth", &["oauth"]),
        ]);
        let problems = layer_violations(&g);
        assert!(
            problems
                .iter()
                .any(|p| p.starts_with("runs (domain) uses tools")),
            "{problems:?}"
        );
        assert!(
            problems
                .iter()
                .any(|p| p.contains("session::driver uses sandbox::daemon")),
            "{problems:?}"
        );
        assert_eq!(problems.len(), 3, "{problems:?}");
    }

    #[test]
    fn cycles_are_found_however_long() {
        let g = graph(&[("a", &["b"]), ("b", &["c"]), ("c", &["a"]), ("d", &["a"])]);
        let found = cycles(&g, "test");
        assert_eq!(found.len(), 1, "{found:?}");
        assert!(found[0].ends_with("a, b, c"), "{found:?}");
        assert!(cycles(&graph(&[("a", &["b"]), ("b", &[])]), "test").is_empty());
    }

    #[test]
    fn markup_in_string_literals_is_recognised() {
        assert!(has_markup_literal(r#"format!("<p>{}</p>", x)"#));
        assert!(has_markup_literal(r#"let s = "</div>";"#));
        assert!(!has_markup_literal(r#"html! { p { (x) } }"#));
        assert!(!has_markup_literal(r#"if a < b { "<=" }"#));
    }

    #[test]
    fn sql_is_recognised_outside_tests_only() {
        assert_eq!(sql_in("sql.exec(\"SELECT 1\", None)"), Some(".exec(\""));
        assert!(sql_in(&production(
            "fn f() {}\n#[cfg(test)]\nmod t { \"SELECT 1\" }"
        ))
        .is_none());
        assert!(is_store(Path::new("src/ledger/store/runs.rs")));
        assert!(is_store(Path::new("src/sandbox/store.rs")));
        assert!(!is_store(Path::new("src/sandbox/mod.rs")));
    }

    #[test]
    fn modules_are_named_by_their_paths() {
        let src = Path::new("/x/src");
        assert_eq!(graph::module_of(src, Path::new("/x/src/lib.rs")), "crate");
        assert_eq!(
            graph::module_of(src, Path::new("/x/src/ledger/mod.rs")),
            "ledger"
        );
        assert_eq!(
            graph::module_of(src, Path::new("/x/src/ledger/api.rs")),
            "ledger::api"
        );
        assert_eq!(layer_of("ledger::api").map(|l| l.0), Some(2));
        assert_eq!(layer_of("ledger::store::runs").map(|l| l.0), Some(3));
        assert_eq!(layer_of("tools::sandbox").map(|l| l.0), Some(4));
    }
}
