//! Completion callbacks: when a run that named a `callbackUrl` ends, the ledger POSTs its result
//! there, signed, and retries with backoff until the receiver answers 2xx or the retry window
//! closes. Each run has one delivery with one id, repeated on every attempt, so a receiver can
//! drop duplicates (delivery is at least once).
//!
//! The request: `POST <callbackUrl>` with `content-type: application/json`,
//! `handoff-delivery: <delivery id>`, `handoff-event: run.ended`, and
//! `handoff-signature: t=<unix seconds>,v1=<hex>` where `v1` is HMAC-SHA256, under the
//! deployment's `HANDOFF_CALLBACK_SECRET`, of `<t>.<body>`.
//!
//! Targets are checked when a run is started and again before every attempt: `https` only, no
//! user name or password, and no host that names a loopback, private, link-local or otherwise
//! internal address (hosts a deployment lists in `CALLBACK_ALLOW_PRIVATE_HOSTS` excepted, for
//! local testing; `http` is then allowed for them too).

use crate::error::{excerpt, Error, Result};
use crate::names::named_enum;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use std::net::{Ipv4Addr, Ipv6Addr};
use worker::{url, Url};

/// The event name in `handoff-event` and the body.
pub const EVENT_RUN_ENDED: &str = "run.ended";
/// Longest accepted callback URL.
pub const MAX_URL_LEN: usize = 2000;
/// Attempts kept per delivery (the count goes on).
pub const KEPT_ATTEMPTS: usize = 10;
/// The longest wait between two attempts.
pub const MAX_BACKOFF_MS: i64 = 3600 * 1000;

named_enum! {
/// Where a delivery stands.
#[derive(JsonSchema)]
pub enum DeliveryState {
    /// Not delivered yet; another attempt is due at `nextAttemptAt`.
    Pending,
    /// A 2xx answer was received.
    Delivered,
    /// The retry window closed without a 2xx answer.
    Failed,
}
}

/// One attempt to deliver.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Attempt {
    pub at: i64,
    /// The receiver's HTTP status, when it answered.
    pub status: Option<u16>,
    /// Why it did not answer (or what was refused).
    pub error: Option<String>,
    pub duration_ms: u64,
}

impl Attempt {
    pub fn succeeded(&self) -> bool {
        matches!(self.status, Some(200..=299))
    }
}

/// A run's callback delivery, as the ledger keeps it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Delivery {
    pub id: String,
    pub state: DeliveryState,
    /// Attempts made so far.
    pub attempt_count: u32,
    /// The latest attempts, oldest first (at most `KEPT_ATTEMPTS`).
    pub attempts: Vec<Attempt>,
    pub next_at: Option<i64>,
    pub created_at: i64,
}

/// A run's callback: where to, and its delivery once the run has ended.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Callback {
    pub url: String,
    pub delivery: Option<Delivery>,
}

/// How long to wait after the `attempts`-th failed attempt: `base_ms` doubled each time, at most
/// an hour.
pub fn backoff_ms(attempts: u32, base_ms: i64) -> i64 {
    let doublings = attempts.saturating_sub(1).min(30);
    base_ms
        .max(1)
        .saturating_mul(1_i64 << doublings)
        .min(MAX_BACKOFF_MS)
}

/// What follows an attempt: `Some(next attempt time)` to try again, `None` when the delivery is
/// over (delivered, or past its window).
pub fn after_attempt(
    delivery: &Delivery,
    attempt: &Attempt,
    base_ms: i64,
    window_ms: i64,
) -> (DeliveryState, Option<i64>) {
    if attempt.succeeded() {
        return (DeliveryState::Delivered, None);
    }
    let next = attempt.at + backoff_ms(delivery.attempt_count + 1, base_ms);
    if next > delivery.created_at + window_ms {
        return (DeliveryState::Failed, None);
    }
    (DeliveryState::Pending, Some(next))
}

/// The signed message: `<t>.<body>`.
pub fn signed_message(timestamp_s: i64, body: &str) -> String {
    format!("{timestamp_s}.{body}")
}

/// Checks a callback URL; `allowed` lists hosts exempt from the address rules (and allowed over
/// plain http), as written in `CALLBACK_ALLOW_PRIVATE_HOSTS`.
pub fn check_url(raw: &str, allowed: &[String]) -> Result<Url> {
    let refuse =
        |why: &str| Error::invalid(format!("`callbackUrl` {} is refused: {why}", excerpt(raw)));
    if raw.len() > MAX_URL_LEN {
        return Err(refuse(&format!("longer than {MAX_URL_LEN} characters")));
    }
    let url = crate::urls::parse(raw).map_err(|e| refuse(&format!("not a URL ({e})")))?;
    if !url.username().is_empty() || url.password().is_some() {
        return Err(refuse("it must not carry a user name or password"));
    }
    let host = url
        .host_str()
        .ok_or_else(|| refuse("it has no host"))?
        .to_ascii_lowercase();
    let exempt = allowed.iter().any(|a| a.eq_ignore_ascii_case(&host));
    match url.scheme() {
        "https" => {}
        "http" if exempt => {}
        _ => return Err(refuse("only https callback URLs are accepted")),
    }
    if exempt {
        return Ok(url);
    }
    let internal = match url.host() {
        Some(url::Host::Ipv4(ip)) => internal_v4(ip),
        Some(url::Host::Ipv6(ip)) => internal_v6(ip),
        Some(url::Host::Domain(name)) => internal_name(name),
        None => true,
    };
    if internal {
        return Err(refuse(
            "it names a loopback, private, link-local or internal address, which callbacks are \
             never sent to",
        ));
    }
    Ok(url)
}

