//! Unguessable identifiers: a short prefix naming the kind (`run_`, `ses_`, `mcp_`) and 128 random
//! bits in lower-case Crockford base32, so ids are URL-, header- and file-name-safe.

/// The characters of an id's random part (lower-case Crockford base32).
pub const ALPHABET: &[u8; 32] = b"0123456789abcdefghjkmnpqrstvwxyz";
/// 128 bits in base32 take 26 characters.
const BODY_LEN: usize = 26;

pub const RUN: &str = "run_";
pub const SESSION: &str = "ses_";
pub const MCP_SESSION: &str = "mcp_";
pub const SANDBOX: &str = "sbx_";
/// An MCP task that runs a command in a sandbox (a run's task id is its run id).
pub const EXEC_TASK: &str = "xtk_";
/// A run's completion callback delivery (the same id on every attempt).
pub const DELIVERY: &str = "dlv_";
/// A worker's webhook: the random part of its secret URL.
pub const HOOK: &str = "hk_";
/// OAuth: a dynamically registered client, a pending authorization request, a grant (the
/// family of tokens one approval issued).
pub const CLIENT: &str = "cli_";
pub const AUTH_REQUEST: &str = "req_";
pub const GRANT: &str = "grt_";

/// Fills `buf` with cryptographically secure random bytes.
///
/// # Panics
/// When the platform's generator fails. Every id and secret comes from here; going on with
/// predictable bytes would hand out guessable tokens, so the request fails instead.
pub fn random_bytes(buf: &mut [u8]) {
    if let Err(e) = getrandom::fill(buf) {
        panic!("the platform's random number generator failed ({e}); refusing to continue");
    }
}

/// A 256-bit secret in unpadded base64url after `prefix`: tokens, codes, CSRF values.
pub fn new_secret(prefix: &str) -> String {
    use base64::Engine;
    let mut bytes = [0u8; 32];
    random_bytes(&mut bytes);
    format!(
        "{prefix}{}",
        base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(bytes)
    )
}

/// `bytes` in lower-case Crockford base32 (5 bits a character, the last one padded).
pub fn base32(bytes: &[u8]) -> String {
    let mut out = String::with_capacity(bytes.len() * 8 / 5 + 1);
    let (mut acc, mut bits) = (0u32, 0u32);
    for &b in bytes {
        acc = (acc << 8) | u32::from(b);
        bits += 8;
        while bits >= 5 {
            bits -= 5;
            out.push(ALPHABET[((acc >> bits) & 0x1f) as usize] as char);
        }
    }
    if bits > 0 {
        out.push(ALPHABET[((acc << (5 - bits)) & 0x1f) as usize] as char);
    }
    out
}

/// A new id with the given prefix.
pub fn new_id(prefix: &str) -> String {
    let mut bytes = [0u8; 16];
    random_bytes(&mut bytes);
    let mut out = String::with_capacity(prefix.len() + BODY_LEN);
    out.push_str(prefix);
    let value = u128::from_be_bytes(bytes);
    for i in (0..BODY_LEN).rev() {
        let index = ((value >> (i * 5)) & 0x1f) as usize;
        out.push(ALPHABET[index] as char);
    }
    out
}

/// Whether `id` has the shape of an id with this prefix (not whether it exists).
pub fn is_valid(prefix: &str, id: &str) -> bool {
    id.strip_prefix(prefix)
        .is_some_and(|body| body.len() == BODY_LEN && body.bytes().all(|b| ALPHABET.contains(&b)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_have_prefix_and_shape_and_differ() {
        let a = new_id(RUN);
        let b = new_id(RUN);
        assert!(is_valid(RUN, &a), "{a}");
        assert_ne!(a, b);
        assert!(!is_valid(SESSION, &a));
        assert!(!is_valid(RUN, "run_../../etc"));
        assert!(!is_valid(RUN, &format!("{a}x")));
    }

    #[test]
    fn base32_is_five_bits_a_character_in_the_id_alphabet() {
        assert_eq!(base32(&[0xff; 10]), "zzzzzzzzzzzzzzzz");
        assert_eq!(base32(&[0; 10]), "0000000000000000");
        assert_eq!(base32(&[0b1000_0100, 0b0010_0000]), "ggg0");
        assert_eq!(base32(&[1]), "04");
    }
}
