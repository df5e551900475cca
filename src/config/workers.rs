//! Settings of background workers (documented in `.dev.vars.example` with the rest).

use super::{get, MIN_SIGNING_KEY_LEN};
use worker::Env;

/// Secret: the key worker secrets are sealed with at rest (32+ characters).
pub const SECRETS_KEY: &str = "HANDOFF_SECRETS_KEY";
/// Var: the shortest interval a worker's schedule may fire at, in seconds (default 60).
pub const MIN_SCHEDULE_SECONDS: &str = "WORKER_MIN_SCHEDULE_SECONDS";
/// Var: how long a worker run waits for approval before it lapses, in seconds (default 7 days).
pub const APPROVAL_TTL_SECONDS: &str = "WORKER_APPROVAL_TTL_SECONDS";

pub const DEFAULT_MIN_SCHEDULE_SECS: u64 = 60;
pub const DEFAULT_APPROVAL_TTL_SECS: u64 = 7 * 24 * 3600;

pub fn secrets_key(env: &Env) -> Option<Vec<u8>> {
    get(env, SECRETS_KEY)
        .filter(|k| k.len() >= MIN_SIGNING_KEY_LEN)
        .map(String::into_bytes)
}

pub fn min_schedule_secs(env: &Env) -> u64 {
    get(env, MIN_SCHEDULE_SECONDS)
        .and_then(|v| v.parse::<u64>().ok())
        .filter(|&s| s >= 1)
        .unwrap_or(DEFAULT_MIN_SCHEDULE_SECS)
}

pub fn approval_ttl_ms(env: &Env) -> i64 {
    get(env, APPROVAL_TTL_SECONDS)
        .and_then(|v| v.parse::<u64>().ok())
        .filter(|&s| s >= 1)
        .unwrap_or(DEFAULT_APPROVAL_TTL_SECS) as i64
        * 1000
}

/// What `/health` says about workers.
pub fn warnings(env: &Env) -> Vec<String> {
    let mut out = Vec::new();
    if secrets_key(env).is_none() {
        out.push(format!(
            "{SECRETS_KEY} is not set (or shorter than {MIN_SIGNING_KEY_LEN} characters): workers_secret_set refuses and workers that declare secrets cannot run"
        ));
    }
    out
}
