//! The run page `/runs/<runId>`: one run's status, live progress (phase, the agent's steps,
//! tokens, cost) and result, refreshing itself while the run is active;
//! `/runs/<runId>/transcript` serves the full agent transcript. Either opens with a signed link
//! (`?token=…`, handed to the MCP client) or for the owner signed in on this browser; anyone
//! else is sent to sign in (the link in a pull request carries no token, since everyone who can
//! read the pull request can read it). No secrets are ever on either: proxy tokens never reach
//! the ledger and the transcript holds none.

use crate::artifacts;
use crate::error::{ErrorKind, Result};
use crate::html;
use crate::http;
use crate::ids;
use crate::ledger::api::{GetRun, Ledger};
use crate::links;
use crate::oauth;
use crate::runs::{RunOutcome, RunRecord};
use crate::time::rfc3339;
use maud::{html, Markup};
use worker::{Env, Request, Response};

pub async fn handle(req: Request, env: &Env) -> Result<Response> {
    let path = req.path();
    let rest = path.trim_start_matches("/runs/").trim_end_matches('/');
    let (run_id, transcript) = match rest.strip_suffix("/transcript") {
        Some(id) => (id, true),
        None => (rest, false),
    };
    if !ids::is_valid(ids::RUN, run_id) {
        return Ok(http::not_found(&path));
    }
    let url = req.url()?;
    let token = url
        .query_pairs()
        .find(|(k, _)| k == "token")
        .map(|(_, v)| v.into_owned());
    // A signed link (handed to the MCP client), or the owner signed in on this browser — the
    // only way in for links without a token, such as the one in the pull request.
    let signed_in = oauth::signed_in_owner(env, &req);
    let owner = signed_in.is_some();
    match &token {
        Some(token) if !owner => {
            if let Err(e) = links::verify_run_page_token(env, run_id, token) {
                let status = if e.kind == ErrorKind::NotConfigured {
                    503
                } else {
                    404
                };
                return respond(status, &html::message("Link not valid", &e.message));
            }
        }
        None if !owner => return sign_in(&path),
        _ => {}
    }
    if transcript {
        return serve_transcript(env, run_id).await;
    }
    let get = GetRun {
        run_id: run_id.to_string(),
    };
    let run = match Ledger::get(env)?.call(get).await {
        Ok(run) => run,
        Err(e) if e.kind == ErrorKind::NotFound => {
            return respond(
                404,
                &html::message("Run not found", "This run does not exist."),
            )
        }
        Err(e) => return Err(e),
    };
    let active = !run.status.is_terminal();
    let transcript_link = match &token {
        Some(token) => format!(
            "/runs/{run_id}/transcript?token={}",
            http::query_value(token)
        ),
        None => format!("/runs/{run_id}/transcript"),
    };
    let body = match &run.worker {
        Some(_) => {
            let base = http::base_url(env, &req);
            crate::page_worker::body(env, &base, &run, signed_in.as_deref()).await?
        }
        None => run_body(&run, &transcript_link),
    };
    respond(200, &page(&run.title, body, active))
}

async fn serve_transcript(env: &Env, run_id: &str) -> Result<Response> {
    let object = env
        .bucket(artifacts::BUCKET)?
        .get(artifacts::transcript_key(run_id))
        .execute()
        .await?;
    let Some(object) = object else {
        return respond(
            404,
            &html::message("No transcript", "This run has no transcript (yet)."),
        );
    };
    let body = object
        .body()
        .ok_or_else(|| crate::error::Error::internal("empty transcript"))?;
    let text = body.text().await?;
    let mut response = Response::ok(text)?;
    response
        .headers_mut()
        .set("content-type", "application/json")?;
    response.headers_mut().set("cache-control", "no-store")?;
    Ok(response)
}

/// Sends a browser without a signed link to the owner's sign-in, and back here afterwards.
fn sign_in(path: &str) -> Result<Response> {
    let headers = worker::Headers::new();
    headers.set("location", &oauth::sign_in_url(path))?;
    headers.set("cache-control", "no-store")?;
    Ok(Response::empty()?.with_status(302).with_headers(headers))
}

fn run_body(run: &RunRecord, transcript_link: &str) -> Markup {
    let detail = run.progress.as_ref().and_then(|p| p.detail.as_ref());
    let outcome = run.outcome.as_ref();
    html! {
        table {
            (row("Status", run.status.as_str()))
            (row("Run", &run.id))
            (row("Session", &run.session_id))
            (row("Created", &rfc3339(run.created_at)))
            @if let Some(repo) = &run.repository { (row("Repository", repo)) }
            @if let Some(branch) = &run.branch { (row("Branch", branch)) }
            @if let Some(at) = run.completed_at { (row("Ended", &rfc3339(at))) }
            @if let Some(p) = &run.progress { (row("Progress", &format!("{}: {}", p.phase, p.message))) }
            @if let Some(d) = detail {
                (row("Agent", &format!(
                    "{} steps, {} tokens, ${:.4}",
                    d.steps,
                    d.tokens.input + d.tokens.output + d.tokens.reasoning,
                    d.cost_usd
                )))
            }
            @if let Some(outcome) = outcome {
                @if let Some(summary) = &outcome.summary { (row("Summary", summary)) }
                @if let Some(url) = &outcome.pull_request_url {
                    tr { th { "Pull request" } td { a href=(url) { (url) } } }
                }
                @if let Some(branch) = &outcome.branch { (row("Branch pushed", branch)) }
                @if let Some(stat) = &outcome.diffstat { (row("Diff", stat)) }
                @if !outcome.changed_files.is_empty() {
                    (row("Changed files", &outcome.changed_files.join("\n")))
                }
                @if !outcome.left_out.is_empty() {
                    (row("Left out (by-products)", &outcome.left_out.join("\n")))
                }
                @if !outcome.commits.is_empty() {
                    (row("Commits", &commit_lines(outcome)))
                }
                @if outcome.transcript {
                    tr {
                        th { "Transcript" }
                        td { a href=(transcript_link) { "full agent transcript (JSON)" } }
                    }
                }
            }
            @if let Some(error) = &run.error {
                (row("Error", &format!("{}: {}", error.code.as_str(), error.message)))
            }
        }
        @if let Some(d) = detail.filter(|d| !d.recent.is_empty()) {
            h2 { "Latest steps" }
            ol {
                @for s in &d.recent {
                    li { b { (s.tool) } " " (s.title) " " i { (s.status) } }
                }
            }
        }
        h2 { "Task" }
        pre { (run.task) }
    }
}

/// One line per commit: its short sha and message.
fn commit_lines(outcome: &RunOutcome) -> String {
    let lines: Vec<String> = outcome
        .commits
        .iter()
        .map(|c| {
            let short: String = c.sha.chars().take(10).collect();
            format!("{short} {}", c.message)
        })
        .collect();
    lines.join("\n")
}

fn row(label: &str, value: &str) -> Markup {
    html! { tr { th { (label) } td { (value) } } }
}

fn page(title: &str, body: Markup, refresh: bool) -> String {
    let head = html! {
        @if refresh { meta http-equiv="refresh" content="5"; }
    };
    html::document(title, head, body)
}

fn respond(status: u16, body: &str) -> Result<Response> {
    html::respond(status, body)
}
