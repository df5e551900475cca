//! MCP 2026-07-28 ("modern", stateless) beside the initialize era on the same `/mcp`, chosen per
//! request: a request that carries its protocol version in `params._meta` (or names a modern
//! version in `MCP-Protocol-Version`) is answered here, without a session.
//!
//! Every request goes through the ladder the spec sets, first failure wins: the `_meta`
//! envelope (protocol version and client capabilities) → the mirrored headers
//! (`MCP-Protocol-Version`, `Mcp-Method`, `Mcp-Name`) → a supported version. Every result
//! carries `resultType` and the server's identity in `_meta`; lists carry cache hints.

use super::jsonrpc::{Message, RpcError};
use super::protocol;
use base64::engine::general_purpose::STANDARD as B64;
use base64::Engine;
use rmcp::model::ErrorCode;
use serde_json::{json, Map, Value};

/// The modern versions this server speaks, newest first.
pub const VERSIONS: [&str; 1] = ["2026-07-28"];
const META_VERSION: &str = "io.modelcontextprotocol/protocolVersion";
const META_CAPABILITIES: &str = "io.modelcontextprotocol/clientCapabilities";
const META_SERVER_INFO: &str = "io.modelcontextprotocol/serverInfo";
/// Methods whose target is mirrored in `Mcp-Name`, and the parameter that names it.
const NAME_BEARING: [(&str, &str); 3] = [
    ("tools/call", "name"),
    ("prompts/get", "name"),
    ("resources/read", "uri"),
];
/// How long clients may cache `server/discover` and `tools/list` (they change with deploys).
const LIST_TTL_MS: u64 = 5 * 60 * 1000;

/// Whether `message` is for the modern era.
pub fn is_modern(message: &Message, header: &dyn Fn(&str) -> Option<String>) -> bool {
    let in_meta = match message {
        Message::Request { params, .. } => params
            .as_ref()
            .and_then(|p| p.get("_meta"))
            .and_then(Value::as_object)
            .is_some_and(|meta| meta.contains_key(META_VERSION)),
        _ => false,
    };
    in_meta || header("mcp-protocol-version").is_some_and(|v| VERSIONS.contains(&v.as_str()))
}

/// A refused request: the JSON-RPC error and the HTTP status it travels with.
pub struct Refusal {
    pub status: u16,
    pub error: RpcError,
}

/// The ladder: returns the protocol version the request speaks, or why it is refused.
pub fn check(
    id: &rmcp::model::RequestId,
    method: &str,
    params: Option<&Map<String, Value>>,
    header: &dyn Fn(&str) -> Option<String>,
) -> Result<&'static str, Refusal> {
    let refuse = |status: u16, code: ErrorCode, message: String, data: Option<Value>| Refusal {
        status,
        error: RpcError::with_data(Some(id.clone()), code, message, data),
    };
    let meta = params
        .and_then(|p| p.get("_meta"))
        .and_then(Value::as_object);
    let Some(meta) = meta else {
        return Err(refuse(
            400,
            ErrorCode::INVALID_PARAMS,
            format!(
                "params._meta must be an object carrying {META_VERSION} and {META_CAPABILITIES}"
            ),
            None,
        ));
    };
    let missing: Vec<&str> = [META_VERSION, META_CAPABILITIES]
        .into_iter()
        .filter(|key| !meta.contains_key(*key))
        .collect();
    if !missing.is_empty() {
        return Err(refuse(
            400,
            ErrorCode::INVALID_PARAMS,
            format!("params._meta is missing {}", missing.join(" and ")),
            None,
        ));
    }
    let Some(requested) = meta.get(META_VERSION).and_then(Value::as_str) else {
        return Err(refuse(
            400,
            ErrorCode::INVALID_PARAMS,
            format!("{META_VERSION} must be a string"),
            None,
        ));
    };
    let mismatch = |what: String| refuse(400, ErrorCode(HEADER_MISMATCH), what, None);
    if header("mcp-protocol-version").as_deref() != Some(requested) {
        return Err(mismatch(format!(
            "the MCP-Protocol-Version header must be {requested:?}, the version in params._meta"
        )));
    }
    if header("mcp-method").as_deref() != Some(method) {
        return Err(mismatch(format!(
            "the Mcp-Method header must be {method:?}, the request's method"
        )));
    }
    if let Some((_, key)) = NAME_BEARING.iter().find(|(m, _)| *m == method) {
        let named = params.and_then(|p| p.get(*key)).and_then(Value::as_str);
        let presented = header("mcp-name").and_then(|v| decode_header_value(&v));
        if named.is_some() && presented.as_deref() != named {
            return Err(mismatch(format!(
                "the Mcp-Name header must be the request's {key:?} parameter"
            )));
        }
    }
    match VERSIONS.iter().find(|v| **v == requested) {
        Some(version) => Ok(version),
        None => Err(refuse(
            400,
            ErrorCode(UNSUPPORTED_VERSION),
            format!(
                "protocol version {requested:?} is not supported; this server speaks {}",
                supported_versions().join(", ")
            ),
            Some(json!({"requested": requested, "supported": supported_versions()})),
        )),
    }
}

