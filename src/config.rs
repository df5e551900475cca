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

/// Secrets: the real provider and forge credentials, used only by the credential proxy and the
/// Worker itself — never handed to a sandbox.
pub const ANTHROPIC_API_KEY: &str = "ANTHROPIC_API_KEY";
pub const OPENAI_API_KEY: &str = "OPENAI_API_KEY";
pub const GITHUB_TOKEN: &str = "GITHUB_TOKEN";
/// Secret: signs the scoped tokens sandboxes use with the credential proxy.
pub const PROXY_JWT_SECRET: &str = "PROXY_JWT_SECRET";
/// Vars: upstreams of the credential proxy.
pub const ANTHROPIC_BASE_URL: &str = "ANTHROPIC_BASE_URL";
pub const OPENAI_BASE_URL: &str = "OPENAI_BASE_URL";
pub const FORGE_API_URL: &str = "FORGE_API_URL";
/// Var: the model runs use when the caller names none (`provider/model`).
pub const DEFAULT_MODEL: &str = "HANDOFF_DEFAULT_MODEL";
/// Var: the longest a run may take, start to end.
pub const MAX_RUN_DURATION: &str = "RUN_MAX_DURATION_SECONDS";
/// Var: how often a session checks on its working agent.
pub const POLL_INTERVAL: &str = "RUN_POLL_INTERVAL_MS";

pub const DEFAULT_STALL_TIMEOUT_SECS: u64 = 30 * 60;
pub const DEFAULT_MAX_RUN_SECS: u64 = 4 * 3600;
pub const DEFAULT_POLL_INTERVAL_MS: u64 = 2000;
pub const DEFAULT_MODEL_NAME: &str = "anthropic/claude-sonnet-4-5";
pub const DEFAULT_ANTHROPIC_BASE_URL: &str = "https://api.anthropic.com";
pub const DEFAULT_OPENAI_BASE_URL: &str = "https://api.openai.com/v1";
pub const DEFAULT_FORGE_API_URL: &str = "https://api.github.com";
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

/// The forge repositories must live on (`FORGE_GIT_URL`, default https://github.com), without a
/// trailing slash.
pub fn forge_git_url(env: &Env) -> String {
    url_var(env, FORGE_GIT_URL, DEFAULT_FORGE_GIT_URL)
}

pub fn forge_api_url(env: &Env) -> String {
    url_var(env, FORGE_API_URL, DEFAULT_FORGE_API_URL)
}

pub fn anthropic_base_url(env: &Env) -> String {
    url_var(env, ANTHROPIC_BASE_URL, DEFAULT_ANTHROPIC_BASE_URL)
}

pub fn openai_base_url(env: &Env) -> String {
    url_var(env, OPENAI_BASE_URL, DEFAULT_OPENAI_BASE_URL)
}

fn url_var(env: &Env, name: &str, default: &str) -> String {
    get(env, name)
        .unwrap_or_else(|| default.to_string())
        .trim_end_matches('/')
        .to_string()
}

pub fn default_model(env: &Env) -> String {
    get(env, DEFAULT_MODEL).unwrap_or_else(|| DEFAULT_MODEL_NAME.to_string())
}

pub fn max_run_ms(env: &Env) -> i64 {
    positive(env, MAX_RUN_DURATION).unwrap_or(DEFAULT_MAX_RUN_SECS) as i64 * 1000
}

pub fn poll_interval_ms(env: &Env) -> i64 {
    positive(env, POLL_INTERVAL).unwrap_or(DEFAULT_POLL_INTERVAL_MS) as i64
}

fn positive(env: &Env, name: &str) -> Option<u64> {
    get(env, name)
        .and_then(|v| v.parse::<u64>().ok())
        .filter(|&v| v > 0)
}

/// The key proxy tokens are signed with (at least 32 characters), if configured.
pub fn proxy_secret(env: &Env) -> Option<Vec<u8>> {
    get(env, PROXY_JWT_SECRET)
        .filter(|k| k.len() >= MIN_SIGNING_KEY_LEN)
        .map(String::into_bytes)
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
    if proxy_secret(env).is_none() {
        out.push(format!(
            "{PROXY_JWT_SECRET} is not set (or shorter than {MIN_SIGNING_KEY_LEN} characters): runs cannot reach the model or the forge"
        ));
    }
    if get(env, ANTHROPIC_API_KEY).is_none() && get(env, OPENAI_API_KEY).is_none() {
        out.push(format!(
            "neither {ANTHROPIC_API_KEY} nor {OPENAI_API_KEY} is set: runs have no model"
        ));
    }
    if get(env, GITHUB_TOKEN).is_none() {
        out.push(format!("{GITHUB_TOKEN} is not set: runs cannot clone private repositories, push or open pull requests"));
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
}
