//! Reading a provider's answer for its own token count (`usage`) as it passes the credential
//! proxy: OpenAI chat completions and responses, Anthropic messages, streamed or whole.

use crate::runs::Tokens;

/// Takes the usage of one JSON object of a provider's answer (a whole body or one stream
/// event) into `tokens`: OpenAI chat completions and responses, Anthropic messages. The largest
/// figure seen per field is kept, since streams repeat running totals (Anthropic's
/// `message_delta`) and the final chunk of an OpenAI stream carries them once.
///
/// Kinds are kept apart as OpenCode keeps them, so the two counts compare: OpenAI counts
/// cached prompt tokens inside the prompt and reasoning inside the completion (each also given
/// apart, in `…_details`), which are taken out of input and output here; Anthropic counts its
/// cache apart from the input already and does not tell reasoning apart from output.
fn take_usage(tokens: &mut Tokens, value: &serde_json::Value) {
    let usage = value
        .get("usage")
        .or_else(|| value.pointer("/message/usage"))
        .or_else(|| value.pointer("/response/usage"));
    let Some(usage) = usage.filter(|u| u.is_object()) else {
        return;
    };
    let field = |name: &str| usage.get(name).and_then(|v| v.as_u64());
    let detail = |group: &str, name: &str| usage.get(group)?.get(name)?.as_u64();
    let keep = |slot: &mut u64, value: Option<u64>| {
        if let Some(v) = value {
            *slot = (*slot).max(v);
        }
    };
    let cached = detail("prompt_tokens_details", "cached_tokens")
        .or(detail("input_tokens_details", "cached_tokens"));
    let reasoning = detail("completion_tokens_details", "reasoning_tokens")
        .or(detail("output_tokens_details", "reasoning_tokens"));
    let input = field("prompt_tokens").or(field("input_tokens"));
    let output = field("completion_tokens").or(field("output_tokens"));
    keep(
        &mut tokens.input,
        input.map(|n| n.saturating_sub(cached.unwrap_or(0))),
    );
    keep(
        &mut tokens.output,
        output.map(|n| n.saturating_sub(reasoning.unwrap_or(0))),
    );
    keep(&mut tokens.reasoning, reasoning);
    keep(
        &mut tokens.cache_read,
        field("cache_read_input_tokens").or(cached),
    );
    keep(
        &mut tokens.cache_write,
        field("cache_creation_input_tokens"),
    );
}

/// Reads usage out of a provider's answer as it streams by: server-sent events line by line
/// (`data: {…}`), or a whole JSON body. At most a line of `MAX_LINE` bytes is kept; longer
/// lines (a huge content delta) are skipped, as usage never sits in one.
#[derive(Debug, Default)]
pub struct Meter {
    line: Vec<u8>,
    skipping: bool,
    /// A JSON body is kept whole (up to `MAX_WHOLE`) to be read at the end.
    whole: Option<Vec<u8>>,
    pub usage: Tokens,
}

const MAX_LINE: usize = 64 * 1024;
const MAX_WHOLE: usize = 4 * 1024 * 1024;

impl Meter {
    /// A meter for an answer of this media type.
    pub fn new(content_type: &str) -> Meter {
        let json = content_type
            .to_ascii_lowercase()
            .starts_with("application/json");
        Meter {
            whole: json.then(Vec::new),
            ..Meter::default()
        }
    }

    pub fn feed(&mut self, chunk: &[u8]) {
        if let Some(whole) = &mut self.whole {
            if whole.len() + chunk.len() <= MAX_WHOLE {
                whole.extend_from_slice(chunk);
            } else {
                self.whole = None;
            }
        }
        for &b in chunk {
            if b == b'\n' {
                if !self.skipping {
                    let line = std::mem::take(&mut self.line);
                    self.line_done(&line);
                }
                self.line.clear();
                self.skipping = false;
            } else if !self.skipping {
                self.line.push(b);
                if self.line.len() > MAX_LINE {
                    self.line.clear();
                    self.skipping = true;
                }
            }
        }
    }

