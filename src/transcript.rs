//! An OpenCode transcript (the session's messages, as stored in R2 when a run ends) read into
//! what a person reads: messages with their text, reasoning and tool calls (input, output,
//! status, duration). The JSON is OpenCode's; anything unexpected is skipped, never fatal.

use serde_json::Value;

/// Longest tool input or output kept per call.
pub const MAX_TOOL_TEXT: usize = 20_000;

#[derive(Debug, Clone, PartialEq)]
pub enum Part {
    Text(String),
    Reasoning(String),
    Tool(ToolCall),
}

#[derive(Debug, Clone, PartialEq)]
pub struct ToolCall {
    pub tool: String,
    pub title: String,
    /// pending, running, completed or error.
    pub status: String,
    pub input: String,
    pub output: String,
    pub duration_ms: Option<u64>,
}

#[derive(Debug, Clone, PartialEq)]
pub struct Message {
    /// user or assistant.
    pub role: String,
    pub created_at: Option<i64>,
    pub parts: Vec<Part>,
    /// The model call's error, if it failed.
    pub error: Option<String>,
}

impl Message {
    /// The message's text parts, joined.
    pub fn text(&self) -> String {
        let texts: Vec<&str> = self
            .parts
            .iter()
            .filter_map(|p| match p {
                Part::Text(t) => Some(t.as_str()),
                _ => None,
            })
            .collect();
        texts.join("\n")
    }
}

/// The messages of a transcript; `None` when it is not OpenCode's message list, or too large a
/// tree to hold (`json_cost::TREE_MAX`; the page then links the JSON).
pub fn read(json: &str) -> Option<Vec<Message>> {
    let value = crate::json_cost::parse(json.as_bytes(), crate::json_cost::TREE_MAX).ok()?;
    Some(value.as_array()?.iter().map(message).collect())
}

fn message(m: &Value) -> Message {
    let info = &m["info"];
    Message {
        role: info["role"].as_str().unwrap_or("unknown").to_string(),
        created_at: info["time"]["created"].as_i64(),
        parts: m["parts"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(part)
            .collect(),
        error: (!info["error"].is_null()).then(|| {
            let e = &info["error"];
            let name = e["name"].as_str().unwrap_or("error");
            let text = e["data"]["message"].as_str().or(e["message"].as_str());
            format!("{name}: {}", text.unwrap_or("no details"))
        }),
    }
}

fn part(p: &Value) -> Option<Part> {
    match p["type"].as_str()? {
        "text" => Some(Part::Text(p["text"].as_str()?.to_string())),
        "reasoning" => Some(Part::Reasoning(p["text"].as_str()?.to_string())),
        "tool" => {
            let state = &p["state"];
            let input = match &state["input"] {
                Value::Null => String::new(),
                Value::String(s) => s.clone(),
                other => serde_json::to_string_pretty(other).unwrap_or_default(),
            };
            let output = state["output"]
                .as_str()
                .or(state["error"].as_str())
                .unwrap_or_default();
            Some(Part::Tool(ToolCall {
                tool: p["tool"].as_str().unwrap_or("tool").to_string(),
                title: step_title(state),
                status: state["status"].as_str().unwrap_or("pending").to_string(),
                input: cut(&input, MAX_TOOL_TEXT),
                output: cut(output, MAX_TOOL_TEXT),
                duration_ms: duration_ms(state),
            }))
        }
        _ => None,
    }
}

/// How long a tool call took, once it ended (its `time.start` and `time.end`).
pub fn duration_ms(state: &Value) -> Option<u64> {
    let time = &state["time"];
    match (time["start"].as_i64(), time["end"].as_i64()) {
        (Some(start), Some(end)) => Some((end - start).max(0) as u64),
        _ => None,
    }
}

/// What a tool call did, in a line: its title, else its command or file.
pub fn step_title(state: &Value) -> String {
    state["title"]
        .as_str()
        .or_else(|| state["input"]["command"].as_str())
        .or_else(|| state["input"]["filePath"].as_str())
        .unwrap_or_default()
        .to_string()
}

/// What every run's prompt carries (`[handoff:<runId>]`, a worker's approved pass
/// `[handoff:<runId>:approved]`); the messages a run adds to its turn (a resume, a turn handed
/// back) carry markers of their own that do not contain it.
pub const PROMPT_MARKER: &str = "[handoff:";

/// The messages of one run's turn: from the user message carrying `marker` up to the next
/// run's prompt (the whole list when the marker is not found).
pub fn turn<'a>(messages: &'a [Message], marker: &str) -> &'a [Message] {
    let Some(start) = messages
        .iter()
        .position(|m| m.role == "user" && m.text().contains(marker))
    else {
        return messages;
    };
    let end = messages[start + 1..]
        .iter()
        .position(|m| m.role == "user" && m.text().contains(PROMPT_MARKER))
        .map_or(messages.len(), |i| start + 1 + i);
    &messages[start..end]
}

fn cut(text: &str, max: usize) -> String {
    if text.len() <= max {
        return text.to_string();
    }
    let mut end = max;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}\n… ({} more bytes)", &text[..end], text.len() - end)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn messages_tools_and_turns_are_read() {
        let transcript = json!([
            {"info": {"role": "user", "time": {"created": 1}}, "parts": [{"type": "text", "text": "old [handoff:run_a]"}]},
            {"info": {"role": "assistant"}, "parts": [{"type": "text", "text": "done a"}]},
            {"info": {"role": "user"}, "parts": [{"type": "text", "text": "new [handoff:run_b]"}]},
            {"info": {"role": "assistant", "error": {"name": "APIError", "data": {"message": "quota"}}}, "parts": [
                {"type": "reasoning", "text": "think"},
                {"type": "tool", "tool": "bash", "state": {"status": "completed", "input": {"command": "ls"},
                  "output": "a\nb", "time": {"start": 10, "end": 35}}},
                {"type": "step-start"}
            ]}
        ])
        .to_string();
        let messages = read(&transcript).unwrap();
        assert_eq!(messages.len(), 4);
        let turn = turn(&messages, "[handoff:run_b]");
        assert_eq!(turn.len(), 2);
        let Part::Tool(call) = &turn[1].parts[1] else {
            panic!("{turn:?}")
        };
        assert_eq!(
            (call.title.as_str(), call.duration_ms, call.output.as_str()),
            ("ls", Some(25), "a\nb")
        );
        assert_eq!(turn[1].error.as_deref(), Some("APIError: quota"));
        assert_eq!(super::turn(&messages, "[handoff:run_a]").len(), 2);
        // A resume is part of the turn it carries on.
        let resumed = json!([
            {"info": {"role": "user"}, "parts": [{"type": "text", "text": "task [handoff:run_c]"}]},
            {"info": {"role": "assistant"}, "parts": [{"type": "text", "text": "working"}]},
            {"info": {"role": "user"}, "parts": [{"type": "text", "text": "[handoff-resume:1:run_c] carry on"}]},
            {"info": {"role": "assistant"}, "parts": [{"type": "text", "text": "done c"}]},
            {"info": {"role": "user"}, "parts": [{"type": "text", "text": "next [handoff:run_d]"}]},
        ])
        .to_string();
        let resumed = read(&resumed).unwrap();
        let turn_c = super::turn(&resumed, "[handoff:run_c]");
        assert_eq!(turn_c.len(), 4);
        assert_eq!(turn_c[3].text(), "done c");
        assert!(read("{}").is_none());
        assert!(cut(&"é".repeat(20), 5).starts_with("éé\n…"));
    }
}
