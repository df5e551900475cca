//! Request parameters of the OAuth endpoints: query strings and form bodies (each parameter at
//! most once, as RFC 6749 requires), bodies read under a size cap, and cookies.

use crate::error::{Error, Result};
use std::collections::HashMap;
use worker::url;
use worker::Request;

/// Form and JSON bodies of the OAuth endpoints are small; larger ones are refused.
pub const MAX_BODY_BYTES: usize = 16 * 1024;
/// No parameter value is longer than this (URLs, tokens, states).
const MAX_VALUE_LEN: usize = 4096;

/// Parameters by name.
pub struct Params(HashMap<String, String>);

impl Params {
    /// Parses `application/x-www-form-urlencoded` text; a repeated parameter is an error.
    pub fn parse(text: &[u8]) -> Result<Params> {
        let mut map = HashMap::new();
        for (key, value) in url::form_urlencoded::parse(text) {
            if value.len() > MAX_VALUE_LEN {
                return Err(Error::invalid(format!(
                    "parameter {key} is longer than {MAX_VALUE_LEN} characters"
                )));
            }
            if map.insert(key.to_string(), value.to_string()).is_some() {
                return Err(Error::invalid(format!(
                    "parameter {key} is repeated; send each parameter once"
                )));
            }
        }
        Ok(Params(map))
    }

    pub fn from_query(req: &Request) -> Result<Params> {
        let url = req.url()?;
        Params::parse(url.query().unwrap_or("").as_bytes())
    }

    /// A form body (Content-Type `application/x-www-form-urlencoded`, at most 16 KiB).
    pub async fn from_form(req: &mut Request) -> Result<Params> {
        let content_type = req
            .headers()
            .get("content-type")
            .ok()
            .flatten()
            .unwrap_or_default()
            .to_ascii_lowercase();
        if !content_type.starts_with("application/x-www-form-urlencoded") {
            return Err(Error::invalid(
                "send parameters as application/x-www-form-urlencoded",
            ));
        }
        Params::parse(&read_body(req).await?)
    }

    /// A non-empty value.
    pub fn get(&self, name: &str) -> Option<&str> {
        self.0
            .get(name)
            .map(String::as_str)
            .filter(|v| !v.is_empty())
    }
}

/// Reads a body of at most `MAX_BODY_BYTES`.
pub async fn read_body(req: &mut Request) -> Result<Vec<u8>> {
    let too_large = || {
        Error::invalid(format!(
            "request body exceeds {} KiB",
            MAX_BODY_BYTES / 1024
        ))
    };
    crate::http::read_capped(req, MAX_BODY_BYTES)
        .await?
        .ok_or_else(too_large)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn forms_parse_and_refuse_repeats() {
        let p = Params::parse(b"a=1&b=x%20y&c=").unwrap();
        assert_eq!(p.get("a"), Some("1"));
        assert_eq!(p.get("b"), Some("x y"));
        assert_eq!(p.get("c"), None);
        assert!(Params::parse(b"a=1&a=2").is_err());
        assert!(Params::parse(format!("a={}", "x".repeat(5000)).as_bytes()).is_err());
    }
}
