//! Reading what a program on a sandbox port answered. The program is the sandbox's — an agent
//! can put anything on OpenCode's port — so its answer is read only up to a size and within a
//! time: a huge or endless body would otherwise fill the object's memory (which other objects
//! in its isolate share) or hold its step for good.

use crate::error::{Error, Result};
use crate::http;
use crate::json_cost::pruned::{Pruned, Pruner};
use futures::future::{select, Either};
use futures::StreamExt;
use serde_json::Value;
use std::time::Duration;
use worker::{Delay, Response};

/// The most of an answer read (of one read pruned, the most kept).
pub const MAX_BYTES: usize = 16 * 1024 * 1024;
/// The most of an answer read to be pruned ([`read_pruned`]): read as it streams in, only what
/// is kept of it is held; this bounds the time spent reading it.
pub const MAX_PRUNED_BYTES: u64 = 256 * 1024 * 1024;
/// The most its text may take escaped as a JSON string, as it travels on in a `PortReply` over
/// the runtime's RPC (32 MiB at most): control characters grow sixfold there, and bytes that
/// are not UTF-8 threefold as they become U+FFFD, so the bytes read alone do not bound it.
const MAX_ESCAPED: usize = 24 * 1024 * 1024;

/// The whole body of `response` from `port`, as text: refused once it is over [`MAX_BYTES`]
/// (at once when it says so up front), or when it has not ended `within` the time given.
pub async fn read(response: Response, port: u16, within: Duration) -> Result<String> {
    let declared = declared_length(&response);
    if declared.is_some_and(|n| n > MAX_BYTES as u64) {
        return Err(too_large(port));
    }
    let body = async move {
        match declared {
            // The runtime holds the body to its declared length: read in one step.
            Some(_) => http::body_text(response).await,
            None => streamed(response, port).await,
        }
    };
    bounded(body, port, within).await
}

/// The body of `response` from `port`, JSON pruned to `skeleton` as it streams in
/// (`crate::json_cost::pruned`): what is kept is held, up to [`MAX_BYTES`], of an answer of up
/// to [`MAX_PRUNED_BYTES`]; refused as [`read`] refuses when it has not ended `within` the time.
/// An empty body is read as empty.
pub async fn read_pruned(
    mut response: Response,
    port: u16,
    within: Duration,
    skeleton: &Value,
) -> Result<String> {
    if declared_length(&response).is_some_and(|n| n > MAX_PRUNED_BYTES) {
        return Err(too_large_to_prune(port));
    }
    let mut pruner =
        Pruner::new(skeleton, MAX_BYTES).map_err(|e| Error::internal(e.to_string()))?;
    let body = async move {
        let Ok(mut stream) = response.stream() else {
            return Ok(String::new());
        };
        let mut read = 0u64;
        while let Some(chunk) = stream.next().await {
            let chunk = chunk?;
            read += chunk.len() as u64;
            if read > MAX_PRUNED_BYTES {
                return Err(too_large_to_prune(port));
            }
            pruner.feed(&chunk).map_err(|e| not_kept(port, e))?;
        }
        if read == 0 {
            return Ok(String::new());
        }
        let kept = pruner.finish().map_err(|e| not_kept(port, e))?;
        // Strings are kept as they were written; one that is not UTF-8 is not JSON.
        String::from_utf8(kept).map_err(|_| {
            Error::internal(format!(
                "the program on sandbox port {port} answered JSON with text that is not UTF-8"
            ))
        })
    };
    bounded(body, port, within).await
}

fn declared_length(response: &Response) -> Option<u64> {
    response
        .headers()
        .get("content-length")
        .ok()
        .flatten()
        .and_then(|v| v.trim().parse::<u64>().ok())
}

/// `body` unless it has not ended `within` the time given, or its text would take more than
/// [`MAX_ESCAPED`] to pass on.
async fn bounded(
    body: impl std::future::Future<Output = Result<String>>,
    port: u16,
    within: Duration,
) -> Result<String> {
    match select(Box::pin(body), Delay::from(within)).await {
        Either::Left((Ok(text), _)) if escaped_len(&text) > MAX_ESCAPED => {
            Err(Error::internal(format!(
                "the program on sandbox port {port} answered text that would take more than {} \
                 MiB to pass on (control characters and bytes that are not UTF-8 count several \
                 times); handoff passes on at most that",
                MAX_ESCAPED / (1024 * 1024)
            )))
        }
        Either::Left((text, _)) => text,
        Either::Right(_) => Err(Error::unavailable(format!(
            "the program on sandbox port {port} did not finish its answer within {} s",
            within.as_secs()
        ))),
    }
}

/// A body of no declared length, read chunk by chunk up to the limit.
async fn streamed(mut response: Response, port: u16) -> Result<String> {
    let mut body = Vec::new();
    let Ok(mut stream) = response.stream() else {
        return Ok(String::new()); // no body at all (a 204, say)
    };
    while let Some(chunk) = stream.next().await {
        let chunk = chunk?;
        if body.len() + chunk.len() > MAX_BYTES {
            return Err(too_large(port));
        }
        body.extend_from_slice(&chunk);
    }
    Ok(String::from_utf8_lossy(&body).into_owned())
}

/// The length of `text` as a JSON string's contents (serde_json's escapes).
fn escaped_len(text: &str) -> usize {
    text.len()
        + text
            .bytes()
            .map(|b| match b {
                b'"' | b'\\' | b'\n' | b'\r' | b'\t' | 0x08 | 0x0c => 1,
                0..0x20 => 5,
                _ => 0,
            })
            .sum::<usize>()
}

fn not_kept(port: u16, e: Pruned) -> Error {
    Error::internal(match e {
        Pruned::TooLarge { .. } => format!(
            "what handoff reads of the answer on sandbox port {port} is over {} MiB",
            MAX_BYTES / (1024 * 1024)
        ),
        e => format!("the answer on sandbox port {port} cannot be read: {e}"),
    })
}

fn too_large(port: u16) -> Error {
    over(port, MAX_BYTES as u64)
}

fn too_large_to_prune(port: u16) -> Error {
    over(port, MAX_PRUNED_BYTES)
}

/// The program on `port` answered more than `max` bytes.
fn over(port: u16, max: u64) -> Error {
    Error::internal(format!(
        "the program on sandbox port {port} answered more than {} MiB; handoff reads at most \
         that",
        max / (1024 * 1024)
    ))
}

#[cfg(test)]
mod tests {
    use super::escaped_len;

    #[test]
    fn the_escaped_length_is_serde_jsons() {
        for text in [
            "plain",
            "",
            "quote \" and backslash \\",
            "lines\n\r\ttabs \u{8}\u{c}",
            "\u{1}\u{1f}\u{0} controls",
            "\u{fffd}é 🦀 \u{7f}",
        ] {
            let json = serde_json::to_string(text).unwrap_or_default();
            assert_eq!(escaped_len(text), json.len() - 2, "{text:?}");
        }
    }
}
