//! A unified diff (`git diff`) read into files, each with its status, how many lines it adds and
//! removes, and its lines, so a page can show a change file by file.

/// What a diff line is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LineKind {
    /// `@@ -a,b +c,d @@`.
    Hunk,
    Added,
    Removed,
    Context,
    /// `\ No newline at end of file` and the like.
    Note,
}

#[derive(Debug, Clone, PartialEq)]
pub struct Line {
    pub kind: LineKind,
    pub text: String,
}

/// One file's part of the diff.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct FileDiff {
    pub path: String,
    /// The old path of a renamed file.
    pub renamed_from: Option<String>,
    /// added, deleted, renamed, binary or modified.
    pub status: &'static str,
    pub additions: usize,
    pub deletions: usize,
    pub lines: Vec<Line>,
}

/// The files of a unified diff, in order. Lines before the first file header are ignored.
pub fn parse(diff: &str) -> Vec<FileDiff> {
    let mut files: Vec<FileDiff> = Vec::new();
    let mut in_hunk = false;
    for raw in diff.lines() {
        if let Some(rest) = raw.strip_prefix("diff --git ") {
            files.push(FileDiff {
                path: header_path(rest),
                status: "modified",
                ..FileDiff::default()
            });
            in_hunk = false;
            continue;
        }
        let Some(file) = files.last_mut() else {
            continue;
        };
        if raw.starts_with("@@") {
            in_hunk = true;
            file.lines.push(Line {
                kind: LineKind::Hunk,
                text: raw.to_string(),
            });
            continue;
        }
        if !in_hunk {
            if raw.starts_with("new file mode") {
                file.status = "added";
            } else if raw.starts_with("deleted file mode") {
                file.status = "deleted";
            } else if let Some(from) = raw.strip_prefix("rename from ") {
                file.status = "renamed";
                file.renamed_from = Some(from.to_string());
            } else if let Some(to) = raw.strip_prefix("rename to ") {
                file.path = to.to_string();
            } else if raw.starts_with("Binary files ") || raw.starts_with("GIT binary patch") {
                file.status = "binary";
            } else if let Some(path) = raw.strip_prefix("+++ b/") {
                file.path = path.to_string();
            }
            continue;
        }
        let (kind, text) = match raw.chars().next() {
            Some('+') => (LineKind::Added, &raw[1..]),
            Some('-') => (LineKind::Removed, &raw[1..]),
            Some(' ') => (LineKind::Context, &raw[1..]),
            Some('\\') => (LineKind::Note, raw),
            None => (LineKind::Context, ""),
            _ => (LineKind::Note, raw),
        };
        match kind {
            LineKind::Added => file.additions += 1,
            LineKind::Removed => file.deletions += 1,
            _ => {}
        }
        file.lines.push(Line {
            kind,
            text: text.to_string(),
        });
    }
    files
}

/// The new path from `a/<old> b/<new>` (paths with spaces included: the part after ` b/`).
fn header_path(rest: &str) -> String {
    match rest.rfind(" b/") {
        Some(at) => rest[at + 3..].to_string(),
        None => rest.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const DIFF: &str = "diff --git a/add.sh b/add.sh
index 1111111..2222222 100755
--- a/add.sh
+++ b/add.sh
@@ -1,2 +1,2 @@
 #!/bin/sh
-echo $(( $1 - $2 ))
+echo $(( $1 + $2 ))
diff --git a/NOTES.md b/NOTES.md
new file mode 100644
--- /dev/null
+++ b/NOTES.md
@@ -0,0 +1 @@
+notes
\\ No newline at end of file
diff --git a/old name.txt b/new name.txt
similarity index 100%
rename from old name.txt
rename to new name.txt
diff --git a/logo.png b/logo.png
Binary files a/logo.png and b/logo.png differ
";

    #[test]
    fn files_statuses_and_counts_are_read() {
        let files = parse(DIFF);
        assert_eq!(files.len(), 4);
        assert_eq!(
            (
                files[0].path.as_str(),
                files[0].status,
                files[0].additions,
                files[0].deletions
            ),
            ("add.sh", "modified", 1, 1)
        );
        assert_eq!(files[0].lines[0].kind, LineKind::Hunk);
        assert_eq!(files[0].lines[2].text, "echo $(( $1 - $2 ))");
        assert_eq!((files[1].status, files[1].additions), ("added", 1));
        assert_eq!(files[1].lines.last().map(|l| l.kind), Some(LineKind::Note));
        assert_eq!(files[2].path, "new name.txt");
        assert_eq!(files[2].renamed_from.as_deref(), Some("old name.txt"));
        assert_eq!(files[3].status, "binary");
        assert!(parse("not a diff\n").is_empty());
    }
}
