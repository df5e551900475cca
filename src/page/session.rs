//! `GET /sessions/<sessionId>`: a work session's runs, newest first, each with its status, when it
//! started and its pull request — for the owner signed in, or with a signed session link (from
//! a run page opened by its link). Each run links to its page.

use super::access::Viewer;
use super::parts;
use crate::error::Result;
use crate::ledger::api::{Ledger, ListRuns};
use crate::links;
use maud::{html, Markup};
use worker::Env;

/// Runs listed at most.
const LIMIT: u32 = 100;

pub async fn body(
    env: &Env,
    base: &str,
    session_id: &str,
    viewer: &Viewer,
    now: i64,
) -> Result<Markup> {
    let op = ListRuns {
        session_id: Some(session_id.to_string()),
        status: None,
        limit: LIMIT,
        before: None,
    };
    let page = Ledger::get(env)?.call(op).await?;
    let link = |run_id: &str| match viewer {
        Viewer::Owner(_) => Some(format!("/runs/{run_id}")),
        Viewer::Link(_) => links::run_page_url(env, base, run_id, now),
    };
    Ok(html! {
        p.muted { code { (session_id) } " · " (page.items.len()) " run" @if page.items.len() != 1 { "s" }
            " · one sandbox and one agent conversation, continued run after run" }
        @if page.items.is_empty() {
            p { "This session has no runs." }
        }
        ol.runs reversed {
            @for run in &page.items {
                li {
                    (parts::badge(run.status)) " "
                    @match link(&run.id) {
                        Some(href) => a href=(href) { (run.title) },
                        None => (run.title),
                    }
                    br;
                    span.muted {
                        (parts::when(run.created_at, now))
                        @if let Some(repo) = &run.repository { " · " (repo) }
                        @if let Some(url) = run.outcome.as_ref().and_then(|o| o.pull_request_url.as_ref()) {
                            " · " a href=(url) { "pull request" }
                        }
                    }
                }
            }
        }
    })
}
