//! Repositories runs work on: the one accepted URL shape (`<forge>/<owner>/<repo>[.git]`), checked
//! where a task is accepted and again where the session clones it.

use crate::error::{excerpt, Error, Result};

/// The longest repository URL accepted.
pub const REPOSITORY_MAX_LEN: usize = 500;

/// Accepts `<forge>/<owner>/<repo>[.git]` (the forge's own scheme and host, `https://github.com`
/// unless configured) with plain path segments only; returns owner and repository name.
pub fn split(repo: &str, forge: &str) -> Result<(String, String)> {
    let (forge_scheme, forge_host) = forge.split_once("://").unwrap_or(("https", forge));
    let rule = format!(
        "`repository` must be a {forge_scheme} URL of a repository on {forge_host}, like {forge}/owner/repo"
    );
    if repo.len() > REPOSITORY_MAX_LEN {
        return Err(Error::invalid(format!(
            "{rule} (at most {REPOSITORY_MAX_LEN} characters)"
        )));
    }
    let Some((scheme, rest)) = repo.split_once("://") else {
        return Err(Error::invalid(format!("{rule}; got {:?}", excerpt(repo))));
    };
    if !scheme.eq_ignore_ascii_case(forge_scheme) {
        return Err(Error::invalid(format!("{rule}; got a {scheme} URL")));
    }
    let (host, path) = rest.split_once('/').unwrap_or((rest, ""));
    if host.contains('@') {
        return Err(Error::invalid(
            "`repository` must not contain credentials; handoff supplies access itself",
        ));
    }
    if !host.eq_ignore_ascii_case(forge_host.trim_end_matches('/')) {
        return Err(Error::invalid(format!(
            "{rule}; repositories on {host:?} are not accepted by this deployment"
        )));
    }
    if path.contains(['?', '#']) {
        return Err(Error::invalid(format!("{rule}: no query or fragment")));
    }
    let path = path.trim_end_matches('/');
    let path = path.strip_suffix(".git").unwrap_or(path);
    let segments: Vec<&str> = path.split('/').collect();
    let segment_ok = |s: &&str| {
        !s.is_empty()
            && !s.starts_with('.')
            && !s.starts_with('-')
            && s.bytes()
                .all(|b| b.is_ascii_alphanumeric() || b"-_.".contains(&b))
    };
    if segments.len() != 2 || !segments.iter().all(segment_ok) {
        return Err(Error::invalid(format!(
            "{rule}: exactly owner/repo, letters, digits and -_. only; got {:?}",
            excerpt(repo)
        )));
    }
    Ok((segments[0].to_string(), segments[1].to_string()))
}

/// `https://host/owner/repo` without a trailing slash or `.git`.
pub fn normalize(repo: &str) -> String {
    let trimmed = repo.trim_end_matches('/');
    trimmed.strip_suffix(".git").unwrap_or(trimmed).to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn repositories_must_be_https_on_the_forge() {
        let ok = [
            "https://github.com/a/b",
            "https://github.com/a-b/c.d.git",
            "https://GitHub.com/a/b/",
        ];
        for r in ok {
            assert!(split(r, "https://github.com").is_ok(), "{r}");
        }
        assert_eq!(
            split("http://127.0.0.1:9/o/r.git", "http://127.0.0.1:9").unwrap(),
            ("o".to_string(), "r".to_string())
        );
        assert!(split("http://127.0.0.1:8/o/r", "http://127.0.0.1:9").is_err());
        let bad = [
            "http://github.com/a/b",
            "git@github.com:a/b.git",
            "https://gitlab.com/a/b",
            "https://user:pw@github.com/a/b",
            "https://github.com/a",
            "https://github.com/a/b/c",
            "https://github.com/../b",
            "https://github.com/a/-b",
            "https://github.com/a/b?x=1",
            "file:///etc/passwd",
        ];
        for r in bad {
            assert!(split(r, "https://github.com").is_err(), "{r}");
        }
        assert_eq!(
            normalize("https://github.com/a/b.git/"),
            "https://github.com/a/b"
        );
    }
}
