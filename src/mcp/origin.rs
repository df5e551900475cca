//! Which browser origins may call `/mcp` (requests without `Origin`, from CLIs and servers, are
//! not affected).

use crate::config;
use crate::http;
use worker::{Env, Request};

/// Browsers send Origin; only this deployment's own origin and configured ones may call.
/// Requests without Origin (CLI and server-side clients) are not affected.
pub fn allowed(env: &Env, req: &Request, origin: &str) -> bool {
    let own = req.url().ok();
    let public = config::public_url(env);
    origin_allowed_for(
        own.as_ref(),
        public.as_deref(),
        &config::allowed_origins(env),
        origin,
    )
}

/// The Origin rule. The request's own origin counts only over https or on a loopback host: a
/// page that rebinds its own name to a local handoff (DNS rebinding) sends its name as both
/// Host and Origin, over http. A handoff on a loopback host also takes pages on loopback
/// origins (`localhost`, `127.0.0.1`, `[::1]`, any port — a local MCP Inspector, say), never
/// names under `localhost` (preview origins live there).
fn origin_allowed_for(
    own: Option<&worker::Url>,
    public: Option<&str>,
    allowed: &[String],
    origin: &str,
) -> bool {
    let origin = origin.trim_end_matches('/').to_ascii_lowercase();
    let own_loopback = own.and_then(|u| u.host()).is_some_and(http::is_loopback);
    let own_trusted = own_loopback || own.is_some_and(|u| u.scheme() == "https");
    let own_origin = own.map(|u| u.origin().ascii_serialization().to_ascii_lowercase());
    let origin_loopback = worker::Url::parse(&origin)
        .ok()
        .is_some_and(|u| u.host().is_some_and(http::is_loopback));
    (own_trusted && own_origin.as_deref() == Some(origin.as_str()))
        || public.map(str::to_ascii_lowercase).as_deref() == Some(origin.as_str())
        || allowed.contains(&origin)
        || (own_loopback && origin_loopback)
}

#[cfg(test)]
mod tests {
    use super::origin_allowed_for;
    use worker::Url;

    fn allowed(own: &str, origin: &str) -> bool {
        let own = Url::parse(own).expect("a URL");
        origin_allowed_for(Some(&own), None, &["https://app.example".into()], origin)
    }

    #[test]
    fn origins_are_own_configured_or_loopback_beside_a_loopback_server() {
        // A handoff on loopback: its own origin and other loopback pages, any port.
        assert!(allowed(
            "http://127.0.0.1:8787/mcp",
            "http://127.0.0.1:8787"
        ));
        assert!(allowed(
            "http://127.0.0.1:8787/mcp",
            "http://localhost:6274"
        ));
        assert!(allowed("http://localhost:8787/mcp", "http://[::1]:3000"));
        // Never names under localhost (preview origins) or anything else.
        assert!(!allowed(
            "http://127.0.0.1:8787/mcp",
            "http://p1.preview.localhost:8787"
        ));
        assert!(!allowed(
            "http://127.0.0.1:8787/mcp",
            "https://evil.example"
        ));
        // DNS rebinding: the attacker's name as Host and Origin, over http.
        assert!(!allowed(
            "http://evil.example:8787/mcp",
            "http://evil.example:8787"
        ));
        assert!(!allowed(
            "http://evil.example:8787/mcp",
            "http://localhost:8787"
        ));
        // A deployment over https: its own origin and the configured ones.
        assert!(allowed(
            "https://handoff.example.workers.dev/mcp",
            "https://handoff.example.workers.dev"
        ));
        assert!(allowed(
            "https://handoff.example.workers.dev/mcp",
            "https://app.example/"
        ));
        assert!(!allowed(
            "https://handoff.example.workers.dev/mcp",
            "http://localhost:6274"
        ));
    }
}
