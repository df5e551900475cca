//! A coding run's page body: status at a glance, the pull request, the error, the agent's answer
//! (Markdown), the change file by file, the timeline of phases and steps, usage, the task, the
//! owner's actions and links to the conversation and the session.

use super::access::Viewer;
use super::{actions, diff_view, parts, stored_text};
use crate::artifacts;
use crate::links;
use crate::markdown;
use crate::runs::{RunRecord, Step};
use crate::transcript::{self, Part};
use maud::{html, Markup, PreEscaped};
use worker::Env;

pub async fn body(env: &Env, base: &str, run: &RunRecord, viewer: &Viewer, now: i64) -> Markup {
    let q = viewer.query();
    let outcome = run.outcome.clone().unwrap_or_default();
    let ended = run.status.is_terminal();
    let detail = run.progress.as_ref().and_then(|p| p.detail.clone());
    let (mut steps, mut total) = detail.map(|d| (d.recent, d.steps)).unwrap_or_default();
    if ended && outcome.transcript {
        if let Some(all) = all_steps(env, &run.id).await {
            total = all.len() as u32;
            steps = all;
        }
    }
    let diff = match outcome.diff {
        true => stored_text(env, &artifacts::diff_key(&run.id)).await,
        false => None,
    };
    let session_link = match viewer {
        Viewer::Owner(_) => Some(format!("/sessions/{}", run.session_id)),
        Viewer::Link(_) => links::session_page_url(env, base, &run.session_id, now),
    };
    let events = format!("/runs/{}/events{q}", run.id);
    html! {
        section #(parts::HEAD) aria-live="polite" data-events=[(!ended).then_some(events)] {
            (parts::head(run, now))
        }
        @if let Some(url) = &outcome.pull_request_url {
            p { a.pr href=(url) { "Open the pull request" } }
        }
        @if let Some(error) = &run.error {
            div.alert role="alert" { b { (error.code.as_str()) } ": " (error.message) }
        }
        @if let Some(branch) = &outcome.branch {
            p.muted { "Branch " code { (branch) } @if let Some(stat) = &outcome.diffstat { " · " (stat) } }
        }
        @if let Some(summary) = outcome.summary.as_ref().filter(|_| ended) {
            section aria-labelledby="answer" {
                h2 #answer { "Answer" }
                div.markdown { (PreEscaped(markdown::to_html(summary))) }
            }
        }
        @if let Some(diff) = &diff {
            section aria-labelledby="change" {
                h2 #change { "Change" }
                (diff_view::render(diff, &format!("/runs/{}/diff{q}", run.id)))
            }
        } @else if !outcome.changed_files.is_empty() {
            section aria-labelledby="change" {
                h2 #change { "Change" }
                ul { @for f in &outcome.changed_files { li { code { (f) } } } }
            }
        }
        @if !outcome.left_out.is_empty() {
            details {
                summary { "Kept out of the commit (" (outcome.left_out.len()) ")" }
                ul { @for f in &outcome.left_out { li { code { (f) } } } }
            }
        }
        section aria-labelledby="timeline" {
            h2 #timeline { "Timeline" }
            div #(parts::TIMELINE) { (parts::timeline(run, &steps, total, now)) }
        }
        section aria-labelledby="usage" {
            h2 #usage { "Usage" }
            div #(parts::USAGE) { (parts::usage(run, now)) }
        }
        section aria-labelledby="task" {
            h2 #task { "Task" }
            pre { (run.task) }
        }
        section aria-labelledby="actions" {
            h2 #actions { "Actions" }
            (actions::forms(env, run, viewer))
        }
        nav aria-label="More about this run" {
            ul {
                @if outcome.transcript {
                    li { a href=(format!("/runs/{}/conversation{q}", run.id)) { "Conversation" } " — every message and tool call"
                        @if outcome.transcript_abridged { " (abridged: " (super::conversation::ABRIDGED) ")" } }
                    li { a href=(format!("/runs/{}/transcript{q}", run.id)) { "Transcript (JSON)" } }
                }
                @if let Some(why) = &outcome.transcript_missing {
                    li { "No conversation: " (why) }
                }
                @for artifact in &outcome.pending {
                    li { "The " (artifact.as_str()) " is not stored yet (the storage refused it); it is tried again until it is." }
                }
                @if let Some(link) = session_link {
                    li { a href=(link) { "All runs of this session" } }
                }
            }
        }
    }
}

/// Every tool call of the run's turn, from its stored transcript.
async fn all_steps(env: &Env, run_id: &str) -> Option<Vec<Step>> {
    let text = stored_text(env, &artifacts::transcript_key(run_id)).await?;
    let messages = transcript::read(&text)?;
    let marker = format!("[handoff:{run_id}]");
    let steps = transcript::turn(&messages, &marker)
        .iter()
        .flat_map(|m| m.parts.iter())
        .filter_map(|p| match p {
            Part::Tool(call) => Some(Step {
                tool: call.tool.clone(),
                title: call.title.chars().take(200).collect(),
                status: call.status.clone(),
                duration_ms: call.duration_ms,
            }),
            _ => None,
        })
        .collect();
    Some(steps)
}
