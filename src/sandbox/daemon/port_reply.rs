//! Reading what a program on a sandbox port answered. The program is the sandbox's — an agent
//! can put anything on OpenCode's port — so its answer is read only up to a size and within a
//! time: a huge or endless body would otherwise fill the object's memory (which other objects
//! in its isolate share) or hold its step for good.

use crate::error::{Error, Result};
use crate::http;
use futures::future::{select, Either};
use futures::StreamExt;
use std::time::Duration;
use worker::{Delay, Response};

/// The most of an answer read.
pub const MAX_BYTES: usize = 16 * 1024 * 1024;
/// The most its text may take escaped as a JSON string, as it travels on in a `PortReply` over
/// the runtime's RPC (32 MiB at most): control characters grow sixfold there, and bytes that
/// are not UTF-8 threefold as they become U+FFFD, so the bytes read alone do not bound it.
const MAX_ESCAPED: usize = 24 * 1024 * 1024;

/// The whole body of `response` from `port`, as text: refused once it is over [`MAX_BYTES`]
/// (at once when it says so up front), or when it has not ended `within` the time given.
pub async fn read(response: Response, port: u16, within: Duration) -> Result<String> {
    let declared = response
        .headers()
        .get("content-length")
        .ok()
        .flatten()
        .and_then(|v| v.trim().parse::<u64>().ok());
    if declared.is_some_and(|n| n > MAX_BYTES as u64) {
        return Err(too_large(port));
    }
    let body = Box::pin(async move {
        match declared {
            // The runtime holds the body to its declared length: read in one step.
            Some(_) => http::body_text(response).await,
            None => streamed(response, port).await,
        }
    });
    match select(body, Delay::from(within)).await {
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

fn too_large(port: u16) -> Error {
    Error::internal(format!(
        "the program on sandbox port {port} answered more than {} MiB; handoff reads at most \
         that",
        MAX_BYTES / (1024 * 1024)
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
