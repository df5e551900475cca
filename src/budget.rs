//! Run budgets: the most a run may spend (dollars, tokens, seconds) and the one rule that says
//! whether it went over. The credential proxy asks before every model call and refuses once a
//! run is over; the run's session sees the same verdict, stops the agent, pushes the work so
//! far and ends the run `failed` with `budget_exceeded`.
//!
//! Tokens are counted by the proxy from the provider's own answers (`usage`), so an agent
//! cannot hide them; the session's reading of OpenCode's count is taken when it is higher.
//! Dollars are OpenCode's cost (its model price table), as the session reports it.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// The most one run may spend; each limit is optional.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Budget {
    /// Dollars of model use (as priced by OpenCode).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_cost_usd: Option<f64>,
    /// Tokens of model use: everything the provider counted (input, cached input, output).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_tokens: Option<u64>,
    /// Seconds from the run's start.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_duration_seconds: Option<u64>,
}

impl Budget {
    pub fn is_empty(&self) -> bool {
        self.max_cost_usd.is_none()
            && self.max_tokens.is_none()
            && self.max_duration_seconds.is_none()
    }

    /// This budget with every limit it leaves open taken from `defaults`.
    pub fn or(self, defaults: &Budget) -> Budget {
        Budget {
            max_cost_usd: self.max_cost_usd.or(defaults.max_cost_usd),
            max_tokens: self.max_tokens.or(defaults.max_tokens),
            max_duration_seconds: self.max_duration_seconds.or(defaults.max_duration_seconds),
        }
    }
}

/// What a run has spent so far.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Spend {
    /// Tokens: the proxy's count, or OpenCode's when higher.
    pub tokens: u64,
    /// Model calls the proxy passed.
    pub model_calls: u64,
    pub cost_usd: f64,
    /// Seconds since the run started (0 before it starts).
    pub seconds: u64,
}

/// Which limit a run went over, and by how much.
#[derive(Debug, Clone, PartialEq)]
pub enum Exceeded {
    Cost { used: f64, max: f64 },
    Tokens { used: u64, max: u64 },
    Duration { used: u64, max: u64 },
}

impl Exceeded {
    /// A sentence for `error.message`.
    pub fn message(&self) -> String {
        let what = match self {
            Exceeded::Cost { used, max } => {
                format!("spent ${used:.4} of its ${max:.4} budget (maxCostUsd)")
            }
            Exceeded::Tokens { used, max } => {
                format!("used {used} tokens of its {max} (maxTokens)")
            }
            Exceeded::Duration { used, max } => {
                format!("ran {used} s of its {max} s (maxDurationSeconds)")
            }
        };
        format!(
            "the run {what} and was stopped; its work so far is on its branch if it changed \
             anything. Raise the budget and continue in the same session to go on"
        )
    }
}

/// Whether `spend` is at or over `budget` (the first limit reached, in the order cost,
/// tokens, time). Reaching a limit counts: the next model call would go over it.
pub fn over(budget: &Budget, spend: &Spend) -> Option<Exceeded> {
    if let Some(max) = budget.max_cost_usd {
        if spend.cost_usd >= max {
            return Some(Exceeded::Cost {
                used: spend.cost_usd,
                max,
            });
        }
    }
    if let Some(max) = budget.max_tokens {
        if spend.tokens >= max {
            return Some(Exceeded::Tokens {
                used: spend.tokens,
                max,
            });
        }
    }
    if let Some(max) = budget.max_duration_seconds {
        if spend.seconds >= max {
            return Some(Exceeded::Duration {
                used: spend.seconds,
                max,
            });
        }
    }
    None
}

/// Token usage read from a provider's answer: the largest figure seen per field, since
/// streams repeat running totals (Anthropic's `message_delta`) and the final chunk of an
/// OpenAI stream carries them once.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Metered {
    pub input: u64,
    pub output: u64,
    pub cache_read: u64,
    pub cache_write: u64,
}

impl Metered {
    pub fn total(&self) -> u64 {
        self.input + self.output + self.cache_read + self.cache_write
    }

    /// Takes the usage of one JSON object of a provider's answer (a whole body or one stream
    /// event): OpenAI chat completions and responses, Anthropic messages.
    pub fn take(&mut self, value: &serde_json::Value) {
        let usage = value
            .get("usage")
            .or_else(|| value.pointer("/message/usage"))
            .or_else(|| value.pointer("/response/usage"));
        let Some(usage) = usage.filter(|u| u.is_object()) else {
            return;
        };
        let field = |name: &str| usage.get(name).and_then(|v| v.as_u64());
        let keep = |slot: &mut u64, value: Option<u64>| {
            if let Some(v) = value {
                *slot = (*slot).max(v);
            }
        };
        // OpenAI counts cached prompt tokens inside the prompt; Anthropic apart from it.
        keep(
            &mut self.input,
            field("prompt_tokens").or(field("input_tokens")),
        );
        keep(
            &mut self.output,
            field("completion_tokens").or(field("output_tokens")),
        );
        keep(&mut self.cache_read, field("cache_read_input_tokens"));
        keep(&mut self.cache_write, field("cache_creation_input_tokens"));
    }
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
    pub usage: Metered,
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
            self.usage.take(&value);
        }
    }

    /// The usage seen, once the answer ended (a plain JSON body is read whole here).
    pub fn finish(mut self) -> Metered {
        if !self.skipping && !self.line.is_empty() {
            let line = std::mem::take(&mut self.line);
            self.line_done(&line);
        }
        if let Some(whole) = &self.whole {
            if let Ok(value) = serde_json::from_slice::<serde_json::Value>(whole) {
                self.usage.take(&value);
            }
        }
        self.usage
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_first_limit_reached_is_the_verdict() {
        let budget = Budget {
            max_cost_usd: Some(1.0),
            max_tokens: Some(1000),
            max_duration_seconds: Some(60),
        };
        let mut spend = Spend::default();
        assert_eq!(over(&budget, &spend), None);
        spend.tokens = 1000;
        assert_eq!(
            over(&budget, &spend),
            Some(Exceeded::Tokens {
                used: 1000,
                max: 1000
            })
        );
        spend.cost_usd = 1.5;
        assert!(matches!(over(&budget, &spend), Some(Exceeded::Cost { .. })));
        let open = Budget::default();
        spend.seconds = 1 << 40;
        assert_eq!(over(&open, &spend), None);
        let message = Exceeded::Duration { used: 61, max: 60 }.message();
        assert!(message.contains("ran 61 s of its 60 s (maxDurationSeconds)"));
    }

    #[test]
    fn a_run_budget_falls_back_to_the_deployment_defaults() {
        let defaults = Budget {
            max_cost_usd: Some(5.0),
            max_tokens: Some(9),
            max_duration_seconds: None,
        };
        let run = Budget {
            max_tokens: Some(3),
            ..Budget::default()
        };
        let merged = run.or(&defaults);
        assert_eq!(merged.max_tokens, Some(3));
        assert_eq!(merged.max_cost_usd, Some(5.0));
        assert_eq!(merged.max_duration_seconds, None);
    }

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
    fn huge_lines_are_skipped_without_losing_the_usage_after_them() {
        let mut meter = Meter::default();
        meter.feed(b"data: {\"x\":\"");
        meter.feed(&vec![b'a'; MAX_LINE * 2]);
        meter.feed(b"\"}\n");
        meter.feed(b"data: {\"usage\":{\"prompt_tokens\":5,\"completion_tokens\":1}}\n");
        assert_eq!(meter.finish().total(), 6);
    }
}
