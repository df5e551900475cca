//! Who is calling: the authenticated principal every request runs as.

/// The authenticated caller. `id` names the credential (an API token's name, or the OAuth
/// grant's owner); runs record it and idempotency keys are scoped to it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Principal {
    pub id: String,
}
