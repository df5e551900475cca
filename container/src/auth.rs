//! Per-sandbox authentication: every route but health needs a Bearer token the Worker minted
//! (HS256 with the shared daemon secret) whose subject is the sandbox named in the path.

use crate::error::{ApiError, Result};
use handoff_wire::{TokenClaims, TOKEN_AUDIENCE};
use jsonwebtoken::{Algorithm, DecodingKey, Validation};

pub struct Verifier {
    key: DecodingKey,
    validation: Validation,
    /// The one sandbox tokens may name (a container of its own).
    pinned: Option<String>,
}

impl Verifier {
    pub fn new(secret: &[u8], pinned: Option<String>) -> std::result::Result<Verifier, String> {
        let key = DecodingKey::from_secret(secret).map_err(|e| e.to_string())?;
        let mut validation = Validation::new(Algorithm::HS256);
        validation.set_audience(&[TOKEN_AUDIENCE]);
        validation.set_required_spec_claims(&["exp", "sub", "aud"]);
        validation.leeway = 5;
        Ok(Verifier {
            key,
            validation,
            pinned,
        })
    }

    /// Checks an `Authorization` header value for `sandbox_id`.
    pub fn check(&self, header: Option<&str>, sandbox_id: &str) -> Result<()> {
        let token = header
            .and_then(|h| {
                h.strip_prefix("Bearer ")
                    .or_else(|| h.strip_prefix("bearer "))
            })
            .map(str::trim)
            .filter(|t| !t.is_empty())
            .ok_or_else(|| ApiError::unauthorized("missing bearer token"))?;
        let data = jsonwebtoken::decode::<TokenClaims>(token, &self.key, &self.validation)
            .map_err(|e| ApiError::unauthorized(format!("invalid token: {e}")))?;
        if data.claims.sub != sandbox_id {
            return Err(ApiError::unauthorized("token is for another sandbox"));
        }
        if self.pinned.as_deref().is_some_and(|p| p != sandbox_id) {
            return Err(ApiError::unauthorized("this daemon serves another sandbox"));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use jsonwebtoken::{EncodingKey, Header};

    fn token(secret: &[u8], sub: &str, exp_offset: i64, aud: &str) -> String {
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_secs() as i64;
        let claims = TokenClaims {
            sub: sub.into(),
            aud: aud.into(),
            exp: now + exp_offset,
        };
        jsonwebtoken::encode(
            &Header::new(Algorithm::HS256),
            &claims,
            &EncodingKey::from_secret(secret).unwrap(),
        )
        .unwrap()
    }

    #[test]
    fn tokens_are_bound_to_sandbox_secret_audience_and_time() {
        let secret = b"0123456789abcdef0123456789abcdef";
        let v = Verifier::new(secret, None).unwrap();
        let good = token(secret, "sbx_a", 60, TOKEN_AUDIENCE);
        assert!(v.check(Some(&format!("Bearer {good}")), "sbx_a").is_ok());
        assert!(v.check(Some(&format!("Bearer {good}")), "sbx_b").is_err());
        assert!(v.check(None, "sbx_a").is_err());
        let expired = token(secret, "sbx_a", -60, TOKEN_AUDIENCE);
        assert!(v
            .check(Some(&format!("Bearer {expired}")), "sbx_a")
            .is_err());
        let wrong_aud = token(secret, "sbx_a", 60, "other");
        assert!(v
            .check(Some(&format!("Bearer {wrong_aud}")), "sbx_a")
            .is_err());
        let wrong_key = token(
            b"another-secret-another-secret-xx",
            "sbx_a",
            60,
            TOKEN_AUDIENCE,
        );
        assert!(v
            .check(Some(&format!("Bearer {wrong_key}")), "sbx_a")
            .is_err());
    }
}
