//! Budgets at the proxy: a model call passes only while its run is within budget, and every
//! answer is read on its way back for the provider's own token count, which is added to the
//! run in the ledger when the answer ends.

use super::meter::Meter;
use crate::error::{Error, ErrorKind, Result};
use crate::ledger::api::{Ledger, RecordUsage};
use crate::runs::{RunRecord, Tokens};
use crate::time::now_ms;
use futures::StreamExt;
use std::collections::BTreeMap;
use worker::{console_error, Env, Method, Response};

/// Refuses a model call of a run that has reached its budget (403, which agents do not retry).
pub fn within_budget(run: &RunRecord) -> Result<()> {
    match run.over_budget(now_ms()) {
        Some(over) => Err(Error::new(
            ErrorKind::Forbidden,
            format!("budget_exceeded: {}", over.message()),
        )),
        None => Ok(()),
    }
}

/// The upstream's answer, passed through unchanged while its usage is counted; the count goes
/// to the ledger once the answer has ended. Only successful calls that can use tokens are
/// read.
pub fn metered(
    env: &Env,
    method: &Method,
    run_id: &str,
    mut response: Response,
) -> Result<Response> {
    let status = response.status_code();
    if *method != Method::Post || !(200..300).contains(&status) {
        return Ok(response);
    }
    let headers = response.headers().clone();
    // The body is read (and so decoded) here; the runtime encodes it again as it leaves.
    headers.delete("content-length")?;
    let content_type = headers
        .get("content-type")
        .ok()
        .flatten()
        .unwrap_or_default();
    let upstream = response.stream()?;
    let tally = Tally {
        meter: Some(Meter::new(&content_type)),
        ledger: Some(Ledger::get(env)?),
        run_id: run_id.to_string(),
    };
    let body = futures::stream::unfold((upstream, tally), |(mut upstream, mut tally)| async move {
        match upstream.next().await {
            Some(Ok(chunk)) => {
                if let Some(meter) = tally.meter.as_mut() {
                    meter.feed(&chunk);
                }
                Some((Ok(chunk), (upstream, tally)))
            }
            Some(Err(e)) => Some((Err(e), (upstream, tally))),
            None => {
                tally.settle().await;
                None
            }
        }
    });
    Ok(Response::from_stream(body)?
        .with_status(status)
        .with_headers(headers))
}

/// Largest chat completion request the proxy reads to ask for usage.
pub const MAX_CHAT_REQUEST: usize = 32 * 1024 * 1024;

/// A chat completion request that streams, made to report its usage at the end
/// (`stream_options.include_usage`), so a caller cannot leave it out and go uncounted. Other
/// bodies pass as they are; a body that is not JSON is refused. Only the top level (and
/// `stream_options`) is taken apart: the members' values pass as the text they came as, so a
/// request of many small values takes no more memory than its text (as a tree, 32 MiB of
/// `{"a":0},` would take gigabytes). Keys are read unescaped, and a key given twice counts
/// once, the last time, as it did for the tree: `"str\u0065am"` is `stream`.
pub fn with_usage(body: &[u8]) -> Result<String> {
    let not_json =
        |e: String| Error::invalid(format!("the chat completion request is not JSON: {e}"));
    let text = std::str::from_utf8(body).map_err(|e| not_json(e.to_string()))?;
    serde_json::from_str::<serde::de::IgnoredAny>(text).map_err(|e| not_json(e.to_string()))?;
    let options_text: String;
    let Some(mut request) = members(text) else {
        return Ok(text.trim_matches(JSON_SPACE).to_string());
    };
    if request.get("stream").copied() == Some("true") {
        let mut options = request
            .get("stream_options")
            .and_then(|o| members(o))
            .unwrap_or_default();
        options.insert("include_usage".into(), "true");
        options_text = object(&options);
        request.insert("stream_options".into(), &options_text);
    }
    Ok(object(&request))
}

const JSON_SPACE: &[char] = &[' ', '\t', '\n', '\r'];

/// The members of the object `text` (valid JSON) is, keys unescaped, each value as its text;
/// `None` when it is not an object.
fn members(text: &str) -> Option<BTreeMap<String, &str>> {
    let inner = text
        .trim_matches(JSON_SPACE)
        .strip_prefix('{')?
        .strip_suffix('}')?;
    let mut found = BTreeMap::new();
    let bytes = inner.as_bytes();
    let (mut depth, mut start, mut colon) = (0usize, 0usize, None);
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            b'"' => {
                i += 1;
                while i < bytes.len() && bytes[i] != b'"' {
                    i += if bytes[i] == b'\\' { 2 } else { 1 };
                }
            }
            b'{' | b'[' => depth += 1,
            b'}' | b']' => depth = depth.saturating_sub(1),
            b':' if depth == 0 && colon.is_none() => colon = Some(i - start),
            b',' if depth == 0 => {
                member(&mut found, &inner[start..i], colon?)?;
                (start, colon) = (i + 1, None);
            }
            _ => {}
        }
        i += 1;
    }
    if let Some(colon) = colon {
        member(&mut found, &inner[start..], colon)?;
    }
    Some(found)
}

