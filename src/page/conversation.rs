//! `GET /runs/<runId>/conversation`: the stored transcript as a person reads it — each message
//! with its text (Markdown), reasoning and tool calls (input and output folded away) — with the
//! run's own turn marked. The whole session's conversation is there, since a run continues it.

use crate::markdown;
use crate::transcript::{self, Message, Part};
use maud::{html, Markup, PreEscaped};

/// Messages shown at most (the JSON transcript has them all).
const MAX_MESSAGES: usize = 400;

/// What an abridged transcript leaves out, and why.
pub const ABRIDGED: &str =
    "the whole was over 16 MiB, so file contents in tool inputs and tool metadata are left out";

/// The conversation in `text`; `abridged` when the transcript is (see [`ABRIDGED`]).
pub fn body(text: &str, run_id: &str, json_link: &str, abridged: bool) -> Markup {
    let Some(messages) = transcript::read(text) else {
        return html! { p { "This transcript could not be read. " a href=(json_link) { "The JSON" } " has it all." } };
    };
    let marker = format!("[handoff:{run_id}]");
    let start = messages
        .iter()
        .position(|m| m.role == "user" && m.text().contains(&marker));
    let shown = messages.len().min(MAX_MESSAGES);
    html! {
        p.muted {
            (messages.len()) " messages in this session's conversation"
            @if start.is_some() { " · " a href="#this-run" { "jump to this run" } }
            " · " a href=(json_link) { "JSON" }
        }
        @if abridged { p.muted { "Abridged: " (ABRIDGED) "." } }
        @for (i, message) in messages[..shown].iter().enumerate() {
            (message_part(message, start == Some(i)))
        }
        @if shown < messages.len() {
            p.muted { (messages.len() - shown) " more messages are in the JSON." }
        }
    }
}

fn message_part(message: &Message, this_run: bool) -> Markup {
    let who = match message.role.as_str() {
        "user" => "Task",
        "assistant" => "Agent",
        other => other,
    };
    html! {
        article class=(format!("msg {}", message.role)) id=[this_run.then_some("this-run")] {
            h3 { (who) @if this_run { " · this run" } }
            @for part in &message.parts {
                @match part {
                    Part::Text(text) if message.role == "assistant" => div.markdown { (PreEscaped(markdown::to_html(text))) },
                    Part::Text(text) => pre { (text) },
                    Part::Reasoning(text) => details { summary { "Reasoning" } pre { (text) } },
                    Part::Tool(call) => details.tool {
                        summary {
                            code { (call.tool) } " " (call.title)
                            span.muted { " · " (call.status)
                                @if let Some(ms) = call.duration_ms { " · " (super::parts::duration(ms as i64)) } }
                        }
                        @if !call.input.is_empty() { p.muted { "Input" } pre { (call.input) } }
                        @if !call.output.is_empty() { p.muted { "Output" } pre { (call.output) } }
                    },
                }
            }
            @if let Some(error) = &message.error { div.alert role="alert" { (error) } }
        }
    }
}
