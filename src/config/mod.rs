//! Configuration read from the Worker's environment (wrangler.toml `[vars]`, `.dev.vars`,
//! `wrangler secret put`). Every name here is documented in `.dev.vars.example`.

use worker::Env;

mod preview;
mod read;
pub use preview::preview_base;
pub use read::get;
pub mod runs;
pub mod workers;

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
/// Var: the base of sandbox preview origins (`https://preview.example.com` serves previews at
/// `https://<token>.preview.example.com`); unset, previews are refused.
pub const PREVIEW_URL: &str = "HANDOFF_PREVIEW_URL";
/// Var (local container lane only): a CONNECT proxy the daemon in each container connects out
/// through — the egress sidecar, whose tunnels reach the host the Worker runs on.
pub const CONTAINER_UPSTREAM_PROXY: &str = "HANDOFF_CONTAINER_UPSTREAM_PROXY";
/// Var: extra certificate authorities (PEM) the daemon in each container trusts for upstream
/// HTTPS — where it swaps secrets in — besides the public ones: a private forge's CA.
pub const CONTAINER_UPSTREAM_CA: &str = "HANDOFF_CONTAINER_UPSTREAM_CA";
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

/// Secret: the passphrase the deployment's owner signs in with on the OAuth consent page.
pub const OWNER_PASSPHRASE: &str = "HANDOFF_OWNER_PASSPHRASE";
/// Optional GitHub sign-in for the owner: an OAuth App's id and secret, and the logins allowed.
pub const GITHUB_OAUTH_CLIENT_ID: &str = "GITHUB_OAUTH_CLIENT_ID";
pub const GITHUB_OAUTH_CLIENT_SECRET: &str = "GITHUB_OAUTH_CLIENT_SECRET";
pub const OWNER_GITHUB_LOGINS: &str = "HANDOFF_OWNER_GITHUB_LOGINS";
/// Vars: GitHub's web (sign-in) and API roots, for GitHub Enterprise and local stand-ins.
pub const GITHUB_OAUTH_URL: &str = "GITHUB_OAUTH_URL";
pub const GITHUB_OAUTH_API_URL: &str = "GITHUB_OAUTH_API_URL";
/// Vars: lifetimes of OAuth access and refresh tokens, in seconds.
pub const ACCESS_TOKEN_TTL: &str = "OAUTH_ACCESS_TOKEN_TTL_SECONDS";
pub const REFRESH_TOKEN_TTL: &str = "OAUTH_REFRESH_TOKEN_TTL_SECONDS";
/// Var: overrides of the OAuth rate limits, e.g. `register=20/3600,signin=5/900`.
pub const RATE_LIMITS: &str = "HANDOFF_RATE_LIMITS";
/// Var (development only): accept `http://127.0.0.1`/`localhost` client metadata document URLs.
pub const DEV_LOOPBACK_CLIENT_IDS: &str = "HANDOFF_DEV_LOOPBACK_CLIENT_IDS";

pub const DEFAULT_STALL_TIMEOUT_SECS: u64 = 30 * 60;
pub const DEFAULT_MAX_RUN_SECS: u64 = 4 * 3600;
pub const DEFAULT_POLL_INTERVAL_MS: u64 = 2000;
pub const DEFAULT_MODEL_NAME: &str = "anthropic/claude-sonnet-4-5";
pub const DEFAULT_ANTHROPIC_BASE_URL: &str = "https://api.anthropic.com";
pub const DEFAULT_OPENAI_BASE_URL: &str = "https://api.openai.com/v1";
pub const DEFAULT_FORGE_API_URL: &str = "https://api.github.com";
pub const DEFAULT_FORGE_GIT_URL: &str = "https://github.com";
pub const DEFAULT_GITHUB_OAUTH_URL: &str = "https://github.com";
pub const DEFAULT_GITHUB_OAUTH_API_URL: &str = "https://api.github.com";
pub const DEFAULT_ACCESS_TOKEN_TTL_SECS: u64 = 3600;
pub const DEFAULT_REFRESH_TOKEN_TTL_SECS: u64 = 30 * 24 * 3600;
/// Owner passphrases shorter than this are refused: they could be guessed.
pub const MIN_PASSPHRASE_LEN: usize = 12;
/// Signing keys shorter than this are refused: links signed with them could be forged.
pub const MIN_SIGNING_KEY_LEN: usize = 32;

