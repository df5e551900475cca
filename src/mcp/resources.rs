//! MCP resources: runs and sandbox files by URI.
//!
//! - `handoff://runs/{runId}`: the run as `opencode_get_result` shows it (JSON);
//! - `handoff://runs/{runId}/transcript`: the agent's whole conversation (JSON, once it ended);
//! - `handoff://runs/{runId}/diff`: the change as a unified diff (once it was pushed);
//! - `handoff://sandboxes/{sandboxId}/files/{path}`: a file in a sandbox's workspace.
//!
//! `resources/list` shows the newest runs; the four shapes are listed as templates. A run's
//! resources can be subscribed to (`resources/subscribe`, or `subscriptions/listen` in the
//! modern era): the stream says when the run changes.

use super::failure::Failure;
use super::jsonrpc;
use crate::artifacts;
use crate::error::Error;
use crate::ids;
use crate::ledger::api::{GetRun, ListRuns, Subscribe, Unsubscribe};
use crate::tools::{self, Ctx};
use base64::engine::general_purpose::{STANDARD as B64, URL_SAFE_NO_PAD};
use base64::Engine;
use rmcp::model::{ErrorCode, RequestId};
use serde_json::{json, Map, Value};

const RUNS: &str = "handoff://runs/";
const SANDBOXES: &str = "handoff://sandboxes/";
/// -32002, "resource not found", in the initialize era (2026-07-28 uses -32602).
const LEGACY_NOT_FOUND: i32 = -32002;
const PAGE: u32 = 50;
const CURSOR: &str = "resources";

/// What a URI names.
#[derive(Debug, PartialEq, Eq)]
pub enum Target {
    Run(String),
    Transcript(String),
    Diff(String),
    SandboxFile { sandbox_id: String, path: String },
}

impl Target {
    /// The run whose changes this resource follows, if any.
    pub fn run_id(&self) -> Option<&str> {
        match self {
            Target::Run(id) | Target::Transcript(id) | Target::Diff(id) => Some(id),
            Target::SandboxFile { .. } => None,
        }
    }
}

/// Parses a handoff URI; `None` for anything else.
pub fn parse(uri: &str) -> Option<Target> {
    if let Some(rest) = uri.strip_prefix(RUNS) {
        let (id, tail) = rest.split_once('/').unwrap_or((rest, ""));
        if !ids::is_valid(ids::RUN, id) {
            return None;
        }
        let id = id.to_string();
        return match tail {
            "" => Some(Target::Run(id)),
            "transcript" => Some(Target::Transcript(id)),
            "diff" => Some(Target::Diff(id)),
            _ => None,
        };
    }
    let rest = uri.strip_prefix(SANDBOXES)?;
    let (sandbox_id, path) = rest.split_once("/files/")?;
    let path = percent_decode(path)?;
    (ids::is_valid(ids::SANDBOX, sandbox_id) && !path.is_empty()).then(|| Target::SandboxFile {
        sandbox_id: sandbox_id.to_string(),
        path,
    })
}

fn percent_decode(text: &str) -> Option<String> {
    let decoded: Vec<u8> =
        worker::url::form_urlencoded::parse(format!("p={}", text.replace('+', "%2B")).as_bytes())
            .next()?
            .1
            .into_owned()
            .into_bytes();
    String::from_utf8(decoded).ok()
}

pub fn templates() -> Value {
    let template = |uri: &str, name: &str, title: &str, description: &str, mime: &str| json!({"uriTemplate": uri, "name": name, "title": title, "description": description, "mimeType": mime});
    json!({"resourceTemplates": [
        template("handoff://runs/{runId}", "run", "A run",
            "A run's status, progress and result, as opencode_get_result shows it.", "application/json"),
        template("handoff://runs/{runId}/transcript", "run-transcript", "A run's transcript",
            "The agent's whole conversation, once the run ended.", "application/json"),
        template("handoff://runs/{runId}/diff", "run-diff", "A run's change",
            "The change the run pushed, as a unified diff.", "text/x-diff"),
        template("handoff://sandboxes/{sandboxId}/files/{+path}", "sandbox-file", "A sandbox file",
            "A file in a sandbox's workspace (relative to /home/sandbox).", "application/octet-stream"),
    ]})
}

