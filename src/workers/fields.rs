//! Reading a manifest's maps field by field, collecting every problem (with the field's path)
//! instead of stopping at the first.

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

/// One thing wrong with a worker folder or a run request: the field and what to fix.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Problem {
    pub field: String,
    pub message: String,
}

impl Problem {
    pub fn new(field: impl Into<String>, message: impl Into<String>) -> Self {
        Self {
            field: field.into(),
            message: message.into(),
        }
    }
}

/// Problems as one message, one per line, `field: message`.
pub fn describe(problems: &[Problem]) -> String {
    problems
        .iter()
        .map(|p| format!("{}: {}", p.field, p.message))
        .collect::<Vec<_>>()
        .join("\n")
}

/// A map of the manifest under `path` (e.g. `limits`).
pub struct Fields<'a> {
    map: &'a Map<String, Value>,
    path: String,
}

impl<'a> Fields<'a> {
    /// The map at `value`, or a problem saying it must be one.
    pub fn new(value: &'a Value, path: &str, problems: &mut Vec<Problem>) -> Option<Self> {
        match value.as_object() {
            Some(map) => Some(Fields {
                map,
                path: path.to_string(),
            }),
            None => {
                problems.push(Problem::new(path, "must be a map of fields"));
                None
            }
        }
    }

    pub fn get(&self, key: &str) -> Option<&'a Value> {
        self.map.get(key).filter(|v| !v.is_null())
    }

    pub fn field(&self, key: &str) -> String {
        if self.path.is_empty() {
            key.to_string()
        } else {
            format!("{}.{key}", self.path)
        }
    }

    /// Refuses keys outside `known`, suggesting the closest known one.
    pub fn only(&self, known: &[&str], problems: &mut Vec<Problem>) {
        for key in self.map.keys() {
            if !known.contains(&key.as_str()) {
                let hint = crate::suggest::closest(key, known)
                    .map(|k| format!("; did you mean {k:?}?"))
                    .unwrap_or_else(|| format!("; known fields: {}", known.join(", ")));
                problems.push(Problem::new(
                    self.field(key),
                    format!("unknown field{hint}"),
                ));
            }
        }
    }

    pub fn string(&self, key: &str, max: usize, problems: &mut Vec<Problem>) -> Option<String> {
        let value = self.get(key)?;
        let text = match value {
            Value::String(s) => s.clone(),
            Value::Number(n) => n.to_string(),
            _ => {
                problems.push(Problem::new(self.field(key), "must be text"));
                return None;
            }
        };
        if text.chars().count() > max {
            problems.push(Problem::new(
                self.field(key),
                format!("is longer than {max} characters"),
            ));
            return None;
        }
        Some(text)
    }

    pub fn boolean(&self, key: &str, problems: &mut Vec<Problem>) -> Option<bool> {
        let value = self.get(key)?;
        match value.as_bool() {
            Some(b) => Some(b),
            None => {
                problems.push(Problem::new(self.field(key), "must be true or false"));
                None
            }
        }
    }

    pub fn number(&self, key: &str, problems: &mut Vec<Problem>) -> Option<f64> {
        let value = self.get(key)?;
        match value.as_f64() {
            Some(n) => Some(n),
            None => {
                problems.push(Problem::new(self.field(key), "must be a number"));
                None
            }
        }
    }

    pub fn uint(&self, key: &str, min: u64, max: u64, problems: &mut Vec<Problem>) -> Option<u64> {
        let value = self.get(key)?;
        match value.as_u64() {
            Some(n) if (min..=max).contains(&n) => Some(n),
            _ => {
                problems.push(Problem::new(
                    self.field(key),
                    format!("must be a whole number from {min} to {max}"),
                ));
                None
            }
        }
    }

    /// Seconds, as a number or text such as `90s`, `10m`, `2h`.
    pub fn seconds(
        &self,
        key: &str,
        min: u64,
        max: u64,
        problems: &mut Vec<Problem>,
    ) -> Option<u64> {
        let units = [("s", 1), ("m", 60), ("h", 3600)];
        self.quantity(key, (min, max), &units, "seconds", "90s, 10m, 1h", problems)
    }

    /// Bytes, as a number or text such as `500KB`, `5MiB`.
    pub fn size(&self, key: &str, min: u64, max: u64, problems: &mut Vec<Problem>) -> Option<u64> {
        let units = [
            ("B", 1),
            ("KB", 1000),
            ("MB", 1_000_000),
            ("KiB", 1024),
            ("MiB", 1024 * 1024),
        ];
        self.quantity(key, (min, max), &units, "bytes", "500KB, 5MiB", problems)
    }

    /// A whole number, or text of one with a unit from `units`, within `range`.
    fn quantity(
        &self,
        key: &str,
        range: (u64, u64),
        units: &[(&str, u64)],
        what: &str,
        examples: &str,
        problems: &mut Vec<Problem>,
    ) -> Option<u64> {
        let value = self.get(key)?;
        let parsed = match value {
            Value::Number(n) => n.as_u64(),
            Value::String(s) => with_unit(s, units),
            _ => None,
        };
        let (min, max) = range;
        match parsed {
            Some(n) if (min..=max).contains(&n) => Some(n),
            _ => {
                problems.push(Problem::new(
                    self.field(key),
                    format!("must be {min} to {max} {what} (a number, or text like {examples})"),
                ));
                None
            }
        }
    }

    /// A list of text items (each at most `max_len` characters).
    pub fn strings(
        &self,
        key: &str,
        max_items: usize,
        max_len: usize,
        problems: &mut Vec<Problem>,
    ) -> Vec<String> {
        let Some(value) = self.get(key) else {
            return Vec::new();
        };
        let Some(items) = value.as_array() else {
            problems.push(Problem::new(self.field(key), "must be a list"));
            return Vec::new();
        };
        if items.len() > max_items {
            problems.push(Problem::new(
                self.field(key),
                format!("has {} items; at most {max_items}", items.len()),
            ));
        }
        let mut out = Vec::new();
        for (i, item) in items.iter().enumerate() {
            match item {
                Value::String(s) if s.chars().count() <= max_len => out.push(s.clone()),
                Value::Number(n) => out.push(n.to_string()),
                _ => problems.push(Problem::new(
                    format!("{}[{i}]", self.field(key)),
                    format!("must be text of at most {max_len} characters"),
                )),
            }
        }
        out
    }

    /// The map under `key`, if there is one.
    pub fn map(&self, key: &str, problems: &mut Vec<Problem>) -> Option<Fields<'a>> {
        let value = self.get(key)?;
        Fields::new(value, &self.field(key), problems)
    }
}

