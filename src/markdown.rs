//! The agent's answer as HTML, safely: CommonMark with tables, strikethrough and task lists,
//! where raw HTML shows as text, a link keeps its target only for http(s), mailto and relative
//! URLs, images become links (a page loads nothing from elsewhere) and headings sit below the
//! page's own.

use pulldown_cmark::{html, CowStr, Event, HeadingLevel, Options, Parser, Tag, TagEnd};

/// `markdown` rendered as HTML that is safe to splice into a page.
pub fn to_html(markdown: &str) -> String {
    let options =
        Options::ENABLE_TABLES | Options::ENABLE_STRIKETHROUGH | Options::ENABLE_TASKLISTS;
    let events = Parser::new_ext(markdown, options).map(|event| match event {
        Event::Html(raw) | Event::InlineHtml(raw) => Event::Text(raw),
        Event::Start(Tag::Link {
            link_type,
            dest_url,
            title,
            id,
        })
        | Event::Start(Tag::Image {
            link_type,
            dest_url,
            title,
            id,
        }) => Event::Start(Tag::Link {
            link_type,
            dest_url: safe_url(dest_url),
            title,
            id,
        }),
        Event::End(TagEnd::Image) => Event::End(TagEnd::Link),
        Event::Start(Tag::Heading {
            level,
            id: _,
            classes,
            attrs,
        }) => Event::Start(Tag::Heading {
            level: lower(level),
            id: None,
            classes,
            attrs,
        }),
        Event::End(TagEnd::Heading(level)) => Event::End(TagEnd::Heading(lower(level))),
        other => other,
    });
    let mut out = String::with_capacity(markdown.len() * 3 / 2);
    html::push_html(&mut out, events);
    out
}

/// Headings two levels down (the page has its title and section headings above them).
fn lower(level: HeadingLevel) -> HeadingLevel {
    match level {
        HeadingLevel::H1 => HeadingLevel::H3,
        HeadingLevel::H2 => HeadingLevel::H4,
        HeadingLevel::H3 => HeadingLevel::H5,
        _ => HeadingLevel::H6,
    }
}

/// A link target kept only when it cannot run script: http(s), mailto, or a relative URL.
fn safe_url(url: CowStr<'_>) -> CowStr<'_> {
    let trimmed: String = url
        .chars()
        .filter(|c| !c.is_whitespace() && !c.is_control())
        .collect();
    let scheme_end = trimmed.find(':');
    let path_start = trimmed.find(['/', '?', '#']);
    let has_scheme = match (scheme_end, path_start) {
        (Some(colon), Some(slash)) => colon < slash,
        (Some(_), None) => true,
        _ => false,
    };
    if !has_scheme {
        return url;
    }
    let scheme = trimmed[..scheme_end.unwrap_or(0)].to_ascii_lowercase();
    match scheme.as_str() {
        "http" | "https" | "mailto" => url,
        _ => CowStr::Borrowed("#"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn markdown_renders_with_tables_lists_and_code() {
        let html = to_html("# Done\n\n- fixed **add.sh**\n- `sh test.sh` passes\n\n| a | b |\n|---|---|\n| 1 | 2 |\n\n```sh\necho <ok>\n```\n");
        assert!(html.contains("<h3>Done</h3>"), "{html}");
        assert!(html.contains("<strong>add.sh</strong>"), "{html}");
        assert!(html.contains("<table>"), "{html}");
        assert!(html.contains("echo &lt;ok&gt;"), "{html}");
    }

    #[test]
    fn hostile_markdown_stays_text() {
        let html = to_html(
            "<script>alert(1)</script>\n\nhi <img src=x onerror=alert(1)> \
             [a](javascript:alert(1)) [b]( JaVaScRiPt:alert(1)) [c](java\tscript:x) \
             [d](data:text/html,x) [e](https://example.com/\"onmouseover=\"x) [f](/runs/x) \
             ![pic](https://tracker.example/p.png) [g](vbscript:x)",
        );
        assert!(!html.contains("<script"), "{html}");
        assert!(!html.contains("<img"), "{html}");
        assert!(!html.to_ascii_lowercase().contains("javascript:"), "{html}");
        assert!(!html.contains("data:text"), "{html}");
        assert!(!html.contains("vbscript:"), "{html}");
        assert!(!html.contains("\"onmouseover"), "{html}");
        assert!(html.contains("&lt;script&gt;"), "{html}");
        assert!(html.contains(r#"href="/runs/x""#), "{html}");
        assert!(
            html.contains(r#"href="https://tracker.example/p.png""#),
            "{html}"
        );
    }
}