/// `resources/list`: the newest runs, paginated.
pub async fn list(
    ctx: &Ctx<'_>,
    id: &RequestId,
    params: Option<&Map<String, Value>>,
) -> Result<Value, Failure> {
    let before = match params.and_then(|p| p.get("cursor")) {
        None | Some(Value::Null) => None,
        Some(cursor) => Some(cursor.as_str().and_then(decode_cursor).ok_or_else(|| {
            Failure::Rpc(jsonrpc::invalid_params(
                id.clone(),
                "`cursor` is not one this server returned; omit it to start from the newest run",
            ))
        })?),
    };
    let page = ctx
        .ledger
        .call(ListRuns {
            session_id: None,
            status: None,
            limit: PAGE,
            before,
        })
        .await
        .map_err(|e| failure(id, &e, true))?;
    let resources: Vec<Value> = page
        .items
        .iter()
        .map(|run| {
            json!({
                "uri": format!("{RUNS}{}", run.id),
                "name": run.id,
                "title": run.title,
                "description": format!("Run {} ({})", run.id, run.status.as_str()),
                "mimeType": "application/json",
            })
        })
        .collect();
    let mut result = json!({ "resources": resources });
    if let Some(next) = page.next {
        result["nextCursor"] = json!(URL_SAFE_NO_PAD.encode(format!("{CURSOR}:{next}")));
    }
    Ok(jsonrpc::result(id, result))
}

fn decode_cursor(cursor: &str) -> Option<i64> {
    let text = String::from_utf8(URL_SAFE_NO_PAD.decode(cursor).ok()?).ok()?;
    text.strip_prefix(CURSOR)?.strip_prefix(':')?.parse().ok()
}

/// `resources/read`.
pub async fn read(
    ctx: &Ctx<'_>,
    legacy: bool,
    id: &RequestId,
    params: Option<&Map<String, Value>>,
) -> Result<Value, Failure> {
    let (uri, target) = target(id, params)?;
    let content = match target {
        Target::Run(run_id) => {
            let run = ctx
                .ledger
                .call(GetRun { run_id })
                .await
                .map_err(|e| failure(id, &e, legacy))?;
            let result = tools::run_result(ctx, run);
            let text = result
                .structured_content
                .map(|v| v.to_string())
                .unwrap_or_default();
            json!({"uri": uri, "mimeType": "application/json", "text": text})
        }
        Target::Transcript(run_id) => {
            let key = artifacts::transcript_key(&run_id);
            let text = stored(ctx, &key, id, legacy, "transcript").await?;
            json!({"uri": uri, "mimeType": "application/json", "text": text})
        }
        Target::Diff(run_id) => {
            let text = stored(ctx, &artifacts::diff_key(&run_id), id, legacy, "diff").await?;
            json!({"uri": uri, "mimeType": "text/x-diff", "text": text})
        }
        Target::SandboxFile { sandbox_id, path } => {
            sandbox_file(ctx, id, &uri, &sandbox_id, &path).await?
        }
    };
    Ok(jsonrpc::result(id, json!({ "contents": [content] })))
}

/// A text artifact of a run from R2.
async fn stored(
    ctx: &Ctx<'_>,
    key: &str,
    id: &RequestId,
    legacy: bool,
    what: &str,
) -> Result<String, Failure> {
    let internal = |e: worker::Error| failure(id, &Error::from(e), legacy);
    let bucket = ctx.env.bucket(artifacts::BUCKET).map_err(internal)?;
    let object = bucket.get(key).execute().await.map_err(internal)?;
    let body = object.as_ref().and_then(|o| o.body());
    let Some(body) = body else {
        return Err(failure(
            id,
            &Error::not_found(format!(
                "this run has no {what} (yet): it is stored when the run ends (a diff only when it pushed a change)"
            )),
            legacy,
        ));
    };
    body.text().await.map_err(internal)
}

