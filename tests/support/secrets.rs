//! The owner's secrets page, driven as a browser would: the forms' tokens, posts with the
//! session cookie and an `Origin`, and setting a secret through the page.

use crate::mcp::read;
use crate::oauth::{browse, hidden, http, random, Jar};

/// The form token of the `/secrets/<action>` form on the secrets page.
pub fn token_for(page: &str, action: &str) -> String {
    let form = page
        .split(&format!("action=\"/secrets/{action}\""))
        .nth(1)
        .expect("the form is on the page");
    hidden(form, "token").expect("the form has a token")
}

/// Posts a form to `base` + `path` with `jar`'s cookies from `origin`: (status, body).
pub async fn post(
    base: &str,
    jar: &Jar,
    path: &str,
    fields: &[(&str, &str)],
    origin: &str,
) -> (u16, String) {
    let body: String = fields
        .iter()
        .map(|(k, v)| format!("{k}={}", url_encode(v)))
        .collect::<Vec<_>>()
        .join("&");
    let r = read(
        http()
            .post(format!("{base}{path}"))
            .header("content-type", "application/x-www-form-urlencoded")
            .header("origin", origin)
            .header("cookie", jar.header())
            .body(body)
            .send()
            .await
            .expect("POST"),
    )
    .await;
    (r.status, r.body)
}

fn url_encode(v: &str) -> String {
    v.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' => (b as char).to_string(),
            _ => format!("%{b:02X}"),
        })
        .collect()
}

/// Sets `name` to `value` as the signed-in owner, through the page's form.
pub async fn set_secret(base: &str, jar: &mut Jar, name: &str, value: &str) {
    let page = browse(&format!("{base}/secrets"), jar).await;
    assert_eq!(page.status, 200, "{}", page.body);
    let token = token_for(&page.body, "set");
    let fields = [("name", name), ("value", value), ("token", &token)];
    let (status, body) = post(base, jar, "/secrets/set", &fields, base).await;
    assert_eq!(status, 303, "{body}");
}

/// Letters and digits only, ten of them.
pub fn suffix() -> String {
    random(12)
        .chars()
        .filter(|c| c.is_ascii_alphanumeric())
        .take(10)
        .collect()
}

/// Shell commands that use secret `name`'s stand-in the way programs do: curl (a bearer header
/// to `/curl`) and Python (a key header to `/python`) against the HTTPS server on port
/// `allowed`, git (Basic credentials of a URL, `/repo.git`) there too when `git`, and curl to
/// `other` (`/other`, certificate unchecked). Prints `seen=<stand-in>` first.
pub fn use_secret_commands(name: &str, allowed: u16, other: u16, git: bool) -> String {
    let a = allowed;
    let git = if git {
        format!(
            "git -c http.extraHeader= ls-remote https://x-access-token:${name}@127.0.0.1:{a}/repo.git \
               >/dev/null 2>&1; "
        )
    } else {
        String::new()
    };
    format!(
        "export NO_PROXY= no_proxy=; echo \"seen=${name}\"; \
         curl -sS -m 20 https://127.0.0.1:{a}/curl -H \"Authorization: Bearer ${name}\"; {git}\
         python3 -c 'import os, urllib.request as u; \
           r = u.Request(\"https://127.0.0.1:{a}/python\", headers={{\"X-Api-Key\": os.environ[\"{name}\"]}}); \
           print(u.urlopen(r, timeout=20).read().decode().strip())'; \
         curl -sS -k -m 20 https://127.0.0.1:{other}/other -H \"Authorization: Bearer ${name}\"; "
    )
}

/// A host the secret is not for got its stand-in (from the commands above) and never `value`.
pub fn got_only_the_stand_in(heads: &[String], value: &str) {
    assert!(
        heads.iter().any(|h| h.contains("Bearer handoff-stand-in-")),
        "{heads:#?}"
    );
    assert!(!heads.iter().any(|h| h.contains(value)), "{heads:#?}");
}