/// -32020: the mirrored headers are missing or disagree with the body.
pub const HEADER_MISMATCH: i32 = -32020;
/// -32022: the request's protocol version is not one this server speaks.
pub const UNSUPPORTED_VERSION: i32 = -32022;

/// Every version this server speaks, modern first.
pub fn supported_versions() -> Vec<&'static str> {
    VERSIONS
        .iter()
        .chain(protocol::SUPPORTED.iter())
        .copied()
        .collect()
}

/// `server/discover`'s result.
pub fn discover() -> Value {
    let mut result = rmcp::model::DiscoverResult::new(
        supported_versions()
            .into_iter()
            .filter_map(|v| serde_json::from_value(json!(v)).ok())
            .collect(),
        protocol::capabilities(),
    )
    .with_server_info(protocol::server_info())
    .with_ttl_ms(LIST_TTL_MS)
    .with_cache_scope(rmcp::model::CacheScope::Public);
    result.instructions = Some(protocol::INSTRUCTIONS.to_string());
    let mut result = json!(result);
    result["capabilities"]["extensions"] = json!({ super::tasks::EXTENSION: {} });
    result
}

/// Adds what every modern result carries to a JSON-RPC response: `resultType` and the server's
/// identity, and for lists the cache hints. Errors pass as they are.
pub fn decorate(method: &str, mut response: Value) -> Value {
    if let Some(result) = response.get_mut("result").and_then(Value::as_object_mut) {
        result
            .entry("resultType")
            .or_insert_with(|| json!("complete"));
        let meta = result
            .entry("_meta")
            .or_insert_with(|| json!({}))
            .as_object_mut();
        if let Some(meta) = meta {
            meta.entry(META_SERVER_INFO)
                .or_insert_with(|| json!(protocol::server_info()));
        }
        match method {
            // Fixed for a deploy.
            "tools/list" | "prompts/list" | "resources/templates/list" => {
                result.insert("ttlMs".into(), json!(LIST_TTL_MS));
                result.insert("cacheScope".into(), json!("public"));
            }
            // Runs come and go, and they are the caller's.
            "resources/list" => {
                result.insert("ttlMs".into(), json!(0));
                result.insert("cacheScope".into(), json!("private"));
            }
            _ => {}
        }
    }
    response
}

/// The HTTP status of a modern-era JSON-RPC error.
pub fn status_of(error: &RpcError) -> u16 {
    match error.error.code.0 {
        HEADER_MISMATCH | UNSUPPORTED_VERSION | -32021 => 400,
        c if c == ErrorCode::METHOD_NOT_FOUND.0 => 404,
        _ => 200,
    }
}

/// A header value, `=?base64?…?=`-decoded when it is so wrapped (for names outside ASCII).
fn decode_header_value(value: &str) -> Option<String> {
    match value
        .strip_prefix("=?base64?")
        .and_then(|v| v.strip_suffix("?="))
    {
        Some(encoded) => B64
            .decode(encoded)
            .ok()
            .and_then(|bytes| String::from_utf8(bytes).ok()),
        None => Some(value.to_string()),
    }
}

