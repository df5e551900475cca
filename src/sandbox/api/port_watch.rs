//! Watching a program's event stream (an answer that never ends by itself) for one piece of
//! text, for at most a while: how the session notices at once that its agent has finished,
//! without asking it over and over.

use crate::error::{Error, Result};
use futures::future::{select, Either};
use futures::StreamExt;
use std::time::Duration;
use worker::{Delay, Response};

/// What to watch an answer for, and for how long.
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
pub struct Watch {
    pub text: String,
    pub within_ms: u64,
}

/// Reads `response`'s body until it holds `watch.text` (true) or `watch.within_ms` has passed
/// or the body ended (false). Only the last bytes that could start the text are kept.
pub async fn read_until(mut response: Response, watch: &Watch) -> Result<bool> {
    let needle = watch.text.as_bytes();
    if needle.is_empty() {
        return Ok(true);
    }
    let mut stream = response.stream()?;
    let mut window: Vec<u8> = Vec::new();
    let mut deadline = Box::pin(Delay::from(Duration::from_millis(watch.within_ms)));
    loop {
        match select(stream.next(), deadline.as_mut()).await {
            Either::Left((Some(Ok(chunk)), _)) => {
                window.extend_from_slice(&chunk);
                if contains(&window, needle) {
                    return Ok(true);
                }
                let keep = needle.len() - 1;
                if window.len() > keep {
                    window.drain(..window.len() - keep);
                }
            }
            Either::Left((Some(Err(e)), _)) => {
                return Err(Error::unavailable(format!(
                    "the watched stream broke off: {e}"
                )))
            }
            Either::Left((None, _)) | Either::Right(_) => return Ok(false),
        }
    }
}

fn contains(haystack: &[u8], needle: &[u8]) -> bool {
    haystack.windows(needle.len()).any(|w| w == needle)
}

#[cfg(test)]
mod tests {
    use super::contains;

    #[test]
    fn finds_text_only_whole() {
        assert!(contains(
            b"data: {\"type\":\"session.idle\"}",
            b"session.idle"
        ));
        assert!(!contains(b"session.idl", b"session.idle"));
    }
}
