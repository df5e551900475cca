//! Webhook signatures, checked before anything else happens: either GitHub's form
//! (`X-Hub-Signature-256: sha256={hex HMAC-SHA256 of the body}` with `X-GitHub-Delivery`), so a
//! GitHub webhook can trigger a worker directly, or handoff's own, which also binds a time
//! (`X-Handoff-Timestamp: {unix seconds}` and `X-Handoff-Signature: sha256={hex HMAC-SHA256 of
//! "{timestamp}.{body}"}`, refused more than five minutes off). Replays are refused by delivery:
//! the ledger keeps each delivery's run under an idempotency key, so a second delivery with the
//! same id (GitHub's, `X-Handoff-Delivery`, or else the signature) starts nothing.

/// How far a handoff-signed timestamp may be from now.
pub const TOLERANCE_S: i64 = 300;
/// Largest webhook body.
pub const MAX_BODY: usize = 256 * 1024;

/// The signature headers of a request.
#[derive(Debug, Default, Clone)]
pub struct Headers {
    pub handoff_signature: Option<String>,
    pub handoff_timestamp: Option<String>,
    pub handoff_delivery: Option<String>,
    pub github_signature: Option<String>,
    pub github_delivery: Option<String>,
    pub github_event: Option<String>,
}

/// Why a request is refused (each with its HTTP status).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Refusal {
    /// 401: no signature header.
    Unsigned,
    /// 400: a header is not in the expected form.
    Malformed(&'static str),
    /// 401: the timestamp is too far from now.
    Stale,
    /// 401: the signature does not match.
    BadSignature,
}

impl Refusal {
    pub fn status(&self) -> u16 {
        match self {
            Refusal::Malformed(_) => 400,
            _ => 401,
        }
    }

    pub fn message(&self) -> String {
        match self {
            Refusal::Unsigned => "the request is not signed: send X-Hub-Signature-256 (with \
                X-GitHub-Delivery) or X-Handoff-Timestamp and X-Handoff-Signature"
                .into(),
            Refusal::Malformed(what) => format!("malformed {what}"),
            Refusal::Stale => format!(
                "X-Handoff-Timestamp is more than {TOLERANCE_S} s from now; sign each delivery \
                 when you send it"
            ),
            Refusal::BadSignature => "the signature does not match this webhook's secret".into(),
        }
    }
}

/// A verified delivery: its id (for replay protection) and the event name, if any.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Delivery {
    pub id: String,
    pub event: Option<String>,
}

/// Checks a delivery's signature with `hmac(message) -> hex`; `now_s` in Unix seconds.
pub fn verify(
    headers: &Headers,
    body: &[u8],
    now_s: i64,
    hmac: impl Fn(&[u8]) -> String,
    same: impl Fn(&[u8], &[u8]) -> bool,
) -> Result<Delivery, Refusal> {
    let hex_of = |value: &str, what: &'static str| -> Result<String, Refusal> {
        let hex = value
            .trim()
            .strip_prefix("sha256=")
            .ok_or(Refusal::Malformed(what))?;
        if hex.len() != 64 || !hex.bytes().all(|b| b.is_ascii_hexdigit()) {
            return Err(Refusal::Malformed(what));
        }
        Ok(hex.to_ascii_lowercase())
    };
    if let Some(signature) = &headers.handoff_signature {
        let presented = hex_of(signature, "X-Handoff-Signature (sha256=<64 hex digits>)")?;
        let stamp = headers
            .handoff_timestamp
            .as_deref()
            .ok_or(Refusal::Malformed("X-Handoff-Timestamp (missing)"))?;
        let ts: i64 = stamp
            .trim()
            .parse()
            .map_err(|_| Refusal::Malformed("X-Handoff-Timestamp (Unix seconds)"))?;
        if (now_s - ts).abs() > TOLERANCE_S {
            return Err(Refusal::Stale);
        }
        let mut message = format!("{}.", stamp.trim()).into_bytes();
        message.extend_from_slice(body);
        if !same(hmac(&message).as_bytes(), presented.as_bytes()) {
            return Err(Refusal::BadSignature);
        }
        let id = headers
            .handoff_delivery
            .clone()
            .unwrap_or_else(|| format!("{}:{presented}", stamp.trim()));
        return Ok(Delivery {
            id: clip(&id),
            event: None,
        });
    }
    if let Some(signature) = &headers.github_signature {
        let presented = hex_of(signature, "X-Hub-Signature-256 (sha256=<64 hex digits>)")?;
        let delivery = headers
            .github_delivery
            .clone()
            .ok_or(Refusal::Malformed("X-GitHub-Delivery (missing)"))?;
        if !same(hmac(body).as_bytes(), presented.as_bytes()) {
            return Err(Refusal::BadSignature);
        }
        return Ok(Delivery {
            id: clip(&delivery),
            event: headers.github_event.clone(),
        });
    }
    Err(Refusal::Unsigned)
}

fn clip(id: &str) -> String {
    id.chars().filter(|c| !c.is_control()).take(200).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hmac(message: &[u8]) -> String {
        // A stand-in keyed hash is enough to test the framing.
        format!("{:0>64}", hex_sum(message))
    }
    fn hex_sum(message: &[u8]) -> String {
        format!("{:x}", message.iter().map(|b| *b as u64).sum::<u64>())
    }
    fn same(a: &[u8], b: &[u8]) -> bool {
        a == b
    }

    #[test]
    fn handoff_signatures_bind_the_time() {
        let body = b"{\"a\":1}";
        let mut message = b"1000.".to_vec();
        message.extend_from_slice(body);
        let headers = Headers {
            handoff_signature: Some(format!("sha256={}", hmac(&message))),
            handoff_timestamp: Some("1000".into()),
            ..Headers::default()
        };
        let ok = verify(&headers, body, 1100, hmac, same).unwrap();
        assert!(ok.id.starts_with("1000:"));
        assert_eq!(
            verify(&headers, body, 1000 + TOLERANCE_S + 1, hmac, same),
            Err(Refusal::Stale)
        );
        assert_eq!(
            verify(&headers, b"{\"a\":2}", 1000, hmac, same),
            Err(Refusal::BadSignature)
        );
        let mut bad = headers.clone();
        bad.handoff_signature = Some("md5=abc".into());
        assert!(matches!(
            verify(&bad, body, 1000, hmac, same),
            Err(Refusal::Malformed(_))
        ));
    }

    #[test]
    fn github_signatures_need_a_delivery() {
        let body = b"payload";
        let mut headers = Headers {
            github_signature: Some(format!("sha256={}", hmac(body))),
            github_event: Some("push".into()),
            ..Headers::default()
        };
        assert!(matches!(
            verify(&headers, body, 0, hmac, same),
            Err(Refusal::Malformed(_))
        ));
        headers.github_delivery = Some("d-1".into());
        let ok = verify(&headers, body, 0, hmac, same).unwrap();
        assert_eq!(
            ok,
            Delivery {
                id: "d-1".into(),
                event: Some("push".into())
            }
        );
        assert_eq!(
            verify(&Headers::default(), body, 0, hmac, same),
            Err(Refusal::Unsigned)
        );
        assert_eq!(Refusal::Unsigned.status(), 401);
    }
}
