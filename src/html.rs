//! HTML pages shared by the run page and the OAuth consent pages: one document shell that works
//! on a phone, escaping, and the headers every page gets (no caching, no framing, no scripts).

use crate::error::Result;
use worker::Response;

/// A whole HTML document. `head` is extra markup for `<head>` (already safe).
pub fn document(title: &str, head: &str, body: &str) -> String {
    format!(
        "<!doctype html><html lang=\"en\"><head><meta charset=\"utf-8\">\
         <meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">{head}\
         <title>{0} — handoff</title><style>\
         body{{font-family:system-ui,sans-serif;margin:1rem auto;padding:0 1rem;max-width:48rem;line-height:1.4}}\
         th{{text-align:left;vertical-align:top;padding-right:1rem;white-space:nowrap}}\
         td{{white-space:pre-wrap;word-break:break-word}}\
         pre{{white-space:pre-wrap;background:#f4f4f4;padding:.5rem}}\
         .box{{border:1px solid #ccc;border-radius:.5rem;padding:1rem;margin:1rem 0}}\
         .error{{color:#a00;font-weight:600}}\
         .muted{{color:#555;font-size:.9rem}}\
         input[type=password]{{width:100%;box-sizing:border-box;font-size:1rem;padding:.6rem;margin:.3rem 0 1rem}}\
         button,.button{{font-size:1rem;padding:.7rem 1.2rem;margin:.2rem .4rem .2rem 0;border-radius:.4rem;\
         border:1px solid #888;background:#fff;color:#000;text-decoration:none;display:inline-block}}\
         button.primary{{background:#1a56db;border-color:#1a56db;color:#fff}}\
         </style></head><body><h1>{0}</h1>{body}</body></html>",
        escape(title)
    )
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

/// Escapes text for HTML element content and quoted attribute values.
pub fn escape(text: &str) -> String {
    text.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
        .replace('\'', "&#39;")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn escaping_covers_markup_and_quotes() {
        assert_eq!(
            escape("<a href=\"x\">'&'</a>"),
            "&lt;a href=&quot;x&quot;&gt;&#39;&amp;&#39;&lt;/a&gt;"
        );
    }
}
