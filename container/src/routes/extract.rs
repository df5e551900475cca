//! What the API's handlers take instead of raw requests: the sandbox a request may act on (its
//! bearer token checked for the sandbox its path names), the id alone for a sandbox that may not
//! exist yet, and JSON bodies decoded with an error that says what was wrong.

use super::App;
use crate::error::ApiError;
use crate::sandbox::Sandbox;
use axum::body::Bytes;
use axum::extract::{FromRequest, FromRequestParts, RawPathParams, Request};
use axum::http::{header, request::Parts};
use serde::de::DeserializeOwned;
use std::sync::Arc;

/// The sandbox named by the path's `{id}`, for a request whose token was minted for it.
pub struct Authorized(pub Arc<Sandbox>);

/// The path's `{id}`, for a request whose token was minted for it (the sandbox may not exist).
pub struct SandboxId(pub String);

/// A JSON request body of type `T`.
pub struct JsonBody<T>(pub T);

impl FromRequestParts<Arc<App>> for SandboxId {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, app: &Arc<App>) -> Result<Self, ApiError> {
        let params = RawPathParams::from_request_parts(parts, app)
            .await
            .map_err(|e| ApiError::bad_request(format!("malformed path: {e}")))?;
        let id = params
            .iter()
            .find(|(name, _)| *name == "id")
            .map(|(_, value)| value.to_string())
            .ok_or_else(|| ApiError::not_found("this route names no sandbox"))?;
        let authorization = parts
            .headers
            .get(header::AUTHORIZATION)
            .and_then(|v| v.to_str().ok());
        app.verifier.check(authorization, &id)?;
        Ok(SandboxId(id))
    }
}

impl FromRequestParts<Arc<App>> for Authorized {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, app: &Arc<App>) -> Result<Self, ApiError> {
        let SandboxId(id) = SandboxId::from_request_parts(parts, app).await?;
        Ok(Authorized(app.registry.get(&id)?))
    }
}

impl<S: Send + Sync, T: DeserializeOwned> FromRequest<S> for JsonBody<T> {
    type Rejection = ApiError;

    async fn from_request(req: Request, state: &S) -> Result<Self, ApiError> {
        let body = Bytes::from_request(req, state)
            .await
            .map_err(|e| ApiError::bad_request(format!("reading the body: {e}")))?;
        decode(&body).map(JsonBody)
    }
}

/// `body` as JSON of type `T`.
pub fn decode<T: DeserializeOwned>(body: &Bytes) -> Result<T, ApiError> {
    serde_json::from_slice(body)
        .map_err(|e| ApiError::bad_request(format!("malformed JSON body: {e}")))
}
