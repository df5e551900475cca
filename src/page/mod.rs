//! The pages handoff serves to people, phone first: a run (`/runs/<runId>`) with its live
//! updates (`/events`), its conversation (`/conversation`), raw diff (`/diff`) and transcript
//! (`/transcript`, JSON), the owner's actions on it (`POST …/cancel`, `…/follow-up`, `…/decide`),
//! and a work session (`/sessions/<sessionId>`). Each opens with a signed link (handed to the MCP
//! client) or for the owner signed in on this browser (`access.rs`); the link in a pull request
//! carries no token. No secrets are ever shown: proxy tokens never reach the ledger, and the
//! transcript and worker logs hold none.

mod access;
mod actions;
mod conversation;
mod diff_view;
mod live;
mod parts;
mod run;
pub mod secrets;
mod session;
mod worker_run;

use crate::artifacts;
use crate::error::{ErrorKind, Result};
use crate::html;
use crate::http;
use crate::ids;
use crate::ledger::api::{GetRun, Ledger};
use crate::time::now_ms;
use access::{Subject, Viewer};
use maud::{html, Markup, PreEscaped};
use worker::{Env, Request, Response};

/// The script every page gets: live updates and relative times (nonce'd, inline).
const SCRIPT: &str = include_str!("live.js");

/// `GET /runs/…` and `GET /sessions/…`.
pub async fn get(req: Request, env: &Env) -> Result<Response> {
    let path = req.path();
    if let Some(session_id) = path.strip_prefix("/sessions/") {
        return session_page(&req, env, session_id.trim_end_matches('/')).await;
    }
    let rest = path.trim_start_matches("/runs/").trim_end_matches('/');
    let (run_id, view) = rest.split_once('/').unwrap_or((rest, ""));
    if !ids::is_valid(ids::RUN, run_id) {
        return Ok(http::not_found(&path));
    }
    let viewer = match access::viewer(env, &req, Subject::Run(run_id))? {
        Ok(viewer) => viewer,
        Err(refused) => return Ok(refused),
    };
    match view {
        "" => run_page(&req, env, run_id, &viewer).await,
        "events" => live::events(env, run_id),
        "transcript" => stored(env, &artifacts::transcript_key(run_id), "application/json").await,
        "diff" => {
            stored(
                env,
                &artifacts::diff_key(run_id),
                "text/plain; charset=utf-8",
            )
            .await
        }
        "conversation" => conversation_page(env, run_id, &viewer).await,
        _ => Ok(http::not_found(&path)),
    }
}

/// `POST /runs/<runId>/<action>`: the owner's actions.
pub async fn post(req: Request, env: &Env) -> Result<Response> {
    let path = req.path();
    let rest = path.trim_start_matches("/runs/");
    let Some((run_id, action)) = rest.split_once('/') else {
        return Ok(http::not_found(&path));
    };
    if !ids::is_valid(ids::RUN, run_id) {
        return Ok(http::not_found(&path));
    }
    let run_id = run_id.to_string();
    match action {
        "cancel" => actions::cancel(req, env, &run_id).await,
        "follow-up" => actions::follow_up(req, env, &run_id).await,
        "decide" => worker_run::decide(req, env, &run_id).await,
        _ => Ok(http::not_found(&path)),
    }
}

async fn run_page(req: &Request, env: &Env, run_id: &str, viewer: &Viewer) -> Result<Response> {
    let get = GetRun {
        run_id: run_id.to_string(),
    };
    let run = match Ledger::get(env)?.call(get).await {
        Ok(run) => run,
        Err(e) if e.kind == ErrorKind::NotFound => {
            return html::respond(
                404,
                &html::message("Run not found", "This run does not exist."),
            )
        }
        Err(e) => return Err(e),
    };
    let base = http::base_url(env, req);
    let now = now_ms();
    let body = match &run.worker {
        Some(_) => {
            let events = (!run.status.is_terminal())
                .then(|| format!("/runs/{run_id}/events{}", viewer.query()));
            worker_run::body(env, &base, &run, viewer.owner(), events).await?
        }
        None => run::body(env, &base, &run, viewer, now).await,
    };
    respond(&run.title, body, !run.status.is_terminal())
}

async fn conversation_page(env: &Env, run_id: &str, viewer: &Viewer) -> Result<Response> {
    let get = GetRun {
        run_id: run_id.to_string(),
    };
    let outcome = Ledger::get(env)?.call(get).await?.outcome;
    let Some(text) = stored_text(env, &artifacts::transcript_key(run_id)).await else {
        let why = outcome.and_then(|o| o.transcript_missing);
        let why = why.unwrap_or_else(|| "This run has no transcript (yet).".to_string());
        return html::respond(404, &html::message("No conversation", &why));
    };
    let abridged = outcome.is_some_and(|o| o.transcript_abridged);
    let q = viewer.query();
    let json_link = format!("/runs/{run_id}/transcript{q}");
    let body = html! {
        p { a href=(format!("/runs/{run_id}{q}")) { "← Back to the run" } }
        (conversation::body(&text, run_id, &json_link, abridged))
    };
    respond("Conversation", body, false)
}

async fn session_page(req: &Request, env: &Env, session_id: &str) -> Result<Response> {
    if !ids::is_valid(ids::SESSION, session_id) {
        return Ok(http::not_found(&req.path()));
    }
    let viewer = match access::viewer(env, req, Subject::Session(session_id))? {
        Ok(viewer) => viewer,
        Err(refused) => return Ok(refused),
    };
    let base = http::base_url(env, req);
    let body = session::body(env, &base, session_id, &viewer, now_ms()).await?;
    respond("Session", body, false)
}

/// A page with the live script; `active` pages also refresh themselves without JavaScript.
fn respond(title: &str, body: Markup, active: bool) -> Result<Response> {
    let nonce = ids::new_secret("");
    let head = html! {
        @if active { noscript { meta http-equiv="refresh" content="10"; } }
    };
    let body = html! {
        (body)
        script nonce=(nonce) { (PreEscaped(SCRIPT)) }
    };
    html::respond_with_script(200, &html::document(title, head, body), &nonce)
}

/// A stored artifact as it is, with the headers every download gets (never rendered as a page).
async fn stored(env: &Env, key: &str, content_type: &str) -> Result<Response> {
    let Some(text) = stored_text(env, key).await else {
        return html::respond(
            404,
            &html::message("Not stored", "This run has none (yet)."),
        );
    };
    let mut response = Response::ok(text)?;
    let headers = response.headers_mut();
    headers.set("content-type", content_type)?;
    headers.set("cache-control", "no-store")?;
    headers.set("x-content-type-options", "nosniff")?;
    headers.set("content-security-policy", "default-src 'none'; sandbox")?;
    Ok(response)
}

/// A text artifact of the bucket, if it is there.
pub(super) async fn stored_text(env: &Env, key: &str) -> Option<String> {
    let object = env
        .bucket(artifacts::BUCKET)
        .ok()?
        .get(key)
        .execute()
        .await
        .ok()??;
    object.body()?.text().await.ok()
}
