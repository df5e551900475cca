//! Signed MCP session ids, so `initialize` answers without a round trip to the ledger: the id
//! carries its random part, when it was issued and the negotiated protocol version, tagged with
//! `HANDOFF_SIGNING_KEY` for the principal it was issued to
//! (`mcp_<random>.<issued ms>.<version>.<tag>`). The ledger records the session the first time
//! a request names it (`notifications/initialized` in practice); from then on the row decides,
//! as for the random ids issued before (and still without a signing key), which stay valid.
//!
//! Invariant: a signed id without a row is taken only within [`OPEN_WINDOW_MS`] of its issue.
//! That window, with [`CLOCK_SKEW_MS`], must not exceed how long the ledger keeps an ended
//! session's row (its tombstone; checked where the ledger sets it), and is far below how long
//! an idle one is kept; so an id whose session was ended or expired is never recorded again.

use crate::{ids, mac};

/// How long after its issue a signed id may still be recorded (the client's first request
/// after `initialize` normally comes within a second).
pub const OPEN_WINDOW_MS: i64 = 12 * 3600 * 1000;
/// How far ahead of the ledger's clock an id's issue time may be (clocks of isolates differ).
pub const CLOCK_SKEW_MS: i64 = 60_000;
const PURPOSE: &str = "handoff:mcp-session";
/// `mac::tag`'s length (80 bits in base32).
const TAG_LEN: usize = 16;
const MAX_VERSION_LEN: usize = 32;

/// A new session id for `principal`, speaking `version`, issued at `now`.
pub fn issue(key: &[u8], principal: &str, version: &str, now: i64) -> String {
    let random = ids::new_id(ids::MCP_SESSION);
    let tag = mac::tag(key, PURPOSE, &message(principal, &random, now, version));
    format!("{random}.{now}.{version}.{tag}")
}

/// The parts of a signed session id, once its shape is checked (not yet its tag).
#[derive(Debug, PartialEq)]
pub struct Signed<'a> {
    random: &'a str,
    pub issued_at: i64,
    pub version: &'a str,
    tag: &'a str,
}

/// A signed id's parts; `None` for anything else (an unsigned id, garbage).
pub fn parse(id: &str) -> Option<Signed<'_>> {
    let mut parts = id.split('.');
    let (random, issued, version, tag) =
        (parts.next()?, parts.next()?, parts.next()?, parts.next()?);
    let digits = |s: &str| !s.is_empty() && s.len() <= 15 && s.bytes().all(|b| b.is_ascii_digit());
    let version_ok = !version.is_empty()
        && version.len() <= MAX_VERSION_LEN
        && version
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-');
    let tag_ok = tag.len() == TAG_LEN && tag.bytes().all(|b| ids::ALPHABET.contains(&b));
    if parts.next().is_some()
        || !ids::is_valid(ids::MCP_SESSION, random)
        || !digits(issued)
        || !version_ok
        || !tag_ok
    {
        return None;
    }
    Some(Signed {
        random,
        issued_at: issued.parse().ok()?,
        version,
        tag,
    })
}

impl Signed<'_> {
    /// Whether this deployment issued the id to `principal`.
    pub fn is_for(&self, key: &[u8], principal: &str) -> bool {
        let expected = mac::tag(
            key,
            PURPOSE,
            &message(principal, self.random, self.issued_at, self.version),
        );
        mac::same(expected.as_bytes(), self.tag.as_bytes())
    }

    /// Whether a session without a row may still be recorded at `now` (see the invariant).
    pub fn may_open_at(&self, now: i64) -> bool {
        self.issued_at <= now + CLOCK_SKEW_MS && now - self.issued_at < OPEN_WINDOW_MS
    }
}

fn message(principal: &str, random: &str, issued_at: i64, version: &str) -> String {
    format!("{principal}|{random}|{issued_at}|{version}")
}

#[cfg(test)]
mod tests {
    use super::*;

    const KEY: &[u8] = b"0123456789abcdef0123456789abcdef";
    const NOW: i64 = 1_764_750_000_000;

    #[test]
    fn an_issued_id_parses_and_is_only_its_principals() {
        let id = issue(KEY, "token:laptop", "2025-11-25", NOW);
        let signed = parse(&id).expect("parses");
        assert_eq!((signed.issued_at, signed.version), (NOW, "2025-11-25"));
        assert!(signed.is_for(KEY, "token:laptop"));
        assert!(!signed.is_for(KEY, "token:phone"));
        assert!(!signed.is_for(b"another key of at least 32 characters", "token:laptop"));
        // Visible ASCII only, as MCP requires of a session id.
        assert!(id.bytes().all(|b| (0x21..=0x7e).contains(&b)), "{id}");
    }

    #[test]
    fn a_changed_part_breaks_the_tag() {
        let id = issue(KEY, "p", "2025-06-18", NOW);
        let parts: Vec<&str> = id.split('.').collect();
        let later = format!("{}.{}.{}.{}", parts[0], NOW + 1, parts[2], parts[3]);
        let version = format!("{}.{}.2025-11-25.{}", parts[0], parts[1], parts[3]);
        let other = ids::new_id(ids::MCP_SESSION);
        let random = format!("{other}.{}.{}.{}", parts[1], parts[2], parts[3]);
        for forged in [later, version, random] {
            assert!(
                !parse(&forged).expect("same shape").is_for(KEY, "p"),
                "{forged}"
            );
        }
    }

    #[test]
    fn anything_else_does_not_parse() {
        let id = issue(KEY, "p", "2025-06-18", NOW);
        let unsigned = ids::new_id(ids::MCP_SESSION);
        for bad in [
            unsigned.as_str(),
            "",
            "...",
            "../../etc/passwd",
            &format!("{id}.extra"),
            &id.replacen("2025-06-18", "2025/06/18", 1),
            &id.replacen(&NOW.to_string(), "-1", 1),
            &id.replacen(&NOW.to_string(), "1234567890123456", 1),
            &id[..id.len() - 1],
            &id.replacen(ids::MCP_SESSION, "sbx_", 1),
        ] {
            assert_eq!(parse(bad), None, "{bad}");
        }
    }

    #[test]
    fn an_id_is_recorded_only_within_its_window() {
        let id = issue(KEY, "p", "2025-06-18", NOW);
        let signed = parse(&id).expect("parses");
        assert!(signed.may_open_at(NOW));
        assert!(signed.may_open_at(NOW - CLOCK_SKEW_MS));
        assert!(!signed.may_open_at(NOW - CLOCK_SKEW_MS - 1));
        assert!(signed.may_open_at(NOW + OPEN_WINDOW_MS - 1));
        assert!(!signed.may_open_at(NOW + OPEN_WINDOW_MS));
    }
}
