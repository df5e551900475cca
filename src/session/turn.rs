//! Reading OpenCode's messages into a run's turn: whether the prompt was answered and the answer
//! settled, the steps, tokens and cost, the summary, the provider's error, and how much the
//! model has sent so far (to tell a silent model).

use super::opencode::{truncate, Agent};
use crate::error::Result;
use crate::runs::{ProgressDetail, Step};
use serde_json::Value;

/// Recent steps kept in a run's progress.
const RECENT_STEPS: usize = 20;

/// A run's turn of the conversation, read from the agent's messages.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Turn {
    /// The prompt was found among the messages.
    pub prompted: bool,
    /// At least one answer to it has started.
    pub answered: bool,
    /// The latest answer is complete and does not wait for tool results: the agent's turn is
    /// over. (An answer exists as soon as a step starts, before its model call returns.)
    pub settled: bool,
    pub detail: ProgressDetail,
    /// The text of the latest answer (the agent's summary once it is done).
    pub last_text: Option<String>,
    /// The error of the latest answer, e.g. the provider's after retries ran out.
    pub error: Option<String>,
    /// That error is the provider's passing trouble (429, 408, 5xx, or marked retryable).
    pub retryable: bool,
    /// Grows with everything the answers hold (parts, streamed text, tool states): unchanged
    /// between two looks, nothing arrived from the model in between.
    pub motion: u64,
    /// A tool of the answers is running (the agent waits on the tool, not on the model).
    pub tool_running: bool,
}

/// The text parts of a message, joined.
fn text_of(m: &Value) -> String {
    m["parts"]
        .as_array()
        .map(|parts| {
            parts
                .iter()
                .filter(|p| p["type"] == "text")
                .filter_map(|p| p["text"].as_str())
                .collect::<Vec<_>>()
                .join("\n")
        })
        .unwrap_or_default()
}

/// Where the prompt carrying `marker` is among the messages (the latest such).
pub fn prompt_at(messages: &[Value], marker: &str) -> Option<usize> {
    messages
        .iter()
        .rposition(|m| m["info"]["role"] == "user" && text_of(m).contains(marker))
}

/// How a run's turn is read at its end: the latest 100 messages, 1,000, then all.
pub const TURN_READS: [Option<u32>; 3] = [Some(100), Some(1_000), None];

/// The messages from the prompt carrying `marker` on (with some before it): the latest
/// `reads[0]`, then `reads[1]`, … (`None`: all), until the prompt is among them, an earlier
/// run's prompt is ([`MARKER`]), or the session has no more. A session serves run after run,
/// so its history is read only as far back as the run's own turn goes.
pub async fn messages_since(
    agent: &Agent,
    session: &str,
    marker: &str,
    reads: &[Option<u32>],
) -> Result<Vec<Value>> {
    let mut messages = Vec::new();
    for &limit in reads {
        messages = agent.messages(session, limit).await?;
        if read_far_enough(&messages, marker, limit) {
            break;
        }
    }
    Ok(messages)
}

/// Whether `messages`, the latest `limit` (`None`: all), go back far enough for the turn of the
/// prompt carrying `marker` (see [`messages_since`]).
fn read_far_enough(messages: &[Value], marker: &str, limit: Option<u32>) -> bool {
    limit.is_none_or(|n| messages.len() < n as usize)
        || prompt_at(messages, marker).is_some()
        || prompt_at(messages, MARKER).is_some()
}

/// What every run's prompt carries. A session's runs follow one another, so a prompt of an
/// earlier run among the messages read, and not this run's, means this run's is not written
/// yet: it is not further back.
pub const MARKER: &str = crate::transcript::PROMPT_MARKER;

/// Reads the messages that follow the prompt carrying `marker`.
pub fn read_turn(messages: &[Value], marker: &str) -> Turn {
    let mut turn = Turn::default();
    let Some(start) = prompt_at(messages, marker) else {
        return turn;
    };
    turn.prompted = true;
    let mut steps = Vec::new();
    for message in messages[start + 1..]
        .iter()
        .filter(|m| m["info"]["role"] == "assistant")
    {
        turn.answered = true;
        let info = &message["info"];
        let tokens = &info["tokens"];
        let add = |total: &mut u64, v: &Value| *total += v.as_u64().unwrap_or(0);
        let t = &mut turn.detail.tokens;
        add(&mut t.input, &tokens["input"]);
        add(&mut t.output, &tokens["output"]);
        add(&mut t.reasoning, &tokens["reasoning"]);
        add(&mut t.cache_read, &tokens["cache"]["read"]);
        add(&mut t.cache_write, &tokens["cache"]["write"]);
        turn.detail.cost_usd += info["cost"].as_f64().unwrap_or(0.0);
        steps.extend(steps_of(message));
        turn.motion += motion_of(message);
        let text = text_of(message);
        if !text.trim().is_empty() {
            turn.last_text = Some(text);
        }
        turn.error = error_message(&info["error"]);
        turn.retryable = turn.error.is_some() && is_passing(&info["error"]);
        let complete = !info["time"]["completed"].is_null();
        turn.settled = complete && (info["finish"] != "tool-calls" || turn.error.is_some());
    }
    turn.detail.steps = steps.len() as u32;
    turn.tool_running = steps.iter().any(|s| s.status == "running");
    turn.detail.current_tool = steps
        .iter()
        .rev()
        .find(|s| s.status == "running" || s.status == "pending")
        .map(|s| s.tool.clone());
    let skip = steps.len().saturating_sub(RECENT_STEPS);
    turn.detail.recent = steps.into_iter().skip(skip).collect();
    turn
}