    fn line_done(&mut self, line: &[u8]) {
        let Some(data) = line.strip_prefix(b"data:") else {
            return;
        };
        if let Ok(value) = serde_json::from_slice::<serde_json::Value>(data.trim_ascii()) {
            take_usage(&mut self.usage, &value);
        }
    }

    /// The usage seen, once the answer ended (a plain JSON body is read whole here).
    pub fn finish(mut self) -> Tokens {
        if !self.skipping && !self.line.is_empty() {
            let line = std::mem::take(&mut self.line);
            self.line_done(&line);
        }
        if let Some(whole) = &self.whole {
            if let Ok(value) = serde_json::from_slice::<serde_json::Value>(whole) {
                take_usage(&mut self.usage, &value);
            }
        }
        self.usage
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn usage_is_read_from_openai_and_anthropic_streams_and_bodies() {
        let openai = "data: {\"choices\":[{\"delta\":{\"content\":\"hi\"}}]}\n\n\
            data: {\"choices\":[],\"usage\":{\"prompt_tokens\":120,\"completion_tokens\":30}}\n\n\
            data: [DONE]\n\n";
        let mut meter = Meter::new("text/event-stream");
        // Split mid-line, as a network would.
        let (a, b) = openai.as_bytes().split_at(70);
        meter.feed(a);
        meter.feed(b);
        assert_eq!(meter.finish().total(), 150);

        let anthropic = "event: message_start\ndata: {\"type\":\"message_start\",\"message\":\
            {\"usage\":{\"input_tokens\":120,\"output_tokens\":1,\"cache_read_input_tokens\":50}}}\n\n\
            event: message_delta\ndata: {\"type\":\"message_delta\",\"usage\":{\"output_tokens\":30}}\n\n";
        let mut meter = Meter::default();
        meter.feed(anthropic.as_bytes());
        let usage = meter.finish();
        assert_eq!((usage.input, usage.output, usage.cache_read), (120, 30, 50));

        let body = br#"{"id":"x","usage":{"input_tokens":7,"output_tokens":3}}"#;
        let mut meter = Meter::new("application/json; charset=utf-8");
        meter.feed(body);
        assert_eq!(meter.finish().total(), 10);

        let responses = "data: {\"type\":\"response.completed\",\"response\":{\"usage\":\
            {\"input_tokens\":11,\"output_tokens\":4}}}\n";
        let mut meter = Meter::default();
        meter.feed(responses.as_bytes());
        assert_eq!(meter.finish().total(), 15);
    }

    #[test]
    fn cached_and_reasoning_tokens_are_told_apart_as_opencode_counts_them() {
        let chat = br#"{"usage":{"prompt_tokens":100,"completion_tokens":40,
            "prompt_tokens_details":{"cached_tokens":60},
            "completion_tokens_details":{"reasoning_tokens":25}}}"#;
        let mut meter = Meter::new("application/json");
        meter.feed(chat);
        let usage = meter.finish();
        let kinds = (usage.input, usage.cache_read, usage.output, usage.reasoning);
        assert_eq!(kinds, (40, 60, 15, 25));
        // The total is the provider's: what budgets count.
        assert_eq!(usage.total(), 140);

        let responses = "data: {\"type\":\"response.completed\",\"response\":{\"usage\":\
            {\"input_tokens\":30,\"output_tokens\":9,\"input_tokens_details\":{\"cached_tokens\":10},\
            \"output_tokens_details\":{\"reasoning_tokens\":4}}}}\n";
        let mut meter = Meter::default();
        meter.feed(responses.as_bytes());
        let usage = meter.finish();
        let kinds = (usage.input, usage.cache_read, usage.output, usage.reasoning);
        assert_eq!(kinds, (20, 10, 5, 4));
    }

    #[test]
    fn huge_lines_are_skipped_without_losing_the_usage_after_them() {
        let mut meter = Meter::default();
        meter.feed(b"data: {\"x\":\"");
        meter.feed(&vec![b'a'; MAX_LINE * 2]);
        meter.feed(b"\"}\n");
        meter.feed(b"data: {\"usage\":{\"prompt_tokens\":5,\"completion_tokens\":1}}\n");
        assert_eq!(meter.finish().total(), 6);
    }
}