/// The error for a method this era does not have.
pub fn method_not_found(id: rmcp::model::RequestId, method: &str) -> RpcError {
    RpcError::new(
        Some(id),
        ErrorCode::METHOD_NOT_FOUND,
        format!(
            "method not found: {method:?}; on {} this server implements server/discover, tools/*, resources/list, resources/templates/list, resources/read, prompts/*, completion/complete, subscriptions/listen and (with the {} extension) tasks/get, tasks/update and tasks/cancel",
            VERSIONS[0],
            super::tasks::EXTENSION
        ),
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::mcp::jsonrpc;
    use rmcp::model::RequestId;
    use std::collections::HashMap;

    fn ladder(params: Value, headers: &[(&str, &str)]) -> Result<&'static str, (u16, i32)> {
        let headers: HashMap<String, String> = headers
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        let params = params.as_object().cloned();
        check(
            &RequestId::Number(1),
            "tools/call",
            params.as_ref(),
            &|name| headers.get(name).cloned(),
        )
        .map_err(|r| (r.status, r.error.error.code.0))
    }

    fn meta(version: &str) -> Value {
        json!({META_VERSION: version, META_CAPABILITIES: {}})
    }

    #[test]
    fn the_ladder_checks_envelope_then_headers_then_version() {
        let ok = [
            ("mcp-protocol-version", "2026-07-28"),
            ("mcp-method", "tools/call"),
            ("mcp-name", "opencode_list_runs"),
        ];
        let call = |m: Value| json!({"name": "opencode_list_runs", "_meta": m});
        assert_eq!(ladder(call(meta("2026-07-28")), &ok), Ok("2026-07-28"));
        // The envelope first.
        assert_eq!(ladder(json!({"name": "x"}), &ok), Err((400, -32602)));
        assert_eq!(
            ladder(call(json!({META_VERSION: "2026-07-28"})), &ok),
            Err((400, -32602))
        );
        // Then the mirrored headers: missing, or disagreeing with the body.
        assert_eq!(
            ladder(call(meta("2026-07-28")), &ok[..2]),
            Err((400, HEADER_MISMATCH))
        );
        let other_name = [ok[0], ok[1], ("mcp-name", "sandbox_exec")];
        assert_eq!(
            ladder(call(meta("2026-07-28")), &other_name),
            Err((400, HEADER_MISMATCH))
        );
        let other_method = [ok[0], ("mcp-method", "tools/list"), ok[2]];
        assert_eq!(
            ladder(call(meta("2026-07-28")), &other_method),
            Err((400, HEADER_MISMATCH))
        );
        assert_eq!(
            ladder(call(meta("2026-07-28")), &ok[1..]),
            Err((400, HEADER_MISMATCH))
        );
        let wrapped = format!("=?base64?{}?=", B64.encode("opencode_list_runs"));
        let encoded = [ok[0], ok[1], ("mcp-name", wrapped.as_str())];
        assert_eq!(ladder(call(meta("2026-07-28")), &encoded), Ok("2026-07-28"));
        // Then the version: headers agreeing on one this server does not speak.
        let future = [("mcp-protocol-version", "2099-01-01"), ok[1], ok[2]];
        assert_eq!(
            ladder(call(meta("2099-01-01")), &future),
            Err((400, UNSUPPORTED_VERSION))
        );
    }

    #[test]
    fn modern_requests_are_told_apart_from_the_initialize_era() {
        let none = |_: &str| None;
        let request = |params: Value| Message::Request {
            id: RequestId::Number(1),
            method: "tools/list".into(),
            params: params.as_object().cloned(),
        };
        assert!(is_modern(
            &request(json!({"_meta": meta("2026-07-28")})),
            &none
        ));
        assert!(!is_modern(&request(json!({})), &none));
        let modern_header =
            |name: &str| (name == "mcp-protocol-version").then(|| "2026-07-28".to_string());
        assert!(is_modern(&request(json!({})), &modern_header));
        let legacy_header =
            |name: &str| (name == "mcp-protocol-version").then(|| "2025-11-25".to_string());
        assert!(!is_modern(&request(json!({})), &legacy_header));
    }

    #[test]
    fn wrapped_header_values_are_decoded() {
        assert_eq!(decode_header_value("plain").as_deref(), Some("plain"));
        let wrapped = format!("=?base64?{}?=", B64.encode("wörk"));
        assert_eq!(decode_header_value(&wrapped).as_deref(), Some("wörk"));
        assert_eq!(decode_header_value("=?base64?***?="), None);
    }

    #[test]
    fn results_carry_their_type_identity_and_cache_hints() {
        let id = rmcp::model::RequestId::Number(1);
        let listed = decorate("tools/list", jsonrpc::result(&id, json!({"tools": []})));
        assert_eq!(listed["result"]["resultType"], "complete");
        assert_eq!(listed["result"]["cacheScope"], "public");
        assert_eq!(listed["result"]["ttlMs"], LIST_TTL_MS);
        assert_eq!(
            listed["result"]["_meta"][META_SERVER_INFO]["name"],
            "handoff"
        );
        let called = decorate("tools/call", jsonrpc::result(&id, json!({"content": []})));
        assert!(called["result"].get("ttlMs").is_none());
        let failed = decorate(
            "tools/call",
            json!({"jsonrpc": "2.0", "id": 1, "error": {"code": -1}}),
        );
        assert!(failed.get("result").is_none());
        let discovered = discover();
        assert_eq!(discovered["resultType"], "complete");
        assert_eq!(discovered["supportedVersions"][0], "2026-07-28");
        assert!(discovered["supportedVersions"]
            .as_array()
            .unwrap()
            .contains(&json!("2025-11-25")));
        assert_eq!(discovered["_meta"][META_SERVER_INFO]["name"], "handoff");
    }
}
