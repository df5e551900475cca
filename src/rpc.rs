//! Calls between the Worker and its Durable Objects: one JSON request per `fetch`, answered with
//! 200 and the JSON reply, or an error status and a serialized `Error`.
//!
//! Each object declares its requests with [`ops!`]: one struct per op, tied to its reply type by
//! [`Op`], the tagged enum they travel in, and a handler trait with one method per op. A client
//! ([`Client`]) only accepts its own object's ops and returns each op's own reply type; the
//! object answers through the handler trait, so a request/reply mismatch on either side is a
//! compile error.
//!
//! Ops travel over the runtime's JS RPC, not `fetch`: the stub's `handoffRpc(text)` (exported on
//! each object by [`export_rpc!`]) takes the op's JSON and resolves to the reply's JSON behind a
//! one-letter tag (`o` an answer, `e` a serialized `Error`), so neither side builds a `Request`,
//! headers or a `Response` per op. `fetch` stays for replies that stream and for previews.

use crate::error::{Error, Result};
use serde::{de::DeserializeOwned, Serialize};
use std::marker::PhantomData;
use wasm_bindgen::prelude::*;
use worker::wasm_bindgen_futures::JsFuture;
use worker::{js_sys, web_sys, Method, Request, RequestInit, Response, Stub};

#[wasm_bindgen]
extern "C" {
    /// A Durable Object stub as the runtime hands it out, called through its RPC method.
    pub type ObjectStub;

    #[wasm_bindgen(method, catch, js_name = handoffRpc)]
    fn handoff_rpc(this: &ObjectStub, body: &str) -> std::result::Result<js_sys::Promise, JsValue>;

    #[wasm_bindgen(method, catch, js_name = fetch)]
    fn fetch_request(
        this: &ObjectStub,
        request: &web_sys::Request,
    ) -> std::result::Result<js_sys::Promise, JsValue>;
}

impl From<Stub> for ObjectStub {
    fn from(stub: Stub) -> Self {
        stub.into_rpc()
    }
}

impl ObjectStub {
    /// Sends a request to the object's `fetch` (replies that stream, previews).
    pub async fn fetch_with_request(&self, request: Request) -> Result<Response> {
        let promise = self.fetch_request(request.inner()).map_err(platform)?;
        let response = JsFuture::from(promise).await.map_err(platform)?;
        let response: web_sys::Response = response.dyn_into().map_err(platform)?;
        Ok(response.into())
    }
}

/// A failure the runtime threw (the object unreachable, reset or over its limits).
fn platform(e: JsValue) -> Error {
    Error::from(worker::Error::from(e))
}

/// The tag before a reply's JSON: an answer.
const ANSWER: char = 'o';
/// The tag before a serialized [`Error`].
const FAILURE: char = 'e';

/// Exports `handoffRpc` on a Durable Object class: `|$object, $text| body` turns an op's JSON
/// into the tagged reply (see [`serve_text`]); the class is `Clone` (its fields shared), as the
/// op may outlive the call. An op that never waits is answered at once (see [`answer`]).
/// `xtask/src/recovery.js` makes every class that has it a `DurableObject`, which the runtime
/// requires of an RPC target.
macro_rules! export_rpc {
    ($class:ty, |$object:ident, $text:ident| $body:expr) => {
        #[cfg(not(feature = "bundle-front"))]
        #[::wasm_bindgen::prelude::wasm_bindgen]
        impl $class {
            #[wasm_bindgen(js_name = handoffRpc)]
            pub fn handoff_rpc(&self, $text: String) -> ::wasm_bindgen::JsValue {
                let shared = ::std::clone::Clone::clone(self);
                $crate::rpc::answer(async move {
                    let $object = &shared;
                    $body
                })
            }
        }
    };
}
pub(crate) use export_rpc;

/// Runs an op's answer until it first waits: one that never waits (a read, most writes: SQL is
/// synchronous in a Durable Object) goes back as the text itself, with no promise, task or
/// microtask; one that waits (a fetch, a timer, a wake-up) goes on as a promise.
///
/// The first poll's waker relays to the promise's task once that has polled, so a future that
/// keeps the first waker it was given (`worker::Delay` does) still wakes the task.
pub fn answer(future: impl std::future::Future<Output = String> + 'static) -> JsValue {
    use std::task::{Context, Poll, Waker};
    let relay = std::sync::Arc::new(Relay::default());
    let waker = Waker::from(relay.clone());
    let mut future = Box::pin(future);
    match future.as_mut().poll(&mut Context::from_waker(&waker)) {
        Poll::Ready(text) => JsValue::from(text),
        Poll::Pending => worker::wasm_bindgen_futures::future_to_promise(async move {
            let text = std::future::poll_fn(|cx| {
                relay.follow(cx.waker());
                future.as_mut().poll(cx)
            })
            .await;
            Ok(JsValue::from(text))
        })
        .into(),
    }
}

/// The waker of [`answer`]'s first poll: wakes whichever task polls the future now.
#[derive(Default)]
struct Relay(std::sync::Mutex<Option<std::task::Waker>>);

