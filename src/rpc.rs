//! Calls between the Worker and its Durable Objects: one JSON request per `fetch`, answered with
//! 200 and the JSON reply, or an error status and a serialized `Error`.

use crate::error::{Error, Result};
use serde::{de::DeserializeOwned, Serialize};
use worker::{Method, Request, RequestInit, Response, Stub};

/// Sends `op` to a Durable Object and decodes its reply.
pub async fn call<Op: Serialize, T: DeserializeOwned>(stub: &Stub, op: &Op) -> Result<T> {
    let body = serde_json::to_string(op)?;
    let mut init = RequestInit::new();
    init.with_method(Method::Post).with_body(Some(body.into()));
    let request = Request::new_with_init("https://durable-object/rpc", &init)?;
    let mut response = stub.fetch_with_request(request).await?;
    let status = response.status_code();
    let text = response.text().await?;
    if status == 200 {
        serde_json::from_str(&text)
            .map_err(|e| Error::internal(format!("undecodable reply from a Durable Object: {e}")))
    } else {
        Err(decode_error(status, text))
    }
}

/// Sends `op` to a Durable Object's `path` and returns its reply unread, for replies that
/// stream; an error reply is decoded as in [`call`].
pub async fn call_streaming<Op: Serialize>(stub: &Stub, path: &str, op: &Op) -> Result<Response> {
    let body = serde_json::to_string(op)?;
    let mut init = RequestInit::new();
    init.with_method(Method::Post).with_body(Some(body.into()));
    let request = Request::new_with_init(&format!("https://durable-object{path}"), &init)?;
    let mut response = stub.fetch_with_request(request).await?;
    let status = response.status_code();
    if status == 200 {
        return Ok(response);
    }
    let text = response.text().await?;
    Err(decode_error(status, text))
}

fn decode_error(status: u16, text: String) -> Error {
    serde_json::from_str::<Error>(&text).unwrap_or_else(|_| Error::from_status(status, text))
}

/// Answers a request for a streamed reply: reads the op and returns the handler's response,
/// or the error as [`call_streaming`] decodes it.
pub async fn serve_streaming<Op, F, Fut>(req: Request, handler: F) -> worker::Result<Response>
where
    Op: DeserializeOwned,
    F: FnOnce(Op) -> Fut,
    Fut: std::future::Future<Output = Result<Response>>,
{
    match handle::<Op, _, _, _>(req, handler).await {
        Ok(response) => Ok(response),
        Err(error) => Ok(Response::from_json(&error)?.with_status(error.http_status())),
    }
}

/// Answers a request a Durable Object received: reads the op, runs `handler`, replies.
pub async fn serve<Op, T, F, Fut>(req: Request, handler: F) -> worker::Result<Response>
where
    Op: DeserializeOwned,
    T: Serialize,
    F: FnOnce(Op) -> Fut,
    Fut: std::future::Future<Output = Result<T>>,
{
    reply(handle::<Op, _, _, _>(req, handler).await)
}

/// Reads the op and runs `handler` on it.
async fn handle<Op, T, F, Fut>(req: Request, handler: F) -> Result<T>
where
    Op: DeserializeOwned,
    F: FnOnce(Op) -> Fut,
    Fut: std::future::Future<Output = Result<T>>,
{
    handler(read_op::<Op>(req).await?).await
}

/// Reads an op from a request a Durable Object received.
async fn read_op<Op: DeserializeOwned>(mut req: Request) -> Result<Op> {
    let text = req.text().await?;
    serde_json::from_str(&text)
        .map_err(|e| Error::internal(format!("malformed internal request: {e}")))
}

/// Turns a handler's result into the response `call` decodes.
fn reply<T: Serialize>(result: Result<T>) -> worker::Result<Response> {
    match result {
        Ok(value) => Response::from_json(&value),
        Err(error) => Ok(Response::from_json(&error)?.with_status(error.http_status())),
    }
}
