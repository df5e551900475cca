//! A scripted LLM that speaks the Anthropic Messages API and the OpenAI-compatible chat
//! completions API, both streaming (the only part of the stack that cannot exist offline). Each conversation names its script with `[scenario:NAME]`
//! in the task; the reply is chosen by how many assistant turns follow that task. It checks the
//! `x-api-key` it receives (the credential proxy must inject the real key) and records every
//! request for the tests.

use axum::body::Body;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use axum::Router;
use serde_json::{json, Value};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// One scripted reply.
#[derive(Debug, Clone)]
pub enum Reply {
    /// Call a tool (`bash`, `write`, …) with this input.
    Tool(&'static str, Value),
    /// Finish with text.
    Text(String),
    /// Answer with an HTTP error (and a `retry-after-ms` hint so retries are quick).
    Fail(u16),
    /// Wait this long before replying with the inner reply.
    After(Duration, Box<Reply>),
    /// Start the answer, then send nothing more (until the client gives up).
    Hang,
}

fn bash(command: &str) -> Reply {
    Reply::Tool(
        "bash",
        json!({"command": command, "description": "run a command"}),
    )
}

/// The scripts the tests and the demo use.
pub fn script(scenario: &str, step: usize) -> Reply {
    let fix = |step: usize| {
        match step {
        0 => bash("sh test.sh"),
        1 => bash("printf '#!/bin/sh\\necho $(( $1 + $2 ))\\n' > add.sh"),
        2 => bash("sh test.sh"),
        _ => Reply::Text(
            "Fixed add.sh: it subtracted its arguments instead of adding them. The test passes now."
                .into(),
        ),
    }
    };
    match scenario {
        "fix-add" | "demo" => fix(step),
        // Leaves a command of its own running in the background (outside the repository),
        // then fixes add.sh. Each tick replaces the file whole (a reader never sees it
        // truncated and not yet written).
        "ticker-fix" => match step {
            0 => bash("(while :; do date +%s%N > /home/sandbox/ticks.new && mv /home/sandbox/ticks.new /home/sandbox/ticks.txt; sleep 0.2; done) > /dev/null 2>&1 &"),
            s => fix(s - 1),
        },
        "slow-fix" if step == 0 => Reply::After(Duration::from_secs(8), Box::new(fix(0))),
        "slow-fix" => fix(step),
        "followup" => match step {
            0 => bash("echo 'follow-up notes' > NOTES.md"),
            _ => Reply::Text("Added NOTES.md with follow-up notes.".into()),
        },
        "self-commit" => match step {
            0 => bash("git checkout -b agent/own-branch && printf '#!/bin/sh\\necho $(( $1 + $2 ))\\n' > add.sh && git -c user.name=agent -c user.email=agent@example.invalid commit -qam 'Fix add'"),
            _ => Reply::Text("Committed the fix on agent/own-branch.".into()),
        },
        "env-dump" => match step {
            0 => bash("env; cat /proc/*/environ 2>/dev/null | tr '\\0' '\\n'; ps -eo args; echo AGENT-UID=$(id -u) $(grep CapEff /proc/self/status | tr -d '\\t')"),
            1 => bash("printf '#!/bin/sh\\necho $(( $1 + $2 ))\\n' > add.sh"),
            _ => Reply::Text("Looked around and fixed add.sh.".into()),
        },
        // Leaves a clean filter that makes `git add` slow, so the run stays in its pushing
        // phase long enough for a test to try the proxy then.
        "slow-push" => match step {
            0 => Reply::After(
                Duration::from_secs(6),
                Box::new(bash("git config filter.slow.clean 'sleep 6; cat' && echo '* filter=slow' > .gitattributes && printf '#!/bin/sh\\necho $(( $1 + $2 ))\\n' > add.sh")),
            ),
            _ => Reply::Text("Fixed add.sh (slowly).".into()),
        },
        // Fixes add.sh, and leaves the index lock of a git killed midway behind.
        "stale-lock" => match step {
            0 => bash("printf '#!/bin/sh\\necho $(( $1 + $2 ))\\n' > add.sh && : > .git/index.lock"),
            _ => Reply::Text("Fixed add.sh; my git was killed midway.".into()),
        },
        // Leaves what builds and tests leave behind, some committed by the agent itself.
        "by-products" => match step {
            0 => bash("printf '#!/bin/sh\\necho $(( $1 + $2 ))\\n' > add.sh && mkdir -p __pycache__ node_modules/left-pad && echo x > __pycache__/add.cpython-311.pyc && echo y > node_modules/left-pad/index.js && echo z > .DS_Store && git add -A && git -c user.name=agent -c user.email=agent@example.invalid commit -qm 'Fix add' && echo late > helper.pyc && echo notes > NOTES.md"),
            _ => Reply::Text("Fixed add.sh and wrote NOTES.md.".into()),
        },
        // A worker's agent allowed only file tools: its shell command is refused, the file it
        // writes with the write tool is kept.
        "worker-refused" => match step {
            0 => bash("touch /home/sandbox/worker/outputs/pwned.txt"),
            1 => Reply::Tool(
                "write",
                json!({"filePath": "/home/sandbox/worker/outputs/summary.md", "content": "All quiet.\n"}),
            ),
            _ => Reply::Text("Wrote outputs/summary.md; the shell was not available.".into()),
        },
        // A worker's agent that keeps reading (each reply counts 150 tokens).
        "worker-chatty" if step < 20 => Reply::Tool(
            "read",
            json!({"filePath": "/home/sandbox/worker/SKILL.md"}),
        ),
        "worker-chatty" => Reply::Text("Read it twenty times.".into()),
        // The demo's triage worker: a proposal, then (approved) the comment.
        "demo-triage" => match step {
            0 => Reply::Tool(
                "write",
                json!({"filePath": "/home/sandbox/worker/proposal.md",
                       "content": "Label: bug\n\nReply: Thanks for the report! add.sh subtracts instead of adding; a fix is on its way.\n"}),
            ),
            1 => Reply::Text("Proposed the label `bug` and a reply; waiting for approval.".into()),
            2 => Reply::Tool(
                "write",
                json!({"filePath": "/home/sandbox/worker/outputs/comment.md",
                       "content": "bug\n\nThanks for the report! add.sh subtracts instead of adding; a fix is on its way.\n"}),
            ),
            _ => Reply::Text("Posted the triage comment (outputs/comment.md), labelled bug.".into()),
        },
        // Fixes add.sh, then keeps testing: a run with a small token budget is stopped early.
        "over-budget" => match step {
            0 => bash("printf '#!/bin/sh\\necho $(( $1 + $2 ))\\n' > add.sh"),
            1..30 => bash("sh test.sh"),
            _ => Reply::Text("Tested thirty times.".into()),
        },
        // A turn of more messages than the session reads at first (100): fixes add.sh, then
        // runs 110 more commands.
        "long-turn" => match step {
            0 => bash("printf '#!/bin/sh\\necho $(( $1 + $2 ))\\n' > add.sh"),
            1..=110 => bash("true"),
            _ => Reply::Text("Fixed add.sh in 111 steps.".into()),
        },
        // Tool calls dense with small values (as a long todo list or a call of many edits is):
        // fixes add.sh, then runs 40 commands, each with 40,000 numbers beside it.
        "dense-steps" => match step {
            0 => bash("printf '#!/bin/sh\\necho $(( $1 + $2 ))\\n' > add.sh"),
            1..=40 => Reply::Tool(
                "bash",
                json!({"command": "true", "description": "check", "notes": vec![0; 40_000]}),
            ),
            _ => Reply::Text("Fixed add.sh in 41 steps.".into()),
        },
        // Tool calls heavy with text (as writes of a large generated file are): fixes add.sh,
        // then runs 5 commands, each with 3.5 MB beside it — 17.5 MB of messages in one turn.
        "heavy-steps" => match step {
            0 => bash("printf '#!/bin/sh\\necho $(( $1 + $2 ))\\n' > add.sh"),
            1..=5 => Reply::Tool(
                "bash",
                json!({"command": "true", "description": "check", "notes": "n".repeat(3_500_000)}),
            ),
            _ => Reply::Text("Fixed add.sh in 6 steps.".into()),
        },
        // The same with the text where an abridged transcript keeps it too (a tool input's
        // `pattern`): 20 MB, too much to store even abridged.
        "heavy-patterns" => match step {
            0..=4 => Reply::Tool(
                "bash",
                json!({"command": "true", "description": "check", "pattern": "p".repeat(4_000_000)}),
            ),
            _ => Reply::Text("Checked 5 times.".into()),
        },
        // Takes a while before its first step, so a page opened meanwhile sees it arrive.
        "page-live" => match step {
            0 => Reply::After(Duration::from_secs(15), Box::new(bash("sh test.sh"))),
            _ => Reply::Text("Ran the test.".into()),
        },
        // An answer that tries to run script on the run page.
        "hostile-answer" => Reply::Text(
            "Done. <script>window.__pwned = 1</script> <img src=x onerror=\"window.__pwned = 2\"> \
             [details](javascript:window.__pwned=3) ![x](https://tracker.invalid/p.png)"
                .into(),
        ),
        "no-change" => Reply::Text("Nothing needed changing.".into()),
        // Fixes add.sh in a command that then takes a while, so a test can stop the agent
        // while it runs (resumed runs carry on from there).
        "stopped-midway" => match step {
            0 => bash("printf '#!/bin/sh\\necho $(( $1 + $2 ))\\n' > add.sh && sleep 15"),
            _ => Reply::Text("Fixed add.sh; the agent was restarted on the way.".into()),
        },
        // Fixes add.sh, then fills the sandbox's disk (the command fails when it is full).
        "fills-disk" => match step {
            0 => bash("printf '#!/bin/sh\\necho $(( $1 + $2 ))\\n' > add.sh && dd if=/dev/zero of=fill.bin bs=1M count=2000 2>&1 | tail -1"),
            _ => Reply::Text("Fixed add.sh; the disk filled up while writing fill.bin.".into()),
        },
        // Runs one command, then its next model call hangs: a run stopped now (cancelled, out
        // of time) has done something to keep.
        "checks-then-waits" => match step {
            0 => bash("echo kept-$((6 * 7)) | tee kept.txt"),
            _ => Reply::After(Duration::from_secs(300), Box::new(Reply::Text("too late".into()))),
        },
        "always-500" => Reply::Fail(500),
        "slow" => Reply::After(Duration::from_secs(120), Box::new(Reply::Text("too late".into()))),
        _ => Reply::Text(format!("unknown scenario {scenario:?}")),
    }
}

/// The largest request the scripted provider takes, as the real ones do.
const MAX_REQUEST_BYTES: usize = 32 * 1024 * 1024;

/// What the LLM saw, for assertions.
#[derive(Debug, Clone)]
pub struct Recorded {
    pub scenario: String,
    /// The handoff run whose prompt this conversation carries (`[handoff:run_…]`), if any.
    pub run: Option<String>,
    pub at: std::time::Instant,
    pub step: usize,
    pub messages: usize,
    pub api_key: String,
    pub model: String,
    /// The request's size in bytes.
    pub bytes: usize,
    /// What the last tool call printed, as the agent sent it back (for failure messages).
    pub tool_output: Option<String>,
    /// How many times the run's prompt (its `[handoff:run_…]` marker) is in the conversation.
    pub prompts: usize,
    /// The text of the conversation's latest user message.
    pub last_user: String,
    /// The system prompt's text (OpenCode's, with its `<env>` facts about the folder).
    pub system: String,
}

struct LlmState {
    expected_key: String,
    expected_openai_key: String,
    requests: Mutex<Vec<Recorded>>,
    /// `METHOD /path` of every request to anything but the two chat APIs.
    strays: Mutex<Vec<String>>,
    ids: AtomicU64,
}

pub struct ScriptedLlm {
    pub port: u16,
    state: Arc<LlmState>,
}

impl ScriptedLlm {
    /// Serves on a free loopback port from its own thread for the life of the process; both
    /// APIs expect `expected_key`.
    pub fn start(expected_key: &str) -> ScriptedLlm {
        Self::start_with(expected_key, expected_key)
    }

