//! A worker's declared inputs: how `worker.yml` declares them (checked at deploy) and the values
//! a run is given (checked before the run is accepted, defaults filled in).

use super::fields::{Fields, Problem};
use crate::names::named_enum;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

/// Most inputs a worker declares.
pub const MAX_INPUTS: usize = 50;
/// Longest `string` input unless the manifest says otherwise.
const STRING_DEFAULT_MAX: u64 = 1_000;
/// Longest `text` input unless the manifest says otherwise (and the longest any scalar may be).
const TEXT_MAX: u64 = 100_000;
/// Largest file input, and the default.
pub const FILE_MAX_BYTES: u64 = 8 * 1024 * 1024;
/// Most options of a `select`.
const MAX_OPTIONS: usize = 100;

named_enum! {
/// The kind of an input.
pub enum InputKind {
    /// One line of text.
    String,
    /// Long text.
    Text,
    Number,
    Boolean,
    /// One of `options`.
    Select,
    /// An http(s) URL.
    Url,
    /// A file, written to `inputs/<name>` in the sandbox.
    File,
}
}

/// One declared input.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct InputSpec {
    pub name: String,
    #[serde(rename = "type")]
    pub kind: InputKind,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub label: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    #[serde(default)]
    pub required: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub default: Option<Value>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub options: Vec<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub min: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_length: Option<u64>,
    /// File inputs: accepted extensions (`.csv`) and media types (`text/csv`, `image/*`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub accept: Vec<String>,
    /// File inputs: largest size in bytes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_size: Option<u64>,
}

/// Reads `inputs:` of a manifest.
pub(super) fn read_specs(value: Option<&Value>, problems: &mut Vec<Problem>) -> Vec<InputSpec> {
    let Some(value) = value else {
        return Vec::new();
    };
    let Some(items) = value.as_array() else {
        problems.push(Problem::new("inputs", "must be a list of inputs"));
        return Vec::new();
    };
    if items.len() > MAX_INPUTS {
        problems.push(Problem::new(
            "inputs",
            format!("{} inputs; at most {MAX_INPUTS}", items.len()),
        ));
    }
    let mut specs: Vec<InputSpec> = Vec::new();
    for (i, item) in items.iter().enumerate() {
        let path = format!("inputs[{i}]");
        let Some(f) = Fields::new(item, &path, problems) else {
            continue;
        };
        if let Some(spec) = read_spec(f, &path, problems) {
            if specs.iter().any(|s| s.name == spec.name) {
                problems.push(Problem::new(
                    format!("{path}.name"),
                    format!("{:?} is declared twice", spec.name),
                ));
            }
            specs.push(spec);
        }
    }
    specs
}

fn read_spec(f: Fields<'_>, path: &str, problems: &mut Vec<Problem>) -> Option<InputSpec> {
    f.only(
        &[
            "name",
            "type",
            "label",
            "description",
            "required",
            "default",
            "options",
            "min",
            "max",
            "max_length",
            "accept",
            "max_size",
        ],
        problems,
    );
    let name = f.string("name", 64, problems);
    if let Some(n) = &name {
        if !is_input_name(n) {
            problems.push(Problem::new(
                format!("{path}.name"),
                format!("{n:?}: use lower-case letters, digits and '_', starting with a letter"),
            ));
        }
    } else if f.get("name").is_none() {
        problems.push(Problem::new(format!("{path}.name"), "is required"));
    }
    let kind = match f.string("type", 20, problems) {
        Some(t) => match t.parse::<InputKind>() {
            Ok(k) => Some(k),
            Err(_) => {
                problems.push(Problem::new(
                    format!("{path}.type"),
                    format!("{t:?} is not a type; use string, text, number, boolean, select, url or file"),
                ));
                None
            }
        },
        None => {
            if f.get("type").is_none() {
                problems.push(Problem::new(format!("{path}.type"), "is required"));
            }
            None
        }
    };
    let mut spec = InputSpec {
        name: name?,
        kind: kind?,
        label: f.string("label", 100, problems),
        description: f.string("description", 1000, problems),
        required: f.boolean("required", problems).unwrap_or(false),
        default: None,
        options: f.strings("options", MAX_OPTIONS, 200, problems),
        min: f.number("min", problems),
        max: f.number("max", problems),
        max_length: f.uint("max_length", 1, TEXT_MAX, problems),
        accept: f.strings("accept", 20, 100, problems),
        max_size: f.size("max_size", 1, FILE_MAX_BYTES, problems),
    };
    check_kind_fields(&spec, &f, path, problems);
    if let Some(default) = f.get("default").filter(|v| !v.is_null()) {
        if spec.kind == InputKind::File {
            problems.push(Problem::new(
                format!("{path}.default"),
                "file inputs have no default",
            ));
        } else {
            match check_value(&spec, default) {
                Ok(v) => spec.default = Some(v),
                Err(why) => problems.push(Problem::new(format!("{path}.default"), why)),
            }
        }
    }
    Some(spec)
}

