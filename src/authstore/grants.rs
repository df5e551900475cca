//! The token rules: one-time codes bound to their client, redirect URI, PKCE challenge and
//! resource; refresh-token rotation where a reused refresh token revokes its whole grant; and
//! revocation. Runs inside the OAuth store's single-threaded event, so every check-then-write is
//! atomic.

use super::api::{
    AuthRequest, Decided, IssuedTokens, TokenReply, ACCESS_PREFIX, ACCESS_TAG, REFRESH_PREFIX,
};
use super::store::{self, GrantRow, ACCESS, REFRESH};
use crate::error::{Error, Result};
use crate::ids;
use base64::Engine;
use sha2::{Digest, Sha256};
use worker::SqlStorage;

/// Authorization codes live this long.
pub const CODE_TTL_MS: i64 = 5 * 60 * 1000;
const CODE_PREFIX: &str = "hnd_ac_";

/// Token lifetimes, from the deployment's configuration.
pub struct Lifetimes {
    pub access_secs: i64,
    pub refresh_secs: i64,
    /// Tags access tokens (`HANDOFF_SIGNING_KEY`), so forged ones are refused before storage.
    pub access_tag_key: Option<Vec<u8>>,
}

fn refused(error: &str, description: impl Into<String>) -> Result<TokenReply> {
    Ok(TokenReply::Refused {
        error: error.to_string(),
        description: description.into(),
    })
}

/// Turns an approved request into a one-time code.
pub fn approve(sql: &SqlStorage, id: &str, owner: &str, now: i64) -> Result<Decided> {
    let pending = store::get_request(sql, id, now)?.ok_or_else(expired_request)?;
    let code = ids::new_secret(CODE_PREFIX);
    store::insert_code(
        sql,
        &store::hash(&code),
        &pending.request,
        owner,
        now + CODE_TTL_MS,
    )?;
    store::delete_request(sql, id)?;
    Ok(Decided {
        redirect_uri: pending.request.redirect_uri,
        state: pending.request.state,
        code: Some(code),
    })
}

pub fn deny(sql: &SqlStorage, id: &str, now: i64) -> Result<Decided> {
    let pending = store::get_request(sql, id, now)?.ok_or_else(expired_request)?;
    store::delete_request(sql, id)?;
    Ok(Decided {
        redirect_uri: pending.request.redirect_uri,
        state: pending.request.state,
        code: None,
    })
}

pub fn expired_request() -> Error {
    Error::not_found(
        "this sign-in request has expired or was already answered; start connecting again from your app",
    )
}

pub struct Exchange<'a> {
    pub code: &'a str,
    pub client_id: &'a str,
    pub redirect_uri: Option<&'a str>,
    pub code_verifier: &'a str,
    pub resource: Option<&'a str>,
}

/// The `authorization_code` grant.
pub fn exchange_code(
    sql: &SqlStorage,
    x: &Exchange,
    lifetimes: &Lifetimes,
    now: i64,
) -> Result<TokenReply> {
    let code_hash = store::hash(x.code);
    let Some(code) = store::get_code(sql, &code_hash)? else {
        return refused(
            "invalid_grant",
            "the authorization code is unknown or expired; start the authorization again",
        );
    };
    if code.used_at.is_some() {
        if let Some(grant) = &code.grant_id {
            store::revoke_grant(sql, grant, "authorization code used twice", now)?;
        }
        return refused(
            "invalid_grant",
            "the authorization code was already used; for safety the tokens issued for it are revoked — start the authorization again",
        );
    }
    if code.expires_at <= now {
        return refused(
            "invalid_grant",
            "the authorization code expired (codes are valid for 5 minutes); start the authorization again",
        );
    }
    let request = &code.request;
    if request.client_id != x.client_id {
        store::mark_code_used(sql, &code_hash, None, now)?;
        return refused(
            "invalid_grant",
            "the authorization code was issued to another client",
        );
    }
    match x.redirect_uri {
        Some(uri) if uri != request.redirect_uri => {
            return refused(
                "invalid_grant",
                "redirect_uri does not match the one of the authorization request",
            )
        }
        None if request.redirect_uri_given => {
            return refused(
                "invalid_request",
                "redirect_uri is required: the authorization request included one",
            )
        }
        _ => {}
    }
    if !is_valid_verifier(x.code_verifier) {
        return refused(
            "invalid_request",
            "code_verifier must be 43 to 128 characters from A-Z a-z 0-9 - . _ ~ (RFC 7636)",
        );
    }
    if s256(x.code_verifier) != request.code_challenge {
        store::mark_code_used(sql, &code_hash, None, now)?;
        return refused(
            "invalid_grant",
            "code_verifier does not match the code_challenge (PKCE S256); start the authorization again",
        );
    }
    if let Some(resource) = x.resource {
        if resource != request.resource {
            return refused(
                "invalid_target",
                format!("resource must be the one authorized: {}", request.resource),
            );
        }
    }
    let grant = new_grant(sql, request, &code.owner, now)?;
    store::mark_code_used(sql, &code_hash, Some(&grant.id), now)?;
    Ok(TokenReply::Issued {
        tokens: issue(sql, &grant, lifetimes, now)?,
    })
}

