//! Rules both sides apply to what crosses the daemon's API: the Worker checks them to give the
//! caller a precise error, the daemon checks them again because it trusts nothing. Written once
//! here so the two cannot drift.

/// Longest environment variable name accepted.
pub const ENV_NAME_MAX: usize = 128;
/// The most environment variables a sandbox holds.
pub const ENV_MAX: usize = 100;
/// Longest host name in a network rule or a host alias.
pub const HOST_MAX: usize = 253;

/// A conservative subset of git's branch-name rules that is also safe on any command line:
/// letters, digits and `._/-`, not starting with `-`, `/` or `.`, without `..`, `//` or `/.`,
/// no part (between slashes) ending in `.lock`, not ending in `/` or `.`, at most 200 bytes.
pub fn is_safe_branch(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= 200
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"._/-".contains(&b))
        && !name.starts_with(['-', '/', '.'])
        && !name.ends_with(['/', '.'])
        && !name.split('/').any(|part| part.ends_with(".lock"))
        && !name.contains("..")
        && !name.contains("//")
        && !name.contains("/.")
}

/// A portable shell variable name: letters, digits and `_`, not starting with a digit, at most
/// `ENV_NAME_MAX` bytes.
pub fn is_env_name(name: &str) -> bool {
    let mut bytes = name.bytes();
    name.len() <= ENV_NAME_MAX
        && bytes
            .next()
            .is_some_and(|b| b.is_ascii_alphabetic() || b == b'_')
        && bytes.all(|b| b.is_ascii_alphanumeric() || b == b'_')
}

/// An environment value: anything but NUL.
pub fn is_env_value(value: &str) -> bool {
    !value.contains('\0')
}

/// A network rule's host pattern and optional port: `host`, `*.domain`, `*`, `host:port`,
/// `[v6]:port`.
pub fn split_network_rule(rule: &str) -> (&str, Option<&str>) {
    // IPv6 literals come bracketed: [::1]:8080
    if let Some(rest) = rule.strip_prefix('[') {
        if let Some((host, tail)) = rest.split_once(']') {
            return (host, tail.strip_prefix(':'));
        }
    }
    match rule.rsplit_once(':') {
        Some((host, port)) if !host.contains(':') => (host, Some(port)),
        _ => (rule, None),
    }
}

/// A network rule (allow or deny list): a host, `*.domain` or `*`, with an optional port 1–65535.
pub fn is_network_rule(rule: &str) -> bool {
    let (host, port) = split_network_rule(rule);
    let host_ok = host == "*"
        || (!host.is_empty()
            && host.len() <= HOST_MAX
            && host
                .trim_start_matches("*.")
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b"-.:[]".contains(&b)));
    let port_ok = port.is_none_or(|p| p.parse::<u16>().is_ok_and(|p| p > 0));
    host_ok && port_ok
}

/// Longest secret value.
pub const SECRET_VALUE_MAX: usize = 16 * 1024;
/// The most secrets one sandbox holds.
pub const SECRETS_MAX: usize = 20;
/// The most hosts one secret may go to.
pub const SECRET_HOSTS_MAX: usize = 20;

/// Where a secret may go: a network rule naming a host or `*.domain` (not `*`), optional port.
pub fn is_secret_host(rule: &str) -> bool {
    let (host, _) = split_network_rule(rule);
    is_network_rule(rule) && host != "*" && !host.is_empty()
}

/// A secret's value (or stand-in): something a request header can carry — printable ASCII and
/// spaces, no line breaks — of at most `SECRET_VALUE_MAX` bytes.
pub fn is_secret_value(value: &str) -> bool {
    !value.is_empty()
        && value.len() <= SECRET_VALUE_MAX
        && value
            .bytes()
            .all(|b| (0x20..0x7f).contains(&b) || b == b'\t')
}

/// A host alias: a lower-case host name pointing at a `host:port`.
pub fn is_host_alias(name: &str, target: &str) -> bool {
    let name_ok = !name.is_empty()
        && name.len() <= HOST_MAX
        && name
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b"-.".contains(&b));
    let target_ok = target
        .rsplit_once(':')
        .is_some_and(|(host, port)| !host.is_empty() && port.parse::<u16>().is_ok_and(|p| p > 0));
    name_ok && target_ok
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn branch_names_are_safe_or_refused() {
        for ok in ["main", "feature/x-1", "release_2.0", "handoff/run_abc"] {
            assert!(is_safe_branch(ok), "{ok}");
        }
        for bad in [
            "--upload-pack=x",
            "$(id)",
            "a b",
            "a..b",
            "x.lock",
            "A.lock/a",
            "/x",
            "x/",
            "a//b",
            "`id`",
            "a;b",
            "",
            ".x",
            "a/.b",
        ] {
            assert!(!is_safe_branch(bad), "{bad}");
        }
        assert!(!is_safe_branch(&"a".repeat(201)));
    }

    #[test]
    fn env_names_are_portable_shell_names() {
        for ok in ["PATH", "_x", "A1_B2"] {
            assert!(is_env_name(ok), "{ok}");
        }
        for bad in ["", "1A", "A-B", "A B", "Ä", "A=B"] {
            assert!(!is_env_name(bad), "{bad}");
        }
        assert!(!is_env_name(&"A".repeat(ENV_NAME_MAX + 1)));
        assert!(is_env_value("a b=c"));
        assert!(!is_env_value("a\0b"));
    }

    #[test]
    fn network_rules_take_hosts_wildcards_and_valid_ports() {
        for ok in [
            "*",
            "example.com",
            "*.example.com",
            "example.com:443",
            "[::1]:8080",
            "10.0.0.1",
        ] {
            assert!(is_network_rule(ok), "{ok}");
        }
        for bad in [
            "",
            "example.com:0",
            "example.com:99999",
            "example.com:x",
            "exa mple.com",
            "a/b",
            "http://example.com",
        ] {
            assert!(!is_network_rule(bad), "{bad}");
        }
        assert_eq!(split_network_rule("[::1]:80"), ("::1", Some("80")));
        assert_eq!(split_network_rule("::1"), ("::1", None));
    }

    #[test]
    fn host_aliases_name_a_lower_case_host_and_a_port() {
        assert!(is_host_alias("api.local", "127.0.0.1:9000"));
        assert!(!is_host_alias("API.local", "127.0.0.1:9000"));
        assert!(!is_host_alias("api.local", "127.0.0.1"));
        assert!(!is_host_alias("api.local", ":9000"));
    }
}