/// Whether a message error is the provider's passing trouble: rate limited, overloaded, down.
fn is_passing(error: &Value) -> bool {
    let data = &error["data"];
    data["isRetryable"] == true
        || data["statusCode"]
            .as_u64()
            .is_some_and(|s| s == 408 || s == 429 || (500..600).contains(&s))
}

/// The readable message of an OpenCode message error (`{name, data: {message}}`), if any.
fn error_message(error: &Value) -> Option<String> {
    if error.is_null() {
        return None;
    }
    let name = error["name"].as_str().unwrap_or("error");
    let message = error["data"]["message"]
        .as_str()
        .or_else(|| error["message"].as_str())
        .unwrap_or("no details");
    Some(format!("{name}: {message}"))
}

/// The tool calls of one assistant message, in order.
pub fn steps_of(message: &Value) -> Vec<Step> {
    let mut steps = Vec::new();
    for part in message["parts"].as_array().into_iter().flatten() {
        if part["type"] == "tool" {
            let state = &part["state"];
            let title = crate::transcript::step_title(state);
            steps.push(Step {
                tool: part["tool"].as_str().unwrap_or("tool").to_string(),
                title: truncate(&title, 200),
                duration_ms: crate::transcript::duration_ms(state),
                status: state["status"].as_str().unwrap_or("pending").to_string(),
            });
        }
    }
    steps
}

