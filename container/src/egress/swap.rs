//! Secrets swapped in at egress: which of a sandbox's secrets may go to a destination, and the
//! request headers with their stand-ins replaced by the values (also inside `Basic`
//! credentials, which carry them base64-encoded, as git over HTTPS sends a token). Bodies, URLs
//! and other destinations keep the stand-in.

use base64::engine::general_purpose::STANDARD as B64;
use base64::Engine;
use handoff_wire::{rules, SandboxSpec, SecretGrant};
use hyper::header::{HeaderMap, HeaderValue, AUTHORIZATION};

/// The secrets with a known value that may go to `host:port` (a host rule without a port means
/// 443).
pub fn for_destination(spec: &SandboxSpec, host: &str, port: u16) -> Vec<SecretGrant> {
    spec.secrets
        .iter()
        .filter(|g| !g.value.is_empty())
        .filter(|g| {
            g.hosts.iter().any(|rule| {
                let (_, rule_port) = rules::split_network_rule(rule);
                (rule_port.is_some() || port == 443) && super::rule_matches(rule, host, port)
            })
        })
        .cloned()
        .collect()
}

fn replace(haystack: &[u8], from: &[u8], to: &[u8]) -> Option<Vec<u8>> {
    if from.is_empty() || haystack.len() < from.len() {
        return None;
    }
    let mut out = Vec::with_capacity(haystack.len());
    let mut i = 0;
    let mut found = false;
    while i < haystack.len() {
        if haystack[i..].starts_with(from) {
            out.extend_from_slice(to);
            i += from.len();
            found = true;
        } else {
            out.push(haystack[i]);
            i += 1;
        }
    }
    found.then_some(out)
}

/// `value` with every grant's stand-in replaced; the names of the grants swapped in.
fn swap_value(value: &[u8], grants: &[SecretGrant], names: &mut Vec<String>) -> Option<Vec<u8>> {
    let mut current: Option<Vec<u8>> = None;
    for grant in grants {
        let from = current.as_deref().unwrap_or(value);
        if let Some(next) = replace(from, grant.stand_in.as_bytes(), grant.value.as_bytes()) {
            current = Some(next);
            if !names.contains(&grant.name) {
                names.push(grant.name.clone());
            }
        }
    }
    current
}

/// `Basic <base64(user:password)>` with stand-ins swapped inside the credentials.
fn swap_basic(value: &[u8], grants: &[SecretGrant], names: &mut Vec<String>) -> Option<Vec<u8>> {
    let (scheme, encoded) = value.split_at_checked(6)?;
    if !scheme.eq_ignore_ascii_case(b"basic ") {
        return None;
    }
    let decoded = B64.decode(encoded.trim_ascii()).ok()?;
    let swapped = swap_value(&decoded, grants, names)?;
    Some(format!("Basic {}", B64.encode(swapped)).into_bytes())
}

/// Replaces the stand-ins of `grants` in `headers`; returns the names of the secrets swapped in.
pub fn swap_headers(headers: &mut HeaderMap, grants: &[SecretGrant]) -> Vec<String> {
    let mut names = Vec::new();
    if grants.is_empty() {
        return names;
    }
    for (name, value) in headers.iter_mut() {
        let bytes = value.as_bytes();
        let swapped = swap_value(bytes, grants, &mut names).or_else(|| {
            (name == AUTHORIZATION)
                .then(|| swap_basic(bytes, grants, &mut names))
                .flatten()
        });
        if let Some(new) = swapped.and_then(|b| HeaderValue::from_bytes(&b).ok()) {
            let sensitive = value.is_sensitive();
            *value = new;
            value.set_sensitive(sensitive || name == AUTHORIZATION);
        }
    }
    names
}

#[cfg(test)]
mod tests {
    use super::*;

    fn grant(name: &str, hosts: &[&str]) -> SecretGrant {
        SecretGrant {
            name: name.into(),
            stand_in: format!("stand-in-{name}-0123456789"),
            value: format!("real-{name}"),
            hosts: hosts.iter().map(|h| h.to_string()).collect(),
        }
    }

    #[test]
    fn only_the_secrets_for_a_destination_apply() {
        let spec = SandboxSpec {
            secrets: vec![
                grant("A", &["api.example.com"]),
                grant("B", &["*.example.org", "127.0.0.1:8443"]),
                SecretGrant {
                    value: String::new(),
                    ..grant("C", &["api.example.com"])
                },
            ],
            ..Default::default()
        };
        let names = |host: &str, port: u16| -> Vec<String> {
            for_destination(&spec, host, port)
                .into_iter()
                .map(|g| g.name)
                .collect()
        };
        assert_eq!(names("api.example.com", 443), ["A"]);
        assert!(names("api.example.com", 80).is_empty());
        assert!(names("evil.com", 443).is_empty());
        assert!(names("api.example.com.evil.com", 443).is_empty());
        assert_eq!(names("x.example.org", 443), ["B"]);
        assert!(names("example.org", 443).is_empty());
        assert_eq!(names("127.0.0.1", 8443), ["B"]);
        assert!(names("127.0.0.1", 443).is_empty());
    }

    #[test]
    fn stand_ins_are_replaced_in_headers_and_basic_credentials() {
        let grants = [grant("A", &["h"]), grant("B", &["h"])];
        let mut headers = HeaderMap::new();
        headers.insert(
            AUTHORIZATION,
            HeaderValue::from_static("Bearer stand-in-A-0123456789"),
        );
        headers.insert(
            "x-both",
            HeaderValue::from_static("stand-in-A-0123456789/stand-in-B-0123456789"),
        );
        headers.insert("x-other", HeaderValue::from_static("nothing here"));
        let names = swap_headers(&mut headers, &grants);
        assert_eq!(names, ["A", "B"]);
        assert_eq!(headers[AUTHORIZATION], "Bearer real-A");
        assert!(headers[AUTHORIZATION].is_sensitive());
        assert_eq!(headers["x-both"], "real-A/real-B");
        assert_eq!(headers["x-other"], "nothing here");

        let basic = format!(
            "Basic {}",
            B64.encode("x-access-token:stand-in-B-0123456789")
        );
        let mut headers = HeaderMap::new();
        headers.insert(AUTHORIZATION, HeaderValue::from_str(&basic).unwrap());
        assert_eq!(swap_headers(&mut headers, &grants), ["B"]);
        let expected = format!("Basic {}", B64.encode("x-access-token:real-B"));
        assert_eq!(headers[AUTHORIZATION], expected.as_str());
    }
}
