//! Configuration read from the Worker's environment (wrangler.toml `[vars]`, `.dev.vars`,
//! `wrangler secret put`). Every name here is documented in `.dev.vars.example`.

use worker::Env;

/// Secret: API tokens accepted as `Authorization: Bearer <token>`.
pub const API_TOKENS: &str = "HANDOFF_API_TOKENS";
/// Secret: key that signs links handed out to users (the run page).
pub const SIGNING_KEY: &str = "HANDOFF_SIGNING_KEY";
/// Var: seconds without progress before the watchdog fails a run with `timed_out`.
pub const STALL_TIMEOUT: &str = "RUN_STALL_TIMEOUT_SECONDS";
/// Var: extra browser origins allowed to call `/mcp` (comma separated).
pub const ALLOWED_ORIGINS: &str = "HANDOFF_ALLOWED_ORIGINS";
/// Var: the public base URL used in links (defaults to the URL the request came in on).
pub const PUBLIC_URL: &str = "HANDOFF_PUBLIC_URL";
/// Var: base URL of a sandbox daemon reachable from the Worker (the local backend).
pub const SANDBOX_DAEMON_URL: &str = "SANDBOX_DAEMON_URL";
/// Secret: shared with the sandbox daemon, which accepts tokens signed with it.
pub const DAEMON_SECRET: &str = "SANDBOX_DAEMON_SECRET";
/// Var: the git forge repositories are accepted from.
pub const FORGE_GIT_URL: &str = "FORGE_GIT_URL";

pub const DEFAULT_STALL_TIMEOUT_SECS: u64 = 30 * 60;
pub const DEFAULT_FORGE_GIT_URL: &str = "https://github.com";
/// Signing keys shorter than this are refused: links signed with them could be forged.
pub const MIN_SIGNING_KEY_LEN: usize = 32;

/// A configured API token: a name for logs and run records, and the secret value.
#[derive(Clone)]
pub struct ApiToken {
    pub name: String,
    pub value: String,
}

/// Reads one variable or secret; unset and empty are the same.
pub fn get(env: &Env, name: &str) -> Option<String> {
    let value = env.var(name).ok()?.to_string();
    let trimmed = value.trim();
    (!trimmed.is_empty()).then(|| trimmed.to_string())
}

/// Parses `HANDOFF_API_TOKENS`: entries separated by commas or whitespace, each `name:token` or
/// a bare token (named `token-N`). Tokens shorter than 16 characters are ignored as unsafe.
pub fn parse_api_tokens(raw: &str) -> Vec<ApiToken> {
    raw.split(|c: char| c == ',' || c.is_whitespace())
        .filter(|entry| !entry.is_empty())
        .enumerate()
        .filter_map(|(i, entry)| {
            let (name, value) = match entry.split_once(':') {
                Some((name, value)) if !name.is_empty() => (name.to_string(), value.to_string()),
                _ => (format!("token-{}", i + 1), entry.to_string()),
            };
            (value.len() >= 16).then_some(ApiToken { name, value })
        })
        .collect()
}

pub fn api_tokens(env: &Env) -> Vec<ApiToken> {
    get(env, API_TOKENS)
        .map(|raw| parse_api_tokens(&raw))
        .unwrap_or_default()
}

pub fn signing_key(env: &Env) -> Option<Vec<u8>> {
    get(env, SIGNING_KEY)
        .filter(|k| k.len() >= MIN_SIGNING_KEY_LEN)
        .map(String::into_bytes)
}

pub fn stall_timeout_ms(env: &Env) -> u64 {
    get(env, STALL_TIMEOUT)
        .and_then(|v| v.parse::<u64>().ok())
        .filter(|&s| s > 0)
        .unwrap_or(DEFAULT_STALL_TIMEOUT_SECS)
        * 1000
}

pub fn allowed_origins(env: &Env) -> Vec<String> {
    get(env, ALLOWED_ORIGINS)
        .map(|raw| {
            raw.split(',')
                .map(|o| o.trim().trim_end_matches('/').to_ascii_lowercase())
                .filter(|o| !o.is_empty())
                .collect()
        })
        .unwrap_or_default()
}

pub fn public_url(env: &Env) -> Option<String> {
    get(env, PUBLIC_URL).map(|u| u.trim_end_matches('/').to_string())
}

pub fn sandbox_daemon_url(env: &Env) -> Option<String> {
    get(env, SANDBOX_DAEMON_URL).map(|u| u.trim_end_matches('/').to_string())
}

/// The key daemon tokens are signed with (at least 32 characters), if configured.
pub fn daemon_secret(env: &Env) -> Option<Vec<u8>> {
    get(env, DAEMON_SECRET)
        .filter(|k| k.len() >= MIN_SIGNING_KEY_LEN)
        .map(String::into_bytes)
}

/// The forge host repositories must live on, from `FORGE_GIT_URL` (default github.com).
pub fn forge_host(env: &Env) -> String {
    let url = get(env, FORGE_GIT_URL).unwrap_or_else(|| DEFAULT_FORGE_GIT_URL.to_string());
    host_of(&url).unwrap_or_else(|| "github.com".to_string())
}

/// The `host[:port]` part of an absolute http(s) URL, lower-cased.
pub fn host_of(url: &str) -> Option<String> {
    let rest = url
        .strip_prefix("https://")
        .or_else(|| url.strip_prefix("http://"))?;
    let host = rest.split(['/', '?', '#']).next()?;
    (!host.is_empty()).then(|| host.to_ascii_lowercase())
}

/// Problems an operator should know about, shown by `/health` (names only, never values).
pub fn warnings(env: &Env) -> Vec<String> {
    let mut out = Vec::new();
    if api_tokens(env).is_empty() {
        out.push(format!(
            "{API_TOKENS} is not set (or holds no token of at least 16 characters): /mcp refuses every request"
        ));
    }
    if signing_key(env).is_none() {
        out.push(format!(
            "{SIGNING_KEY} is not set (or shorter than {MIN_SIGNING_KEY_LEN} characters): runs get no webUiUrl"
        ));
    }
    if sandbox_daemon_url(env).is_none() {
        out.push(format!(
            "no local sandbox backend: {SANDBOX_DAEMON_URL} is not set (fine on Cloudflare with Containers)"
        ));
    }
    if daemon_secret(env).is_none() {
        out.push(format!(
            "{DAEMON_SECRET} is not set (or shorter than {MIN_SIGNING_KEY_LEN} characters): sandboxes cannot be used"
        ));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tokens_parse_named_and_bare_and_skip_short_ones() {
        let t = parse_api_tokens("laptop:abcdefghijklmnop, 0123456789abcdefXYZ short:tiny");
        assert_eq!(t.len(), 2);
        assert_eq!(t[0].name, "laptop");
        assert_eq!(t[0].value, "abcdefghijklmnop");
        assert_eq!(t[1].name, "token-2");
        assert_eq!(t[1].value, "0123456789abcdefXYZ");
    }

    #[test]
    fn host_of_handles_ports_paths_and_garbage() {
        assert_eq!(
            host_of("https://GitHub.com/a/b").as_deref(),
            Some("github.com")
        );
        assert_eq!(
            host_of("http://127.0.0.1:9000").as_deref(),
            Some("127.0.0.1:9000")
        );
        assert_eq!(host_of("ftp://x"), None);
        assert_eq!(host_of("https://"), None);
    }
}