impl Relay {
    fn follow(&self, waker: &std::task::Waker) {
        let mut slot = self
            .0
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if !slot.as_ref().is_some_and(|w| w.will_wake(waker)) {
            *slot = Some(waker.clone());
        }
    }
}

impl std::task::Wake for Relay {
    fn wake(self: std::sync::Arc<Self>) {
        self.wake_by_ref();
    }

    fn wake_by_ref(self: &std::sync::Arc<Self>) {
        // Before the task's first poll there is nobody to wake: that poll comes anyway.
        let slot = self
            .0
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if let Some(waker) = slot.as_ref() {
            waker.wake_by_ref();
        }
    }
}

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
    stub: ObjectStub,
    request: PhantomData<fn(R)>,
}

impl<R: Serialize> Client<R> {
    pub fn new(stub: Stub) -> Self {
        Client {
            stub: stub.into(),
            request: PhantomData,
        }
    }

    /// Sends one of this object's ops and decodes the op's reply.
    pub async fn call<O: Op<Request = R>>(&self, op: O) -> Result<O::Reply> {
        send(&self.stub, &op.into()).await
    }

    pub fn stub(&self) -> &ObjectStub {
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
pub async fn send<Op: Serialize, T: DeserializeOwned>(stub: &ObjectStub, op: &Op) -> Result<T> {
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
pub async fn send_text(stub: &ObjectStub, body: String) -> Result<String> {
    let promise = stub.handoff_rpc(&body).map_err(platform)?;
    let reply = JsFuture::from(promise).await.map_err(platform)?;
    let Some(mut text) = reply.as_string() else {
        return Err(Error::internal(
            "a Durable Object answered something other than text",
        ));
    };
    match text.chars().next() {
        Some(ANSWER) => {
            text.remove(0);
            Ok(text)
        }
        Some(FAILURE) => Err(decode_error(500, text.split_off(1))),
        _ => Err(Error::internal("a Durable Object answered untagged text")),
    }
}

/// Sends `op` to a Durable Object's `path` and returns its reply unread, for replies that
/// stream; an error reply is decoded as in [`send_text`].
pub async fn call_streaming<Op: Serialize>(
    stub: &ObjectStub,
    path: &str,
    op: &Op,
) -> Result<Response> {
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
    let outcome = match read_op::<Op>(req).await {
        Ok(op) => handler(op).await,
        Err(e) => Err(e),
    };
    match outcome {
        Ok(response) => Ok(response),
        Err(error) => Ok(Response::from_json(&error)?.with_status(error.http_status())),
    }
}

/// Answers an op a Durable Object received over RPC (see [`export_rpc!`]): decodes it, runs
/// `handler`, and tags the reply for [`send_text`].
pub async fn serve_text<Op, F, Fut>(text: String, handler: F) -> String
where
    Op: DeserializeOwned,
    F: FnOnce(Op) -> Fut,
    Fut: std::future::Future<Output = Result<Encoded>>,
{
    let outcome = match serde_json::from_str::<Op>(&text) {
        Ok(op) => handler(op).await,
        Err(e) => Err(Error::internal(format!("malformed internal request: {e}"))),
    };
    tagged(outcome)
}

/// What an object whose ops arrive over RPC answers a `fetch`: nothing is served there.
pub fn fetch_refused() -> worker::Result<Response> {
    let error = Error::new(
        crate::error::ErrorKind::NotFound,
        "this object takes its ops over RPC, not fetch",
    );
    Ok(Response::from_json(&error)?.with_status(error.http_status()))
}

/// A handler's result as the tagged text [`send_text`] reads.
fn tagged(outcome: Result<Encoded>) -> String {
    let (tag, body) = match outcome {
        Ok(Encoded(text)) => (ANSWER, text),
        Err(error) => (
            FAILURE,
            serde_json::to_string(&error).unwrap_or_else(|_| "{}".to_string()),
        ),
    };
    let mut out = String::with_capacity(body.len() + 1);
    out.push(tag);
    out.push_str(&body);
    out
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

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::Arc;
    use std::task::{Wake, Waker};

    /// A task's waker that counts its wake-ups.
    #[derive(Default)]
    struct Count(AtomicUsize);

    impl Wake for Count {
        fn wake(self: Arc<Self>) {
            self.0.fetch_add(1, Ordering::SeqCst);
        }
    }

    #[test]
    fn the_first_polls_waker_wakes_the_task_that_polls_later() {
        let relay = Arc::new(Relay::default());
        let first = Waker::from(relay.clone());
        // Before the promise's task has polled there is nobody to wake (its first poll comes).
        first.wake_by_ref();
        let task = Arc::new(Count::default());
        let task_waker = Waker::from(task.clone());
        relay.follow(&task_waker);
        relay.follow(&task_waker);
        // A timer that kept the first waker still reaches the task, once per wake-up.
        first.wake_by_ref();
        first.wake();
        assert_eq!(task.0.load(Ordering::SeqCst), 2);
        let later = Arc::new(Count::default());
        relay.follow(&Waker::from(later.clone()));
        Waker::from(relay).wake();
        assert_eq!(
            (
                task.0.load(Ordering::SeqCst),
                later.0.load(Ordering::SeqCst)
            ),
            (2, 1),
            "the latest poller's waker is the one woken"
        );
    }
}
