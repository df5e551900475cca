//! Rate limits in the OAuth store: fixed windows per bucket and key (a client address, or `*`
//! for everyone), checked — and counted when asked — inside the store's single-threaded event.
//! The `rate` table is created with the rest of the schema in `store/mod.rs`.

use crate::authstore::api::RateHit;
use crate::error::{Error, Result};
use serde::Deserialize;
use worker::SqlStorage;

/// Checks one rate-limit bucket (fixed windows) and counts the request when asked.
pub fn rate_hit(sql: &SqlStorage, hit: &RateHit, now: i64) -> Result<()> {
    #[derive(Deserialize)]
    struct Row {
        window_start: i64,
        window_ms: i64,
        count: i64,
    }
    let window_ms = i64::from(hit.window_secs) * 1000;
    let row = sql
        .exec(
            "SELECT window_start, window_ms, count FROM rate WHERE bucket = ? AND key = ?",
            vec![hit.bucket.clone().into(), hit.key.clone().into()],
        )?
        .to_array::<Row>()?
        .into_iter()
        .next()
        .filter(|r| now < r.window_start + r.window_ms);
    let (window_start, count) = row.map_or((now, 0), |r| (r.window_start, r.count));
    if count >= i64::from(hit.max) {
        let retry = ((window_start + window_ms - now).max(0) + 999) / 1000;
        let what = match hit.bucket.as_str() {
            "signin" => "failed sign-ins",
            "register" => "client registrations",
            "token" => "token requests",
            "authorize" => "authorization requests",
            other => other,
        };
        return Err(Error::rate_limited(
            format!(
                "too many {what} (at most {} per {} s); retry in {retry} s",
                hit.max, hit.window_secs
            ),
            retry.max(1) as u64,
        ));
    }
    if hit.count {
        sql.exec(
            "INSERT INTO rate (bucket, key, window_start, window_ms, count) VALUES (?, ?, ?, ?, ?)
             ON CONFLICT(bucket, key) DO UPDATE SET window_start = excluded.window_start,
               window_ms = excluded.window_ms, count = excluded.count",
            vec![
                hit.bucket.clone().into(),
                hit.key.clone().into(),
                window_start.into(),
                window_ms.into(),
                (count + 1).into(),
            ],
        )?;
    }
    Ok(())
}