fn internal_v4(ip: Ipv4Addr) -> bool {
    let [a, b, ..] = ip.octets();
    ip.is_loopback()
        || ip.is_private()
        || ip.is_link_local()
        || ip.is_unspecified()
        || ip.is_broadcast()
        || ip.is_documentation()
        || ip.is_multicast()
        || a == 0
        // Carrier-grade NAT 100.64.0.0/10, benchmarking 198.18.0.0/15, reserved 240.0.0.0/4.
        || (a == 100 && (64..128).contains(&b))
        || (a == 198 && (b == 18 || b == 19))
        || a >= 240
}

fn internal_v6(ip: Ipv6Addr) -> bool {
    if let Some(v4) = ip.to_ipv4_mapped() {
        return internal_v4(v4);
    }
    let first = ip.segments()[0];
    ip.is_loopback()
        || ip.is_unspecified()
        || ip.is_multicast()
        || (first & 0xfe00) == 0xfc00 // unique local fc00::/7
        || (first & 0xffc0) == 0xfe80 // link-local fe80::/10
        || (first & 0xffc0) == 0xfec0 // site-local fec0::/10
        || first == 0x2001 && ip.segments()[1] == 0x0db8 // documentation
        || first == 0x0064 && ip.segments()[1] == 0xff9b // NAT64 (embeds IPv4)
        || first == 0x2002 // 6to4 (embeds IPv4)
        || ip.segments()[..6].iter().all(|s| *s == 0) // IPv4-compatible ::a.b.c.d
}

/// Names that only mean something inside a network: `localhost`, single labels, and the
/// special-use and internal suffixes.
fn internal_name(name: &str) -> bool {
    let name = name.trim_end_matches('.');
    const SUFFIXES: [&str; 8] = [
        ".localhost",
        ".local",
        ".internal",
        ".intranet",
        ".lan",
        ".home.arpa",
        ".corp",
        ".private",
    ];
    name == "localhost"
        || !name.contains('.')
        || SUFFIXES.iter().any(|s| name.ends_with(s))
        || name.ends_with(".in-addr.arpa")
        || name.ends_with(".ip6.arpa")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn public_https_targets_pass_and_internal_ones_are_refused() {
        assert!(check_url("https://hooks.example.com/handoff?x=1", &[]).is_ok());
        assert!(check_url("https://93.184.216.34/cb", &[]).is_ok());
        for refused in [
            "http://hooks.example.com/cb",
            "https://user:pw@hooks.example.com/cb",
            "ftp://hooks.example.com/cb",
            "https://localhost/cb",
            "https://app.localhost/cb",
            "https://printer.local/cb",
            "https://metadata.google.internal/cb",
            "https://intranet/cb",
            "https://127.0.0.1/cb",
            "https://127.1/cb",
            "https://2130706433/cb",
            "https://0x7f000001/cb",
            "https://0.0.0.0/cb",
            "https://10.1.2.3/cb",
            "https://172.16.0.1/cb",
            "https://192.168.1.1/cb",
            "https://169.254.169.254/latest/meta-data",
            "https://100.64.0.1/cb",
            "https://[::1]/cb",
            "https://[::]/cb",
            "https://[fd00::1]/cb",
            "https://[fe80::1]/cb",
            "https://[::ffff:127.0.0.1]/cb",
            "https://[::ffff:10.0.0.1]/cb",
            "https://[64:ff9b::a00:1]/cb",
            "not a url",
        ] {
            assert!(check_url(refused, &[]).is_err(), "{refused}");
        }
        let long = format!("https://example.com/{}", "a".repeat(MAX_URL_LEN));
        assert!(check_url(&long, &[]).is_err());
    }

    #[test]
    fn listed_hosts_are_exempt_for_local_testing() {
        let allowed = vec!["127.0.0.1".to_string()];
        assert!(check_url("http://127.0.0.1:8080/cb", &allowed).is_ok());
        assert!(check_url("http://localhost:8080/cb", &allowed).is_err());
        assert!(check_url("http://127.0.0.2:8080/cb", &allowed).is_err());
    }

    #[test]
    fn attempts_back_off_and_stop_at_the_window() {
        assert_eq!(backoff_ms(1, 1000), 1000);
        assert_eq!(backoff_ms(2, 1000), 2000);
        assert_eq!(backoff_ms(5, 1000), 16000);
        assert_eq!(backoff_ms(40, 1000), MAX_BACKOFF_MS);
        let delivery = Delivery {
            id: "dlv_1".into(),
            state: DeliveryState::Pending,
            attempt_count: 0,
            attempts: vec![],
            next_at: Some(0),
            created_at: 0,
        };
        let failed = Attempt {
            at: 10,
            status: Some(500),
            error: None,
            duration_ms: 3,
        };
        assert_eq!(
            after_attempt(&delivery, &failed, 1000, 60_000),
            (DeliveryState::Pending, Some(1010))
        );
        let late = Attempt {
            at: 59_500,
            ..failed.clone()
        };
        assert_eq!(
            after_attempt(&delivery, &late, 1000, 60_000),
            (DeliveryState::Failed, None)
        );
        let ok = Attempt {
            status: Some(204),
            ..failed
        };
        assert_eq!(
            after_attempt(&delivery, &ok, 1000, 60_000),
            (DeliveryState::Delivered, None)
        );
    }
}