/// A configured API token: a name for logs and run records, and the secret value.
#[derive(Clone)]
pub struct ApiToken {
    pub name: String,
    pub value: String,
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

/// The owner's passphrase, if one of usable length is set.
pub fn owner_passphrase(env: &Env) -> Option<String> {
    get(env, OWNER_PASSPHRASE).filter(|p| p.chars().count() >= MIN_PASSPHRASE_LEN)
}

/// GitHub sign-in for the owner, when an OAuth App and at least one login are configured.
#[derive(Clone)]
pub struct GithubSignIn {
    pub client_id: String,
    pub client_secret: String,
    /// Allowed logins, lower-case.
    pub logins: Vec<String>,
    pub oauth_url: String,
    pub api_url: String,
}

/// `None` also when `HANDOFF_SIGNING_KEY` is missing: the sign-in state and the owner's cookie
/// are signed with it.
pub fn github_sign_in(env: &Env) -> Option<GithubSignIn> {
    signing_key(env)?;
    let logins: Vec<String> = get(env, OWNER_GITHUB_LOGINS)?
        .split(|c: char| c == ',' || c.is_whitespace())
        .map(|l| l.trim().trim_start_matches('@').to_ascii_lowercase())
        .filter(|l| !l.is_empty())
        .collect();
    if logins.is_empty() {
        return None;
    }
    Some(GithubSignIn {
        client_id: get(env, GITHUB_OAUTH_CLIENT_ID)?,
        client_secret: get(env, GITHUB_OAUTH_CLIENT_SECRET)?,
        logins,
        oauth_url: url_var(env, GITHUB_OAUTH_URL, DEFAULT_GITHUB_OAUTH_URL),
        api_url: url_var(env, GITHUB_OAUTH_API_URL, DEFAULT_GITHUB_OAUTH_API_URL),
    })
}

/// Whether the owner can sign in on the consent page at all (OAuth clients can connect).
pub fn owner_sign_in_configured(env: &Env) -> bool {
    owner_passphrase(env).is_some() || github_sign_in(env).is_some()
}

pub fn access_token_ttl_secs(env: &Env) -> i64 {
    positive(env, ACCESS_TOKEN_TTL).unwrap_or(DEFAULT_ACCESS_TOKEN_TTL_SECS) as i64
}

pub fn refresh_token_ttl_secs(env: &Env) -> i64 {
    positive(env, REFRESH_TOKEN_TTL).unwrap_or(DEFAULT_REFRESH_TOKEN_TTL_SECS) as i64
}

pub fn dev_loopback_client_ids(env: &Env) -> bool {
    get(env, DEV_LOOPBACK_CLIENT_IDS).is_some_and(|v| v == "1" || v.eq_ignore_ascii_case("true"))
}

/// A rate limit: at most `max` events per `window_secs` per key.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limit {
    pub max: u32,
    pub window_secs: u32,
}

/// The OAuth endpoints' rate limits.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RateLimits {
    /// Client registrations per client address.
    pub register: Limit,
    /// Token and revocation requests per client address.
    pub token: Limit,
    /// Authorization requests (consent pages opened) per client address.
    pub authorize: Limit,
    /// Failed owner sign-ins per client address.
    pub signin: Limit,
    /// Failed owner sign-ins in total, from everywhere.
    pub signin_global: Limit,
}

pub const DEFAULT_RATE_LIMITS: RateLimits = RateLimits {
    register: Limit {
        max: 20,
        window_secs: 3600,
    },
    token: Limit {
        max: 120,
        window_secs: 60,
    },
    authorize: Limit {
        max: 60,
        window_secs: 600,
    },
    signin: Limit {
        max: 5,
        window_secs: 900,
    },
    signin_global: Limit {
        max: 30,
        window_secs: 3600,
    },
};

pub fn rate_limits(env: &Env) -> RateLimits {
    get(env, RATE_LIMITS)
        .map(|raw| parse_rate_limits(&raw))
        .unwrap_or(DEFAULT_RATE_LIMITS)
}

