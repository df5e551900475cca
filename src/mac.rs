//! The Worker's keyed hashes and digests, in one place: HMAC-SHA256 tags over strings (80 bits,
//! base32) for what a preview origin's name grants and on OAuth access tokens (so the Worker
//! refuses a forged token without asking the auth store), keys derived for one subject (a
//! sandbox container's daemon key), SHA-256 digests of secrets, and constant-time comparison.

use hmac::{KeyInit, Mac};
use sha2::{Digest, Sha256};
use subtle::ConstantTimeEq;

/// Whether two secrets are equal, in time that does not depend on where they differ.
pub fn same(a: &[u8], b: &[u8]) -> bool {
    a.ct_eq(b).into()
}

/// The SHA-256 digest of `data`, in lower-case hex (how stored secrets are kept).
pub fn sha256_hex(data: &[u8]) -> String {
    hex::encode(Sha256::digest(data))
}

/// The tag of `message` under `key`, for `purpose` (so a tag of one kind never passes as
/// another).
pub fn tag(key: &[u8], purpose: &str, message: &str) -> String {
    // HMAC accepts keys of any length, so this cannot fail.
    let Ok(mut mac) = hmac::Hmac::<sha2::Sha256>::new_from_slice(key) else {
        return String::new();
    };
    mac.update(purpose.as_bytes());
    mac.update(b"|");
    mac.update(message.as_bytes());
    let full = mac.finalize().into_bytes();
    crate::ids::base32(&full[..10])
}

/// A key of its own for `message`, derived from `key` (the full HMAC-SHA256, 64 hex
/// characters): a sandbox container gets its sandbox's key, never the master.
pub fn derive_key(key: &[u8], purpose: &str, message: &str) -> String {
    let Ok(mut mac) = hmac::Hmac::<sha2::Sha256>::new_from_slice(key) else {
        return String::new();
    };
    mac.update(purpose.as_bytes());
    mac.update(b"|");
    mac.update(message.as_bytes());
    hex::encode(mac.finalize().into_bytes())
}

/// HMAC-SHA256 of `message` under `key`, in lower-case hex (webhook signatures).
pub fn hmac_hex(key: &[u8], message: &[u8]) -> String {
    let Ok(mut mac) = hmac::Hmac::<sha2::Sha256>::new_from_slice(key) else {
        return String::new();
    };
    mac.update(message);
    hex::encode(mac.finalize().into_bytes())
}

/// Whether `presented` is the tag of `message` (compared in constant time).
pub fn matches(key: &[u8], purpose: &str, message: &str, presented: &str) -> bool {
    let expected = tag(key, purpose, message);
    !expected.is_empty() && same(expected.as_bytes(), presented.as_bytes())
}

/// `secret` with its tag appended (`secret.tag`).
pub fn tagged(key: &[u8], purpose: &str, secret: &str) -> String {
    format!("{secret}.{}", tag(key, purpose, secret))
}

/// Whether a `secret.tag` value carries its own secret's tag.
pub fn is_tagged(key: &[u8], purpose: &str, value: &str) -> bool {
    value
        .rsplit_once('.')
        .is_some_and(|(secret, tag)| matches(key, purpose, secret, tag))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tags_bind_key_purpose_and_message() {
        let t = tag(b"key", "access", "hnd_at_x");
        assert_eq!(t.len(), 16);
        assert!(matches(b"key", "access", "hnd_at_x", &t));
        assert!(!matches(b"other", "access", "hnd_at_x", &t));
        assert!(!matches(b"key", "preview", "hnd_at_x", &t));
        assert!(!matches(b"key", "access", "hnd_at_y", &t));
        let value = tagged(b"key", "access", "hnd_at_abc");
        assert!(is_tagged(b"key", "access", &value));
        assert!(!is_tagged(b"key", "access", "hnd_at_abc"));
        assert!(!is_tagged(b"key", "access", &format!("{value}x")));
        let a = derive_key(b"master", "sandbox", "sbx_a");
        assert_eq!(a.len(), 64);
        assert_ne!(a, derive_key(b"master", "sandbox", "sbx_b"));
        assert_ne!(a, derive_key(b"other", "sandbox", "sbx_a"));
    }
}