/// Fields that only some kinds take.
fn check_kind_fields(spec: &InputSpec, f: &Fields<'_>, path: &str, problems: &mut Vec<Problem>) {
    let only = |field: &str, kinds: &[InputKind], problems: &mut Vec<Problem>| {
        if f.get(field).is_some() && !kinds.contains(&spec.kind) {
            let names: Vec<&str> = kinds.iter().map(|k| k.as_str()).collect();
            problems.push(Problem::new(
                format!("{path}.{field}"),
                format!("applies only to {} inputs", names.join(" and ")),
            ));
        }
    };
    only("options", &[InputKind::Select], problems);
    only("min", &[InputKind::Number], problems);
    only("max", &[InputKind::Number], problems);
    only(
        "max_length",
        &[InputKind::String, InputKind::Text],
        problems,
    );
    only("accept", &[InputKind::File], problems);
    only("max_size", &[InputKind::File], problems);
    if spec.kind == InputKind::Select && spec.options.is_empty() {
        problems.push(Problem::new(
            format!("{path}.options"),
            "a select needs a list of options",
        ));
    }
    if let (Some(min), Some(max)) = (spec.min, spec.max) {
        if min > max {
            problems.push(Problem::new(format!("{path}.min"), "is above max"));
        }
    }
    for accept in &spec.accept {
        let extension = accept.starts_with('.') && accept.len() > 1;
        let media = super::fields::is_media_type(accept)
            || accept.strip_suffix("/*").is_some_and(|t| !t.contains('/'));
        if !extension && !media {
            problems.push(Problem::new(
                format!("{path}.accept"),
                format!("{accept:?}: use an extension (.csv) or a media type (text/csv, image/*)"),
            ));
        }
    }
}

fn is_input_name(name: &str) -> bool {
    name.bytes().next().is_some_and(|b| b.is_ascii_lowercase())
        && name
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_')
}

/// A scalar value checked against its input; the error says what is wrong in plain words.
pub fn check_value(spec: &InputSpec, value: &Value) -> Result<Value, String> {
    let text_limit = |default: u64| spec.max_length.unwrap_or(default).min(TEXT_MAX);
    match spec.kind {
        InputKind::String | InputKind::Text => {
            let s = value.as_str().ok_or("must be text")?;
            let limit = text_limit(if spec.kind == InputKind::String {
                STRING_DEFAULT_MAX
            } else {
                TEXT_MAX
            });
            if s.chars().count() as u64 > limit {
                return Err(format!("is longer than {limit} characters"));
            }
            Ok(value.clone())
        }
        InputKind::Number => {
            let n = value.as_f64().ok_or("must be a number")?;
            if spec.min.is_some_and(|min| n < min) || spec.max.is_some_and(|max| n > max) {
                return Err(format!(
                    "must be between {} and {}",
                    spec.min.map_or("-∞".into(), |m| m.to_string()),
                    spec.max.map_or("∞".into(), |m| m.to_string())
                ));
            }
            Ok(value.clone())
        }
        InputKind::Boolean => value
            .as_bool()
            .map(Value::Bool)
            .ok_or_else(|| "must be true or false".into()),
        InputKind::Select => {
            let s = value.as_str().ok_or("must be text")?;
            if spec.options.iter().any(|o| o == s) {
                Ok(value.clone())
            } else {
                Err(format!("must be one of {}", spec.options.join(", ")))
            }
        }
        InputKind::Url => {
            let s = value.as_str().ok_or("must be a URL")?;
            let ok = s.len() <= 2048
                && worker::Url::parse(s)
                    .is_ok_and(|u| matches!(u.scheme(), "http" | "https") && u.host().is_some());
            if ok {
                Ok(value.clone())
            } else {
                Err("must be an http(s) URL of at most 2048 characters".into())
            }
        }
        InputKind::File => Err("is a file input; pass it in `files`".into()),
    }
}

