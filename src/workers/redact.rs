//! Secret values taken out of what a worker run leaves behind (logs, `result.json`, proposals,
//! output files): each value, its base64 form and its percent-encoded form become
//! `[secret NAME]`. Like every such filter it catches what is written as is or in these common
//! encodings, not a value the worker transforms on purpose; secrets are therefore at least
//! [`MIN_SECRET_LEN`] characters, so redaction never shreds ordinary text.

use base64::engine::general_purpose::STANDARD as B64;
use base64::Engine;
use serde_json::Value;

/// Shortest secret value accepted.
pub const MIN_SECRET_LEN: usize = 8;

/// The values to take out and what replaces each, longest first.
#[derive(Debug, Clone, Default)]
pub struct Redactor {
    needles: Vec<(Vec<u8>, String)>,
}

impl Redactor {
    pub fn new<'a>(secrets: impl IntoIterator<Item = (&'a str, &'a str)>) -> Self {
        let mut needles = Vec::new();
        for (name, value) in secrets {
            if value.len() < MIN_SECRET_LEN {
                continue;
            }
            let label = format!("[secret {name}]");
            let mut forms = vec![
                value.as_bytes().to_vec(),
                B64.encode(value.as_bytes()).into_bytes(),
            ];
            let encoded = percent_encode(value);
            if encoded != value {
                forms.push(encoded.into_bytes());
            }
            for form in forms {
                needles.push((form, label.clone()));
            }
        }
        needles.sort_by_key(|n| std::cmp::Reverse(n.0.len()));
        Redactor { needles }
    }

    /// `bytes` with every secret form replaced; the flag says whether anything was.
    pub fn bytes(&self, bytes: &[u8]) -> (Vec<u8>, bool) {
        let mut out = bytes.to_vec();
        let mut changed = false;
        for (needle, label) in &self.needles {
            if let Some(replaced) = replace_all(&out, needle, label.as_bytes()) {
                out = replaced;
                changed = true;
            }
        }
        (out, changed)
    }

    pub fn text(&self, text: &str) -> String {
        let (bytes, changed) = self.bytes(text.as_bytes());
        if !changed {
            return text.to_string();
        }
        String::from_utf8_lossy(&bytes).into_owned()
    }

    /// Every string (and key) in a JSON value, redacted.
    pub fn json(&self, value: &Value) -> Value {
        match value {
            Value::String(s) => Value::String(self.text(s)),
            Value::Array(items) => Value::Array(items.iter().map(|v| self.json(v)).collect()),
            Value::Object(map) => Value::Object(
                map.iter()
                    .map(|(k, v)| (self.text(k), self.json(v)))
                    .collect(),
            ),
            other => other.clone(),
        }
    }
}

fn replace_all(haystack: &[u8], needle: &[u8], with: &[u8]) -> Option<Vec<u8>> {
    if needle.is_empty() || haystack.len() < needle.len() {
        return None;
    }
    let mut out = Vec::with_capacity(haystack.len());
    let mut i = 0;
    let mut found = false;
    while i < haystack.len() {
        if haystack[i..].starts_with(needle) {
            out.extend_from_slice(with);
            i += needle.len();
            found = true;
        } else {
            out.push(haystack[i]);
            i += 1;
        }
    }
    found.then_some(out)
}

fn percent_encode(value: &str) -> String {
    let mut out = String::with_capacity(value.len());
    for b in value.bytes() {
        if b.is_ascii_alphanumeric() || b"-._~".contains(&b) {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn takes_out_values_and_their_common_encodings() {
        let r = Redactor::new([("TOKEN", "s3cr3t/value+1"), ("SHORT", "abc")]);
        let text = format!(
            "raw s3cr3t/value+1, b64 {}, url s3cr3t%2Fvalue%2B1, short abc",
            B64.encode("s3cr3t/value+1")
        );
        assert_eq!(
            r.text(&text),
            "raw [secret TOKEN], b64 [secret TOKEN], url [secret TOKEN], short abc"
        );
        assert_eq!(
            r.json(&json!({"k": ["x s3cr3t/value+1"], "s3cr3t/value+1": 1})),
            json!({"k": ["x [secret TOKEN]"], "[secret TOKEN]": 1})
        );
        let (bytes, changed) = r.bytes(b"\x00s3cr3t/value+1\xff");
        assert!(changed);
        assert_eq!(bytes, b"\x00[secret TOKEN]\xff");
        assert!(!r.bytes(b"nothing here").1);
    }

    #[test]
    fn a_longer_secret_is_replaced_before_one_inside_it() {
        let r = Redactor::new([("A", "password"), ("B", "password123")]);
        assert_eq!(r.text("password123 password"), "[secret B] [secret A]");
    }
}
