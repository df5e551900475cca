//! `worker.yml` read into a JSON value, with the YAML 1.2 core schema for plain scalars
//! (`true`/`false`, `null`/`~`, integers, floats; `no` and `on` stay strings). Anchors, aliases,
//! tags other than the standard ones, several documents, non-string keys and duplicate keys are
//! refused, so a small file cannot expand into a huge value and nothing is silently dropped.

use serde_json::{Map, Number, Value};
use yaml_rust2::parser::{Event, MarkedEventReceiver, Parser};
use yaml_rust2::scanner::{Marker, TScalarStyle};

/// Deepest nesting accepted.
const MAX_DEPTH: usize = 32;
/// Most nodes (scalars, lists, maps) accepted.
const MAX_NODES: usize = 20_000;

/// Parses one YAML document into JSON; the error names the line and what to fix.
pub fn parse(text: &str) -> Result<Value, String> {
    let mut builder = Builder::default();
    let mut parser = Parser::new_from_str(text);
    parser
        .load(&mut builder, true)
        .map_err(|e| format!("not valid YAML: {e}"))?;
    if let Some(error) = builder.error {
        return Err(error);
    }
    match builder.documents {
        0 => Err("the file is empty".into()),
        1 => Ok(builder.root.unwrap_or(Value::Null)),
        _ => Err("the file holds several YAML documents (---); keep one".into()),
    }
}

enum Frame {
    List(Vec<Value>),
    Map(Map<String, Value>, Option<String>),
}

#[derive(Default)]
struct Builder {
    stack: Vec<Frame>,
    root: Option<Value>,
    documents: usize,
    nodes: usize,
    error: Option<String>,
}

impl Builder {
    fn fail(&mut self, mark: Marker, message: impl Into<String>) {
        if self.error.is_none() {
            self.error = Some(format!("line {}: {}", mark.line(), message.into()));
        }
    }

    fn count(&mut self, mark: Marker) -> bool {
        self.nodes += 1;
        if self.nodes > MAX_NODES {
            self.fail(mark, format!("more than {MAX_NODES} values"));
            return false;
        }
        true
    }

    /// Places a finished value into its parent (or as the document).
    fn place(&mut self, value: Value, mark: Marker) {
        match self.stack.last_mut() {
            None => self.root = Some(value),
            Some(Frame::List(items)) => items.push(value),
            Some(Frame::Map(map, key)) => match key.take() {
                None => match value {
                    Value::String(k) if map.contains_key(&k) => {
                        let message = format!("the key {k:?} appears twice");
                        self.fail(mark, message);
                    }
                    Value::String(k) => *key = Some(k),
                    other => {
                        let message = format!("keys must be text, not {other}");
                        self.fail(mark, message);
                    }
                },
                Some(k) => {
                    map.insert(k, value);
                }
            },
        }
    }

    fn open(&mut self, frame: Frame, anchor: usize, tagged: bool, mark: Marker) {
        if anchor != 0 || tagged {
            self.fail(
                mark,
                "anchors (&), aliases (*) and tags (!) are not supported",
            );
        }
        if self.stack.len() >= MAX_DEPTH {
            self.fail(mark, format!("nested deeper than {MAX_DEPTH} levels"));
        }
        if self.count(mark) {
            self.stack.push(frame);
        }
    }

    fn close(&mut self, mark: Marker) {
        match self.stack.pop() {
            Some(Frame::List(items)) => self.place(Value::Array(items), mark),
            Some(Frame::Map(map, _)) => self.place(Value::Object(map), mark),
            None => {}
        }
    }
}

impl MarkedEventReceiver for Builder {
    fn on_event(&mut self, event: Event, mark: Marker) {
        if self.error.is_some() {
            return;
        }
        match event {
            Event::DocumentStart => self.documents += 1,
            Event::Alias(_) => self.fail(
                mark,
                "anchors (&), aliases (*) and tags (!) are not supported",
            ),
            Event::Scalar(text, style, anchor, tag) => {
                if anchor != 0 || tag.as_ref().is_some_and(|t| !is_core_tag(t)) {
                    self.fail(
                        mark,
                        "anchors (&), aliases (*) and tags (!) are not supported",
                    );
                    return;
                }
                if self.count(mark) {
                    let value = if style == TScalarStyle::Plain && tag.is_none() {
                        plain_scalar(&text)
                    } else {
                        Value::String(text)
                    };
                    self.place(value, mark);
                }
            }
            Event::SequenceStart(anchor, tag) => {
                self.open(Frame::List(Vec::new()), anchor, tag.is_some(), mark)
            }
            Event::MappingStart(anchor, tag) => {
                self.open(Frame::Map(Map::new(), None), anchor, tag.is_some(), mark)
            }
            Event::SequenceEnd | Event::MappingEnd => self.close(mark),
            _ => {}
        }
    }
}

