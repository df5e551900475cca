//! A run's change as a person reads it: a summary line, then file by file — path, status, lines
//! added and removed — with the lines themselves, collapsed when a file is large. Signs (+, −)
//! stay in the text, so nothing depends on colour.

use crate::diff::{self, FileDiff, LineKind};
use maud::{html, Markup};

/// Files with more lines than this start collapsed.
const OPEN_MAX_LINES: usize = 200;
/// Lines shown per file at most (the raw diff has the rest).
const SHOWN_MAX_LINES: usize = 2000;
/// Files shown open at most; the rest start collapsed.
const OPEN_MAX_FILES: usize = 10;

pub fn render(text: &str, raw_link: &str) -> Markup {
    let files = diff::parse(text);
    let (added, removed) = files
        .iter()
        .fold((0, 0), |(a, r), f| (a + f.additions, r + f.deletions));
    html! {
        p {
            (files.len()) " file" @if files.len() != 1 { "s" } " changed, "
            span.add { "+" (added) } " " span.del { "−" (removed) }
            " · " a href=(raw_link) { "raw diff" }
        }
        @for (i, file) in files.iter().enumerate() {
            (file_part(file, i < OPEN_MAX_FILES && file.lines.len() <= OPEN_MAX_LINES))
        }
    }
}

fn file_part(file: &FileDiff, open: bool) -> Markup {
    let shown = file.lines.len().min(SHOWN_MAX_LINES);
    html! {
        details.file open[open] {
            summary {
                code.path { (file.path) }
                " " span.muted { (file.status) }
                @if let Some(from) = &file.renamed_from { " " span.muted { "from " code { (from) } } }
                " " span.add { "+" (file.additions) } " " span.del { "−" (file.deletions) }
            }
            @if file.lines.is_empty() {
                p.muted { "No text lines to show (" (file.status) ")." }
            } @else {
                pre.diff {
                    @for line in &file.lines[..shown] {
                        @match line.kind {
                            LineKind::Hunk => span.h { (line.text) "\n" },
                            LineKind::Added => span.a { "+" (line.text) "\n" },
                            LineKind::Removed => span.d { "-" (line.text) "\n" },
                            LineKind::Context => span { " " (line.text) "\n" },
                            LineKind::Note => span.muted { (line.text) "\n" },
                        }
                    }
                }
                @if shown < file.lines.len() {
                    p.muted { (file.lines.len() - shown) " more lines in the raw diff." }
                }
            }
        }
    }
}
