//! The parts of a run page that change while the run works — its status line, its timeline
//! and its usage — rendered the same for the page and for the live updates (`live.rs`), plus
//! the small formatting helpers every page part uses (times, durations, badges).

use crate::runs::{RunRecord, RunStatus, Step};
use crate::time::rfc3339;
use maud::{html, Markup};

/// The ids of the live parts, as the page's script finds them.
pub const HEAD: &str = "run-head";
pub const TIMELINE: &str = "run-timeline";
pub const USAGE: &str = "run-usage";

/// "3 min ago", with the exact time on hover; the page's script keeps it current.
pub fn when(at: i64, now: i64) -> Markup {
    let exact = rfc3339(at);
    html! { time datetime=(exact) title=(exact) data-rel { (ago(now - at)) } }
}

pub fn ago(ms: i64) -> String {
    let s = ms.max(0) / 1000;
    match s {
        0..=9 => "just now".to_string(),
        10..=59 => format!("{s} s ago"),
        60..=3599 => format!("{} min ago", s / 60),
        3600..=86_399 => format!("{} h ago", s / 3600),
        _ => format!("{} d ago", s / 86_400),
    }
}

/// "4 min 12 s", "850 ms".
pub fn duration(ms: i64) -> String {
    let ms = ms.max(0);
    let s = ms / 1000;
    match s {
        0 => format!("{ms} ms"),
        1..=59 => format!("{s} s"),
        60..=3599 => format!("{} min {} s", s / 60, s % 60),
        _ => format!("{} h {} min", s / 3600, (s % 3600) / 60),
    }
}

/// A status as a coloured badge with a sign of its own (never colour alone).
pub fn badge(status: RunStatus) -> Markup {
    let (sign, label) = match status {
        RunStatus::Queued => ("○", "Queued"),
        RunStatus::Starting => ("◔", "Starting"),
        RunStatus::Running => ("●", "Running"),
        RunStatus::PendingApproval => ("◆", "Waiting for approval"),
        RunStatus::Completed => ("✓", "Completed"),
        RunStatus::Failed => ("✗", "Failed"),
        RunStatus::Cancelled => ("■", "Cancelled"),
    };
    html! {
        span class=(format!("badge s-{}", status.as_str())) {
            span aria-hidden="true" { (sign) } " " (label)
        }
    }
}

fn phase_label(phase: &str) -> &str {
    match phase {
        "queued" => "Queued",
        "preparing_sandbox" => "Preparing the sandbox",
        "cloning" => "Cloning the repository",
        "starting_agent" => "Starting the agent",
        "working" => "Agent working",
        "resuming_agent" => "Starting the stopped agent again",
        "pushing" => "Pushing the changes",
        "opening_pr" => "Opening the pull request",
        "staging" => "Staging the worker",
        "running" => "Running",
        "pending_approval" => "Waiting for approval",
        "collecting" => "Collecting the results",
        "done" => "Done",
        "failed" => "Failed",
        "cancelled" => "Cancelled",
        other => other,
    }
}

/// Status, what the run is doing, when it started and how long it took (or has taken).
pub fn head(run: &RunRecord, now: i64) -> Markup {
    let message = run.progress.as_ref().map(|p| p.message.as_str());
    let since = run.started_at.unwrap_or(run.created_at);
    html! {
        p.status {
            (badge(run.status))
            @if let Some(message) = message { " " span.message { (message) } }
        }
        p.muted {
            "Started " (when(run.created_at, now))
            @match run.completed_at {
                Some(end) => { " · took " (duration(end - since)) }
                None => { " · running for " span data-since=(rfc3339(since)) { (duration(now - since)) } }
            }
        }
    }
}

/// The phases with their durations, and the agent's steps under the phase it worked in.
/// `steps` are every step when known (an ended run's transcript), else the latest ones.
pub fn timeline(run: &RunRecord, steps: &[Step], total_steps: u32, now: i64) -> Markup {
    let ended = run.status.is_terminal();
    let hidden = (total_steps as usize).saturating_sub(steps.len());
    html! {
        ol.timeline {
            @for (i, mark) in run.phases.iter().enumerate() {
                @let next = run.phases.get(i + 1).map(|n| n.at);
                @let current = next.is_none() && !ended;
                li class=(if current { "current" } else { "" }) {
                    span.phase { (phase_label(&mark.phase)) }
                    " "
                    span.muted {
                        @match next {
                            Some(end) => (duration(end - mark.at)),
                            None if current => { "now · " (duration(now - mark.at)) },
                            None => "",
                        }
                    }
                    @if matches!(mark.phase.as_str(), "working" | "running") && !steps.is_empty() {
                        @if hidden > 0 { p.muted { (hidden) " earlier steps not shown" } }
                        ol.steps {
                            @for step in steps {
                                li class=(format!("step-{}", step.status)) {
                                    code { (step.tool) } " " (step.title)
                                    span.muted {
                                        " · " (step.status)
                                        @if let Some(ms) = step.duration_ms { " · " (duration(ms as i64)) }
                                    }
                                }
                            }
                        }
                    }
                }
            }
        }
    }
}

/// Steps, tokens, cost, the model and the budget.
pub fn usage(run: &RunRecord, now: i64) -> Markup {
    let detail = run.progress.as_ref().and_then(|p| p.detail.clone());
    let outcome = run.outcome.as_ref();
    let reported = detail
        .as_ref()
        .map(|d| &d.tokens)
        .or_else(|| outcome.and_then(|o| o.tokens.as_ref()));
    let tokens = run.tokens_used(reported).unwrap_or_default();
    let cost = detail
        .as_ref()
        .map(|d| d.cost_usd)
        .or_else(|| outcome.and_then(|o| o.cost_usd))
        .unwrap_or(0.0);
    let spend = run.spend(now);
    html! {
        dl.facts {
            @if let Some(d) = &detail { dt { "Steps" } dd { (d.steps) } }
            dt { "Tokens" }
            dd { (tokens.total()) span.muted { " (" (tokens.input) " in, " (tokens.output) " out)" } }
            dt { "Cost" } dd { (format!("${cost:.4}")) }
            @if let Some(model) = &run.model { dt { "Model" } dd { code { (model) } } }
            @if let Some(budget) = &run.budget {
                dt { "Budget" }
                dd {
                    @if let Some(max) = budget.max_tokens { (spend.tokens) " of " (max) " tokens. " }
                    @if let Some(max) = budget.max_cost_usd { (format!("${:.4} of ${max:.2}. ", spend.cost_usd)) }
                    @if let Some(max) = budget.max_duration_seconds { (spend.seconds) " of " (max) " s." }
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn times_read_like_a_person_would_say_them() {
        assert_eq!(ago(3_000), "just now");
        assert_eq!(ago(125_000), "2 min ago");
        assert_eq!(ago(7_300_000), "2 h ago");
        assert_eq!(duration(850), "850 ms");
        assert_eq!(duration(252_000), "4 min 12 s");
        assert_eq!(duration(3_900_000), "1 h 5 min");
    }
}
