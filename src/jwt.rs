//! HS256 JSON Web Tokens: the one place the Worker signs and checks its own tokens (owner
//! sessions, signed run-page links, the credential proxy's run tokens, sandbox daemon tokens).
//! Every token here is minted by this deployment, so none gets clock leeway.

use jsonwebtoken::{Algorithm, DecodingKey, EncodingKey, Header, Validation};
use serde::{de::DeserializeOwned, Serialize};

/// What a token must say besides its signature and expiry.
pub struct Expect<'a> {
    pub audience: &'a str,
    pub issuer: Option<&'a str>,
}

/// `claims` signed with `key`.
pub fn sign<C: Serialize>(key: &[u8], claims: &C) -> Result<String, String> {
    let key = EncodingKey::from_secret(key).map_err(|e| e.to_string())?;
    jsonwebtoken::encode(&Header::new(Algorithm::HS256), claims, &key).map_err(|e| e.to_string())
}

/// The claims of `token` if `key` signed it, it has not expired and it is for `expect`;
/// otherwise why not.
pub fn verify<C: DeserializeOwned>(key: &[u8], token: &str, expect: &Expect) -> Result<C, String> {
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
}
