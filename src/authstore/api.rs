//! What the OAuth store can be asked, the records it keeps, and the typed client the Worker's
//! OAuth endpoints and `/mcp` authentication use.

use crate::config::Limit;
use crate::error::Result;
use crate::names::named_enum;
use crate::rpc::{self, Ack};
use serde::{Deserialize, Serialize};
use worker::Env;

/// Binding name of the OAuth store Durable Object namespace (wrangler.toml).
pub const BINDING: &str = "AUTH";
/// The deployment's one OAuth store.
const INSTANCE: &str = "auth-v1";

/// How access and refresh tokens begin.
pub const ACCESS_PREFIX: &str = "hnd_at_";
pub const REFRESH_PREFIX: &str = "hnd_rt_";
/// What an access token's tag is for (see `crate::mac`).
pub const ACCESS_TAG: &str = "handoff:access-token";

/// A request to the store. Every limit in `limits` is checked (and, when `count` is set,
/// counted) before the op runs, so a rate-limited call costs one round trip.
#[derive(Debug, Serialize, Deserialize)]
pub struct Envelope {
    pub limits: Vec<RateHit>,
    pub op: AuthStoreRequest,
}

/// One rate-limit bucket a request falls in.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct RateHit {
    /// What is limited: `register`, `token`, `authorize`, `signin`.
    pub bucket: String,
    /// Who: a client address, or `*` for everyone.
    pub key: String,
    pub max: u32,
    pub window_secs: u32,
    /// Count this request (false: only check that the bucket is not full).
    pub count: bool,
}

impl RateHit {
    pub fn new(bucket: &str, key: &str, limit: Limit, count: bool) -> Self {
        RateHit {
            bucket: bucket.to_string(),
            key: key.to_string(),
            max: limit.max,
            window_secs: limit.window_secs,
            count,
        }
    }
}

rpc::ops! {
    /// What the store can be asked.
    pub enum AuthStoreRequest, answered by AuthStoreHandler {
        /// Stores a dynamically registered client; refused when `max_clients` are already stored.
        register_client: RegisterClient { client: ClientRecord, max_clients: u32 } => Ack;
        /// Caches a validated client metadata document.
        put_document_client: PutDocumentClient { client: ClientRecord } => Ack;
        get_client: GetClient { id: String } => Option<ClientRecord>;
        /// Stores a validated authorization request awaiting the owner's decision.
        open_request: OpenRequest { request: AuthRequest } => PendingRequest;
        /// Not found once expired or decided.
        get_request: GetRequest { id: String } => PendingRequest;
        /// The owner approved: the request becomes a one-time code.
        approve: Approve { id: String, owner: String } => Decided;
        /// The owner declined (no code).
        deny: Deny { id: String } => Decided;
        /// The token endpoint's `authorization_code` grant.
        exchange_code: ExchangeCode {
            code: String,
            client_id: String,
            redirect_uri: Option<String>,
            code_verifier: String,
            resource: Option<String>,
        } => TokenReply;
        /// The token endpoint's `refresh_token` grant (rotation, reuse detection).
        refresh: Refresh {
            refresh_token: String,
            client_id: String,
            resource: Option<String>,
        } => TokenReply;
        /// RFC 7009 revocation of a token this client holds; unknown tokens are ignored.
        revoke: Revoke { token: String, client_id: String } => Ack;
        /// Checks an access token presented to `/mcp`.
        verify_access: VerifyAccess { token: String } => Option<AccessGrant>;
        /// Nothing beyond the envelope's limits (counts a failed sign-in).
        count: Count {} => Ack;
    }
}

impl AuthStoreRequest {
    /// Whether the op only reads (then a request without limits leaves the alarm alone).
    pub fn reads_only(&self) -> bool {
        matches!(
            self,
            AuthStoreRequest::GetClient(_)
                | AuthStoreRequest::GetRequest(_)
                | AuthStoreRequest::VerifyAccess(_)
        )
    }
}

/// How a client is known.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ClientKind {
    /// Dynamic Client Registration (RFC 7591): the name is whatever the client said.
    Registered,
    /// A Client ID Metadata Document: the id is an https URL serving the client's metadata.
    Document,
}

named_enum! {
/// How a client authenticates at the token endpoint (`token_endpoint_auth_method`).
pub enum AuthMethod {
    None,
    ClientSecretPost,
    ClientSecretBasic,
}
}

impl AuthMethod {
    pub fn parse(value: &str) -> Option<AuthMethod> {
        value.parse().ok()
    }
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ClientRecord {
    pub id: String,
    pub kind: ClientKind,
    pub name: String,
    pub redirect_uris: Vec<String>,
    pub auth_method: AuthMethod,
    /// SHA-256 (hex) of the client secret of confidential registered clients.
    pub secret_hash: Option<String>,
    /// Whether the client registered for refresh tokens.
    pub refresh: bool,
    pub created_at: i64,
    /// Documents: when the cached copy must be fetched again.
    pub fresh_until: Option<i64>,
}

/// A validated authorization request (everything the consent page and the code need).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct AuthRequest {
    pub client_id: String,
    pub client_name: String,
    pub client_kind: ClientKind,
    pub redirect_uri: String,
    /// Whether the client sent `redirect_uri` (then the token request must repeat it).
    pub redirect_uri_given: bool,
    pub state: String,
    pub code_challenge: String,
    pub resource: String,
    pub scope: String,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct PendingRequest {
    pub id: String,
    pub request: AuthRequest,
    pub expires_at: i64,
}

/// Where the owner's decision sends the browser.
#[derive(Debug, Serialize, Deserialize)]
pub struct Decided {
    pub redirect_uri: String,
    pub state: String,
    /// The one-time authorization code (approvals only).
    pub code: Option<String>,
}

/// Tokens as the token endpoint returns them.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct IssuedTokens {
    pub access_token: String,
    pub token_type: String,
    pub expires_in: i64,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub refresh_token: Option<String>,
    pub scope: String,
}

/// The outcome of a grant: tokens, or an RFC 6749 error (`invalid_grant`, `invalid_target`, …).
/// Externally tagged: an internally tagged enum carries a second, buffering decoder.
#[derive(Debug, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum TokenReply {
    Issued { tokens: IssuedTokens },
    Refused { error: String, description: String },
}

/// What a live access token grants.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct AccessGrant {
    pub client_id: String,
    pub client_name: String,
    pub owner: String,
    pub resource: String,
    pub scope: String,
    pub expires_at: i64,
}

/// A handle on the deployment's OAuth store.
pub struct AuthStore {
    stub: rpc::ObjectStub,
}

impl AuthStore {
    pub fn get(env: &Env) -> Result<AuthStore> {
        let stub = env.durable_object(BINDING)?.get_by_name(INSTANCE)?.into();
        Ok(AuthStore { stub })
    }

    /// Sends one of the store's ops after checking `limits`.
    pub async fn call<O: rpc::Op<Request = AuthStoreRequest>>(
        &self,
        limits: Vec<RateHit>,
        op: O,
    ) -> Result<O::Reply> {
        let envelope = Envelope {
            limits,
            op: op.into(),
        };
        rpc::send(&self.stub, &envelope).await
    }
}
