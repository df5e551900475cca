//! Tool schemas as clients read them. Generated from doc comments and Rust types, they would
//! carry the comments' hard line wraps and schemars' Rust-specific `format`s (`uint64`,
//! `uint16`, …) that JSON Schema does not define — the official TypeScript SDK warns about every
//! one on each `tools/list`. Here wrapped lines are joined (paragraphs stay apart) and such
//! formats become plain integers with `minimum: 0` where they are unsigned.

use serde_json::{Map, Value};

/// Joins a doc comment's wrapped lines; blank lines between paragraphs stay.
pub fn unwrap_lines(text: &str) -> String {
    text.split("\n\n")
        .map(|paragraph| {
            paragraph
                .lines()
                .map(str::trim)
                .filter(|l| !l.is_empty())
                .collect::<Vec<_>>()
                .join(" ")
        })
        .filter(|p| !p.is_empty())
        .collect::<Vec<_>>()
        .join("\n\n")
}

/// Tidies a schema in place, at every depth.
pub fn tidy(schema: &mut Map<String, Value>) {
    if let Some(Value::String(text)) = schema.get_mut("description") {
        *text = unwrap_lines(text);
    }
    let rust_format = schema
        .get("format")
        .and_then(Value::as_str)
        .filter(|f| is_rust_number_format(f))
        .map(str::to_string);
    if let Some(format) = rust_format {
        schema.remove("format");
        if format.starts_with('u') {
            let minimum = schema.entry("minimum").or_insert(Value::from(0));
            if minimum.as_f64().is_some_and(|m| m < 0.0) {
                *minimum = Value::from(0);
            }
        }
    }
    for (key, value) in schema.iter_mut() {
        // `properties`, `$defs` and `definitions` map names to schemas; a property might be
        // called `description` or `format`, so these maps are walked as maps, never as schemas.
        let named = matches!(key.as_str(), "properties" | "$defs" | "definitions");
        tidy_value(value, named);
    }
}

fn tidy_value(value: &mut Value, named: bool) {
    match value {
        Value::Object(map) if named => map.values_mut().for_each(|v| tidy_value(v, false)),
        Value::Object(map) => tidy(map),
        Value::Array(items) => items.iter_mut().for_each(|v| tidy_value(v, false)),
        _ => {}
    }
}

/// schemars' names for Rust's integer and float types.
fn is_rust_number_format(format: &str) -> bool {
    matches!(
        format,
        "uint"
            | "uint8"
            | "uint16"
            | "uint32"
            | "uint64"
            | "uint128"
            | "int"
            | "int8"
            | "int16"
            | "int32"
            | "int64"
            | "int128"
            | "float"
            | "double"
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn wrapped_lines_are_joined_and_paragraphs_kept() {
        assert_eq!(
            unwrap_lines("Runs a command\nin the sandbox.\n\nIt waits\n for the end."),
            "Runs a command in the sandbox.\n\nIt waits for the end."
        );
    }

    #[test]
    fn rust_formats_become_plain_integers_at_every_depth() {
        let mut schema = json!({
            "type": "object",
            "description": "A\nB",
            "properties": {
                "format": {"type": "string", "description": "a property named format"},
                "size": {"type": "integer", "format": "uint64", "minimum": 0},
                "port": {"type": ["integer", "null"], "format": "uint16", "maximum": 65535},
                "delta": {"type": "integer", "format": "int64"},
                "items": {"type": "array", "items": {"type": "integer", "format": "uint"}},
                "when": {"type": "string", "format": "date-time"}
            },
            "$defs": {"Inner": {"type": "integer", "format": "uint32", "description": "x\ny"}}
        });
        tidy(schema.as_object_mut().unwrap());
        assert_eq!(schema["description"], "A B");
        let p = &schema["properties"];
        assert_eq!(p["format"]["type"], "string");
        assert_eq!(p["size"], json!({"type": "integer", "minimum": 0}));
        assert_eq!(
            p["port"],
            json!({"type": ["integer", "null"], "minimum": 0, "maximum": 65535})
        );
        assert_eq!(p["delta"], json!({"type": "integer"}));
        assert_eq!(
            p["items"]["items"],
            json!({"type": "integer", "minimum": 0})
        );
        assert_eq!(p["when"]["format"], "date-time");
        assert_eq!(
            schema["$defs"]["Inner"],
            json!({"type": "integer", "minimum": 0, "description": "x y"})
        );
    }
}
