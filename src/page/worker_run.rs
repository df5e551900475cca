//! The run page of a worker run (`/runs/<runId>`, opened like a coding run's): status, inputs,
//! the live log while it runs, the approval with its proposal, result, output files with
//! download links, logs and tool calls. The owner signed in on this browser gets Approve and
//! Reject buttons: `POST /runs/<runId>/decide`, which needs the owner's sign-in cookie (SameSite,
//! so no other site's form carries it), a form token bound to the owner, the run and the action,
//! and a same-origin `Origin` when the browser sends one. Nothing here ever shows a secret: every
//! text it shows was redacted before it was stored.

use super::{actions, parts};
use crate::artifacts;
use crate::error::{Error, Result};
use crate::html;
use crate::ledger::api::{Decide, Ledger};
use crate::links;
use crate::oauth;
use crate::runs::{RunRecord, RunStatus};
use crate::time::{now_ms, rfc3339};
use crate::workers::{Decision, WorkerRunInfo};
use maud::{html, Markup};
use worker::{Env, Request, Response};

/// The action name the decision form's token is bound to.
const DECIDE: &str = "decide";
/// Longest reason a decision keeps.
const REASON_MAX: usize = 500;

/// The body of a worker run's page; `owner` is the signed-in owner, if any, and `events` the
/// live updates' URL while the run is active.
pub async fn body(
    env: &Env,
    base: &str,
    run: &RunRecord,
    owner: Option<&str>,
    events: Option<String>,
) -> Result<Markup> {
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
        section #(parts::HEAD) aria-live="polite" data-events=[events] { (parts::head(run, now)) }
        table {
            (row("Worker", &format!("{} v{}", spec.worker, spec.version)))
            (row("Trigger", spec.trigger.as_str()))
            @if let Some(of) = &spec.replay_of { (row("Replay of", of)) }
            (row("Run", &run.id))
            (row("Created", &rfc3339(run.created_at)))
            @if let Some(at) = run.completed_at { (row("Ended", &rfc3339(at))) }
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
        (approval(run, info, owner.zip(crate::config::signing_key(env)).map(|(o, key)| actions::form_token(&key, o, &run.id, DECIDE))))
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

/// `POST /runs/<runId>/decide`: the owner's decision from the page.
pub async fn decide(mut req: Request, env: &Env, run_id: &str) -> Result<Response> {
    let form = match actions::checked(&mut req, env, run_id, DECIDE).await? {
        Ok(form) => form,
        Err(refused) => return Ok(refused),
    };
    let decision = match form.field("decision") {
        Some("approve") => Decision::Approved,
        Some("reject") => Decision::Rejected,
        _ => return html::respond(400, &html::message("Refused", "Choose Approve or Reject.")),
    };
    let reason = form
        .field("reason")
        .map(|r| r.chars().take(REASON_MAX).collect::<String>())
        .filter(|r| !r.trim().is_empty());
    let op = Decide {
        run_id: run_id.to_string(),
        decision,
        principal: form.owner.clone(),
        reason,
    };
    match Ledger::get(env)?.call(op).await {
        Ok(_) => actions::see_other(&format!("/runs/{run_id}")),
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
