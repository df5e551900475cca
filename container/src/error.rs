//! The daemon's one error type: a wire `ErrorCode` and a message for the caller, turned into
//! an HTTP response (`ErrorBody` JSON) only at the axum boundary.

use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use handoff_wire::{ErrorBody, ErrorCode};
use std::fmt;

#[derive(Debug, Clone)]
pub struct ApiError {
    pub code: ErrorCode,
    pub message: String,
}

pub type Result<T, E = ApiError> = std::result::Result<T, E>;

impl ApiError {
    pub fn new(code: ErrorCode, message: impl Into<String>) -> Self {
        Self {
            code,
            message: message.into(),
        }
    }
    pub fn bad_request(message: impl Into<String>) -> Self {
        Self::new(ErrorCode::BadRequest, message)
    }
    pub fn not_found(message: impl Into<String>) -> Self {
        Self::new(ErrorCode::NotFound, message)
    }
    pub fn too_large(message: impl Into<String>) -> Self {
        Self::new(ErrorCode::TooLarge, message)
    }
    pub fn conflict(message: impl Into<String>) -> Self {
        Self::new(ErrorCode::Conflict, message)
    }
    pub fn unauthorized(message: impl Into<String>) -> Self {
        Self::new(ErrorCode::Unauthorized, message)
    }
    pub fn unavailable(message: impl Into<String>) -> Self {
        Self::new(ErrorCode::Unavailable, message)
    }
    pub fn isolation_unavailable(message: impl Into<String>) -> Self {
        Self::new(ErrorCode::IsolationUnavailable, message)
    }
    pub fn internal(message: impl Into<String>) -> Self {
        Self::new(ErrorCode::Internal, message)
    }
}

impl fmt::Display for ApiError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for ApiError {}

impl From<std::io::Error> for ApiError {
    fn from(e: std::io::Error) -> Self {
        match e.raw_os_error() {
            Some(libc::ENOSPC) | Some(libc::EDQUOT) => ApiError::too_large(
                "the sandbox's disk is full (its quota is used up): delete files in the \
                 workspace, then try again",
            ),
            _ => ApiError::internal(format!("I/O error: {e}")),
        }
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let status = StatusCode::from_u16(self.code.http_status())
            .unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
        if self.code == ErrorCode::Internal {
            eprintln!("handoff-sandboxd: internal error: {}", self.message);
        }
        let body = ErrorBody {
            code: self.code,
            message: self.message,
        };
        // Marks the daemon's own errors, so they are not mistaken for a proxied program's answer.
        (
            status,
            [(handoff_wire::DAEMON_ERROR, "error")],
            axum::Json(body),
        )
            .into_response()
    }
}