/// A sandbox file through `sandbox_files_read` (its checks and errors), as text when it is
/// UTF-8 and as a blob otherwise.
async fn sandbox_file(
    ctx: &Ctx<'_>,
    id: &RequestId,
    uri: &str,
    sandbox_id: &str,
    path: &str,
) -> Result<Value, Failure> {
    let arguments = json!({"sandboxId": sandbox_id, "path": path, "encoding": "base64"});
    let result = tools::call(ctx, "sandbox_files_read", arguments.as_object().cloned())
        .await
        .map_err(|e| super::failure::of_call(id, e))?;
    let content = result
        .structured_content
        .as_ref()
        .and_then(|s| s.get("content"))
        .and_then(Value::as_str);
    let Some(content) = content.filter(|_| result.is_error != Some(true)) else {
        let text = json!(result.content)[0]["text"]
            .as_str()
            .unwrap_or("the file could not be read")
            .to_string();
        return Err(Failure::Rpc(jsonrpc::invalid_params(id.clone(), text)));
    };
    let bytes = B64.decode(content).unwrap_or_default();
    let mime = media_type(path);
    Ok(match String::from_utf8(bytes) {
        Ok(text) => json!({"uri": uri, "mimeType": mime, "text": text}),
        Err(_) => json!({"uri": uri, "mimeType": mime, "blob": content}),
    })
}

/// A media type from a file name's extension (a few common ones; the rest are octet streams).
fn media_type(path: &str) -> &'static str {
    let ext = path.rsplit_once('.').map(|(_, e)| e.to_ascii_lowercase());
    match ext.as_deref() {
        Some("txt" | "log" | "rs" | "py" | "sh" | "toml" | "yml" | "yaml" | "ts" | "js") => {
            "text/plain"
        }
        Some("md") => "text/markdown",
        Some("json") => "application/json",
        Some("html") => "text/html",
        Some("png") => "image/png",
        Some("jpg" | "jpeg") => "image/jpeg",
        Some("diff" | "patch") => "text/x-diff",
        _ => "application/octet-stream",
    }
}

/// `resources/subscribe` and `resources/unsubscribe` (initialize era): only a run's resources
/// change in ways worth telling.
pub async fn subscribe(
    ctx: &Ctx<'_>,
    id: &RequestId,
    params: Option<&Map<String, Value>>,
    on: bool,
) -> Result<Value, Failure> {
    let (uri, target) = target(id, params)?;
    let Some(run_id) = target.run_id().map(str::to_string) else {
        return Err(Failure::Rpc(jsonrpc::invalid_params(
            id.clone(),
            "only a run's resources (handoff://runs/…) can be subscribed to",
        )));
    };
    let outcome = if on {
        ctx.ledger.call(Subscribe { uri, run_id }).await
    } else {
        ctx.ledger.call(Unsubscribe { uri }).await
    };
    outcome.map_err(|e| failure(id, &e, true))?;
    Ok(jsonrpc::result(id, json!({})))
}

fn target(
    id: &RequestId,
    params: Option<&Map<String, Value>>,
) -> Result<(String, Target), Failure> {
    let uri = params
        .and_then(|p| p.get("uri"))
        .and_then(Value::as_str)
        .ok_or_else(|| {
            Failure::Rpc(jsonrpc::invalid_params(
                id.clone(),
                "`uri` (a string) is required",
            ))
        })?;
    let target = parse(uri).ok_or_else(|| {
        Failure::Rpc(jsonrpc::invalid_params(
            id.clone(),
            format!(
                "unknown resource {}; see resources/templates/list for the URIs this server serves",
                crate::error::excerpt(uri)
            ),
        ))
    })?;
    Ok((uri.to_string(), target))
}

fn failure(id: &RequestId, e: &Error, legacy: bool) -> Failure {
    let not_found = if legacy {
        ErrorCode(LEGACY_NOT_FOUND)
    } else {
        ErrorCode::INVALID_PARAMS
    };
    super::failure::failure_of(id, e, not_found)
}

#[cfg(test)]
mod tests {
    use super::*;

    const RUN: &str = "run_0123456789abcdefghjkmnpqrs";

    #[test]
    fn uris_name_runs_and_sandbox_files_and_nothing_else() {
        assert_eq!(
            parse(&format!("{RUNS}{RUN}")),
            Some(Target::Run(RUN.into()))
        );
        assert_eq!(
            parse(&format!("{RUNS}{RUN}/diff")),
            Some(Target::Diff(RUN.into()))
        );
        assert_eq!(
            parse(&format!("{RUNS}{RUN}/transcript")),
            Some(Target::Transcript(RUN.into()))
        );
        for bad in [
            format!("{RUNS}{RUN}/other"),
            format!("{RUNS}../etc/passwd"),
            format!("{RUNS}run_x"),
            "file:///etc/passwd".to_string(),
            format!("{SANDBOXES}sbx_x/files/a"),
        ] {
            assert_eq!(parse(&bad), None, "{bad}");
        }
    }
}
