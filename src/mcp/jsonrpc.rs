//! JSON-RPC 2.0 framing: classifying an incoming message and building responses and errors with
//! rmcp's wire types (`ErrorData`, `ErrorCode`, `RequestId`).

use rmcp::model::{ErrorCode, ErrorData, RequestId};
use serde_json::{json, Map, Value};

/// One incoming JSON-RPC message, already checked for shape.
#[derive(Debug)]
pub enum Message {
    Request {
        id: RequestId,
        method: String,
        params: Option<Map<String, Value>>,
    },
    /// A message without an id (`notifications/initialized`, `notifications/cancelled`, …).
    Notification,
    /// A response to a server-initiated request (this server sends none, so it is acknowledged).
    Response,
}

/// A JSON-RPC error to send back, with the id of the request when it could be read.
#[derive(Debug)]
pub struct RpcError {
    pub id: Option<RequestId>,
    pub error: ErrorData,
}

impl RpcError {
    pub fn new(id: Option<RequestId>, code: ErrorCode, message: impl Into<String>) -> Self {
        Self {
            id,
            error: ErrorData::new(code, message.into(), None),
        }
    }

    /// The error response. The id is `null` when the request's could not be read (JSON-RPC 2.0
    /// §5, what clients of the initialize era expect), so this is not rmcp's `JsonRpcError`,
    /// which omits it as MCP 2026-07-28 says.
    /// An error with structured `data` (e.g. the supported versions of -32022).
    pub fn with_data(
        id: Option<RequestId>,
        code: ErrorCode,
        message: impl Into<String>,
        data: Option<Value>,
    ) -> Self {
        Self {
            id,
            error: ErrorData::new(code, message.into(), data),
        }
    }

    pub fn to_json(&self) -> Value {
        json!({
            "jsonrpc": "2.0",
            "id": self.id.clone().map(RequestId::into_json_value).unwrap_or(Value::Null),
            "error": self.error,
        })
    }
}

pub fn parse_error(detail: impl std::fmt::Display) -> RpcError {
    RpcError::new(
        None,
        ErrorCode::PARSE_ERROR,
        format!("parse error: the body is not valid JSON ({detail})"),
    )
}

pub fn invalid_request(id: Option<RequestId>, message: impl Into<String>) -> RpcError {
    RpcError::new(id, ErrorCode::INVALID_REQUEST, message)
}

pub fn invalid_params(id: RequestId, message: impl Into<String>) -> RpcError {
    RpcError::new(Some(id), ErrorCode::INVALID_PARAMS, message)
}

/// The error for a method the initialize era (`version`) does not have; it names those it has.
pub fn method_not_found(id: RequestId, method: &str, version: &str) -> RpcError {
    let tasks = if version == super::protocol::TASKS_VERSION {
        ", tasks/get, tasks/result, tasks/list and tasks/cancel"
    } else {
        ""
    };
    RpcError::new(
        Some(id),
        ErrorCode::METHOD_NOT_FOUND,
        format!(
            "method not found: {method:?}; on {version} this server implements initialize, ping, tools/list, tools/call, resources/list, resources/templates/list, resources/read, resources/subscribe, resources/unsubscribe, prompts/list, prompts/get, completion/complete{tasks}"
        ),
    )
}

/// A list this server answers in one page never hands out a cursor, so a cursor sent for it is
/// not one of its own: -32602, as the spec asks for invalid cursors. `null` counts as absent.
pub fn no_cursor(id: &RequestId, params: Option<&Map<String, Value>>) -> Result<(), RpcError> {
    match params.and_then(|p| p.get("cursor")) {
        None | Some(Value::Null) => Ok(()),
        Some(_) => Err(invalid_params(
            id.clone(),
            "`cursor` is not one this server returned: this list has a single page; omit the cursor",
        )),
    }
}

pub fn result(id: &RequestId, result: Value) -> Value {
    // Built around `result`, which is moved, not serialised again: a `tools/list` result is
    // hundreds of kilobytes.
    let mut response = Map::with_capacity(3);
    response.insert("jsonrpc".into(), json!("2.0"));
    response.insert("id".into(), json!(id));
    response.insert("result".into(), result);
    Value::Object(response)
}