/// Adds the member `span` is (its key before `colon`, unescaped), replacing one of that key.
fn member<'a>(found: &mut BTreeMap<String, &'a str>, span: &'a str, colon: usize) -> Option<()> {
    let key = serde_json::from_str::<String>(&span[..colon]).ok()?;
    found.insert(key, span[colon + 1..].trim_matches(JSON_SPACE));
    Some(())
}

/// An object of these members, in the order of their keys.
fn object(members: &BTreeMap<String, &str>) -> String {
    let size: usize = members.iter().map(|(k, v)| k.len() + v.len() + 8).sum();
    let mut text = String::with_capacity(size + 2);
    text.push('{');
    for (i, (key, value)) in members.iter().enumerate() {
        if i > 0 {
            text.push(',');
        }
        text.push_str(&serde_json::Value::from(key.as_str()).to_string());
        text.push(':');
        text.push_str(value);
    }
    text.push('}');
    text
}

/// What one answer used so far, recorded once: when the answer ends, or — when the caller
/// drops it before the end — with what was seen by then (Anthropic reports the input at the
/// start), so cutting an answer short does not hide it.
struct Tally {
    meter: Option<Meter>,
    ledger: Option<Ledger>,
    run_id: String,
}

impl Tally {
    async fn settle(&mut self) {
        if let (Some(meter), Some(ledger)) = (self.meter.take(), self.ledger.take()) {
            record(ledger, self.run_id.clone(), meter.finish()).await;
        }
    }
}

impl Drop for Tally {
    fn drop(&mut self) {
        if let (Some(meter), Some(ledger)) = (self.meter.take(), self.ledger.take()) {
            let run_id = std::mem::take(&mut self.run_id);
            worker::wasm_bindgen_futures::spawn_local(record(ledger, run_id, meter.finish()));
        }
    }
}

async fn record(ledger: Ledger, run_id: String, usage: Tokens) {
    let tokens = usage.total();
    let op = RecordUsage {
        run_id: run_id.clone(),
        tokens,
        usage: Some(usage),
    };
    if let Err(e) = ledger.call(op).await {
        console_error!("proxy: recording {tokens} tokens of {run_id}: {e}");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn streamed_chat_completions_always_ask_for_usage() {
        let asked =
            with_usage(br#"{"model":"m","stream":true,"stream_options":{"include_usage":false}}"#)
                .unwrap();
        assert!(asked.contains(r#""include_usage":true"#), "{asked}");
        let bare = with_usage(br#"{"model":"m","stream":true}"#).unwrap();
        assert!(
            bare.contains(r#""stream_options":{"include_usage":true}"#),
            "{bare}"
        );
        let odd = with_usage(br#"{"stream":true,"stream_options":7}"#).unwrap();
        assert!(odd.contains(r#""include_usage":true"#), "{odd}");
        let whole = with_usage(br#"{"model":"m"}"#).unwrap();
        assert!(!whole.contains("stream_options"), "{whole}");
        assert!(with_usage(b"not json").is_err());
        assert!(with_usage(br#"{"a":1,}"#).is_err());
        assert_eq!(with_usage(b" [1, 2] ").unwrap(), "[1, 2]");
        assert_eq!(with_usage(b"{ }").unwrap(), "{}");
        // An escaped key is the key it spells; the last of two is the one that counts.
        let escaped = with_usage(br#"{"str\u0065am" : true, "n":{"a":[1,"}"]}}"#).unwrap();
        assert_eq!(
            escaped,
            r#"{"n":{"a":[1,"}"]},"stream":true,"stream_options":{"include_usage":true}}"#
        );
        let twice = with_usage(br#"{"stream":true,"stream":false}"#).unwrap();
        assert_eq!(twice, r#"{"stream":false}"#);
        let quoted = with_usage(br#"{"a\"b:,":"x,\"y:","stream":true}"#).unwrap();
        assert!(
            quoted.starts_with(r#"{"a\"b:,":"x,\"y:","stream":true,"#),
            "{quoted}"
        );
    }

    #[test]
    fn a_request_of_many_small_values_takes_no_more_than_its_text() {
        let body = format!(
            r#"{{"model":"m","stream":true,"messages":[{}]}}"#,
            vec![r#"{"a":0}"#; 200_000].join(",")
        );
        let (passed, _, peak) = crate::json_cost::tests::measured(|| with_usage(body.as_bytes()));
        let passed = passed.unwrap();
        assert!(passed.contains(r#""include_usage":true"#));
        assert!(
            passed.contains(&body[28..200]),
            "the messages pass as they came"
        );
        assert!(
            peak <= body.len() * 3 / 2,
            "took {peak} bytes for {}",
            body.len()
        );
    }
}
