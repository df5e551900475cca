//! Secrets sealed at rest: XChaCha20-Poly1305 under a key derived from `HANDOFF_SECRETS_KEY`,
//! a random 192-bit nonce per value, and the value's name as associated data (a sealed value
//! moved to another name does not open). Stored as `v1.<nonce>.<ciphertext>` in base64url.

use crate::error::{Error, Result};
use base64::engine::general_purpose::URL_SAFE_NO_PAD as B64;
use base64::Engine;
use chacha20poly1305::aead::{Aead, KeyInit, Payload};
use chacha20poly1305::{XChaCha20Poly1305, XNonce};

const VERSION: &str = "v1";

fn cipher(master: &[u8]) -> Result<XChaCha20Poly1305> {
    let key = crate::mac::derive_key(master, "worker-secrets", VERSION);
    let bytes = hex::decode(key).map_err(|_| Error::internal("could not derive the key"))?;
    XChaCha20Poly1305::new_from_slice(&bytes)
        .map_err(|_| Error::internal("could not derive the secrets key"))
}

/// `value` sealed for `name` under `master`.
pub fn seal(master: &[u8], name: &str, value: &str) -> Result<String> {
    let mut nonce = [0u8; 24];
    crate::ids::random_bytes(&mut nonce);
    let sealed = cipher(master)?
        .encrypt(
            &XNonce::from(nonce),
            Payload {
                msg: value.as_bytes(),
                aad: name.as_bytes(),
            },
        )
        .map_err(|_| Error::internal("could not seal the secret"))?;
    Ok(format!(
        "{VERSION}.{}.{}",
        B64.encode(nonce),
        B64.encode(sealed)
    ))
}

/// The value sealed for `name`; an error when the key is another or the value was tampered with.
pub fn open(master: &[u8], name: &str, sealed: &str) -> Result<String> {
    let unreadable = || {
        Error::not_configured(format!(
            "the secret {name} cannot be read with this deployment's HANDOFF_SECRETS_KEY (was the key \
             changed?); set the secret again with workers_secret_set"
        ))
    };
    let mut parts = sealed.split('.');
    let (Some(VERSION), Some(nonce), Some(body), None) =
        (parts.next(), parts.next(), parts.next(), parts.next())
    else {
        return Err(unreadable());
    };
    let nonce: [u8; 24] = B64
        .decode(nonce)
        .ok()
        .and_then(|n| n.try_into().ok())
        .ok_or_else(unreadable)?;
    let body = B64.decode(body).map_err(|_| unreadable())?;
    let plain = cipher(master)?
        .decrypt(
            &XNonce::from(nonce),
            Payload {
                msg: &body,
                aad: name.as_bytes(),
            },
        )
        .map_err(|_| unreadable())?;
    String::from_utf8(plain).map_err(|_| unreadable())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sealed_values_open_only_with_their_key_and_name() {
        let sealed = seal(b"master-key-1", "API_KEY", "hunter2-hunter2").unwrap();
        assert!(!sealed.contains("hunter2"));
        assert_eq!(
            open(b"master-key-1", "API_KEY", &sealed).unwrap(),
            "hunter2-hunter2"
        );
        assert!(open(b"master-key-2", "API_KEY", &sealed).is_err());
        assert!(open(b"master-key-1", "OTHER", &sealed).is_err());
        let again = seal(b"master-key-1", "API_KEY", "hunter2-hunter2").unwrap();
        assert_ne!(sealed, again, "every seal has a fresh nonce");
        assert!(open(b"master-key-1", "API_KEY", "v1.x.y").is_err());
    }
}