/// Parses `name=max/seconds` entries over the defaults; malformed entries are ignored.
pub fn parse_rate_limits(raw: &str) -> RateLimits {
    let mut limits = DEFAULT_RATE_LIMITS;
    for entry in raw.split(|c: char| c == ',' || c.is_whitespace()) {
        let Some((name, value)) = entry.split_once('=') else {
            continue;
        };
        let Some((max, window)) = value.split_once('/') else {
            continue;
        };
        let (Ok(max), Ok(window_secs)) = (max.trim().parse::<u32>(), window.trim().parse::<u32>())
        else {
            continue;
        };
        if max == 0 || window_secs == 0 {
            continue;
        }
        let limit = Limit { max, window_secs };
        match name.trim() {
            "register" => limits.register = limit,
            "token" => limits.token = limit,
            "authorize" => limits.authorize = limit,
            "signin" => limits.signin = limit,
            "signin_global" => limits.signin_global = limit,
            _ => {}
        }
    }
    limits
}

/// Problems an operator should know about, shown by `/health` (names only, never values).
pub fn warnings(env: &Env) -> Vec<String> {
    let mut out = Vec::new();
    let sign_in = owner_sign_in_configured(env);
    if api_tokens(env).is_empty() && !sign_in {
        out.push(format!(
            "neither {API_TOKENS} nor an owner sign-in ({OWNER_PASSPHRASE} or GitHub) is set: /mcp refuses every request"
        ));
    }
    if !sign_in {
        out.push(format!(
            "no owner sign-in ({OWNER_PASSPHRASE} of at least {MIN_PASSPHRASE_LEN} characters, or GitHub sign-in): OAuth clients (Claude.ai, Claude Desktop, ChatGPT) cannot connect"
        ));
    }
    if get(env, OWNER_GITHUB_LOGINS).is_some() && signing_key(env).is_none() {
        out.push(format!(
            "GitHub sign-in needs {SIGNING_KEY}: it is switched off until that is set"
        ));
    }
    if dev_loopback_client_ids(env) {
        out.push(format!(
            "{DEV_LOOPBACK_CLIENT_IDS} is on: http loopback client ids are accepted (development only)"
        ));
    }
    if signing_key(env).is_none() {
        out.push(format!(
            "{SIGNING_KEY} is not set (or shorter than {MIN_SIGNING_KEY_LEN} characters): runs get no webUiUrl"
        ));
    }
    if preview_base(env).is_none() {
        out.push(format!(
            "{PREVIEW_URL} is not set (or not an http(s) origin): sandbox_preview_url refuses, since previews need an origin of their own"
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
    out.extend(workers::warnings(env));
    out.extend(runs::warnings(env));
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
    fn rate_limits_override_only_what_they_name() {
        let l = parse_rate_limits("register=2/60, signin=1/5 token=x/1 bogus=1/1 authorize=0/9");
        assert_eq!(
            l.register,
            Limit {
                max: 2,
                window_secs: 60
            }
        );
        assert_eq!(
            l.signin,
            Limit {
                max: 1,
                window_secs: 5
            }
        );
        assert_eq!(l.token, DEFAULT_RATE_LIMITS.token);
        assert_eq!(l.authorize, DEFAULT_RATE_LIMITS.authorize);
    }

    #[test]
    fn every_setting_is_documented_in_the_example_file() {
        let example = include_str!("../../.dev.vars.example");
        let documented = |name: &str| {
            example.lines().any(|line| {
                let line = line.trim_start_matches('#').trim_start();
                line.strip_prefix(name)
                    .is_some_and(|rest| rest.starts_with('='))
            })
        };
        let sources = [
            include_str!("mod.rs"),
            include_str!("workers.rs"),
            include_str!("runs.rs"),
        ];
        let names: Vec<&str> = sources
            .iter()
            .flat_map(|source| source.lines())
            .filter_map(|line| line.strip_prefix("pub const "))
            .filter(|line| line.contains(": &str = \""))
            .filter_map(|line| line.split('"').nth(1))
            .filter(|value| {
                value
                    .chars()
                    .all(|c| c.is_ascii_uppercase() || c.is_ascii_digit() || c == '_')
            })
            .collect();
        assert!(names.len() > 20, "{names:?}");
        let missing: Vec<&&str> = names.iter().filter(|n| !documented(n)).collect();
        assert!(missing.is_empty(), "not in .dev.vars.example: {missing:?}");
    }
}
