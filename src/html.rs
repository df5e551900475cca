//! HTML pages shared by the run page and the OAuth consent pages: one document shell that works
//! on a phone, and the headers every page gets (no caching, no framing, no scripts). Pages are
//! written with `maud`, which escapes every spliced value, so no page builds markup from strings.

use crate::error::Result;
use maud::{html, Markup, PreEscaped, DOCTYPE};
use worker::Response;

const STYLE: &str = "\
body{font-family:system-ui,sans-serif;margin:1rem auto;padding:0 1rem;max-width:48rem;line-height:1.4}\
th{text-align:left;vertical-align:top;padding-right:1rem;white-space:nowrap}\
td{white-space:pre-wrap;word-break:break-word}\
pre{white-space:pre-wrap;background:#f4f4f4;padding:.5rem}\
.box{border:1px solid #ccc;border-radius:.5rem;padding:1rem;margin:1rem 0}\
.error{color:#a00;font-weight:600}\
.muted{color:#555;font-size:.9rem}\
input[type=password]{width:100%;box-sizing:border-box;font-size:1rem;padding:.6rem;margin:.3rem 0 1rem}\
button,.button{font-size:1rem;padding:.7rem 1.2rem;margin:.2rem .4rem .2rem 0;border-radius:.4rem;\
border:1px solid #888;background:#fff;color:#000;text-decoration:none;display:inline-block}\
button.primary{background:#1a56db;border-color:#1a56db;color:#fff}";

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
                h1 { (title) }
                (body)
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
/// no referrer, no scripts and no outside resources.
pub fn respond(status: u16, document: &str) -> Result<Response> {
    let mut response = Response::from_html(document)?.with_status(status);
    let headers = response.headers_mut();
    headers.set("cache-control", "no-store")?;
    headers.set("x-frame-options", "DENY")?;
    headers.set("x-content-type-options", "nosniff")?;
    headers.set("referrer-policy", "no-referrer")?;
    headers.set(
        "content-security-policy",
        "default-src 'none'; style-src 'unsafe-inline'; frame-ancestors 'none'; base-uri 'none'",
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
