//! The import graph of a crate's source: every file is a module (`ledger::api`), and a module
//! uses every module a `crate::` or `super::` path in it names. Test modules do not count.

use super::{production, rust_files};
use std::collections::{BTreeMap, BTreeSet};
use std::fs;
use std::path::Path;

/// Module path (`ledger::api`, `crate` for the root) → the modules it uses.
pub type Graph = BTreeMap<String, BTreeSet<String>>;

pub fn modules(src: &Path) -> Graph {
    let files = rust_files(src);
    let names: BTreeSet<String> = files.iter().map(|f| module_of(src, f)).collect();
    let mut graph = Graph::new();
    for file in &files {
        let module = module_of(src, file);
        let text = production(&fs::read_to_string(file).unwrap_or_default());
        let parent = parent_of(&module, file);
        let mut uses = BTreeSet::new();
        for path in referenced_paths(&text) {
            let full = match path.strip_prefix("crate::") {
                Some(rest) => rest.to_string(),
                None => match path.strip_prefix("super::") {
                    Some(rest) if parent.is_empty() => rest.to_string(),
                    Some(rest) => format!("{parent}::{rest}"),
                    None => continue,
                },
            };
            if let Some(target) = longest_module(&names, &full) {
                if target != module {
                    uses.insert(target);
                }
            }
        }
        graph.insert(module, uses);
    }
    graph
}

/// `src/ledger/api.rs` → `ledger::api`; `src/ledger/mod.rs` → `ledger`; `src/lib.rs` → `crate`.
pub fn module_of(src: &Path, file: &Path) -> String {
    let rel = file.strip_prefix(src).unwrap_or(file).with_extension("");
    let mut parts: Vec<String> = rel
        .components()
        .map(|c| c.as_os_str().to_string_lossy().into_owned())
        .collect();
    if parts
        .last()
        .is_some_and(|l| l == "mod" || l == "lib" || l == "main")
    {
        parts.pop();
    }
    if parts.is_empty() {
        "crate".into()
    } else {
        parts.join("::")
    }
}

/// The module `super::` names from `module` (written in `file`).
fn parent_of(module: &str, _file: &Path) -> String {
    match module.rsplit_once("::") {
        Some((parent, _)) => parent.to_string(),
        None => String::new(),
    }
}

/// Every `crate::a::b` / `super::a::b` path in `text`, expanding `use crate::{a, b::c}` groups
/// one level deep.
pub fn referenced_paths(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    for prefix in ["crate::", "super::"] {
        let mut rest = text;
        while let Some(at) = rest.find(prefix) {
            let before = rest[..at].chars().last();
            rest = &rest[at + prefix.len()..];
            if before.is_some_and(|c| c.is_alphanumeric() || c == '_' || c == ':') {
                continue;
            }
            if let Some(group) = rest.strip_prefix('{') {
                let end = group.find('}').unwrap_or(group.len());
                for item in group[..end].split(',') {
                    let item = item.trim();
                    if !item.is_empty() {
                        out.push(format!("{prefix}{}", path_head(item)));
                    }
                }
            } else {
                out.push(format!("{prefix}{}", path_head(rest)));
            }
        }
    }
    out
}

/// The leading `a::b::c` of `text`.
fn path_head(text: &str) -> String {
    let end = text
        .find(|c: char| !(c.is_alphanumeric() || c == '_' || c == ':'))
        .unwrap_or(text.len());
    text[..end].trim_end_matches(':').to_string()
}

/// The longest known module that `path` starts with.
fn longest_module(names: &BTreeSet<String>, path: &str) -> Option<String> {
    let parts: Vec<&str> = path.split("::").collect();
    (1..=parts.len())
        .rev()
        .map(|n| parts[..n].join("::"))
        .find(|candidate| names.contains(candidate))
}

/// Tarjan's strongly connected components, iteratively (no recursion limit).
pub fn strongly_connected(graph: &Graph) -> Vec<Vec<String>> {
    let nodes: Vec<&String> = graph.keys().collect();
    let index_of: BTreeMap<&String, usize> =
        nodes.iter().enumerate().map(|(i, n)| (*n, i)).collect();
    let edges: Vec<Vec<usize>> = nodes
        .iter()
        .map(|n| {
            graph[*n]
                .iter()
                .filter_map(|t| index_of.get(t).copied())
                .collect()
        })
        .collect();
    let n = nodes.len();
    let (mut index, mut low) = (vec![usize::MAX; n], vec![0; n]);
    let mut on_stack = vec![false; n];
    let (mut stack, mut out, mut next) = (Vec::new(), Vec::new(), 0);
    for start in 0..n {
        if index[start] != usize::MAX {
            continue;
        }
        let mut work = vec![(start, 0usize)];
        while let Some(&mut (v, ref mut edge)) = work.last_mut() {
            if *edge == 0 && index[v] == usize::MAX {
                index[v] = next;
                low[v] = next;
                next += 1;
                stack.push(v);
                on_stack[v] = true;
            }
            if let Some(&w) = edges[v].get(*edge) {
                *edge += 1;
                if index[w] == usize::MAX {
                    work.push((w, 0));
                } else if on_stack[w] {
                    low[v] = low[v].min(index[w]);
                }
                continue;
            }
            work.pop();
            if let Some(&(parent, _)) = work.last() {
                low[parent] = low[parent].min(low[v]);
            }
            if low[v] == index[v] {
                let mut component = Vec::new();
                while let Some(w) = stack.pop() {
                    on_stack[w] = false;
                    component.push(nodes[w].clone());
                    if w == v {
                        break;
                    }
                }
                component.sort();
                out.push(component);
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_are_read_from_uses_groups_and_inline_references() {
        let text = "use crate::{config, ledger::api::{Ledger, GetRun}};\nuse super::store;\n\
                    fn f() { crate::repository::split(x) }\nlet s = \"not::crate::this\";";
        let paths = referenced_paths(text);
        assert!(paths.contains(&"crate::config".to_string()), "{paths:?}");
        assert!(
            paths.contains(&"crate::ledger::api".to_string()),
            "{paths:?}"
        );
        assert!(
            paths.contains(&"crate::repository::split".to_string()),
            "{paths:?}"
        );
        assert!(paths.contains(&"super::store".to_string()), "{paths:?}");
        assert!(!paths.iter().any(|p| p.contains("this")), "{paths:?}");
    }

    #[test]
    fn components_group_files_that_reach_each_other() {
        let g: Graph = [("a", vec!["b"]), ("b", vec!["a"]), ("c", vec!["a"])]
            .into_iter()
            .map(|(k, v)| (k.to_string(), v.into_iter().map(String::from).collect()))
            .collect();
        let mut sizes: Vec<usize> = strongly_connected(&g).iter().map(Vec::len).collect();
        sizes.sort();
        assert_eq!(sizes, vec![1, 2]);
    }
}
