//! The run page of a worker run (`/runs/<runId>`, opened like a coding run's): status, inputs,
//! the live log while it runs, the approval with its proposal, result, output files with
//! download links, logs and tool calls. The owner signed in on this browser gets Approve and
//! Reject buttons: `POST /runs/<runId>/decide`, which needs the owner's sign-in cookie (SameSite,
//! so no other site's form carries it), a form token bound to the owner, the run and the action,
//! and a same-origin `Origin` when the browser sends one. Nothing here ever shows a secret: every
//! text it shows was redacted before it was stored.

use crate::artifacts;
use crate::error::{Error, Result};
use crate::html;
use crate::http;
use crate::ids;
use crate::ledger::api::{Decide, Ledger};
use crate::links;
use crate::mac;
use crate::oauth;
use crate::runs::{RunRecord, RunStatus};
use crate::time::{now_ms, rfc3339};
use crate::workers::{Decision, WorkerRunInfo};
use maud::{html, Markup};
use worker::{Env, Request, Response};

/// Longest reason a decision keeps.
const REASON_MAX: usize = 500;

/// The body of a worker run's page; `owner` is the signed-in owner, if any.
pub async fn body(env: &Env, base: &str, run: &RunRecord, owner: Option<&str>) -> Result<Markup> {
    let Some(info) = &run.worker else {
        return Err(Error::internal("not a worker run"));
    };
    let spec = &info.spec;
    let outcome = info.outcome.clone().unwrap_or_default();
    let logs = if outcome.logs_stored {
        stored_logs(env, &run.id).await
    } else {
        None
    };
    let now = now_ms();
    Ok(html! {
        table {
            (row("Status", run.status.as_str()))
            (row("Worker", &format!("{} v{}", spec.worker, spec.version)))
            (row("Trigger", spec.trigger.as_str()))
            @if let Some(of) = &spec.replay_of { (row("Replay of", of)) }
            (row("Run", &run.id))
            (row("Created", &rfc3339(run.created_at)))
            @if let Some(at) = run.completed_at { (row("Ended", &rfc3339(at))) }
            @if let Some(p) = &run.progress { (row("Now", &format!("{}: {}", p.phase, p.message))) }
            @if run.status.is_terminal() {
                (row("Exit", &outcome.exit_code.map_or("killed".into(), |c| c.to_string())))
                (row("Duration", &format!("{:.1} s", outcome.duration_ms as f64 / 1000.0)))
            }
            @if let Some(error) = &run.error {
                (row("Error", &format!("{}: {}", error.code.as_str(), error.message)))
            }
        }
        @if !spec.inputs.is_empty() {
            h2 { "Inputs" }
            pre { (serde_json::Value::Object(spec.inputs.clone()).to_string()) }
        }
        (approval(run, info, owner.zip(crate::config::signing_key(env)).map(|(o, key)| form_token(&key, o, &run.id))))
        @if let Some(live) = info.live_log.as_ref().filter(|_| !run.status.is_terminal()) {
            h2 { "Log (live)" }
            pre { (live) }
        }
        @if let Some(result) = &outcome.result {
            h2 { "Result" }
            pre { (serde_json::to_string_pretty(result).unwrap_or_default()) }
        }
        @if !outcome.outputs.is_empty() {
            h2 { "Outputs" }
            ul {
                @for o in &outcome.outputs {
                    li {
                        @match links::output_url(env, base, &run.id, &o.path, now) {
                            Some(url) => a href=(url) { (o.path) },
                            None => (o.path),
                        }
                        " " span.muted { (o.media_type) ", " (o.size) " bytes" }
                    }
                }
            }
        }
        @if !outcome.tool_calls.is_empty() {
            h2 { "Tool calls" }
            ol { @for c in &outcome.tool_calls { li { b { (c.tool) } " " (c.title) " " i { (c.status) } } } }
        }
        @if let Some((stdout, stderr)) = &logs {
            h2 { "Output" }
            pre { (stdout) }
            @if !stderr.is_empty() { h2 { "Errors" } pre { (stderr) } }
        } @else if !outcome.log_tail.is_empty() {
            h2 { "Log" }
            pre { (outcome.log_tail) }
        }
    })
}