/// [`result`] for a result already encoded as JSON: the response's text.
pub fn encoded_result(id: &RequestId, result: &str) -> serde_json::Result<String> {
    let id = serde_json::to_string(id)?;
    Ok(format!(
        r#"{{"jsonrpc":"2.0","id":{id},"result":{result}}}"#
    ))
}

/// Checks the JSON-RPC envelope of one parsed message.
pub fn classify(value: Value) -> Result<Message, RpcError> {
    let mut object = match value {
        Value::Object(object) => object,
        Value::Array(_) => {
            return Err(invalid_request(
                None,
                "a batch may not hold another batch: each item must be one JSON-RPC message",
            ))
        }
        _ => {
            return Err(invalid_request(
                None,
                "a JSON-RPC message must be a JSON object",
            ))
        }
    };
    let id = match object.remove("id") {
        None => None,
        Some(Value::String(s)) => Some(RequestId::String(s.into())),
        Some(Value::Number(n)) => match n.as_i64() {
            Some(n) => Some(RequestId::Number(n)),
            None => return Err(invalid_request(None, "`id` must be a string or an integer")),
        },
        Some(_) => return Err(invalid_request(None, "`id` must be a string or an integer")),
    };
    if object.get("jsonrpc").and_then(Value::as_str) != Some("2.0") {
        return Err(invalid_request(id, "`jsonrpc` must be \"2.0\""));
    }
    let method = match object.remove("method") {
        Some(Value::String(m)) => m,
        Some(_) => return Err(invalid_request(id, "`method` must be a string")),
        None if id.is_some() && (object.contains_key("result") || object.contains_key("error")) => {
            return Ok(Message::Response)
        }
        None => return Err(invalid_request(id, "missing `method`")),
    };
    let params = match object.remove("params") {
        None | Some(Value::Null) => None,
        Some(Value::Object(p)) => Some(p),
        Some(_) => {
            return Err(match id {
                Some(id) => invalid_params(id, "`params` must be an object"),
                None => invalid_request(None, "`params` must be an object"),
            })
        }
    };
    Ok(match id {
        Some(id) => Message::Request { id, method, params },
        None => Message::Notification,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn code(r: Result<Message, RpcError>) -> i32 {
        r.err().map(|e| e.error.code.0).unwrap_or(0)
    }

    #[test]
    fn classifies_requests_notifications_and_responses() {
        let req = classify(json!({"jsonrpc":"2.0","id":1,"method":"ping"}));
        assert!(matches!(req, Ok(Message::Request { .. })));
        let note = classify(json!({"jsonrpc":"2.0","method":"notifications/initialized"}));
        assert!(matches!(note, Ok(Message::Notification)));
        let resp = classify(json!({"jsonrpc":"2.0","id":"a","result":{}}));
        assert!(matches!(resp, Ok(Message::Response)));
    }

    #[test]
    fn responses_echo_the_request_id_and_errors_without_one_say_null() {
        let Ok(Message::Request { id, .. }) =
            classify(json!({"jsonrpc":"2.0","id":"r-1","method":"ping"}))
        else {
            panic!("a request");
        };
        assert_eq!(
            result(&id, json!({})),
            json!({"jsonrpc": "2.0", "id": "r-1", "result": {}})
        );
        let unknown = parse_error("eof").to_json();
        assert_eq!(unknown["id"], Value::Null);
        assert_eq!(unknown["error"]["code"], -32700);
    }

    #[test]
    fn rejects_bad_envelopes() {
        assert_eq!(code(classify(json!([]))), -32600);
        assert_eq!(code(classify(json!("x"))), -32600);
        assert_eq!(code(classify(json!({"id":1,"method":"ping"}))), -32600);
        assert_eq!(
            code(classify(json!({"jsonrpc":"2.0","id":1.5,"method":"ping"}))),
            -32600
        );
        assert_eq!(
            code(classify(json!({"jsonrpc":"2.0","id":1,"method":7}))),
            -32600
        );
        assert_eq!(
            code(classify(
                json!({"jsonrpc":"2.0","id":1,"method":"x","params":[1]})
            )),
            -32602
        );
    }
}
