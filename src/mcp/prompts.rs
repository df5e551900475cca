//! MCP prompts (clients such as Claude Code show them as slash commands) and
//! `completion/complete` for their arguments and for the resource templates' ids.

use super::failure::Failure;
use super::jsonrpc;
use crate::error::Error;
use crate::ledger::api::{ListRuns, ListSandboxes, ListSessions};
use crate::runs::RunStatus;
use crate::tools::Ctx;
use rmcp::model::{ErrorCode, RequestId};
use serde_json::{json, Map, Value};

/// A prompt argument: name, description, required.
type Argument = (&'static str, &'static str, bool);

struct Prompt {
    name: &'static str,
    title: &'static str,
    description: &'static str,
    arguments: &'static [Argument],
}

const PROMPTS: [Prompt; 3] = [
    Prompt {
        name: "delegate",
        title: "Delegate a coding task",
        description: "Hand a coding task on a repository to handoff: it works in a sandbox and opens a pull request.",
        arguments: &[
            ("task", "What to do, in plain words", true),
            ("repository", "The https URL of the repository (omit for a scratch workspace)", false),
            ("branch", "The branch to start from (default: the repository's default branch)", false),
        ],
    },
    Prompt {
        name: "continue_session",
        title: "Continue a session",
        description: "Send a follow-up instruction to an earlier session: same sandbox, same agent conversation.",
        arguments: &[
            ("sessionId", "The session to continue", true),
            ("instruction", "What to do next", true),
        ],
    },
    Prompt {
        name: "review_run",
        title: "Review a run's pull request",
        description: "Review what a run changed and its pull request (the newest finished run unless one is named).",
        arguments: &[("runId", "The run to review (default: the newest completed run)", false)],
    },
];

pub fn list() -> Value {
    let prompts: Vec<Value> = PROMPTS
        .iter()
        .map(|p| {
            let arguments: Vec<Value> = p
                .arguments
                .iter()
                .map(|(name, description, required)| {
                    json!({"name": name, "description": description, "required": required})
                })
                .collect();
            json!({"name": p.name, "title": p.title, "description": p.description, "arguments": arguments})
        })
        .collect();
    json!({ "prompts": prompts })
}

/// `prompts/get`.
pub async fn get(
    ctx: &Ctx<'_>,
    id: &RequestId,
    params: Option<&Map<String, Value>>,
) -> Result<Value, Failure> {
    let invalid = |message: String| Failure::Rpc(jsonrpc::invalid_params(id.clone(), message));
    let name = params
        .and_then(|p| p.get("name"))
        .and_then(Value::as_str)
        .ok_or_else(|| invalid("`name` (a string) is required".into()))?;
    let prompt = PROMPTS.iter().find(|p| p.name == name).ok_or_else(|| {
        invalid(format!(
            "unknown prompt {}; prompts/list shows the prompts",
            crate::error::excerpt(name)
        ))
    })?;
    let empty = Map::new();
    let given = params
        .and_then(|p| p.get("arguments"))
        .and_then(Value::as_object)
        .unwrap_or(&empty);
    let arg = |key: &str| {
        given
            .get(key)
            .and_then(Value::as_str)
            .map(str::trim)
            .filter(|v| !v.is_empty())
    };
    for (key, _, required) in prompt.arguments {
        if *required && arg(key).is_none() {
            return Err(invalid(format!("prompt {name} needs the argument `{key}`")));
        }
    }
    if let Some(unknown) = given
        .keys()
        .find(|k| !prompt.arguments.iter().any(|(a, _, _)| a == k))
    {
        return Err(invalid(format!(
            "prompt {name} has no argument `{}`",
            crate::error::excerpt(unknown)
        )));
    }
    let text = match prompt.name {
        "delegate" => {
            let mut call = json!({"task": arg("task")});
            if let Some(repository) = arg("repository") {
                call["repository"] = json!(repository);
            }
            if let Some(branch) = arg("branch") {
                call["branch"] = json!(branch);
            }
            format!(
                "Delegate this coding task to handoff. Call opencode_run_task with {call}. It returns a runId at once; \
                 then follow the run with opencode_wait (or opencode_get_result every 30-60 s) until it ends, and \
                 report the summary and the pull request link (or the error and what to do about it)."
            )
        }
        "continue_session" => format!(
            "Continue handoff session {} with this instruction: {}. Call opencode_run_task with \
             {{\"sessionId\": {}, \"task\": {}}}, then follow the run with opencode_wait until it ends and report \
             what changed.",
            arg("sessionId").unwrap_or_default(),
            arg("instruction").unwrap_or_default(),
            json!(arg("sessionId")),
            json!(arg("instruction")),
        ),
        _ => review_text(ctx, id, arg("runId")).await?,
    };
    Ok(jsonrpc::result(
        id,
        json!({
            "description": prompt.description,
            "messages": [{"role": "user", "content": {"type": "text", "text": text}}],
        }),
    ))
}

