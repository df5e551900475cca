//! What the daemon accepts from the Worker about a sandbox: its id, its environment, its
//! network rules and host aliases.

use crate::egress;
use crate::error::{ApiError, Result};
use handoff_wire::SandboxSpec;
use std::collections::BTreeMap;

/// Sandbox ids are chosen by the Worker: 1–64 of `a-z 0-9 _ -`.
pub fn valid_id(id: &str) -> bool {
    !id.is_empty()
        && id.len() <= 64
        && id
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_' || b == b'-')
}

pub fn check_id(id: &str) -> Result<()> {
    if valid_id(id) {
        Ok(())
    } else {
        Err(ApiError::bad_request(
            "sandbox ids are 1 to 64 characters of a-z, 0-9, _ and -",
        ))
    }
}

pub fn check_spec(spec: &SandboxSpec) -> Result<()> {
    check_env(&spec.env)?;
    for rule in spec.allow_out.iter().chain(&spec.deny_out) {
        egress::check_rule(rule)?;
    }
    for (name, target) in &spec.hosts {
        let name_ok = !name.is_empty()
            && name.len() <= 253
            && name
                .bytes()
                .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b"-.".contains(&b));
        let target_ok = target.rsplit_once(':').is_some_and(|(host, port)| {
            !host.is_empty() && port.parse::<u16>().is_ok_and(|p| p > 0)
        });
        if !name_ok || !target_ok {
            return Err(ApiError::bad_request(format!(
                "host alias {name:?} -> {target:?} is not valid: a lower-case host name and a host:port"
            )));
        }
    }
    Ok(())
}

/// Environment names must be portable shell names; values may not contain NUL.
pub fn check_env(env: &BTreeMap<String, String>) -> Result<()> {
    for (name, value) in env {
        let mut bytes = name.bytes();
        let first_ok = bytes
            .next()
            .is_some_and(|b| b.is_ascii_alphabetic() || b == b'_');
        if !first_ok || !bytes.all(|b| b.is_ascii_alphanumeric() || b == b'_') || name.len() > 128 {
            return Err(ApiError::bad_request(format!(
                "environment variable name {name:?} is not valid: use letters, digits and _, not starting with a digit"
            )));
        }
        if value.contains('\0') {
            return Err(ApiError::bad_request(format!(
                "environment variable {name} contains a NUL byte"
            )));
        }
    }
    Ok(())
}
