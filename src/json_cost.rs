//! What JSON text costs to hold as a `serde_json::Value`, reckoned from the text before it is
//! parsed, so text from outside (an agent's answers, a transcript, a client's request) is refused
//! before it takes the memory instead of after.
//!
//! A tree of small values takes many times its text: `{"a":0},` is 8 bytes of text and a B-tree
//! node of about 400 bytes on wasm32 (measured natively, 15 MiB of it became a 1.3 GB tree), so
//! a byte cap on the text alone does not bound the memory. The reckoning is an upper bound for
//! `serde_json`'s own tree: every array's vector at twice its length (growth by doubling, from 4), every
//! object's map at as many nodes as a B-tree with five entries per node would need (no node but
//! the root holds fewer), every string with its allocation, and the parser's buffer for unescaping
//! the longest string. It takes one pass over the bytes and
//! no memory beyond a stack of at most [`MAX_DEPTH`] levels (`serde_json` refuses deeper text).

use serde_json::Value;
use std::mem::size_of;

/// The most a tree parsed from text that comes from outside may take: half of the 128 MB a
/// Durable Object's isolate has, the text and the rest of the work beside it.
pub const TREE_MAX: usize = 64 * 1024 * 1024;

/// `serde_json`'s recursion limit: deeper text fails to parse, so it is not reckoned deeper.
pub(crate) const MAX_DEPTH: usize = 128;
/// What the allocator adds to each allocation, rounded up (dlmalloc's header and alignment).
const ALLOC: usize = 4 * size_of::<usize>();
/// Entries of a B-tree node (`std`'s `BTreeMap`: B = 6), and the fewest a node but the root has.
const NODE_CAPACITY: usize = 11;
const NODE_FEWEST: usize = 5;

/// Why text was not parsed.
#[derive(Debug)]
pub enum Refused {
    /// Held as a tree it would take `bytes`, more than `max`.
    TooLarge { bytes: usize, max: usize },
    /// It is not JSON (`serde_json`'s message, with line and column).
    Invalid(serde_json::Error),
}

impl std::fmt::Display for Refused {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Refused::TooLarge { bytes, max } => write!(
                f,
                "it would take {} to hold once parsed, more than the {} allowed (too many values)",
                mib(*bytes),
                mib(*max)
            ),
            Refused::Invalid(e) => write!(f, "{e}"),
        }
    }
}

fn mib(bytes: usize) -> String {
    format!("{:.1} MiB", bytes as f64 / (1024.0 * 1024.0))
}

/// `text` as a `Value`, unless holding it would take more than `max` bytes.
pub fn parse(text: &[u8], max: usize) -> Result<Value, Refused> {
    let bytes = tree_bytes(text);
    if bytes > max {
        return Err(Refused::TooLarge { bytes, max });
    }
    serde_json::from_slice(text).map_err(Refused::Invalid)
}

/// At most what `text` takes once parsed into a `Value` (beyond the root's own slot). Text that
/// is not JSON is reckoned as far as it goes; parsing it fails anyway.
pub fn tree_bytes(text: &[u8]) -> usize {
    // Per open container: whether it is an object, its commas, whether it holds anything.
    let mut open: Vec<(bool, usize, bool)> = Vec::new();
    // Containers opened past MAX_DEPTH, not reckoned (the parse refuses them).
    let mut too_deep = 0usize;
    let mut total = 0usize;
    // The longest string: the parser unescapes strings in a buffer of its own, grown to hold it.
    let mut longest = 0usize;
    let mut i = 0;
    while i < text.len() {
        let byte = text[i];
        match byte {
            b'"' => {
                let start = i + 1;
                i = start;
                while i < text.len() && text[i] != b'"' {
                    i += if text[i] == b'\\' { 2 } else { 1 };
                }
                let len = i.min(text.len()) - start;
                if len > 0 {
                    total = total.saturating_add(len + ALLOC);
                }
                longest = longest.max(len);
                mark(&mut open);
            }
            b'{' | b'[' => {
                mark(&mut open);
                if open.len() < MAX_DEPTH {
                    open.push((byte == b'{', 0, false));
                } else {
                    too_deep += 1;
                }
            }
            b'}' | b']' => {
                if too_deep > 0 {
                    too_deep -= 1;
                } else if let Some((object, commas, filled)) = open.pop() {
                    let entries = if filled { commas + 1 } else { 0 };
                    total = total.saturating_add(container_bytes(object, entries));
                }
            }
            b',' => {
                if too_deep == 0 {
                    if let Some(top) = open.last_mut() {
                        top.1 += 1;
                    }
                }
            }
            b' ' | b'\t' | b'\n' | b'\r' | b':' => {}
            _ => mark(&mut open),
        }
        i += 1;
    }
    // Containers never closed: the parse fails, but reckon them as they stand.
    for (object, commas, filled) in open {
        let entries = if filled { commas + 1 } else { 0 };
        total = total.saturating_add(container_bytes(object, entries));
    }
    total.saturating_add(longest.saturating_mul(2) + ALLOC)
}

/// The innermost open container holds something.
fn mark(open: &mut [(bool, usize, bool)]) {
    if let Some(top) = open.last_mut() {
        top.2 = true;
    }
}

/// An array's vector or an object's map of `entries` (not what the entries hold themselves).
fn container_bytes(object: bool, entries: usize) -> usize {
    if entries == 0 {
        return 0;
    }
    if !object {
        // A vector's capacity doubles from 4 as it grows.
        return entries.saturating_mul(2).max(4) * size_of::<Value>() + ALLOC;
    }
    let leaves = if entries <= NODE_CAPACITY {
        1
    } else {
        entries.div_ceil(NODE_FEWEST)
    };
    // Internal nodes: at most one per NODE_FEWEST + 1 children, level by level.
    let mut nodes = leaves;
    let mut level = leaves;
    while level > 1 {
        level = level.div_ceil(NODE_FEWEST + 1);
        nodes += level;
    }
    nodes.saturating_mul(internal_node() + ALLOC)
}

/// The larger of a B-tree's two node kinds: keys, values, parent link and counts, and edges.
const fn internal_node() -> usize {
    let leaf = NODE_CAPACITY * (size_of::<String>() + size_of::<Value>()) + size_of::<usize>() + 4;
    leaf + (NODE_CAPACITY + 1) * size_of::<usize>()
}

pub mod kept;
pub mod pruned;

#[cfg(test)]
pub(crate) mod tests;
