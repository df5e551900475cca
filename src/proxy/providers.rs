//! Which model-provider calls pass the credential proxy: only what a coding agent needs —
//! messages (and token counting) and model listing for Anthropic; chat completions, responses
//! and model listing for OpenAI-compatible APIs. Everything else the real key could do (files,
//! batches, fine-tuning, organisation settings, …) is refused, and a path is accepted only as
//! plain segments, so nothing can climb out of the configured base URL.

use crate::error::{Error, Result};
use crate::tokens::Service;
use worker::Method;

/// The allowed calls, as (method, path) with `{id}` standing for one model id.
const ANTHROPIC: [(Method, &str); 4] = [
    (Method::Post, "v1/messages"),
    (Method::Post, "v1/messages/count_tokens"),
    (Method::Get, "v1/models"),
    (Method::Get, "v1/models/{id}"),
];
const OPENAI: [(Method, &str); 4] = [
    (Method::Post, "chat/completions"),
    (Method::Post, "responses"),
    (Method::Get, "models"),
    (Method::Get, "models/{id}"),
];

/// A model id: letters, digits and `-._:@` (e.g. `claude-sonnet-4-5`, `ft:gpt-4o:org:x`).
fn model_id(segment: &str) -> bool {
    !segment.is_empty()
        && segment.len() <= 200
        && segment != "."
        && segment != ".."
        && segment
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"-._:@".contains(&b))
}

fn matches(pattern: &str, tail: &str) -> bool {
    let mut want = pattern.split('/');
    let mut got = tail.split('/');
    loop {
        match (want.next(), got.next()) {
            (None, None) => return true,
            (Some("{id}"), Some(segment)) if model_id(segment) => {}
            (Some(w), Some(g)) if w == g => {}
            _ => return false,
        }
    }
}

/// Checks a provider call; the error lists what passes.
pub fn check(service: Service, method: &Method, tail: &str, query: &str) -> Result<()> {
    let allowed: &[(Method, &str)] = match service {
        Service::Anthropic => &ANTHROPIC,
        Service::OpenAi => &OPENAI,
        _ => &[],
    };
    let query_ok = query
        .trim_start_matches('?')
        .bytes()
        .all(|b| b.is_ascii_alphanumeric() || b"=&_.-".contains(&b));
    if query_ok && allowed.iter().any(|(m, p)| m == method && matches(p, tail)) {
        return Ok(());
    }
    let list: Vec<String> = allowed.iter().map(|(m, p)| format!("{m} {p}")).collect();
    Err(Error::not_found(format!(
        "the credential proxy does not pass {method} {tail}: it passes only {}",
        list.join(", ")
    )))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_agent_calls_pass() {
        let ok = [
            (Service::Anthropic, Method::Post, "v1/messages", ""),
            (
                Service::Anthropic,
                Method::Post,
                "v1/messages",
                "?beta=true",
            ),
            (
                Service::Anthropic,
                Method::Post,
                "v1/messages/count_tokens",
                "",
            ),
            (Service::Anthropic, Method::Get, "v1/models", "?limit=20"),
            (
                Service::Anthropic,
                Method::Get,
                "v1/models/claude-sonnet-4-5",
                "",
            ),
            (Service::OpenAi, Method::Post, "chat/completions", ""),
            (Service::OpenAi, Method::Post, "responses", ""),
            (Service::OpenAi, Method::Get, "models/ft:gpt-4o:org:x", ""),
        ];
        for (service, method, tail, query) in ok {
            assert!(
                check(service, &method, tail, query).is_ok(),
                "{method} {tail}"
            );
        }
        let refused = [
            (Service::Anthropic, Method::Get, "v1/files", ""),
            (Service::Anthropic, Method::Delete, "v1/files/file_1", ""),
            (Service::Anthropic, Method::Post, "v1/messages/batches", ""),
            (Service::Anthropic, Method::Get, "v1/messages/batches", ""),
            (Service::Anthropic, Method::Get, "v1/messages", ""),
            (Service::Anthropic, Method::Post, "v1/messages/", ""),
            (Service::Anthropic, Method::Post, "v1//messages", ""),
            (Service::Anthropic, Method::Post, "v1/../v1/messages", ""),
            (Service::Anthropic, Method::Get, "v1/models/..", ""),
            (Service::Anthropic, Method::Get, "v1/models/%2e%2e", ""),
            (Service::Anthropic, Method::Post, "v1/organizations/me", ""),
            (Service::Anthropic, Method::Post, "v1/messages", "?x=%2F"),
            (Service::OpenAi, Method::Get, "files", ""),
            (Service::OpenAi, Method::Post, "fine_tuning/jobs", ""),
            (Service::OpenAi, Method::Post, "batches", ""),
            (Service::OpenAi, Method::Delete, "models/gpt-4o", ""),
            (Service::OpenAi, Method::Post, "v1/chat/completions", ""),
        ];
        for (service, method, tail, query) in refused {
            let err = check(service, &method, tail, query).unwrap_err();
            assert!(err.message.contains("passes only"), "{method} {tail}");
        }
    }
}
