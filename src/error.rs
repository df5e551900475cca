//! The Worker's one error type. Every layer returns `Error`; it is turned into an HTTP response,
//! a JSON-RPC error or an `isError` tool result only at the boundary that owns that format.

use serde::{Deserialize, Serialize};
use std::fmt;

/// What went wrong, by kind. The kind decides the HTTP status and the MCP shape; the message is
/// written for the person or model that has to act on it and never contains secrets.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ErrorKind {
    /// The caller sent something malformed or out of range; fixing the input fixes it.
    InvalidInput,
    /// Nothing listens on the sandbox port a request was for (HTTP 400, like invalid input;
    /// a run's driver reads it as "the agent stopped").
    PortClosed,
    /// The caller named something that does not exist (a run, a session, an MCP session).
    NotFound,
    /// A credential was missing, wrong, expired or is no longer valid.
    Unauthorized,
    /// A valid credential asked for something it does not allow (HTTP 403).
    Forbidden,
    /// The request conflicts with existing state (an idempotency key reused for other input).
    Conflict,
    /// The MCP session named by `Mcp-Session-Id` is unknown, expired or ended (HTTP 404, so the
    /// client initializes again).
    McpSessionGone,
    /// Something handoff depends on did not answer or is starting: transient, retry with backoff.
    Unavailable,
    /// A setting or secret is missing or wrong; an operator has to act (retrying will not help).
    NotConfigured,
    /// Too many requests of this kind from this caller; `retry_after_secs` says when to retry.
    RateLimited,
    /// A bug or an unexpected failure of the platform; retrying may help.
    Internal,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Error {
    pub kind: ErrorKind,
    pub message: String,
    /// Seconds until a rate-limited request may be retried (`Retry-After`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub retry_after_secs: Option<u64>,
}

pub type Result<T, E = Error> = std::result::Result<T, E>;

impl Error {
    pub fn new(kind: ErrorKind, message: impl Into<String>) -> Self {
        Self {
            kind,
            message: message.into(),
            retry_after_secs: None,
        }
    }
    pub fn rate_limited(message: impl Into<String>, retry_after_secs: u64) -> Self {
        Self {
            retry_after_secs: Some(retry_after_secs),
            ..Self::new(ErrorKind::RateLimited, message)
        }
    }
    pub fn invalid(message: impl Into<String>) -> Self {
        Self::new(ErrorKind::InvalidInput, message)
    }
    pub fn not_found(message: impl Into<String>) -> Self {
        Self::new(ErrorKind::NotFound, message)
    }
    pub fn conflict(message: impl Into<String>) -> Self {
        Self::new(ErrorKind::Conflict, message)
    }
    pub fn unavailable(message: impl Into<String>) -> Self {
        Self::new(ErrorKind::Unavailable, message)
    }
    pub fn not_configured(message: impl Into<String>) -> Self {
        Self::new(ErrorKind::NotConfigured, message)
    }
    pub fn internal(message: impl Into<String>) -> Self {
        Self::new(ErrorKind::Internal, message)
    }

    /// The HTTP status this error maps to wherever it becomes a plain HTTP response.
    pub fn http_status(&self) -> u16 {
        match self.kind {
            ErrorKind::InvalidInput | ErrorKind::PortClosed => 400,
            ErrorKind::NotFound | ErrorKind::McpSessionGone => 404,
            ErrorKind::Unauthorized => 401,
            ErrorKind::Forbidden => 403,
            ErrorKind::Conflict => 409,
            ErrorKind::RateLimited => 429,
            ErrorKind::Unavailable | ErrorKind::NotConfigured => 503,
            ErrorKind::Internal => 500,
        }
    }

    /// Rebuilds an error from an HTTP status and message (the inverse of `http_status`), used
    /// when a Durable Object answers with an error body that cannot be parsed.
    pub fn from_status(status: u16, message: impl Into<String>) -> Self {
        let kind = match status {
            400 | 413 | 422 => ErrorKind::InvalidInput,
            401 => ErrorKind::Unauthorized,
            403 => ErrorKind::Forbidden,
            404 => ErrorKind::NotFound,
            409 => ErrorKind::Conflict,
            429 => ErrorKind::RateLimited,
            503 => ErrorKind::Unavailable,
            _ => ErrorKind::Internal,
        };
        Self::new(kind, message)
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for Error {}

impl From<worker::Error> for Error {
    fn from(e: worker::Error) -> Self {
        Error::internal(format!("platform error: {e}"))
    }
}

impl From<serde_json::Error> for Error {
    fn from(e: serde_json::Error) -> Self {
        Error::internal(format!("serialization error: {e}"))
    }
}

impl From<Error> for worker::Error {
    fn from(e: Error) -> Self {
        worker::Error::RustError(e.message)
    }
}

/// Quotes at most 80 characters of a rejected value, so a huge input does not flood the error.
pub fn excerpt(value: &str) -> String {
    if value.chars().count() <= 80 {
        value.to_string()
    } else {
        format!("{}…", value.chars().take(80).collect::<String>())
    }
}
