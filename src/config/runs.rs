//! Settings of runs' completion callbacks, budgets and kept agents (documented in
//! `.dev.vars.example` with the rest).

use super::{get, MIN_SIGNING_KEY_LEN};
use crate::budget::Budget;
use worker::Env;

/// Secret: the key completion callbacks are signed with (32+ characters); receivers check the
/// `handoff-signature` header with it.
pub const CALLBACK_SECRET: &str = "HANDOFF_CALLBACK_SECRET";
/// Var: hosts callbacks may reach although they are loopback or private (comma-separated, exact
/// host names or IP addresses; plain http is allowed for them). For local testing only.
pub const CALLBACK_ALLOW_PRIVATE_HOSTS: &str = "CALLBACK_ALLOW_PRIVATE_HOSTS";
/// Var: the wait before the second attempt of a callback, in seconds, doubled after each
/// further failure up to an hour (default 10).
pub const CALLBACK_RETRY_SECONDS: &str = "CALLBACK_RETRY_SECONDS";
/// Var: how long a callback is retried after the run ended, in seconds (default 24 hours).
pub const CALLBACK_RETRY_WINDOW_SECONDS: &str = "CALLBACK_RETRY_WINDOW_SECONDS";
/// Var: the budget in dollars of a run that sets no `maxCostUsd` (default: none).
pub const DEFAULT_MAX_COST_USD: &str = "RUN_DEFAULT_MAX_COST_USD";
/// Var: the token budget of a run that sets no `maxTokens` (default: none).
pub const DEFAULT_MAX_TOKENS: &str = "RUN_DEFAULT_MAX_TOKENS";
/// Var: the time budget in seconds of a run that sets no `maxDurationSeconds` (default: none;
/// `RUN_MAX_DURATION_SECONDS` still bounds every run).
pub const DEFAULT_MAX_DURATION_SECONDS: &str = "RUN_DEFAULT_MAX_DURATION_SECONDS";

/// Var: how long a session's OpenCode keeps serving after a coding run, for the next one, in
/// seconds (default 600; 0: it stops with each run).
pub const AGENT_KEEP_SECONDS: &str = "RUN_AGENT_KEEP_SECONDS";

/// Var: whether a coding run that starts a new session also prepares a spare one for the
/// caller's next new session — its sandbox and OpenCode started, then frozen — which waits
/// `RUN_AGENT_KEEP_SECONDS` and is deleted unused ("1", the default, or "0").
pub const SPARE_SESSIONS: &str = "RUN_SPARE_SESSIONS";

/// Var: how long a run waits, in seconds, before it hands the agent its turn again when the
/// model provider kept failing (429, 5xx) past OpenCode's own retries; doubled for each
/// further attempt, up to 4 (default 30).
pub const MODEL_RETRY_SECONDS: &str = "RUN_MODEL_RETRY_SECONDS";

/// Var: how long the model may send nothing while the agent waits on it, in seconds, before
/// the turn is stopped and handed back like a failed one (default 180; at least 5).
pub const MODEL_STALL_SECONDS: &str = "RUN_MODEL_STALL_SECONDS";

/// Var: how long a run waits for a sandbox that stopped answering while it works on by itself
/// (the agent working, a worker's script running) — a daemon restarting, the network between
/// the Worker and the sandboxes down — before the run fails, in seconds (default 300).
pub const DAEMON_OUTAGE_SECONDS: &str = "RUN_DAEMON_OUTAGE_SECONDS";
pub const DEFAULT_DAEMON_OUTAGE_SECS: u64 = 300;

/// How long an unanswering sandbox is waited for (see [`DAEMON_OUTAGE_SECONDS`]).
pub fn daemon_outage_ms(env: &Env) -> i64 {
    get(env, DAEMON_OUTAGE_SECONDS)
        .and_then(|v| v.parse::<u64>().ok())
        .unwrap_or(DEFAULT_DAEMON_OUTAGE_SECS)
        .min(24 * 3600) as i64
        * 1000
}

pub const DEFAULT_AGENT_KEEP_SECS: u64 = 600;
pub const DEFAULT_MODEL_RETRY_SECS: u64 = 30;
/// How many times a run's turn is handed back after the provider failed.
pub const MODEL_RETRIES: u32 = 4;

pub const DEFAULT_MODEL_STALL_SECS: u64 = 180;

/// How long a silent model is waited for (see [`MODEL_STALL_SECONDS`]).
pub fn model_stall_ms(env: &Env) -> i64 {
    get(env, MODEL_STALL_SECONDS)
        .and_then(|v| v.parse::<u64>().ok())
        .unwrap_or(DEFAULT_MODEL_STALL_SECS)
        .clamp(5, 24 * 3600) as i64
        * 1000
}

