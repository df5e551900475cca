//! Cookies, the one place they are read and written. Every cookie handoff sets is `HttpOnly`,
//! host-only (no `Domain`, so preview origins never see it), scoped to a path, and `Secure` when
//! the page is served over https.

use worker::Request;

/// Which cross-site requests carry the cookie.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SameSite {
    Lax,
    Strict,
}

/// The value of cookie `name` in the request, if it has a non-empty one.
pub fn get(req: &Request, name: &str) -> Option<String> {
    let header = req.headers().get("cookie").ok().flatten()?;
    find(&header, name).map(str::to_string)
}

/// The value of `name` in a `Cookie` header.
pub(crate) fn find<'a>(header: &'a str, name: &str) -> Option<&'a str> {
    header.split(';').find_map(|pair| {
        let (k, v) = pair.trim().split_once('=')?;
        (k.trim() == name && !v.is_empty()).then_some(v.trim())
    })
}

/// A `Set-Cookie` value. `max_age` 0 with an empty value removes the cookie.
pub fn set(
    name: &str,
    value: &str,
    path: &str,
    same_site: SameSite,
    max_age: i64,
    secure: bool,
) -> String {
    let same_site = match same_site {
        SameSite::Lax => "Lax",
        SameSite::Strict => "Strict",
    };
    let secure = if secure { "; Secure" } else { "" };
    format!(
        "{name}={value}; Path={path}; Max-Age={max_age}; HttpOnly; SameSite={same_site}{secure}"
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_cookie_is_found_by_its_exact_name() {
        let header = "a=1; handoff_owner=tok.en; handoff_owner_x=no; empty=";
        assert_eq!(find(header, "handoff_owner"), Some("tok.en"));
        assert_eq!(find(header, "a"), Some("1"));
        assert_eq!(find(header, "empty"), None);
        assert_eq!(find(header, "owner"), None);
        assert_eq!(find("", "a"), None);
    }

    #[test]
    fn set_cookies_are_http_only_host_only_and_secure_over_https() {
        let c = set("n", "v", "/oauth", SameSite::Strict, 3600, true);
        assert_eq!(
            c,
            "n=v; Path=/oauth; Max-Age=3600; HttpOnly; SameSite=Strict; Secure"
        );
        assert!(!c.contains("Domain"));
        assert!(!set("n", "v", "/", SameSite::Lax, 1, false).contains("Secure"));
    }
}
