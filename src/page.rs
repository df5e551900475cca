//! The run page `/runs/<runId>`: one run's status, live progress (phase, the agent's steps,
//! tokens, cost) and result, refreshing itself while the run is active;
//! `/runs/<runId>/transcript` serves the full agent transcript. Either opens with a signed link
//! (`?token=…`, handed to the MCP client) or for the owner signed in on this browser; anyone
//! else is sent to sign in (the link in a pull request carries no token, since everyone who can
//! read the pull request can read it). No secrets are ever on either: proxy tokens never reach
//! the ledger and the transcript holds none.

use crate::artifacts;
use crate::error::{ErrorKind, Result};
use crate::html::{self, escape};
use crate::http;
use crate::ids;
use crate::ledger::api::{GetRun, Ledger};
use crate::links;
use crate::oauth;
use crate::runs::RunRecord;
use crate::time::rfc3339;
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
    let owner = oauth::signed_in_owner(env, &req).is_some();
    match &token {
        Some(token) if !owner => {
            if let Err(e) = links::verify_run_page_token(env, run_id, token) {
                let status = if e.kind == ErrorKind::NotConfigured {
                    503
                } else {
                    404
                };
                return respond(
                    status,
                    &page(
                        "Link not valid",
                        &format!("<p>{}</p>", escape(&e.message)),
                        false,
                    ),
                );
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
                &page("Run not found", "<p>This run does not exist.</p>", false),
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
    respond(
        200,
        &page(&run.title, &run_body(&run, &transcript_link), active),
    )
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
            &page(
                "No transcript",
                "<p>This run has no transcript (yet).</p>",
                false,
            ),
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

fn run_body(run: &RunRecord, transcript_link: &str) -> String {
    let mut rows = vec![
        row("Status", run.status.as_str()),
        row("Run", &run.id),
        row("Session", &run.session_id),
        row("Created", &rfc3339(run.created_at)),
    ];
    if let Some(repo) = &run.repository {
        rows.push(row("Repository", repo));
    }
    if let Some(branch) = &run.branch {
        rows.push(row("Branch", branch));
    }
    if let Some(at) = run.completed_at {
        rows.push(row("Ended", &rfc3339(at)));
    }
    let mut steps_html = String::new();
    if let Some(p) = &run.progress {
        rows.push(row("Progress", &format!("{}: {}", p.phase, p.message)));
        if let Some(d) = &p.detail {
            let tokens = d.tokens.input + d.tokens.output + d.tokens.reasoning;
            rows.push(row(
                "Agent",
                &format!("{} steps, {tokens} tokens, ${:.4}", d.steps, d.cost_usd),
            ));
            if !d.recent.is_empty() {
                let items: Vec<String> = d
                    .recent
                    .iter()
                    .map(|s| {
                        format!(
                            "<li><b>{}</b> {} <i>{}</i></li>",
                            escape(&s.tool),
                            escape(&s.title),
                            escape(&s.status)
                        )
                    })
                    .collect();
                steps_html = format!("<h2>Latest steps</h2><ol>{}</ol>", items.join(""));
            }
        }
    }
    if let Some(outcome) = &run.outcome {
        if let Some(summary) = &outcome.summary {
            rows.push(row("Summary", summary));
        }
        if let Some(url) = &outcome.pull_request_url {
            rows.push(format!(
                "<tr><th>Pull request</th><td><a href=\"{0}\">{0}</a></td></tr>",
                escape(url)
            ));
        }
        if let Some(branch) = &outcome.branch {
            rows.push(row("Branch pushed", branch));
        }
        if let Some(stat) = &outcome.diffstat {
            rows.push(row("Diff", stat));
        }
        if !outcome.changed_files.is_empty() {
            rows.push(row("Changed files", &outcome.changed_files.join("\n")));
        }
        if !outcome.left_out.is_empty() {
            rows.push(row("Left out (by-products)", &outcome.left_out.join("\n")));
        }
        if !outcome.commits.is_empty() {
            let commits: Vec<String> = outcome
                .commits
                .iter()
                .map(|c| {
                    let short: String = c.sha.chars().take(10).collect();
                    format!("{short} {}", c.message)
                })
                .collect();
            rows.push(row("Commits", &commits.join("\n")));
        }
        if outcome.transcript {
            rows.push(format!(
                "<tr><th>Transcript</th><td><a href=\"{}\">full agent transcript (JSON)</a></td></tr>",
                escape(transcript_link)
            ));
        }
    }
    if let Some(error) = &run.error {
        rows.push(row(
            "Error",
            &format!("{}: {}", error.code.as_str(), error.message),
        ));
    }
    format!(
        "<table>{}</table>{steps_html}<h2>Task</h2><pre>{}</pre>",
        rows.join(""),
        escape(&run.task)
    )
}

fn row(label: &str, value: &str) -> String {
    format!("<tr><th>{label}</th><td>{}</td></tr>", escape(value))
}

fn page(title: &str, body: &str, refresh: bool) -> String {
    let head = if refresh {
        "<meta http-equiv=\"refresh\" content=\"5\">"
    } else {
        ""
    };
    html::document(title, head, body)
}

fn respond(status: u16, body: &str) -> Result<Response> {
    html::respond(status, body)
}
