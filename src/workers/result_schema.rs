//! The JSON Schema subset a worker's `outputs.result.schema` may use, and checking `result.json`
//! against it: `type` (object, array, string, number, integer, boolean, null, or a list of
//! them), `properties`, `required`, `additionalProperties: false`, `items`, `enum`,
//! `minimum`/`maximum`, `minLength`/`maxLength`, `minItems`/`maxItems`, and `description` /
//! `title` (ignored). Anything else is refused at deploy, so a schema never promises a check
//! that is not made.

use serde_json::{Map, Value};

const KEYWORDS: &[&str] = &[
    "type",
    "properties",
    "required",
    "additionalProperties",
    "items",
    "enum",
    "minimum",
    "maximum",
    "minLength",
    "maxLength",
    "minItems",
    "maxItems",
    "description",
    "title",
    "$schema",
];
const TYPES: &[&str] = &[
    "object", "array", "string", "number", "integer", "boolean", "null",
];
/// Most problems reported for one result.
const MAX_REPORTED: usize = 20;

/// Checks that a schema uses only the supported subset.
pub fn check_schema(schema: &Value) -> Result<(), String> {
    check_node(schema, "schema", 0)
}

fn check_node(schema: &Value, at: &str, depth: usize) -> Result<(), String> {
    if depth > 16 {
        return Err(format!("{at}: nested too deeply"));
    }
    let map = schema
        .as_object()
        .ok_or_else(|| format!("{at}: a schema must be a map"))?;
    for key in map.keys() {
        if !KEYWORDS.contains(&key.as_str()) {
            return Err(format!(
                "{at}: {key:?} is not supported (supported: {})",
                KEYWORDS.join(", ")
            ));
        }
    }
    if let Some(t) = map.get("type") {
        let names: Vec<&Value> = match t {
            Value::Array(items) => items.iter().collect(),
            other => vec![other],
        };
        for name in names {
            if !name.as_str().is_some_and(|n| TYPES.contains(&n)) {
                return Err(format!("{at}.type: {name} is not a JSON type"));
            }
        }
    }
    if let Some(props) = map.get("properties") {
        let props = props
            .as_object()
            .ok_or_else(|| format!("{at}.properties must be a map"))?;
        for (name, sub) in props {
            check_node(sub, &format!("{at}.properties.{name}"), depth + 1)?;
        }
    }
    if let Some(items) = map.get("items") {
        check_node(items, &format!("{at}.items"), depth + 1)?;
    }
    if let Some(required) = map.get("required") {
        if !required
            .as_array()
            .is_some_and(|r| r.iter().all(Value::is_string))
        {
            return Err(format!("{at}.required must be a list of names"));
        }
    }
    if map
        .get("additionalProperties")
        .is_some_and(|a| !a.is_boolean())
    {
        return Err(format!("{at}.additionalProperties must be true or false"));
    }
    Ok(())
}

/// Every way `value` does not match `schema` (at most 20), each with its JSON path.
pub fn validate(schema: &Value, value: &Value) -> Vec<String> {
    let mut out = Vec::new();
    node(schema, value, "$", &mut out);
    out.truncate(MAX_REPORTED);
    out
}

fn node(schema: &Value, value: &Value, at: &str, out: &mut Vec<String>) {
    let Some(s) = schema.as_object() else {
        return;
    };
    if let Some(t) = s.get("type") {
        let ok = match t {
            Value::Array(items) => items.iter().any(|n| is_type(n, value)),
            one => is_type(one, value),
        };
        if !ok {
            out.push(format!("{at}: expected {t}, found {}", kind(value)));
            return;
        }
    }
    if let Some(choices) = s.get("enum").and_then(Value::as_array) {
        if !choices.contains(value) {
            out.push(format!(
                "{at}: must be one of {}",
                Value::Array(choices.clone())
            ));
        }
    }
    bounds(s, value, at, out);
    match value {
        Value::Object(map) => object(s, map, at, out),
        Value::Array(items) => {
            if let Some(item_schema) = s.get("items") {
                for (i, item) in items.iter().enumerate() {
                    node(item_schema, item, &format!("{at}[{i}]"), out);
                }
            }
        }
        _ => {}
    }
}

fn object(s: &Map<String, Value>, map: &Map<String, Value>, at: &str, out: &mut Vec<String>) {
    let props = s.get("properties").and_then(Value::as_object);
    for name in s
        .get("required")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(Value::as_str)
    {
        if !map.contains_key(name) {
            out.push(format!("{at}: missing required property {name:?}"));
        }
    }
    for (name, v) in map {
        match props.and_then(|p| p.get(name)) {
            Some(sub) => node(sub, v, &format!("{at}.{name}"), out),
            None if s.get("additionalProperties") == Some(&Value::Bool(false)) => {
                out.push(format!("{at}: property {name:?} is not allowed"))
            }
            None => {}
        }
    }
}

fn bounds(s: &Map<String, Value>, value: &Value, at: &str, out: &mut Vec<String>) {
    let limit = |key: &str| s.get(key).and_then(Value::as_f64);
    let (size, what) = match value {
        Value::String(text) => (Some(text.chars().count() as f64), "characters"),
        Value::Array(items) => (Some(items.len() as f64), "items"),
        _ => (None, ""),
    };
    if let Some(n) = value.as_f64() {
        if limit("minimum").is_some_and(|m| n < m) || limit("maximum").is_some_and(|m| n > m) {
            out.push(format!("{at}: {n} is out of range"));
        }
    }
    let (min_key, max_key) = match value {
        Value::String(_) => ("minLength", "maxLength"),
        _ => ("minItems", "maxItems"),
    };
    if let Some(size) = size {
        if limit(min_key).is_some_and(|m| size < m) || limit(max_key).is_some_and(|m| size > m) {
            out.push(format!("{at}: {size} {what} is out of range"));
        }
    }
}

fn is_type(name: &Value, value: &Value) -> bool {
    match name.as_str().unwrap_or_default() {
        "object" => value.is_object(),
        "array" => value.is_array(),
        "string" => value.is_string(),
        "number" => value.is_number(),
        "integer" => value.is_i64() || value.is_u64(),
        "boolean" => value.is_boolean(),
        "null" => value.is_null(),
        _ => false,
    }
}

fn kind(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "boolean",
        Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn checks_the_supported_subset() {
        let schema = json!({"type": "object", "required": ["count"],
            "additionalProperties": false,
            "properties": {"count": {"type": "integer", "minimum": 0},
                           "tags": {"type": "array", "items": {"type": "string"}, "maxItems": 2},
                           "level": {"enum": ["low", "high"]}}});
        assert!(check_schema(&schema).is_ok());
        assert!(validate(&schema, &json!({"count": 3, "tags": ["a"]})).is_empty());
        let problems = validate(
            &schema,
            &json!({"count": -1, "tags": ["a", "b", 3], "x": 1, "level": "mid"}),
        );
        assert_eq!(problems.len(), 5, "{problems:?}");
        assert!(validate(&schema, &json!([]))
            .join("")
            .contains("expected \"object\""));
        assert!(validate(&schema, &json!({}))
            .join("")
            .contains("missing required"));
        assert!(check_schema(&json!({"type": "object", "pattern": "x"})).is_err());
        assert!(check_schema(&json!({"type": "thing"})).is_err());
    }
}