    /// Serves with one expected key per API.
    pub fn start_with(anthropic_key: &str, openai_key: &str) -> ScriptedLlm {
        let expected_key = anthropic_key;
        let state = Arc::new(LlmState {
            expected_openai_key: openai_key.to_string(),
            expected_key: expected_key.to_string(),
            requests: Mutex::new(Vec::new()),
            strays: Mutex::new(Vec::new()),
            ids: AtomicU64::new(1),
        });
        let app = Router::new()
            .route("/v1/messages", post(messages))
            .route("/v1/chat/completions", post(chat_completions))
            .fallback(stray)
            // A provider takes large conversations (Anthropic's API up to 32 MB; axum's default
            // of 2 MB would answer 413, which OpenCode takes for a context overflow).
            .layer(axum::extract::DefaultBodyLimit::max(MAX_REQUEST_BYTES))
            .with_state(state.clone());
        let port = crate::serve_forever(app);
        ScriptedLlm { port, state }
    }

    /// The base URL to configure as `ANTHROPIC_BASE_URL`.
    pub fn url(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    pub fn requests(&self, scenario: &str) -> Vec<Recorded> {
        self.state
            .requests
            .lock()
            .map(|r| {
                r.iter()
                    .filter(|x| x.scenario == scenario)
                    .cloned()
                    .collect()
            })
            .unwrap_or_default()
    }

    /// Requests that reached the provider for anything but messages and chat completions.
    pub fn strays(&self) -> Vec<String> {
        self.state
            .strays
            .lock()
            .map(|r| r.clone())
            .unwrap_or_default()
    }

    pub fn all_requests(&self) -> Vec<Recorded> {
        self.state
            .requests
            .lock()
            .map(|r| r.clone())
            .unwrap_or_default()
    }
}

fn text_of(message: &Value) -> String {
    match &message["content"] {
        Value::String(s) => s.clone(),
        Value::Array(blocks) => blocks
            .iter()
            .filter_map(|b| b["text"].as_str())
            .collect::<Vec<_>>()
            .join("\n"),
        _ => String::new(),
    }
}

/// The output of the latest tool call in the conversation, in either API's shape.
fn last_tool_output(messages: &[Value]) -> Option<String> {
    messages.iter().rev().find_map(|m| {
        if m["role"] == "tool" {
            return Some(text_of(m));
        }
        let blocks = m["content"].as_array()?;
        blocks
            .iter()
            .rev()
            .find(|b| b["type"] == "tool_result")
            .map(|b| match &b["content"] {
                Value::String(s) => s.clone(),
                other => text_of(&json!({ "content": other })),
            })
    })
}

async fn stray(State(state): State<Arc<LlmState>>, req: axum::extract::Request) -> StatusCode {
    if let Ok(mut strays) = state.strays.lock() {
        strays.push(format!("{} {}", req.method(), req.uri()));
    }
    StatusCode::NOT_FOUND
}

/// The scenario named by the latest tagged user message, and the assistant turns since it.
fn locate(messages: &[Value]) -> (String, usize) {
    let tagged = messages
        .iter()
        .rposition(|m| m["role"] == "user" && text_of(m).contains("[scenario:"));
    let Some(index) = tagged else {
        return ("none".into(), 0);
    };
    let text = text_of(&messages[index]);
    let name = text
        // The last tag: a user message may hold two prompts (a cancelled turn's, which never
        // got an answer, merged with the next), and the latest instruction is the one in force.
        .rsplit("[scenario:")
        .next()
        .filter(|_| text.contains("[scenario:"))
        .and_then(|rest| rest.split(']').next())
        .unwrap_or("none")
        .to_string();
    let step = messages[index + 1..]
        .iter()
        .filter(|m| m["role"] == "assistant")
        .count();
    (name, step)
}

async fn messages(
    State(state): State<Arc<LlmState>>,
    headers: HeaderMap,
    body: String,
) -> Response {
    let api_key = headers
        .get("x-api-key")
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default()
        .to_string();
    if api_key != state.expected_key {
        let error = json!({"type": "error", "error": {"type": "authentication_error", "message": "invalid x-api-key"}});
        return (StatusCode::UNAUTHORIZED, axum::Json(error)).into_response();
    }
    let request: Value = serde_json::from_str(&body).unwrap_or(Value::Null);
    let model = request["model"].as_str().unwrap_or_default().to_string();
    let system = text_of(&json!({ "content": request["system"] }));
    if system.contains("title generator") {
        return stream(
            &state,
            vec![Block::Text("Scripted title".into())],
            "end_turn",
        );
    }
    let messages = request["messages"].as_array().cloned().unwrap_or_default();
    let model = (model, body.len());
    let (scenario, step) = record(&state, (system, &messages), api_key, model);
    let reply = match by_count(&state, &scenario, &messages) {
        Some(reply) => reply,
        None => resolve(&scenario, step).await,
    };
    match reply {
        Reply::Hang => hang(format!(
            "event: message_start\ndata: {}\n\n",
            json!({"type": "message_start", "message": {"id": "msg_scripted_hang", "type": "message",
                "role": "assistant", "model": "scripted", "content": [], "stop_reason": null,
                "stop_sequence": null, "usage": {"input_tokens": 120, "output_tokens": 1}}})
        )),
        Reply::Tool(name, input) => stream(&state, vec![Block::Tool(name, input)], "tool_use"),
        Reply::Text(text) => stream(&state, vec![Block::Text(text)], "end_turn"),
        Reply::Fail(status) => failure(
            status,
            json!({"type": "error", "error": {"type": "api_error", "message": "scripted provider failure"}}),
        ),
        Reply::After(..) => stream(
            &state,
            vec![Block::Text("unexpected script step".into())],
            "end_turn",
        ),
    }
}

/// A scripted provider error in the API's own shape, with a `retry-after-ms` hint so
/// OpenCode's retries are quick.
fn failure(status: u16, error: Value) -> Response {
    let mut response = (
        StatusCode::from_u16(status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR),
        axum::Json(error),
    )
        .into_response();
    response
        .headers_mut()
        .insert("retry-after-ms", "20".parse().expect("header value"));
    response
}

/// How many of a run's first requests the `overloaded` scenario answers with 529: two turns
/// worth of OpenCode's own tries (one and five retries each).
pub const OVERLOADED_REQUESTS: usize = 12;

/// How many of a run's first requests the `hangs-twice` scenario leaves hanging.
pub const HANGING_REQUESTS: usize = 2;

/// The scenarios decided by how many requests a run made so far, not by the conversation's
/// turns (which failed answers would skew). `overloaded`: the provider answers a run's first
/// [`OVERLOADED_REQUESTS`] requests with 529; `hangs-twice`: its first [`HANGING_REQUESTS`]
/// requests start an answer and then send nothing; `hangs`: every request does. After those,
/// the agent fixes add.sh and says so.
fn by_count(state: &LlmState, scenario: &str, messages: &[Value]) -> Option<Reply> {
    let trouble = match scenario {
        "overloaded" => (Reply::Fail(529), OVERLOADED_REQUESTS),
        "hangs-twice" => (Reply::Hang, HANGING_REQUESTS),
        "hangs" => (Reply::Hang, usize::MAX),
        _ => return None,
    };
    let run = run_of(messages);
    let seen = state
        .requests
        .lock()
        .ok()
        .map_or(0, |log| log.iter().filter(|r| r.run == run).count());
    Some(if seen <= trouble.1 {
        trouble.0
    } else if last_tool_output(messages).is_none() {
        bash("printf '#!/bin/sh\\necho $(( $1 + $2 ))\\n' > add.sh")
    } else {
        Reply::Text("Fixed add.sh once the provider was back.".into())
    })
}

/// A streaming answer that sends `first` and then nothing, until the client hangs up.
fn hang(first: String) -> Response {
    let start =
        futures::stream::once(async move { Ok::<_, std::io::Error>(bytes::Bytes::from(first)) });
    let body = Body::from_stream(futures::StreamExt::chain(start, futures::stream::pending()));
    Response::builder()
        .header("content-type", "text/event-stream")
        .body(body)
        .unwrap_or_else(|_| StatusCode::INTERNAL_SERVER_ERROR.into_response())
}

/// The script's reply, after any delay it asks for.
async fn resolve(scenario: &str, step: usize) -> Reply {
    let mut reply = script(scenario, step);
    while let Reply::After(delay, inner) = reply {
        tokio::time::sleep(delay).await;
        reply = *inner;
    }
    reply
}

/// The handoff run whose prompt the conversation carries (`[handoff:run_…]`).
fn run_of(messages: &[Value]) -> Option<String> {
    messages.iter().rev().map(text_of).find_map(|t| {
        let rest = t
            .rsplit("[handoff:")
            .next()
            .filter(|_| t.contains("[handoff:"))?;
        Some(rest.split(']').next()?.to_string())
    })
}

fn record(
    state: &LlmState,
    (system, messages): (String, &[Value]),
    api_key: String,
    (model, bytes): (String, usize),
) -> (String, usize) {
    let (scenario, step) = locate(messages);
    let run = run_of(messages);
    let prompts = run.as_ref().map_or(0, |run| {
        let marker = format!("[handoff:{run}]");
        messages
            .iter()
            .filter(|m| m["role"] == "user")
            .map(|m| text_of(m).matches(&marker).count())
            .sum()
    });
    if let Ok(mut log) = state.requests.lock() {
        log.push(Recorded {
            scenario: scenario.clone(),
            run,
            prompts,
            at: std::time::Instant::now(),
            step,
            messages: messages.len(),
            api_key,
            model,
            bytes,
            tool_output: last_tool_output(messages),
            last_user: messages
                .iter()
                .rev()
                .find(|m| m["role"] == "user" && !text_of(m).is_empty())
                .map(text_of)
                .unwrap_or_default(),
            system,
        });
    }
    (scenario, step)
}

/// `POST /v1/chat/completions` (OpenAI-compatible, streaming).
async fn chat_completions(
    State(state): State<Arc<LlmState>>,
    headers: HeaderMap,
    body: String,
) -> Response {
    let api_key = headers
        .get("authorization")
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer "))
        .unwrap_or_default()
        .to_string();
    if api_key != state.expected_openai_key {
        let error = json!({"error": {"message": "Incorrect API key provided", "type": "invalid_request_error"}});
        return (StatusCode::UNAUTHORIZED, axum::Json(error)).into_response();
    }
    let request: Value = serde_json::from_str(&body).unwrap_or(Value::Null);
    let model = request["model"].as_str().unwrap_or_default().to_string();
    let messages = request["messages"].as_array().cloned().unwrap_or_default();
    let system_is_title = messages
        .first()
        .is_some_and(|m| m["role"] == "system" && text_of(m).contains("title generator"));
    if system_is_title {
        return chat_stream(&state, &model, Reply::Text("Scripted title".into()));
    }
    let system = messages
        .iter()
        .filter(|m| m["role"] == "system")
        .map(text_of)
        .collect::<Vec<_>>()
        .join("\n");
    let sent = (model.clone(), body.len());
    let (scenario, step) = record(&state, (system, &messages), api_key, sent);
    let reply = match by_count(&state, &scenario, &messages) {
        Some(reply) => reply,
        None => resolve(&scenario, step).await,
    };
    match reply {
        Reply::Hang => hang(format!(
            "data: {}\n\n",
            json!({"id": "chatcmpl-scripted-hang", "object": "chat.completion.chunk", "created": 0,
                "model": model, "choices": [{"index": 0, "delta": {"role": "assistant", "content": ""},
                "finish_reason": null}]})
        )),
        Reply::Fail(status) => failure(
            status,
            json!({"error": {"message": "scripted provider failure", "type": "server_error"}}),
        ),
        reply => chat_stream(&state, &model, reply),
    }
}

fn chat_stream(state: &LlmState, model: &str, reply: Reply) -> Response {
    let id = format!(
        "chatcmpl-scripted-{}",
        state.ids.fetch_add(1, Ordering::SeqCst)
    );
    let chunk = |delta: Value, finish: Value| {
        json!({"id": id, "object": "chat.completion.chunk", "created": 0, "model": model,
            "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]})
    };
    let mut events = vec![chunk(
        json!({"role": "assistant", "content": ""}),
        Value::Null,
    )];
    match reply {
        Reply::Tool(name, input) => {
            events.push(chunk(
                json!({"tool_calls": [{"index": 0, "id": format!("call_{id}"), "type": "function",
                    "function": {"name": name, "arguments": ""}}]}),
                Value::Null,
            ));
            events.push(chunk(
                json!({"tool_calls": [{"index": 0, "function": {"arguments": input.to_string()}}]}),
                Value::Null,
            ));
            events.push(chunk(json!({}), json!("tool_calls")));
        }
        Reply::Text(text) => {
            events.push(chunk(json!({"content": text}), Value::Null));
            events.push(chunk(json!({}), json!("stop")));
        }
        Reply::Fail(_) | Reply::After(..) | Reply::Hang => {
            events.push(chunk(
                json!({"content": "unexpected script step"}),
                Value::Null,
            ));
            events.push(chunk(json!({}), json!("stop")));
        }
    }
    events.push(json!({"id": id, "object": "chat.completion.chunk", "created": 0, "model": model,
        "choices": [], "usage": {"prompt_tokens": 120, "completion_tokens": 30, "total_tokens": 150}}));
    let mut body: String = events.iter().map(|e| format!("data: {e}\n\n")).collect();
    body.push_str("data: [DONE]\n\n");
    Response::builder()
        .header("content-type", "text/event-stream")
        .body(Body::from(body))
        .unwrap_or_else(|_| StatusCode::INTERNAL_SERVER_ERROR.into_response())
}

enum Block {
    Text(String),
    Tool(&'static str, Value),
}

/// An Anthropic streaming response with the given content blocks.
fn stream(state: &LlmState, blocks: Vec<Block>, stop_reason: &str) -> Response {
    let id = state.ids.fetch_add(1, Ordering::SeqCst);
    let mut events = Vec::new();
    let mut push = |name: &str, data: Value| {
        events.push(format!("event: {name}\ndata: {data}\n\n"));
    };
    push(
        "message_start",
        json!({"type": "message_start", "message": {"id": format!("msg_scripted_{id}"), "type": "message",
            "role": "assistant", "model": "scripted", "content": [], "stop_reason": null, "stop_sequence": null,
            "usage": {"input_tokens": 120, "output_tokens": 1}}}),
    );
    for (index, block) in blocks.into_iter().enumerate() {
        match block {
            Block::Text(text) => {
                push(
                    "content_block_start",
                    json!({"type": "content_block_start", "index": index, "content_block": {"type": "text", "text": ""}}),
                );
                push(
                    "content_block_delta",
                    json!({"type": "content_block_delta", "index": index, "delta": {"type": "text_delta", "text": text}}),
                );
            }
            Block::Tool(name, input) => {
                push(
                    "content_block_start",
                    json!({"type": "content_block_start", "index": index,
                    "content_block": {"type": "tool_use", "id": format!("toolu_scripted_{id}_{index}"), "name": name, "input": {}}}),
                );
                push(
                    "content_block_delta",
                    json!({"type": "content_block_delta", "index": index,
                    "delta": {"type": "input_json_delta", "partial_json": input.to_string()}}),
                );
            }
        }
        push(
            "content_block_stop",
            json!({"type": "content_block_stop", "index": index}),
        );
    }
    push(
        "message_delta",
        json!({"type": "message_delta", "delta": {"stop_reason": stop_reason, "stop_sequence": null}, "usage": {"output_tokens": 30}}),
    );
    push("message_stop", json!({"type": "message_stop"}));
    let body = events.concat();
    Response::builder()
        .header("content-type", "text/event-stream")
        .header("cache-control", "no-cache")
        .body(Body::from(body))
        .unwrap_or_else(|_| StatusCode::INTERNAL_SERVER_ERROR.into_response())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_latest_tagged_prompt_decides_the_scenario_and_step() {
        let messages = vec![
            json!({"role": "user", "content": "do it [scenario:fix-add]"}),
            json!({"role": "assistant", "content": [{"type": "tool_use"}]}),
            json!({"role": "user", "content": [{"type": "tool_result"}]}),
            json!({"role": "assistant", "content": "done"}),
            json!({"role": "user", "content": [{"type": "text", "text": "more [scenario:followup]"}]}),
            json!({"role": "assistant", "content": [{"type": "tool_use"}]}),
            json!({"role": "user", "content": [{"type": "tool_result"}]}),
        ];
        assert_eq!(locate(&messages), ("followup".to_string(), 1));
        assert_eq!(locate(&messages[..1]), ("fix-add".to_string(), 0));
        // A cancelled turn's prompt merged with the next one: the later tag is in force.
        let merged = vec![json!({"role": "user", "content": [
            {"type": "text", "text": "wait [scenario:slow]"},
            {"type": "text", "text": "again [scenario:no-change]"}
        ]})];
        assert_eq!(locate(&merged), ("no-change".to_string(), 0));
    }
}
