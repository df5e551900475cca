//! Decoding a JSON object into a type while naming where it failed (`limit`, `files[2].path`,
//! `.` for the object itself), the way `serde_path_to_error` names it, without a path-tracking
//! deserializer compiled for every type (that cost the Worker 27 KB gzip): the object is decoded
//! from its compact text, and a failure's column is mapped back to the value, or the object, it
//! points into by one small scan of that text.
//!
//! Where serde_json leaves the column, in the compact text it decodes:
//! - a value of the wrong type or value, an unknown variant, a failed check of a value's own:
//!   right after the value (a container of the wrong type: at its opening bracket);
//! - an unknown field: right after the key, which is named;
//! - a missing field, too few or too many members: after the closing bracket, so the object or
//!   array is named;
//! - a failed check raised without a position (an unknown variant, a length): after the comma or
//!   bracket that follows the value, which the object or array around it took first;
//! - an enum given neither a name nor a one-member object, a struct given too long an array:
//!   where the reader stopped in it (its bare "expected value" or "trailing characters" is
//!   rewritten to say what it got, in a value decoder's words).

use serde::de::DeserializeOwned;
use serde_json::{Map, Value};
use std::fmt::Write;

/// Why an object did not decode.
#[derive(Debug, PartialEq, Eq)]
pub struct DecodeError {
    /// Where: `.` for the object itself, else fields and indexes (`files[2].path`).
    pub path: String,
    /// serde's message (without a position: the client never saw the text it points into).
    pub message: String,
}

/// Decodes `object` as a `T`, naming the offending field on failure.
pub fn decode<T: DeserializeOwned>(object: Map<String, Value>) -> Result<T, DecodeError> {
    let text = Value::Object(object).to_string();
    serde_json::from_str(&text).map_err(|e| explain(&text, &e))
}

fn explain(text: &str, e: &serde_json::Error) -> DecodeError {
    let full = e.to_string();
    let position = format!(" at line {} column {}", e.line(), e.column());
    let mut message = full.strip_suffix(&position).unwrap_or(&full).to_string();
    if e.line() != 1 {
        return DecodeError {
            path: ".".to_string(),
            message,
        };
    }
    let (path, hit, start) = path_at(text, e.column(), &message);
    match hit {
        // An enum given neither a name nor an object: say what it got, as a value's decoder would.
        Some(Hit::PeekedStart) => {
            message = format!(
                "invalid type: {}, expected string or map",
                unexpected(text.as_bytes(), start)
            )
        }
        Some(Hit::EmptyObjectEnd | Hit::FirstMemberEnd) => {
            message = "invalid value: map, expected map with a single key".to_string()
        }
        Some(Hit::ExtraMember) => {
            message = format!(
                "invalid length {}, expected fewer elements in array",
                members(text.as_bytes(), start)
            )
        }
        _ => {}
    }
    DecodeError { path, message }
}

/// The value starting at `start` as serde's `Unexpected` writes it.
fn unexpected(bytes: &[u8], start: usize) -> String {
    let scalar = || {
        let text = bytes
            .get(start..scalar_end(bytes, start))
            .unwrap_or_default();
        String::from_utf8_lossy(text).into_owned()
    };
    match bytes.get(start) {
        Some(b'[') => "sequence".to_string(),
        Some(b'{') => "map".to_string(),
        Some(b'n') => "null".to_string(),
        Some(b't' | b'f') => format!("boolean `{}`", scalar()),
        _ => {
            let number = scalar();
            if number.contains(['.', 'e', 'E']) {
                format!("floating point `{number}`")
            } else {
                format!("integer `{number}`")
            }
        }
    }
}

/// One step of a path: an object's key or an array's index.
enum Step {
    Key(String),
    Index(usize),
}