async fn review_text(
    ctx: &Ctx<'_>,
    id: &RequestId,
    run_id: Option<&str>,
) -> Result<String, Failure> {
    let run_id = match run_id {
        Some(run_id) => run_id.to_string(),
        None => {
            let page = ctx
                .ledger
                .call(ListRuns {
                    session_id: None,
                    status: Some(RunStatus::Completed),
                    limit: 1,
                    before: None,
                })
                .await
                .map_err(|e| internal(id, &e))?;
            page.items.first().map(|r| r.id.clone()).ok_or_else(|| {
                Failure::Rpc(jsonrpc::invalid_params(
                    id.clone(),
                    "no run has completed yet; name one with `runId`",
                ))
            })?
        }
    };
    Ok(format!(
        "Review handoff run {run_id}. Read it with opencode_get_result (or the resource handoff://runs/{run_id}); \
         read its change from the resource handoff://runs/{run_id}/diff. Check that the change does what the task \
         asked, look for bugs, missing tests and risky edits, and give a verdict with concrete suggestions. If it \
         opened a pull request, name it (result.pullRequestUrl)."
    ))
}

/// `completion/complete`: ids and repositories for prompt arguments and template variables.
pub async fn complete(
    ctx: &Ctx<'_>,
    id: &RequestId,
    params: Option<&Map<String, Value>>,
) -> Result<Value, Failure> {
    let invalid = |message: &str| Failure::Rpc(jsonrpc::invalid_params(id.clone(), message));
    let argument = params
        .and_then(|p| p.get("argument"))
        .and_then(Value::as_object)
        .ok_or_else(|| invalid("`argument` {name, value} is required"))?;
    let name = argument.get("name").and_then(Value::as_str).unwrap_or("");
    let value = argument.get("value").and_then(Value::as_str).unwrap_or("");
    let reference = params
        .and_then(|p| p.get("ref"))
        .and_then(Value::as_object)
        .ok_or_else(|| invalid("`ref` is required"))?;
    // A prompt or template this server does not have simply has no completions.
    if !matches!(
        reference.get("type").and_then(Value::as_str),
        Some("ref/prompt" | "ref/resource")
    ) {
        return Err(invalid("`ref.type` must be ref/prompt or ref/resource"));
    }
    let candidates = match name {
        "runId" => recent_runs(ctx, id, |r| r.id.clone()).await?,
        "repository" => recent_runs(ctx, id, |r| r.repository.clone().unwrap_or_default()).await?,
        "sessionId" => {
            let page = ctx
                .ledger
                .call(ListSessions {
                    limit: 100,
                    before: None,
                })
                .await
                .map_err(|e| internal(id, &e))?;
            page.items.into_iter().map(|s| s.id).collect()
        }
        "sandboxId" => {
            let page = ctx
                .ledger
                .call(ListSandboxes {
                    limit: 100,
                    before: None,
                })
                .await
                .map_err(|e| internal(id, &e))?;
            page.items.into_iter().map(|s| s.id).collect()
        }
        _ => Vec::new(),
    };
    let mut values: Vec<String> = Vec::new();
    for candidate in candidates {
        if !candidate.is_empty() && candidate.starts_with(value) && !values.contains(&candidate) {
            values.push(candidate);
        }
    }
    let total = values.len();
    values.truncate(100);
    Ok(jsonrpc::result(
        id,
        json!({"completion": {"values": values, "total": total, "hasMore": total > 100}}),
    ))
}

async fn recent_runs(
    ctx: &Ctx<'_>,
    id: &RequestId,
    pick: impl Fn(&crate::runs::RunRecord) -> String,
) -> Result<Vec<String>, Failure> {
    let page = ctx
        .ledger
        .call(ListRuns {
            session_id: None,
            status: None,
            limit: 100,
            before: None,
        })
        .await
        .map_err(|e| internal(id, &e))?;
    Ok(page.items.iter().map(pick).collect())
}

fn internal(id: &RequestId, e: &Error) -> Failure {
    super::failure::failure_of(id, e, ErrorCode::INVALID_PARAMS)
}
