//! "Did you mean …?": the known name nearest to one that is not known, for the hints in
//! refusals of unknown tools and unknown fields.

/// The known name within two edits of `name` (the nearest; ties go to the first in order).
pub fn closest<'k>(name: &str, known: &[&'k str]) -> Option<&'k str> {
    known
        .iter()
        .map(|k| (distance(name, k), *k))
        .filter(|(d, _)| *d <= 2)
        .min()
        .map(|(_, k)| k)
}

/// Known `_`-separated names to suggest for `name`: the one within two edits of it, or else
/// those made of the most of its words (at least two, in any order, case and a plural `s`
/// ignored: `sandbox_read_file` → `sandbox_files_read`), at most three.
pub fn similar<'k>(name: &str, known: &[&'k str]) -> Vec<&'k str> {
    if let Some(near) = closest(name, known) {
        return vec![near];
    }
    let wanted = words(name);
    let shared = |k: &str| words(k).iter().filter(|w| wanted.contains(w)).count();
    let best = known.iter().map(|k| shared(k)).max().unwrap_or(0);
    if best < 2 {
        return Vec::new();
    }
    known
        .iter()
        .copied()
        .filter(|k| shared(k) == best)
        .take(3)
        .collect()
}

fn words(name: &str) -> Vec<String> {
    name.split(['_', '-', '.', '/', ' '])
        .filter(|w| !w.is_empty())
        .map(|w| {
            let w = w.to_ascii_lowercase();
            match w.strip_suffix('s') {
                Some(stem) if stem.len() > 2 => stem.to_string(),
                _ => w,
            }
        })
        .collect()
}

/// Levenshtein distance over characters.
fn distance(a: &str, b: &str) -> usize {
    let b: Vec<char> = b.chars().collect();
    let mut row: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.chars().enumerate() {
        let mut prev = row[0];
        row[0] = i + 1;
        for (j, cb) in b.iter().enumerate() {
            let cur = row[j + 1];
            row[j + 1] = (prev + usize::from(ca != *cb)).min(row[j] + 1).min(cur + 1);
            prev = cur;
        }
    }
    row[b.len()]
}

#[cfg(test)]
mod tests {
    use super::*;

    const TOOLS: &[&str] = &[
        "opencode_run_task",
        "opencode_get_result",
        "sandbox_exec",
        "sandbox_files_read",
        "sandbox_files_write",
        "sandbox_files_list",
        "workers_run",
        "workers_runs",
    ];

    #[test]
    fn a_misspelt_name_gets_the_nearest() {
        assert_eq!(closest("timout", &["timeout", "tools"]), Some("timeout"));
        assert_eq!(closest("zzzzzz", &["timeout"]), None);
        assert_eq!(similar("sandbox_exce", TOOLS), ["sandbox_exec"]);
        assert_eq!(similar("workers_rn", TOOLS), ["workers_run"]);
    }

    #[test]
    fn a_name_of_the_same_words_in_another_order_gets_those_names() {
        assert_eq!(similar("sandbox_read_file", TOOLS), ["sandbox_files_read"]);
        assert_eq!(
            similar("Sandbox_File_Write", TOOLS),
            ["sandbox_files_write"]
        );
        assert_eq!(similar("run_task", TOOLS), ["opencode_run_task"]);
        assert_eq!(
            similar("sandbox_files_delete", TOOLS),
            [
                "sandbox_files_read",
                "sandbox_files_write",
                "sandbox_files_list"
            ]
        );
    }

    #[test]
    fn a_name_with_one_word_in_common_gets_none() {
        assert!(similar("sandbox_kill", TOOLS).is_empty());
        assert!(similar("opencode_status", TOOLS).is_empty());
        assert!(similar("", TOOLS).is_empty());
    }
}