/// `type/subtype`, both plain tokens.
pub fn is_media_type(text: &str) -> bool {
    let token = |s: &str| {
        !s.is_empty()
            && s.len() <= 100
            && s.bytes()
                .all(|b| b.is_ascii_alphanumeric() || b"!#$&-^_.+".contains(&b))
    };
    text.split_once('/')
        .is_some_and(|(t, s)| token(t) && token(s))
}

/// `12`, `12s`, `5 MiB`: a number with an optional unit from `units`.
fn with_unit(text: &str, units: &[(&str, u64)]) -> Option<u64> {
    let text = text.trim();
    let split = text
        .find(|c: char| !c.is_ascii_digit())
        .unwrap_or(text.len());
    let (digits, unit) = text.split_at(split);
    let n: u64 = digits.parse().ok()?;
    let unit = unit.trim();
    if unit.is_empty() {
        return Some(n);
    }
    let factor = units.iter().find(|(u, _)| u.eq_ignore_ascii_case(unit))?.1;
    n.checked_mul(factor)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn units() {
        assert_eq!(with_unit("10m", &[("m", 60)]), Some(600));
        assert_eq!(with_unit("5 MiB", &[("MiB", 1 << 20)]), Some(5 << 20));
        assert_eq!(with_unit("5 parsecs", &[("m", 60)]), None);
    }
}
