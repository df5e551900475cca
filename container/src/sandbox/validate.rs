//! What the daemon accepts from the Worker about a sandbox: its id, its environment, its
//! network rules and host aliases.

use crate::error::{ApiError, Result};
use handoff_wire::{rules, SandboxSpec};
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
        if !rules::is_network_rule(rule) {
            return Err(ApiError::bad_request(format!(
                "network rule {rule:?} is not valid: use host, *.domain or * with an optional :port"
            )));
        }
    }
    if let Some(limits) = &spec.limits {
        let zero = [limits.memory_bytes, limits.pids, limits.cpu_millis].contains(&Some(0));
        if zero {
            return Err(ApiError::bad_request(
                "sandbox limits must be above zero (leave one out for the daemon's)",
            ));
        }
    }
    check_secrets(spec)?;
    for (name, target) in &spec.hosts {
        if !rules::is_host_alias(name, target) {
            return Err(ApiError::bad_request(format!(
                "host alias {name:?} -> {target:?} is not valid: a lower-case host name and a host:port"
            )));
        }
    }
    Ok(())
}

/// Secrets: a few, each a variable name with a long stand-in, a header-safe value (or none
/// yet) and the hosts it may go to (never every host); names and stand-ins distinct.
fn check_secrets(spec: &SandboxSpec) -> Result<()> {
    let bad = |why: String| Err(ApiError::bad_request(why));
    if spec.secrets.len() > rules::SECRETS_MAX {
        return bad(format!(
            "at most {} secrets per sandbox",
            rules::SECRETS_MAX
        ));
    }
    let mut seen = std::collections::HashSet::new();
    for g in &spec.secrets {
        if !rules::is_env_name(&g.name) {
            return bad(format!("secret name {:?} is not a variable name", g.name));
        }
        if g.stand_in.len() < 16 || !rules::is_secret_value(&g.stand_in) {
            return bad(format!("the stand-in of secret {} is not valid", g.name));
        }
        if !g.value.is_empty() && !rules::is_secret_value(&g.value) {
            return bad(format!("the value of secret {} is not header-safe", g.name));
        }
        if g.hosts.is_empty()
            || g.hosts.len() > rules::SECRET_HOSTS_MAX
            || !g.hosts.iter().all(|h| rules::is_secret_host(h))
        {
            return bad(format!(
                "secret {} needs 1 to {} hosts (host or *.domain, optional :port; not *)",
                g.name,
                rules::SECRET_HOSTS_MAX
            ));
        }
        if !seen.insert(g.name.as_str()) || !seen.insert(g.stand_in.as_str()) {
            return bad(format!("secret {} is given twice", g.name));
        }
    }
    Ok(())
}

/// Environment names must be portable shell names; values may not contain NUL.
pub fn check_env(env: &BTreeMap<String, String>) -> Result<()> {
    for (name, value) in env {
        if !rules::is_env_name(name) {
            return Err(ApiError::bad_request(format!(
                "environment variable name {name:?} is not valid: use letters, digits and _, not starting with a digit"
            )));
        }
        if !rules::is_env_value(value) {
            return Err(ApiError::bad_request(format!(
                "environment variable {name} contains a NUL byte"
            )));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(allow: &[&str], env: &[(&str, &str)], hosts: &[(&str, &str)]) -> SandboxSpec {
        SandboxSpec {
            allow_out: allow.iter().map(|s| s.to_string()).collect(),
            env: env
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
            hosts: hosts
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
            ..SandboxSpec::default()
        }
    }

    #[test]
    fn specs_with_bad_rules_names_or_aliases_are_refused() {
        assert!(check_spec(&spec(
            &["*.example.com:443"],
            &[("A_1", "x")],
            &[("api", "127.0.0.1:80")]
        ))
        .is_ok());
        for bad in [
            spec(&["x:99999"], &[], &[]),
            spec(&["http://x"], &[], &[]),
            spec(&[], &[("1A", "x")], &[]),
            spec(&[], &[("A", "a\0b")], &[]),
            spec(&[], &[], &[("API", "127.0.0.1:80")]),
            spec(&[], &[], &[("api", "127.0.0.1")]),
        ] {
            assert!(check_spec(&bad).is_err(), "{bad:?}");
        }
    }
}
