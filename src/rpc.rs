//! Calls between the Worker and its Durable Objects: one JSON request per `fetch`, answered with
//! 200 and the JSON reply, or an error status and a serialized `Error`.
//!
//! Each object declares its requests with [`ops!`]: one struct per op, tied to its reply type by
//! [`Op`], the tagged enum they travel in, and a handler trait with one method per op. A client
//! ([`Client`]) only accepts its own object's ops and returns each op's own reply type; the
//! object answers through the handler trait, so a request/reply mismatch on either side is a
//! compile error.

use crate::error::{Error, Result};
use serde::{de::DeserializeOwned, Serialize};
use std::marker::PhantomData;
use worker::{Method, Request, RequestInit, Response, Stub};

/// One request to a Durable Object: the enum it travels in and the reply it gets.
pub trait Op: Into<Self::Request> {
    /// The object's request enum (which object answers).
    type Request: Serialize;
    /// What the object replies.
    type Reply: DeserializeOwned;
}

/// The reply of an op that only succeeds or fails.
#[derive(Debug, Serialize, serde::Deserialize)]
pub struct Ack {}

/// One page of a keyset-paginated listing.
#[derive(Debug, Serialize, serde::Deserialize)]
pub struct Page<T> {
    pub items: Vec<T>,
    /// Pass as `before` to get the next page; absent on the last page.
    pub next: Option<i64>,
}

/// A reply already encoded as JSON, as an object's `dispatch` returns it.
pub struct Encoded(pub String);

/// Splits `limit + 1` rows into a page and the cursor of the next page.
pub fn paginate<T>(mut rows: Vec<(i64, T)>, limit: u32) -> (Vec<T>, Option<i64>) {
    let more = rows.len() > limit as usize;
    rows.truncate(limit as usize);
    let next = if more {
        rows.last().map(|(seq, _)| *seq)
    } else {
        None
    };
    (rows.into_iter().map(|(_, item)| item).collect(), next)
}

/// A typed handle on one Durable Object instance whose requests are `R`.
pub struct Client<R> {
    stub: Stub,
    request: PhantomData<fn(R)>,
}

impl<R: Serialize> Client<R> {
    pub fn new(stub: Stub) -> Self {
        Client {
            stub,
            request: PhantomData,
        }
    }

    /// Sends one of this object's ops and decodes the op's reply.
    pub async fn call<O: Op<Request = R>>(&self, op: O) -> Result<O::Reply> {
        send(&self.stub, &op.into()).await
    }

    pub fn stub(&self) -> &Stub {
        &self.stub
    }
}

/// Declares a Durable Object's ops (see the module documentation). Each entry reads
/// `method: Op { fields } => Reply;`.
macro_rules! ops {
    (
        $(#[$enum_meta:meta])*
        $vis:vis enum $request:ident, answered by $handler:ident {
            $(
                $(#[$op_meta:meta])*
                $method:ident: $op:ident { $($(#[$field_meta:meta])* $field:ident: $ty:ty),* $(,)? } => $reply:ty;
            )*
        }
    ) => {
        $(#[$enum_meta])*
        // Externally tagged (`{"op_name": {fields}}`): an internally tagged enum would buffer
        // every request and carry a second decoder for every op (serde's `Content` path).
        #[derive(Debug, serde::Serialize, serde::Deserialize)]
        #[serde(rename_all = "snake_case")]
        $vis enum $request {
            $($op($op),)*
        }

        $(
            $(#[$op_meta])*
            #[derive(Debug, serde::Serialize, serde::Deserialize)]
            $vis struct $op {
                $($(#[$field_meta])* pub $field: $ty,)*
            }

            impl $crate::rpc::Op for $op {
                type Request = $request;
                type Reply = $reply;
            }

            impl From<$op> for $request {
                fn from(op: $op) -> Self {
                    $request::$op(op)
                }
            }
        )*

        /// What the object does for each of its ops; each answer has the op's reply type.
        #[allow(async_fn_in_trait)]
        $vis trait $handler {
            $(async fn $method(&self, op: $op) -> $crate::error::Result<$reply>;)*
        }

        impl $request {
            /// Runs the handler's method for this op and encodes its reply (straight to text:
            /// no `Value` tree in between).
            $vis async fn dispatch(
                self,
                handler: &impl $handler,
            ) -> $crate::error::Result<$crate::rpc::Encoded> {
                Ok($crate::rpc::Encoded(match self {
                    $($request::$op(op) => serde_json::to_string(&$handler::$method(handler, op).await?)?,)*
                }))
            }
        }
    };
}
pub(crate) use ops;

/// Sends a request to a Durable Object and decodes its reply.
pub async fn send<Op: Serialize, T: DeserializeOwned>(stub: &Stub, op: &Op) -> Result<T> {
    let text = send_text(stub, serde_json::to_string(op)?).await?;
    decode_reply(&text)
}

/// A reply's JSON as its type.
pub fn decode_reply<T: DeserializeOwned>(text: &str) -> Result<T> {
    serde_json::from_str(text)
        .map_err(|e| Error::internal(format!("undecodable reply from a Durable Object: {e}")))
}

/// Sends an op already in JSON and returns the reply's JSON (an error reply decoded). Not
/// generic: one copy of the exchange serves every op (the bundle has one, not one per op).
pub async fn send_text(stub: &Stub, body: String) -> Result<String> {
    let mut init = RequestInit::new();
    init.with_method(Method::Post).with_body(Some(body.into()));
    let request = Request::new_with_init("https://durable-object/rpc", &init)?;
    let response = stub.fetch_with_request(request).await?;
    let status = response.status_code();
    let text = crate::http::body_text(response).await?;
    if status == 200 {
        Ok(text)
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
    let response = stub.fetch_with_request(request).await?;
    let status = response.status_code();
    if status == 200 {
        return Ok(response);
    }
    let text = crate::http::body_text(response).await?;
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
pub async fn serve<Op, F, Fut>(req: Request, handler: F) -> worker::Result<Response>
where
    Op: DeserializeOwned,
    F: FnOnce(Op) -> Fut,
    Fut: std::future::Future<Output = Result<Encoded>>,
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
async fn read_op<Op: DeserializeOwned>(req: Request) -> Result<Op> {
    let text = read_text(req).await?;
    serde_json::from_str(&text)
        .map_err(|e| Error::internal(format!("malformed internal request: {e}")))
}

async fn read_text(mut req: Request) -> Result<String> {
    Ok(req.text().await?)
}

/// Turns a handler's result into the response `call` decodes.
fn reply(result: Result<Encoded>) -> worker::Result<Response> {
    match result {
        Ok(Encoded(text)) => Response::ok(text),
        Err(error) => Ok(Response::from_json(&error)?.with_status(error.http_status())),
    }
}