/// A run's scalar inputs checked against the worker's declarations: unknown names refused,
/// defaults filled in, required ones present. File inputs are checked by `check_file`.
pub fn check_values(
    specs: &[InputSpec],
    given: &Map<String, Value>,
    files: &[String],
) -> Result<Map<String, Value>, Vec<Problem>> {
    let mut problems = Vec::new();
    let mut out = Map::new();
    for name in given.keys() {
        match specs.iter().find(|s| &s.name == name) {
            None => problems.push(Problem::new(
                format!("inputs.{name}"),
                format!(
                    "the worker declares no such input (it takes: {})",
                    names(specs)
                ),
            )),
            Some(s) if s.kind == InputKind::File => problems.push(Problem::new(
                format!("inputs.{name}"),
                "is a file input; pass it in `files`",
            )),
            Some(_) => {}
        }
    }
    for name in files {
        if !specs
            .iter()
            .any(|s| &s.name == name && s.kind == InputKind::File)
        {
            problems.push(Problem::new(
                format!("files.{name}"),
                "the worker declares no such file input",
            ));
        }
    }
    for spec in specs {
        if spec.kind == InputKind::File {
            if spec.required && !files.contains(&spec.name) {
                problems.push(Problem::new(format!("files.{}", spec.name), "is required"));
            }
            continue;
        }
        match given.get(&spec.name).filter(|v| !v.is_null()) {
            Some(value) => match check_value(spec, value) {
                Ok(v) => {
                    out.insert(spec.name.clone(), v);
                }
                Err(why) => problems.push(Problem::new(format!("inputs.{}", spec.name), why)),
            },
            None => match &spec.default {
                Some(d) => {
                    out.insert(spec.name.clone(), d.clone());
                }
                None if spec.required => {
                    problems.push(Problem::new(format!("inputs.{}", spec.name), "is required"))
                }
                None => {}
            },
        }
    }
    if problems.is_empty() {
        Ok(out)
    } else {
        Err(problems)
    }
}

/// A file given for a file input: its name's extension or media type must be accepted and it
/// must fit the size.
pub fn check_file(
    spec: &InputSpec,
    filename: &str,
    media_type: &str,
    size: u64,
) -> Result<(), String> {
    let limit = spec.max_size.unwrap_or(FILE_MAX_BYTES);
    if size > limit {
        return Err(format!("is {size} bytes; at most {limit}"));
    }
    if spec.accept.is_empty() {
        return Ok(());
    }
    let lower = filename.to_ascii_lowercase();
    let accepted = spec.accept.iter().any(|a| {
        let a = a.to_ascii_lowercase();
        if a.starts_with('.') {
            lower.ends_with(&a)
        } else if let Some(family) = a.strip_suffix("/*") {
            media_type.split('/').next() == Some(family)
        } else {
            media_type.eq_ignore_ascii_case(&a)
        }
    });
    if accepted {
        Ok(())
    } else {
        Err(format!(
            "{filename:?} ({media_type}) is not accepted; the worker takes {}",
            spec.accept.join(", ")
        ))
    }
}

fn names(specs: &[InputSpec]) -> String {
    if specs.is_empty() {
        return "no inputs".into();
    }
    specs
        .iter()
        .map(|s| s.name.as_str())
        .collect::<Vec<_>>()
        .join(", ")
}
