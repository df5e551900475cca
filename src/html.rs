//! HTML pages shared by the run pages and the OAuth consent pages: one document shell that works
//! on a phone, and the headers every page gets (no caching, no framing, scripts only by nonce). Pages are
//! written with `maud`, which escapes every spliced value, so no page builds markup from strings.

use crate::error::Result;
use maud::{html, Markup, PreEscaped, DOCTYPE};
use worker::Response;

/// Phone first, light and dark (the system's choice), contrast above 4.5:1 for text.
const STYLE: &str = include_str!("html.css");

/// A whole HTML document: `extra_head` goes into `<head>`, `body` under the title.
pub fn document(title: &str, extra_head: Markup, body: Markup) -> String {
    html! {
        (DOCTYPE)
        html lang="en" {
            head {
                meta charset="utf-8";
                meta name="viewport" content="width=device-width, initial-scale=1";
                (extra_head)
                title { (title) " — handoff" }
                style { (PreEscaped(STYLE)) }
            }
            body {
                header { h1 { (title) } }
                main { (body) }
            }
        }
    }
    .into_string()
}

/// A page of one paragraph.
pub fn message(title: &str, text: &str) -> String {
    document(title, html! {}, html! { p { (text) } })
}

/// An HTML response with the headers every page gets: never cached, never framed (clickjacking),
/// no referrer to other origins, no scripts and no outside resources.
pub fn respond(status: u16, document: &str) -> Result<Response> {
    with_policy(status, document, "'none'")
}

/// As `respond`, but running the inline scripts that carry `nonce` (and nothing else), which
/// may read this origin's event streams.
pub fn respond_with_script(status: u16, document: &str, nonce: &str) -> Result<Response> {
    with_policy(status, document, &format!("'nonce-{nonce}'"))
}

fn with_policy(status: u16, document: &str, scripts: &str) -> Result<Response> {
    let mut response = Response::from_html(document)?.with_status(status);
    let headers = response.headers_mut();
    headers.set("cache-control", "no-store")?;
    headers.set("x-frame-options", "DENY")?;
    headers.set("x-content-type-options", "nosniff")?;
    // Not `no-referrer`: with it, browsers send `Origin: null` on the pages' own form posts,
    // which the same-origin checks must then refuse. Other origins still get no referrer.
    headers.set("referrer-policy", "same-origin")?;
    headers.set(
        "content-security-policy",
        &format!(
            "default-src 'none'; style-src 'unsafe-inline'; script-src {scripts}; \
             connect-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'"
        ),
    )?;
    Ok(response)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn spliced_text_is_escaped_everywhere() {
        let page = document(
            "<b>\"T\"</b>",
            html! {},
            html! { a href=("\"><script>") { ("<i>&</i>") } },
        );
        assert!(
            page.contains("<title>&lt;b&gt;&quot;T&quot;&lt;/b&gt; — handoff</title>"),
            "{page}"
        );
        assert!(
            page.contains(r#"<a href="&quot;&gt;&lt;script&gt;">&lt;i&gt;&amp;&lt;/i&gt;</a>"#),
            "{page}"
        );
        assert!(!page.contains("<script>"), "{page}");
        assert!(page.starts_with("<!DOCTYPE html>"), "{page}");
    }
}
