//! URLs from outside (callback URLs, OAuth redirect URIs and client ids), parsed with an error
//! that says what to change.
//!
//! The build resolves `idna_adapter` 1.0 (Cargo.toml): without its Unicode tables the Worker is
//! 49 KB gzip smaller, and a host name outside ASCII is refused instead of mapped, so such a
//! host is written in its Punycode form (`xn--…`), as every browser and HTTP client sends it.

use worker::{url, Url};

/// Parses `raw`; the error names what is wrong in words a caller can act on.
pub fn parse(raw: &str) -> Result<Url, String> {
    Url::parse(raw).map_err(|e| match e {
        url::ParseError::IdnaError => {
            "its host is not ASCII: write a host name outside ASCII in its Punycode form (xn--…)"
                .to_string()
        }
        e => e.to_string(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hosts_outside_ascii_are_refused_with_what_to_write_instead() {
        let e = parse("https://bücher.example/hook").unwrap_err();
        assert!(e.contains("Punycode"), "{e}");
        let url = parse("https://xn--bcher-kva.example/hook").unwrap();
        assert_eq!(url.host_str(), Some("xn--bcher-kva.example"));
        // Full-width digits are not turned into a loopback address either.
        assert!(parse("https://１２７.０.０.１/").is_err());
        assert_eq!(
            parse("not a url").unwrap_err(),
            "relative URL without a base"
        );
    }
}