/// How much an answer holds: its parts, the length of their streamed text and reasoning, and
/// each tool part's progress through pending, running and done.
fn motion_of(message: &Value) -> u64 {
    let parts = message["parts"]
        .as_array()
        .map(Vec::as_slice)
        .unwrap_or_default();
    parts
        .iter()
        .map(|part| {
            let text = part["text"].as_str().map_or(0, str::len) as u64;
            let state = match part["state"]["status"].as_str() {
                Some("running") => 1,
                Some("completed" | "error") => 2,
                _ => 0,
            };
            1 + text + state
        })
        .sum::<u64>()
        + u64::from(!message["info"]["time"]["completed"].is_null())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn message(role: &str, parts: Value, info: Value) -> Value {
        let mut info = info;
        info["role"] = json!(role);
        json!({"info": info, "parts": parts})
    }

    #[test]
    fn a_turn_counts_steps_tokens_cost_and_finds_the_summary() {
        let messages = vec![
            message(
                "user",
                json!([{"type": "text", "text": "old task [handoff:run_a]"}]),
                json!({}),
            ),
            message(
                "assistant",
                json!([{"type": "tool", "tool": "bash", "state": {"status": "completed", "input": {"command": "ls"}}}]),
                json!({"tokens": {"input": 999}}),
            ),
            message(
                "user",
                json!([{"type": "text", "text": "task [handoff:run_b]"}]),
                json!({}),
            ),
            message(
                "assistant",
                json!([
                    {"type": "tool", "tool": "bash", "state": {"status": "completed", "title": "sh test.sh"}},
                    {"type": "tool", "tool": "edit", "state": {"status": "running", "input": {"filePath": "/a.rs"}}}
                ]),
                json!({"tokens": {"input": 100, "output": 20, "reasoning": 0, "cache": {"read": 5, "write": 1}}, "cost": 0.25}),
            ),
            message(
                "assistant",
                json!([{"type": "text", "text": "Fixed it."}]),
                json!({"tokens": {"input": 10, "output": 2}, "cost": 0.05}),
            ),
        ];
        let turn = read_turn(&messages, "[handoff:run_b]");
        assert!(turn.prompted && turn.answered);
        assert_eq!(turn.detail.steps, 2);
        assert_eq!(turn.detail.current_tool.as_deref(), Some("edit"));
        assert_eq!(turn.detail.tokens.input, 110);
        assert_eq!(turn.detail.tokens.cache_read, 5);
        assert!((turn.detail.cost_usd - 0.30).abs() < 1e-9);
        assert_eq!(turn.detail.recent[0].title, "sh test.sh");
        assert_eq!(turn.detail.recent[1].title, "/a.rs");
        assert_eq!(turn.last_text.as_deref(), Some("Fixed it."));
        assert_eq!(turn.error, None);
    }

    #[test]
    fn a_turn_is_settled_only_by_a_complete_answer_that_needs_no_tool_results() {
        let prompt = message(
            "user",
            json!([{"type": "text", "text": "task [handoff:run_s]"}]),
            json!({}),
        );
        let answer = |info: Value| message("assistant", json!([]), info);
        let settled = |answers: Vec<Value>| {
            let mut messages = vec![prompt.clone()];
            messages.extend(answers);
            let turn = read_turn(&messages, "[handoff:run_s]");
            (turn.answered, turn.settled)
        };
        // A step has started but its model call has not returned.
        assert_eq!(
            settled(vec![answer(json!({"time": {"created": 1}}))]),
            (true, false)
        );
        // A step that asked for tools: more steps follow.
        let tools = json!({"time": {"created": 1, "completed": 2}, "finish": "tool-calls"});
        assert_eq!(settled(vec![answer(tools.clone())]), (true, false));
        let stop = json!({"time": {"created": 3, "completed": 4}, "finish": "stop"});
        assert_eq!(
            settled(vec![answer(tools.clone()), answer(stop)]),
            (true, true)
        );
        let failed = json!({"time": {"created": 1, "completed": 2}, "finish": "tool-calls",
            "error": {"name": "APIError", "data": {"message": "boom"}}});
        assert_eq!(settled(vec![answer(failed)]), (true, true));
        assert_eq!(settled(vec![]), (false, false));
    }

    #[test]
    fn motion_grows_with_everything_the_model_sends_and_only_then() {
        let prompt = message(
            "user",
            json!([{"type": "text", "text": "task [handoff:run_m]"}]),
            json!({}),
        );
        let read = |parts: Value, info: Value| {
            let turn = read_turn(
                &[prompt.clone(), message("assistant", parts, info)],
                "[handoff:run_m]",
            );
            (turn.motion, turn.tool_running)
        };
        let started = json!({"time": {"created": 1}});
        let (empty, _) = read(json!([]), started.clone());
        let (some, _) = read(json!([{"type": "text", "text": "Look"}]), started.clone());
        let (more, _) = read(
            json!([{"type": "text", "text": "Looking"}]),
            started.clone(),
        );
        assert!(empty < some && some < more, "{empty} {some} {more}");
        // The same answer read twice: no motion.
        assert_eq!(
            more,
            read(
                json!([{"type": "text", "text": "Looking"}]),
                started.clone()
            )
            .0
        );
        let tool =
            |status: &str| json!([{"type": "tool", "tool": "bash", "state": {"status": status}}]);
        let (pending, running_pending) = read(tool("pending"), started.clone());
        let (running, running_now) = read(tool("running"), started.clone());
        let (done, running_done) = read(tool("completed"), started.clone());
        assert!(pending < running && running < done);
        assert_eq!(
            (running_pending, running_now, running_done),
            (false, true, false)
        );
        let finished = json!({"time": {"created": 1, "completed": 2}});
        assert!(read(tool("completed"), finished).0 > done);
    }

    #[test]
    fn passing_provider_trouble_is_told_from_the_rest() {
        let error = |data: Value| json!({"name": "APIError", "data": data});
        assert!(is_passing(&error(json!({"statusCode": 529}))));
        assert!(is_passing(&error(json!({"statusCode": 429}))));
        assert!(is_passing(&error(
            json!({"message": "x", "isRetryable": true})
        )));
        assert!(!is_passing(&error(json!({"statusCode": 403}))));
        assert!(!is_passing(&error(
            json!({"statusCode": 400, "isRetryable": false})
        )));
        assert!(!is_passing(
            &json!({"name": "ProviderAuthError", "data": {}})
        ));
    }

    #[test]
    fn provider_errors_and_missing_prompts_are_reported() {
        let messages = vec![
            message(
                "user",
                json!([{"type": "text", "text": "task [handoff:run_c]"}]),
                json!({}),
            ),
            message(
                "assistant",
                json!([]),
                json!({"error": {"name": "APIError", "data": {"message": "scripted provider failure"}}}),
            ),
        ];
        let turn = read_turn(&messages, "[handoff:run_c]");
        assert_eq!(
            turn.error.as_deref(),
            Some("APIError: scripted provider failure")
        );
        assert!(!read_turn(&messages, "[handoff:run_x]").prompted);
    }

    #[test]
    fn a_turn_is_read_back_to_its_prompt_and_no_further() {
        let user = |text: &str| message("user", json!([{"type": "text", "text": text}]), json!({}));
        let answer = || message("assistant", json!([]), json!({}));
        let mine = "[handoff:run_m]";
        let far = |messages: &[Value]| read_far_enough(messages, mine, Some(3));
        // A full read of answers only: the prompt is further back.
        assert!(!far(&[answer(), answer(), answer()]));
        // A resume's message is not a run's prompt: further back still.
        assert!(!far(&[
            user("[handoff-resume:1:run_m] carry on"),
            answer(),
            answer()
        ]));
        // The prompt, or an earlier run's (this run's is not written yet), ends the reading.
        assert!(far(&[user("task [handoff:run_m]"), answer(), answer()]));
        assert!(far(&[user("task [handoff:run_l]"), answer(), answer()]));
        // As does the whole session.
        assert!(far(&[answer(), answer()]));
        assert!(read_far_enough(&[answer(), answer()], mine, None));
    }
}