/// The path serde_json's `column` points into in `text` (compact JSON, one line) for an error
/// with `message`, and where the value it names starts.
fn path_at(text: &str, column: usize, message: &str) -> (String, Option<Hit>, usize) {
    let mut scan = Scan {
        bytes: text.as_bytes(),
        at: column,
        steps: Vec::new(),
        hits: Default::default(),
    };
    scan.value(0);
    let order: &[Hit] = if message.starts_with("missing field") {
        &[Hit::ObjectEnd]
    } else if message == "expected value" {
        &[Hit::PeekedStart, Hit::EmptyObjectEnd, Hit::FirstMemberEnd]
    } else if message == "trailing characters" {
        &[Hit::ExtraMember]
    } else if message.starts_with("invalid length") {
        &[Hit::ContainerEnd]
    } else if message.starts_with("unknown variant") {
        &[
            Hit::ScalarEnd,
            Hit::ContainerStart,
            Hit::VariantKeyEnd,
            Hit::AfterDelimiter,
        ]
    } else {
        &[
            Hit::ScalarEnd,
            Hit::ContainerStart,
            Hit::KeyEnd,
            Hit::AfterDelimiter,
        ]
    };
    order
        .iter()
        .find_map(|hit| {
            let (path, start) = scan.hits[*hit as usize].take()?;
            Some((path, Some(*hit), start))
        })
        .unwrap_or_else(|| (".".to_string(), None, 0))
}

/// What can sit at serde_json's column, each with the path it names.
#[derive(Clone, Copy)]
enum Hit {
    /// An object's end: a field was missing in it (the reader took its closing brace).
    ObjectEnd,
    /// A scalar's end: it had the wrong type or value.
    ScalarEnd,
    /// An object's or array's start: it had the wrong type.
    ContainerStart,
    /// A key's end: an unknown field.
    KeyEnd,
    /// One byte after a value's end: it failed a check raised without a position, and the
    /// object or array around it took the comma or bracket after it before placing the error.
    AfterDelimiter,
    /// One byte after a value's start: an enum given neither a name nor an object.
    PeekedStart,
    /// A key's end, naming the object: an enum's unknown variant.
    VariantKeyEnd,
    /// An object's or array's end: it had too few or too many members (the reader took its
    /// closing bracket).
    ContainerEnd,
    /// One byte after the start of an array's member past the first, naming the array: a
    /// struct given as an array with too many members.
    ExtraMember,
    /// An empty object's end: an enum given `{}`.
    EmptyObjectEnd,
    /// The end of an object's first member's value, a comma after it: an enum given more than
    /// one variant.
    FirstMemberEnd,
}

struct Scan<'a> {
    bytes: &'a [u8],
    /// The byte serde_json's column names.
    at: usize,
    /// The path to the value being scanned.
    steps: Vec<Step>,
    /// The first path found for each [`Hit`], in its order, with where its value starts.
    hits: [Option<(String, usize)>; 11],
}