fn new_grant(sql: &SqlStorage, request: &AuthRequest, owner: &str, now: i64) -> Result<GrantRow> {
    let refresh = store::get_client(sql, &request.client_id)?.is_some_and(|c| c.refresh);
    let grant = GrantRow {
        id: ids::new_id(ids::GRANT),
        client_id: request.client_id.clone(),
        client_name: request.client_name.clone(),
        owner: owner.to_string(),
        resource: request.resource.clone(),
        scope: request.scope.clone(),
        refresh,
        revoked: false,
    };
    store::insert_grant(sql, &grant, now)?;
    store::touch_client(sql, &request.client_id, now)?;
    Ok(grant)
}

fn issue(
    sql: &SqlStorage,
    grant: &GrantRow,
    lifetimes: &Lifetimes,
    now: i64,
) -> Result<IssuedTokens> {
    let access = ids::new_secret(ACCESS_PREFIX);
    let access = match &lifetimes.access_tag_key {
        Some(key) => crate::mac::tagged(key, ACCESS_TAG, &access),
        None => access,
    };
    store::insert_token(
        sql,
        &store::hash(&access),
        ACCESS,
        &grant.id,
        now + lifetimes.access_secs * 1000,
    )?;
    let refresh = if grant.refresh {
        let token = ids::new_secret(REFRESH_PREFIX);
        store::insert_token(
            sql,
            &store::hash(&token),
            REFRESH,
            &grant.id,
            now + lifetimes.refresh_secs * 1000,
        )?;
        Some(token)
    } else {
        None
    };
    Ok(IssuedTokens {
        access_token: access,
        token_type: "Bearer".into(),
        expires_in: lifetimes.access_secs,
        refresh_token: refresh,
        scope: grant.scope.clone(),
    })
}

/// The `refresh_token` grant: the presented token is spent and a new pair issued; presenting a
/// spent token again means it leaked, so the whole grant is revoked.
pub fn refresh(
    sql: &SqlStorage,
    refresh_token: &str,
    client_id: &str,
    resource: Option<&str>,
    lifetimes: &Lifetimes,
    now: i64,
) -> Result<TokenReply> {
    let token_hash = store::hash(refresh_token);
    let Some(token) = store::get_token(sql, &token_hash)?.filter(|t| t.kind == REFRESH) else {
        return refused(
            "invalid_grant",
            "the refresh token is unknown; authorize again",
        );
    };
    let Some(grant) = store::get_grant(sql, &token.grant_id)? else {
        return refused(
            "invalid_grant",
            "the refresh token is unknown; authorize again",
        );
    };
    if grant.client_id != client_id {
        return refused(
            "invalid_grant",
            "the refresh token was issued to another client",
        );
    }
    if grant.revoked || token.revoked {
        return refused(
            "invalid_grant",
            "this authorization was revoked; authorize again",
        );
    }
    if token.used {
        store::revoke_grant(sql, &grant.id, "refresh token reused", now)?;
        return refused(
            "invalid_grant",
            "the refresh token was already used; for safety every token of this authorization is revoked — authorize again",
        );
    }
    if token.expires_at <= now {
        return refused(
            "invalid_grant",
            "the refresh token expired; authorize again",
        );
    }
    if let Some(resource) = resource {
        if resource != grant.resource {
            return refused(
                "invalid_target",
                format!("resource must be the one authorized: {}", grant.resource),
            );
        }
    }
    store::mark_token_used(sql, &token_hash, now)?;
    store::touch_client(sql, client_id, now)?;
    Ok(TokenReply::Issued {
        tokens: issue(sql, &grant, lifetimes, now)?,
    })
}

/// RFC 7009: revoking a refresh token ends its whole grant; an access token ends alone. Tokens
/// that are unknown or belong to another client are ignored.
pub fn revoke(sql: &SqlStorage, token: &str, client_id: &str, now: i64) -> Result<()> {
    let token_hash = store::hash(token);
    let Some(row) = store::get_token(sql, &token_hash)? else {
        return Ok(());
    };
    let Some(grant) = store::get_grant(sql, &row.grant_id)? else {
        return Ok(());
    };
    if grant.client_id != client_id {
        return Ok(());
    }
    if row.kind == REFRESH {
        store::revoke_grant(sql, &grant.id, "revoked by the client", now)
    } else {
        store::revoke_token(sql, &token_hash, now)
    }
}

/// BASE64URL(SHA256(verifier)), the S256 code challenge.
pub fn s256(verifier: &str) -> String {
    base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(Sha256::digest(verifier.as_bytes()))
}

pub fn is_valid_verifier(verifier: &str) -> bool {
    (43..=128).contains(&verifier.len())
        && verifier
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"-._~".contains(&b))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn s256_matches_rfc_7636_appendix_b() {
        assert_eq!(
            s256("dBjftJeZ4CVP-mB92K27uhbUJU1p1r_wW1gFWFOEjXk"),
            "E9Melhoa2OwvFrEMTJguCHaoeK1t8URWbuGJSstw-cM"
        );
    }

    #[test]
    fn verifiers_need_length_and_alphabet() {
        assert!(is_valid_verifier(&"a".repeat(43)));
        assert!(!is_valid_verifier(&"a".repeat(42)));
        assert!(!is_valid_verifier(&"a".repeat(129)));
        assert!(!is_valid_verifier(&format!("{}+", "a".repeat(43))));
    }
}