/// The wait before the `attempt`-th (1-based) new try of a turn the provider failed: the
/// configured wait doubled for each earlier attempt, at most 10 minutes.
pub fn model_retry_wait_ms(env: &Env, attempt: u32) -> i64 {
    let base = get(env, MODEL_RETRY_SECONDS)
        .and_then(|v| v.parse::<u64>().ok())
        .unwrap_or(DEFAULT_MODEL_RETRY_SECS);
    (base.saturating_mul(1 << attempt.saturating_sub(1).min(10))).min(600) as i64 * 1000
}
pub const DEFAULT_CALLBACK_RETRY_SECS: u64 = 10;
pub const DEFAULT_CALLBACK_WINDOW_SECS: u64 = 24 * 3600;

/// How long a session's agent waits for the next run (0: it stops with each run; at most a day).
pub fn agent_keep_ms(env: &Env) -> i64 {
    get(env, AGENT_KEEP_SECONDS)
        .and_then(|v| v.parse::<u64>().ok())
        .unwrap_or(DEFAULT_AGENT_KEEP_SECS)
        .min(86_400) as i64
        * 1000
}

/// How long before a coding run's deadline (`RUN_MAX_DURATION_SECONDS`) its agent is stopped so
/// that its work so far can still be committed and pushed: a tenth of the run's longest time,
/// at most five minutes.
pub fn finish_reserve_ms(max_run_ms: i64) -> i64 {
    (max_run_ms / 10).min(FINISH_RESERVE_MAX_MS)
}

const FINISH_RESERVE_MAX_MS: i64 = 5 * 60_000;

/// How long the git token handoff's own push uses stays valid at the least: a run that stops
/// its agent close to its deadline still pushes (the proxy refuses it once the run has ended).
pub const PUSH_WINDOW_MS: i64 = 2 * 60_000;

/// Whether new sessions are prepared ahead (see [`SPARE_SESSIONS`]); never when agents are not
/// kept.
pub fn spare_sessions(env: &Env) -> bool {
    get(env, SPARE_SESSIONS).as_deref() != Some("0") && agent_keep_ms(env) > 0
}

/// How long a spare session may still be waiting after the ledger named it: its run's longest
/// time, then its agent's wait.
pub fn spare_lifetime_ms(env: &Env) -> i64 {
    super::max_run_ms(env) + agent_keep_ms(env)
}

pub fn callback_secret(env: &Env) -> Option<Vec<u8>> {
    get(env, CALLBACK_SECRET)
        .filter(|k| k.len() >= MIN_SIGNING_KEY_LEN)
        .map(String::into_bytes)
}

pub fn callback_allowed_hosts(env: &Env) -> Vec<String> {
    get(env, CALLBACK_ALLOW_PRIVATE_HOSTS)
        .unwrap_or_default()
        .split(',')
        .map(|h| h.trim().to_ascii_lowercase())
        .filter(|h| !h.is_empty())
        .collect()
}

fn seconds(env: &Env, name: &str, default: u64) -> i64 {
    get(env, name)
        .and_then(|v| v.parse::<u64>().ok())
        .filter(|&s| s >= 1)
        .unwrap_or(default) as i64
        * 1000
}

pub fn callback_retry_ms(env: &Env) -> i64 {
    seconds(env, CALLBACK_RETRY_SECONDS, DEFAULT_CALLBACK_RETRY_SECS)
}

pub fn callback_window_ms(env: &Env) -> i64 {
    seconds(
        env,
        CALLBACK_RETRY_WINDOW_SECONDS,
        DEFAULT_CALLBACK_WINDOW_SECS,
    )
}

/// The deployment's default budget (each limit optional).
pub fn default_budget(env: &Env) -> Budget {
    let positive = |name: &str| {
        get(env, name)
            .and_then(|v| v.parse::<u64>().ok())
            .filter(|&v| v > 0)
    };
    Budget {
        max_cost_usd: get(env, DEFAULT_MAX_COST_USD)
            .and_then(|v| v.parse::<f64>().ok())
            .filter(|v| v.is_finite() && *v > 0.0),
        max_tokens: positive(DEFAULT_MAX_TOKENS),
        max_duration_seconds: positive(DEFAULT_MAX_DURATION_SECONDS),
    }
}

/// What `/health` says about callbacks.
pub fn warnings(env: &Env) -> Vec<String> {
    let mut out = Vec::new();
    if callback_secret(env).is_none() {
        out.push(format!(
            "{CALLBACK_SECRET} is not set (or shorter than {MIN_SIGNING_KEY_LEN} characters): runs cannot take a callbackUrl"
        ));
    }
    if !callback_allowed_hosts(env).is_empty() {
        out.push(format!(
            "{CALLBACK_ALLOW_PRIVATE_HOSTS} is set: callbacks may reach the hosts it lists although they are private (local testing only)"
        ));
    }
    out
}