impl Scan<'_> {
    /// Scans the value starting at `start`; returns where it ends (exclusive).
    fn value(&mut self, start: usize) -> usize {
        self.hit(start + 1 == self.at, Hit::PeekedStart, start);
        let end = match self.bytes.get(start) {
            Some(open @ (b'{' | b'[')) => {
                self.hit(start == self.at, Hit::ContainerStart, start);
                let end = if *open == b'{' {
                    self.object(start)
                } else {
                    self.array(start)
                };
                self.hit(*open == b'{' && end == self.at, Hit::ObjectEnd, start);
                self.hit(end == self.at, Hit::ContainerEnd, start);
                let empty = end == start + 2;
                self.hit(
                    *open == b'{' && empty && end == self.at,
                    Hit::EmptyObjectEnd,
                    start,
                );
                end
            }
            Some(b'"') => {
                let end = string_end(self.bytes, start);
                self.hit(end == self.at, Hit::ScalarEnd, start);
                end
            }
            _ => {
                let end = scalar_end(self.bytes, start);
                self.hit(end == self.at, Hit::ScalarEnd, start);
                end
            }
        };
        self.hit(end + 1 == self.at, Hit::AfterDelimiter, start);
        end
    }

    fn object(&mut self, start: usize) -> usize {
        let mut i = start + 1;
        let mut first = true;
        while self.bytes.get(i).is_some_and(|b| *b != b'}') && i <= self.at {
            let key_end = string_end(self.bytes, i);
            let key = serde_json::from_str::<String>(&self.text(i, key_end)).unwrap_or_default();
            self.hit(key_end == self.at, Hit::VariantKeyEnd, start);
            self.steps.push(Step::Key(key));
            self.hit(key_end == self.at, Hit::KeyEnd, i);
            i = self.value(key_end + 1);
            self.steps.pop();
            let more = self.bytes.get(i) == Some(&b',');
            self.hit(first && more && i == self.at, Hit::FirstMemberEnd, start);
            first = false;
            if more {
                i += 1;
            }
        }
        close(self.bytes, i, b'}')
    }

    fn array(&mut self, start: usize) -> usize {
        let mut i = start + 1;
        let mut index = 0;
        while self.bytes.get(i).is_some_and(|b| *b != b']') && i <= self.at {
            self.hit(index > 0 && i + 1 == self.at, Hit::ExtraMember, start);
            self.steps.push(Step::Index(index));
            i = self.value(i);
            self.steps.pop();
            index += 1;
            if self.bytes.get(i) == Some(&b',') {
                i += 1;
            }
        }
        close(self.bytes, i, b']')
    }

    fn text(&self, start: usize, end: usize) -> String {
        String::from_utf8_lossy(self.bytes.get(start..end).unwrap_or_default()).into_owned()
    }

    /// Records the current path for `kind` (its value starting at `start`) if `here` and none
    /// was recorded for it before.
    fn hit(&mut self, here: bool, kind: Hit, start: usize) {
        let slot = &mut self.hits[kind as usize];
        if here && slot.is_none() {
            *slot = Some((render(&self.steps), start));
        }
    }
}

/// Where a container whose members the scan left at `i` ends: after its closing `bracket`, found
/// by skipping whatever members lie past the column (no path there can be named).
fn close(bytes: &[u8], i: usize, bracket: u8) -> usize {
    if bytes.get(i) == Some(&bracket) {
        return i + 1;
    }
    let mut depth = 0usize;
    let mut j = i;
    while let Some(b) = bytes.get(j) {
        match b {
            b'"' => {
                j = string_end(bytes, j);
                continue;
            }
            b'{' | b'[' => depth += 1,
            b'}' | b']' if depth == 0 => return j + 1,
            b'}' | b']' => depth -= 1,
            _ => {}
        }
        j += 1;
    }
    bytes.len()
}

/// How many members the array starting at `start` has.
fn members(bytes: &[u8], start: usize) -> usize {
    let mut scan = Scan {
        bytes,
        at: usize::MAX,
        steps: Vec::new(),
        hits: Default::default(),
    };
    let mut count = 0;
    let mut i = start + 1;
    while bytes.get(i).is_some_and(|b| *b != b']') {
        i = scan.value(i);
        count += 1;
        if bytes.get(i) == Some(&b',') {
            i += 1;
        }
    }
    count
}

/// Where the string starting at `start` (its opening quote) ends (after its closing quote).
fn string_end(bytes: &[u8], start: usize) -> usize {
    let mut i = start + 1;
    while let Some(b) = bytes.get(i) {
        match b {
            b'\\' => i += 2,
            b'"' => return i + 1,
            _ => i += 1,
        }
    }
    bytes.len()
}

/// Where the number or literal starting at `start` ends.
fn scalar_end(bytes: &[u8], start: usize) -> usize {
    let mut i = start;
    while bytes
        .get(i)
        .is_some_and(|b| !matches!(b, b',' | b'}' | b']'))
    {
        i += 1;
    }
    i
}

/// A path as `serde_path_to_error` writes it: `.` when empty, keys joined by dots, `[i]` for
/// indexes.
fn render(steps: &[Step]) -> String {
    if steps.is_empty() {
        return ".".to_string();
    }
    let mut out = String::new();
    for step in steps {
        match step {
            Step::Key(key) => {
                if !out.is_empty() {
                    out.push('.');
                }
                out.push_str(key);
            }
            Step::Index(index) => {
                let _ = write!(out, "[{index}]");
            }
        }
    }
    out
}

#[cfg(test)]
mod tests;
