//! Discovery documents: protected resource metadata (RFC 9728) naming handoff as the MCP
//! endpoint's authorization server, and that server's metadata (RFC 8414).

use crate::http;
use serde_json::json;
use worker::Response;

/// The one scope: full use of this deployment's MCP tools.
pub const SCOPE: &str = "mcp";

/// The protected resource: the MCP endpoint's URL.
pub fn resource(base: &str) -> String {
    format!("{base}/mcp")
}

/// Where the protected resource metadata is (sent in the `WWW-Authenticate` challenge).
pub fn resource_metadata_url(base: &str) -> String {
    format!("{base}/.well-known/oauth-protected-resource/mcp")
}

/// The canonical resource for a client's `resource` parameter, or `None` when it names another
/// resource. The MCP URL (with or without a trailing slash) and the bare origin both mean this
/// deployment's MCP endpoint.
pub fn canonical_resource(base: &str, requested: &str) -> Option<String> {
    let requested = requested.trim().trim_end_matches('/');
    let ours = resource(base);
    (requested.eq_ignore_ascii_case(&ours) || requested.eq_ignore_ascii_case(base)).then_some(ours)
}

pub fn protected_resource(base: &str) -> Response {
    with_cache(http::json(
        200,
        &json!({
            "resource": resource(base),
            "authorization_servers": [base],
            "scopes_supported": [SCOPE],
            "bearer_methods_supported": ["header"],
            "resource_name": "handoff",
            "resource_documentation": format!("{base}/"),
        }),
    ))
}

pub fn authorization_server(base: &str) -> Response {
    let auth_methods = ["none", "client_secret_post", "client_secret_basic"];
    with_cache(http::json(
        200,
        &json!({
            "issuer": base,
            "authorization_endpoint": format!("{base}/oauth/authorize"),
            "token_endpoint": format!("{base}/oauth/token"),
            "registration_endpoint": format!("{base}/oauth/register"),
            "revocation_endpoint": format!("{base}/oauth/revoke"),
            "scopes_supported": [SCOPE],
            "response_types_supported": ["code"],
            "response_modes_supported": ["query"],
            "grant_types_supported": ["authorization_code", "refresh_token"],
            "code_challenge_methods_supported": ["S256"],
            "token_endpoint_auth_methods_supported": auth_methods,
            "revocation_endpoint_auth_methods_supported": auth_methods,
            "client_id_metadata_document_supported": true,
            "authorization_response_iss_parameter_supported": true,
            "service_documentation": format!("{base}/"),
        }),
    ))
}

fn with_cache(mut response: Response) -> Response {
    let _ = response
        .headers_mut()
        .set("cache-control", "public, max-age=300");
    response
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn resources_are_canonicalized_or_refused() {
        let base = "https://h.example";
        let ours = Some("https://h.example/mcp".to_string());
        assert_eq!(canonical_resource(base, "https://h.example/mcp"), ours);
        assert_eq!(canonical_resource(base, "https://h.example/mcp/"), ours);
        assert_eq!(canonical_resource(base, "https://h.example"), ours);
        assert_eq!(canonical_resource(base, "https://other.example/mcp"), None);
        assert_eq!(canonical_resource(base, "https://h.example/mcpx"), None);
    }
}
