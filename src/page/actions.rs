//! What the owner can do from a run's page: cancel it, send a follow-up instruction to its
//! session, and (worker runs) approve or reject. Every action is a `POST /runs/<runId>/<action>`
//! that needs the owner's sign-in cookie (SameSite, so another site's form does not carry it), a
//! form token bound to the owner, the run and the action, and a same-origin `Origin` when the
//! browser sends one. Anyone else gets 403 and nothing happens.

use super::access::Viewer;
use crate::error::{Error, Result};
use crate::html;
use crate::http;
use crate::ledger::api::{CancelRun, CreateRun, GetRun, Ledger};
use crate::mac;
use crate::oauth;
use crate::runs::{RunRecord, RunSpec};
use maud::{html, Markup};
use worker::{Env, Request, Response};

/// Largest form body read (a follow-up of 50,000 characters, percent-encoded).
const MAX_FORM: usize = 256 * 1024;
/// Longest follow-up instruction, as for `opencode_run_task`.
const TASK_MAX_CHARS: usize = 50_000;

/// The token of `owner`'s form for `action` on `run_id`.
pub fn form_token(key: &[u8], owner: &str, run_id: &str, action: &str) -> String {
    mac::tag(
        key,
        &format!("run-page-{action}"),
        &format!("{owner}|{run_id}"),
    )
}

/// The owner's forms for a coding run, or a way to sign in for them.
pub fn forms(env: &Env, run: &RunRecord, viewer: &Viewer) -> Markup {
    let key = crate::config::signing_key(env);
    let Some((owner, key)) = viewer.owner().zip(key) else {
        return html! {
            p { a.button href=(oauth::sign_in_url(&format!("/runs/{}", run.id))) { "Sign in to cancel or follow up" } }
        };
    };
    let token = |action: &str| form_token(&key, owner, &run.id, action);
    html! {
        @if !run.status.is_terminal() {
            form method="post" action=(format!("/runs/{}/cancel", run.id)) {
                input type="hidden" name="token" value=(token("cancel"));
                button.danger type="submit" { "Cancel this run" }
            }
        }
        form method="post" action=(format!("/runs/{}/follow-up", run.id)) {
            label for="follow-up" { "Follow-up instruction for this session" }
            textarea #follow-up name="task" rows="3" maxlength="50000" required {}
            input type="hidden" name="token" value=(token("follow-up"));
            button.primary type="submit" { "Send follow-up" }
        }
    }
}

/// A checked owner form: who sent it and its fields, or the refusal to answer.
pub struct Form {
    pub owner: String,
    fields: Vec<(String, String)>,
}

impl Form {
    pub fn field(&self, name: &str) -> Option<&str> {
        self.fields
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.as_str())
    }
}

/// Checks a POST for `action` on `run_id`: sign-in, origin, size and form token.
pub async fn checked(
    req: &mut Request,
    env: &Env,
    run_id: &str,
    action: &str,
) -> Result<std::result::Result<Form, Response>> {
    let refuse =
        |status: u16, title: &str, text: &str| -> Result<std::result::Result<Form, Response>> {
            Ok(Err(html::respond(status, &html::message(title, text))?))
        };
    let Some(owner) = oauth::signed_in_owner(env, req) else {
        return refuse(
            403,
            "Sign in first",
            "Only the owner, signed in, can do this.",
        );
    };
    let base = http::base_url(env, req);
    if let Some(origin) = req.headers().get("origin").ok().flatten() {
        if origin.trim_end_matches('/') != base.trim_end_matches('/') {
            return refuse(403, "Refused", "This form came from another site.");
        }
    }
    let Some(body) = http::read_capped(req, MAX_FORM).await? else {
        return refuse(413, "Refused", "This form is too large.");
    };
    let fields: Vec<(String, String)> = worker::url::form_urlencoded::parse(&body)
        .into_owned()
        .collect();
    let form = Form { owner, fields };
    let key =
        crate::config::signing_key(env).ok_or_else(|| Error::not_configured("no signing key"))?;
    let expected = form_token(&key, &form.owner, run_id, action);
    if !form
        .field("token")
        .is_some_and(|t| mac::same(t.as_bytes(), expected.as_bytes()))
    {
        return refuse(403, "Refused", "This form is not valid; reload the page.");
    }
    Ok(Ok(form))
}

/// `POST /runs/<runId>/cancel`.
pub async fn cancel(mut req: Request, env: &Env, run_id: &str) -> Result<Response> {
    let form = match checked(&mut req, env, run_id, "cancel").await? {
        Ok(form) => form,
        Err(refused) => return Ok(refused),
    };
    let op = CancelRun {
        run_id: run_id.to_string(),
        principal: form.owner,
    };
    match Ledger::get(env)?.call(op).await {
        Ok(_) => see_other(&format!("/runs/{run_id}")),
        Err(e) => html::respond(e.http_status(), &html::message("Not cancelled", &e.message)),
    }
}

/// `POST /runs/<runId>/follow-up`: a new run in the same session, on the same repository.
pub async fn follow_up(mut req: Request, env: &Env, run_id: &str) -> Result<Response> {
    let form = match checked(&mut req, env, run_id, "follow-up").await? {
        Ok(form) => form,
        Err(refused) => return Ok(refused),
    };
    let task = form.field("task").unwrap_or_default().trim().to_string();
    let chars = task.chars().count();
    if chars == 0 || chars > TASK_MAX_CHARS {
        let text = format!("Write an instruction of 1 to {TASK_MAX_CHARS} characters.");
        return html::respond(400, &html::message("Not sent", &text));
    }
    let ledger = Ledger::get(env)?;
    let run = ledger
        .call(GetRun {
            run_id: run_id.to_string(),
        })
        .await?;
    if run.worker.is_some() {
        return html::respond(
            400,
            &html::message("Not sent", "A worker run has no session to continue."),
        );
    }
    let spec = RunSpec {
        title: crate::runs::title_from(&task, 100),
        task,
        repository: run.repository.clone(),
        branch: run.branch.clone(),
        session_id: Some(run.session_id.clone()),
        model: run.model.clone(),
        idempotency_key: None,
        origin: Some(http::base_url(env, &req)),
        worker: None,
        budget: None,
        callback_url: None,
    };
    let op = CreateRun {
        principal: form.owner,
        spec,
        task_ttl_ms: None,
    };
    match ledger.call(op).await {
        Ok(created) => see_other(&format!("/runs/{}", created.run.id)),
        Err(e) => html::respond(e.http_status(), &html::message("Not sent", &e.message)),
    }
}

pub fn see_other(location: &str) -> Result<Response> {
    let headers = worker::Headers::new();
    headers.set("location", location)?;
    headers.set("cache-control", "no-store")?;
    Ok(Response::empty()?.with_status(303).with_headers(headers))
}
