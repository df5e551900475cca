//! What the OAuth store does for each op of its API. A [`Call`] is one request: the database,
//! the time it arrived and the token lifetimes of this deployment.

use super::api::*;
use super::grants::{self, Exchange, Lifetimes};
use super::{store, REQUEST_TTL_MS};
use crate::error::{Error, Result};
use crate::ids;
use crate::rpc::Ack;
use worker::SqlStorage;

pub(super) struct Call {
    pub sql: SqlStorage,
    pub now: i64,
    pub lifetimes: Lifetimes,
}

impl AuthStoreHandler for Call {
    async fn register_client(&self, op: RegisterClient) -> Result<Ack> {
        if store::count_clients(&self.sql, ClientKind::Registered)? >= i64::from(op.max_clients) {
            return Err(Error::unavailable(
                "this deployment holds the most registered clients it keeps; retry later",
            ));
        }
        store::put_client(&self.sql, &op.client, self.now)?;
        Ok(Ack {})
    }

    async fn put_document_client(&self, op: PutDocumentClient) -> Result<Ack> {
        store::put_client(&self.sql, &op.client, self.now)?;
        Ok(Ack {})
    }

    async fn get_client(&self, op: GetClient) -> Result<Option<ClientRecord>> {
        store::get_client(&self.sql, &op.id)
    }

    async fn open_request(&self, op: OpenRequest) -> Result<PendingRequest> {
        let id = ids::new_id(ids::AUTH_REQUEST);
        let expires_at = self.now + REQUEST_TTL_MS;
        store::insert_request(&self.sql, &id, &op.request, expires_at)?;
        Ok(PendingRequest {
            id,
            request: op.request,
            expires_at,
        })
    }

    async fn get_request(&self, op: GetRequest) -> Result<PendingRequest> {
        store::get_request(&self.sql, &op.id, self.now)?.ok_or_else(grants::expired_request)
    }

    async fn approve(&self, op: Approve) -> Result<Decided> {
        grants::approve(&self.sql, &op.id, &op.owner, self.now)
    }

    async fn deny(&self, op: Deny) -> Result<Decided> {
        grants::deny(&self.sql, &op.id, self.now)
    }

    async fn exchange_code(&self, op: ExchangeCode) -> Result<TokenReply> {
        let exchange = Exchange {
            code: &op.code,
            client_id: &op.client_id,
            redirect_uri: op.redirect_uri.as_deref(),
            code_verifier: &op.code_verifier,
            resource: op.resource.as_deref(),
        };
        grants::exchange_code(&self.sql, &exchange, &self.lifetimes, self.now)
    }

    async fn refresh(&self, op: Refresh) -> Result<TokenReply> {
        grants::refresh(
            &self.sql,
            &op.refresh_token,
            &op.client_id,
            op.resource.as_deref(),
            &self.lifetimes,
            self.now,
        )
    }

    async fn revoke(&self, op: Revoke) -> Result<Ack> {
        grants::revoke(&self.sql, &op.token, &op.client_id, self.now)?;
        Ok(Ack {})
    }

    async fn verify_access(&self, op: VerifyAccess) -> Result<Option<AccessGrant>> {
        store::live_access(&self.sql, &store::hash(&op.token), self.now)
    }

    async fn count(&self, _: Count) -> Result<Ack> {
        Ok(Ack {})
    }
}
