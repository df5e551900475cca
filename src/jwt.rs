//! HS256 JSON Web Tokens: the one place the Worker signs and checks its own tokens (owner
//! sessions, signed run-page links, the credential proxy's run tokens, sandbox daemon tokens).
//! Every token here is minted by this deployment, so none gets clock leeway.

use hmac::{Hmac, KeyInit, Mac};
use jsonwebtoken::crypto::{CryptoProvider, JwtSigner, JwtVerifier, KeyUtils};
use jsonwebtoken::errors::ErrorKind;
use jsonwebtoken::{Algorithm, DecodingKey, EncodingKey, Header, Validation};
use serde::{de::DeserializeOwned, Serialize};
use sha2::Sha256;
use std::sync::Once;

type HmacSha256 = Hmac<Sha256>;

/// jsonwebtoken's cryptography, cut to the one algorithm handoff uses: HMAC-SHA256 with the
/// `hmac` and `sha2` crates it already has. Its built-in backends bring RSA and elliptic
/// curves, which the Worker never needs (tokens of any other algorithm are refused anyway).
static HS256_ONLY: CryptoProvider = CryptoProvider {
    signer_factory: |algorithm, key| match algorithm {
        Algorithm::HS256 => Ok(Box::new(Hs256(keyed(key.as_bytes())?))),
        _ => Err(ErrorKind::InvalidAlgorithm.into()),
    },
    verifier_factory: |algorithm, key| match algorithm {
        Algorithm::HS256 => Ok(Box::new(Hs256(keyed(key.try_get_as_bytes()?)?))),
        _ => Err(ErrorKind::InvalidAlgorithm.into()),
    },
    key_utils: KeyUtils::new_unimplemented(),
};

fn keyed(key: &[u8]) -> jsonwebtoken::errors::Result<HmacSha256> {
    HmacSha256::new_from_slice(key).map_err(|_| ErrorKind::InvalidKeyFormat.into())
}

struct Hs256(HmacSha256);

impl signature::Signer<Vec<u8>> for Hs256 {
    fn try_sign(&self, message: &[u8]) -> Result<Vec<u8>, signature::Error> {
        let mut mac = self.0.clone();
        mac.update(message);
        Ok(mac.finalize().into_bytes().to_vec())
    }
}

impl signature::Verifier<Vec<u8>> for Hs256 {
    fn verify(&self, message: &[u8], tag: &Vec<u8>) -> Result<(), signature::Error> {
        let mut mac = self.0.clone();
        mac.update(message);
        // Constant time.
        mac.verify_slice(tag).map_err(|_| signature::Error::new())
    }
}

impl JwtSigner for Hs256 {
    fn algorithm(&self) -> Algorithm {
        Algorithm::HS256
    }
}

impl JwtVerifier for Hs256 {
    fn algorithm(&self) -> Algorithm {
        Algorithm::HS256
    }
}

/// Installs [`HS256_ONLY`] once, before the first token is signed or checked.
fn install() {
    static INSTALL: Once = Once::new();
    INSTALL.call_once(|| {
        // Fails only if another provider was installed first, which nothing here does.
        let _ = HS256_ONLY.install_default();
    });
}

/// What a token must say besides its signature and expiry.
pub struct Expect<'a> {
    pub audience: &'a str,
    pub issuer: Option<&'a str>,
}

/// `claims` signed with `key`.
pub fn sign<C: Serialize>(key: &[u8], claims: &C) -> Result<String, String> {
    install();
    let key = EncodingKey::from_secret(key).map_err(|e| e.to_string())?;
    jsonwebtoken::encode(&Header::new(Algorithm::HS256), claims, &key).map_err(|e| e.to_string())
}

/// The claims of `token` if `key` signed it, it has not expired and it is for `expect`;
/// otherwise why not.
pub fn verify<C: DeserializeOwned>(key: &[u8], token: &str, expect: &Expect) -> Result<C, String> {
    install();
    let key = DecodingKey::from_secret(key).map_err(|e| e.to_string())?;
    let mut validation = Validation::new(Algorithm::HS256);
    validation.set_audience(&[expect.audience]);
    let mut required = vec!["exp", "aud"];
    if let Some(issuer) = expect.issuer {
        validation.set_issuer(&[issuer]);
        required.extend(["iss", "sub"]);
    }
    validation.set_required_spec_claims(&required);
    validation.leeway = 0;
    jsonwebtoken::decode::<C>(token, &key, &validation)
        .map(|data| data.claims)
        .map_err(|e| e.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde::Deserialize;

    #[derive(Debug, Serialize, Deserialize, PartialEq)]
    struct Claims {
        sub: String,
        aud: String,
        exp: i64,
        #[serde(skip_serializing_if = "Option::is_none")]
        iss: Option<String>,
    }

    fn claims(aud: &str, exp_offset: i64, iss: Option<&str>) -> Claims {
        Claims {
            sub: "run_1".into(),
            aud: aud.into(),
            exp: crate::time::now_ms() / 1000 + exp_offset,
            iss: iss.map(str::to_string),
        }
    }

    #[test]
    fn a_token_passes_only_with_its_key_audience_issuer_and_time() {
        let expect = Expect {
            audience: "a",
            issuer: None,
        };
        let token = sign(b"key", &claims("a", 60, None)).unwrap();
        assert_eq!(
            verify::<Claims>(b"key", &token, &expect).unwrap(),
            claims("a", 60, None)
        );
        assert!(verify::<Claims>(b"other", &token, &expect).is_err());
        let other_audience = Expect {
            audience: "b",
            issuer: None,
        };
        assert!(verify::<Claims>(b"key", &token, &other_audience).is_err());
        let expired = sign(b"key", &claims("a", -1, None)).unwrap();
        assert!(verify::<Claims>(b"key", &expired, &expect).is_err());
        let with_issuer = Expect {
            audience: "a",
            issuer: Some("handoff"),
        };
        assert!(verify::<Claims>(b"key", &token, &with_issuer).is_err());
        let issued = sign(b"key", &claims("a", 60, Some("handoff"))).unwrap();
        assert!(verify::<Claims>(b"key", &issued, &with_issuer).is_ok());
        let tampered = format!("{}x", &issued[..issued.len() - 1]);
        assert!(verify::<Claims>(b"key", &tampered, &with_issuer).is_err());
    }

    #[test]
    fn only_hs256_passes_whatever_the_header_says() {
        use base64::Engine;
        let b64 = |v: &str| base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(v);
        let expect = Expect {
            audience: "a",
            issuer: None,
        };
        let token = sign(b"key", &claims("a", 60, None)).unwrap();
        let (_, rest) = token.split_once('.').unwrap();
        let (body, tag) = rest.split_once('.').unwrap();
        for alg in ["none", "HS384", "HS512", "RS256", "ES256", "EdDSA"] {
            let header = b64(&format!(r#"{{"alg":"{alg}","typ":"JWT"}}"#));
            for signature in [tag, ""] {
                let forged = format!("{header}.{body}.{signature}");
                assert!(verify::<Claims>(b"key", &forged, &expect).is_err(), "{alg}");
            }
        }
    }
}