/// The approval box; `token` (the owner's form token) shows the buttons.
fn approval(run: &RunRecord, info: &WorkerRunInfo, token: Option<String>) -> Markup {
    let Some(a) = &info.approval else {
        return html! {};
    };
    let open = a.decision == Decision::Pending && run.status == RunStatus::PendingApproval;
    html! {
        div.box {
            h2 { "Approval: " (a.label) }
            p.muted { "Requested " (rfc3339(a.requested_at)) @if open { ", lapses " (rfc3339(a.expires_at)) } }
            pre { (a.proposal) }
            @if open {
                @match token {
                    Some(token) => form method="post" action=(format!("/runs/{}/decide", run.id)) {
                        input type="hidden" name="token" value=(token);
                        label { "Reason (optional) " input type="text" name="reason" maxlength="500"; }
                        p {
                            button.primary type="submit" name="decision" value="approve" { "Approve" }
                            button type="submit" name="decision" value="reject" { "Reject" }
                        }
                    },
                    None => p {
                        a.button href=(oauth::sign_in_url(&format!("/runs/{}", run.id))) { "Sign in to decide" }
                    },
                }
            } @else {
                p {
                    b { (a.decision.as_str()) }
                    @if let Some(by) = &a.decided_by { " by " (by) }
                    @if let Some(at) = a.decided_at { " at " (rfc3339(at)) }
                    @if let Some(reason) = &a.reason { ": " (reason) }
                }
            }
        }
    }
}

fn form_token(key: &[u8], owner: &str, run_id: &str) -> String {
    mac::tag(key, "worker-decision", &format!("{owner}|{run_id}"))
}

/// `POST /runs/<runId>/decide`: the owner's decision from the page.
pub async fn decide(mut req: Request, env: &Env) -> Result<Response> {
    let path = req.path();
    let run_id = path
        .trim_start_matches("/runs/")
        .trim_end_matches("/decide")
        .to_string();
    if !ids::is_valid(ids::RUN, &run_id) || !path.ends_with("/decide") {
        return Ok(http::not_found(&path));
    }
    let Some(owner) = oauth::signed_in_owner(env, &req) else {
        return html::respond(
            403,
            &html::message("Sign in first", "Only the owner, signed in, can decide."),
        );
    };
    let base = http::base_url(env, &req);
    if let Some(origin) = req.headers().get("origin").ok().flatten() {
        if origin.trim_end_matches('/') != base.trim_end_matches('/') {
            return html::respond(
                403,
                &html::message("Refused", "This form came from another site."),
            );
        }
    }
    let body = http::read_capped(&mut req, 4096).await?.unwrap_or_default();
    let form: Vec<(String, String)> = worker::url::form_urlencoded::parse(&body)
        .into_owned()
        .collect();
    let field = |name: &str| form.iter().find(|(k, _)| k == name).map(|(_, v)| v.clone());
    let key =
        crate::config::signing_key(env).ok_or_else(|| Error::not_configured("no signing key"))?;
    let expected = form_token(&key, &owner, &run_id);
    if !field("token").is_some_and(|t| mac::same(t.as_bytes(), expected.as_bytes())) {
        return html::respond(
            403,
            &html::message("Refused", "This form is not valid; reload the page."),
        );
    }
    let decision = match field("decision").as_deref() {
        Some("approve") => Decision::Approved,
        Some("reject") => Decision::Rejected,
        _ => return html::respond(400, &html::message("Refused", "Choose Approve or Reject.")),
    };
    let reason = field("reason")
        .map(|r| r.chars().take(REASON_MAX).collect::<String>())
        .filter(|r| !r.trim().is_empty());
    let op = Decide {
        run_id: run_id.clone(),
        decision,
        principal: owner,
        reason,
    };
    match Ledger::get(env)?.call(op).await {
        Ok(_) => {
            let headers = worker::Headers::new();
            headers.set("location", &format!("/runs/{run_id}"))?;
            Ok(Response::empty()?.with_status(303).with_headers(headers))
        }
        Err(e) => html::respond(e.http_status(), &html::message("Not decided", &e.message)),
    }
}

async fn stored_logs(env: &Env, run_id: &str) -> Option<(String, String)> {
    let bucket = env.bucket(artifacts::BUCKET).ok()?;
    let object = bucket
        .get(artifacts::logs_key(run_id))
        .execute()
        .await
        .ok()??;
    let text = object.body()?.text().await.ok()?;
    let logs: serde_json::Value = serde_json::from_str(&text).ok()?;
    Some((
        logs["stdout"].as_str().unwrap_or_default().to_string(),
        logs["stderr"].as_str().unwrap_or_default().to_string(),
    ))
}

fn row(label: &str, value: &str) -> Markup {
    html! { tr { th { (label) } td { (value) } } }
}