/// `!!str` and friends (the only tags a hand-written file might carry harmlessly).
fn is_core_tag(tag: &yaml_rust2::parser::Tag) -> bool {
    tag.handle == "!!" && tag.suffix == "str"
}

/// A plain scalar under the YAML 1.2 core schema.
fn plain_scalar(text: &str) -> Value {
    match text {
        "" | "~" | "null" | "Null" | "NULL" => return Value::Null,
        "true" | "True" | "TRUE" => return Value::Bool(true),
        "false" | "False" | "FALSE" => return Value::Bool(false),
        _ => {}
    }
    if let Some(n) = integer(text) {
        return Value::Number(n.into());
    }
    if looks_like_float(text) {
        if let Some(n) = text.parse::<f64>().ok().and_then(Number::from_f64) {
            return Value::Number(n);
        }
    }
    Value::String(text.to_string())
}

fn integer(text: &str) -> Option<i64> {
    let (negative, digits) = match text.as_bytes().first()? {
        b'-' => (true, &text[1..]),
        b'+' => (false, &text[1..]),
        _ => (false, text),
    };
    let magnitude = if let Some(hex) = digits.strip_prefix("0x") {
        i64::from_str_radix(hex, 16).ok()?
    } else if let Some(oct) = digits.strip_prefix("0o") {
        i64::from_str_radix(oct, 8).ok()?
    } else if !digits.is_empty() && digits.bytes().all(|b| b.is_ascii_digit()) {
        digits.parse().ok()?
    } else {
        return None;
    };
    Some(if negative { -magnitude } else { magnitude })
}

/// `[-+]?(\.[0-9]+|[0-9]+(\.[0-9]*)?)([eE][-+]?[0-9]+)?` (infinities and NaN are not numbers
/// JSON can hold, so they stay text).
fn looks_like_float(text: &str) -> bool {
    let body = text.trim_start_matches(['-', '+']);
    let (mantissa, exponent) = match body.find(['e', 'E']) {
        Some(i) => (&body[..i], Some(&body[i + 1..])),
        None => (body, None),
    };
    let mantissa_ok = match mantissa.split_once('.') {
        Some((a, b)) => {
            (!a.is_empty() || !b.is_empty())
                && a.bytes().all(|c| c.is_ascii_digit())
                && b.bytes().all(|c| c.is_ascii_digit())
        }
        None => !mantissa.is_empty() && mantissa.bytes().all(|c| c.is_ascii_digit()),
    };
    let exponent_ok = exponent.is_none_or(|e| {
        let e = e.trim_start_matches(['-', '+']);
        !e.is_empty() && e.bytes().all(|c| c.is_ascii_digit())
    });
    mantissa_ok && exponent_ok
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn reads_maps_lists_and_core_scalars() {
        let value = parse(
            "name: report\ncount: 3\nratio: 0.5\non: no\nflag: true\nnothing: ~\n\
             quoted: \"true\"\nlist:\n  - a\n  - 0x1f\n",
        )
        .unwrap();
        assert_eq!(
            value,
            json!({"name": "report", "count": 3, "ratio": 0.5, "on": "no", "flag": true,
                   "nothing": null, "quoted": "true", "list": ["a", 31]})
        );
    }

    #[test]
    fn refuses_aliases_duplicates_and_several_documents() {
        let bomb = "a: &a [x, x]\nb: &b [*a, *a]\nc: [*b, *b]\n";
        assert!(parse(bomb).unwrap_err().contains("aliases"));
        assert!(parse("a: 1\na: 2\n").unwrap_err().contains("twice"));
        assert!(parse("a: 1\n---\nb: 2\n").unwrap_err().contains("several"));
        assert!(parse("? [a]\n: 1\n")
            .unwrap_err()
            .contains("keys must be text"));
        assert!(parse("a: !!binary aGk=\n").unwrap_err().contains("tags"));
        assert!(parse("a: [1, 2").unwrap_err().contains("not valid YAML"));
        assert_eq!(parse("").unwrap_err(), "the file is empty");
    }

    #[test]
    fn refuses_deep_nesting() {
        let deep = format!("{}1{}", "[".repeat(40), "]".repeat(40));
        assert!(parse(&deep).unwrap_err().contains("deeper"));
    }
}
