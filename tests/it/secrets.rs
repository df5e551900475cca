//! Secrets swapped in at egress, through the whole local stack: the owner sets a canary value on
//! the signed-in secrets page, a tool attaches it to a sandbox for one host, and programs in the
//! sandbox (curl, git, Python) use the stand-in they see. The HTTPS server for that host gets the
//! real value; another host gets the stand-in; the value appears nowhere the sandbox, its logs,
//! its network log or the tools' results could show it.

use handoff_tests::oauth::{browse, owner_browser, Jar};
use handoff_tests::secrets::{
    got_only_the_stand_in, set_secret, suffix, token_for, use_secret_commands,
};
use handoff_tests::tls::Recorder;
use handoff_tests::worker::with_sandboxes;
use handoff_tests::Mcp;
use serde_json::{json, Value};

fn base() -> String {
    with_sandboxes().1.url("")
}

async fn post(jar: &Jar, path: &str, fields: &[(&str, &str)], origin: &str) -> (u16, String) {
    handoff_tests::secrets::post(&base(), jar, path, fields, origin).await
}

/// A file below `dir` that contains `needle`.
fn found_below(dir: &std::path::Path, needle: &str) -> Option<std::path::PathBuf> {
    for entry in std::fs::read_dir(dir).ok()?.flatten() {
        let path = entry.path();
        let kind = entry.file_type().ok()?;
        if kind.is_dir() {
            if let Some(hit) = found_below(&path, needle) {
                return Some(hit);
            }
        } else if kind.is_file() && entry.metadata().ok()?.len() < 64 << 20 {
            // (Larger files are the volume's disk image, whose files are read where it is mounted.)
            let bytes = std::fs::read(&path).unwrap_or_default();
            if bytes.windows(needle.len()).any(|w| w == needle.as_bytes()) {
                return Some(path);
            }
        }
    }
    None
}

fn text(value: &Value) -> String {
    value.to_string()
}

#[tokio::test]
async fn a_secret_reaches_only_its_host_and_never_the_sandbox() {
    let canary = format!("canary-{}", suffix());
    let name = format!("CANARY_{}", suffix().to_uppercase());
    let mut jar = owner_browser(&base()).await;
    set_secret(&base(), &mut jar, &name, &canary).await;

    // Nobody else can set or see secrets: no cookie, another origin, a forged token.
    let stranger = browse(&format!("{}/secrets", base()), &mut Jar::default()).await;
    assert_eq!(stranger.status, 302, "a stranger is sent to sign in");
    let page = browse(&format!("{}/secrets", base()), &mut jar).await;
    assert!(page.body.contains(&name) && !page.body.contains(&canary));
    let token = token_for(&page.body, "set");
    let forged = [("name", name.as_str()), ("value", "stolen"), ("token", "x")];
    assert_eq!(post(&jar, "/secrets/set", &forged, &base()).await.0, 403);
    let cross = [
        ("name", name.as_str()),
        ("value", "stolen"),
        ("token", &token),
    ];
    let other_site = "https://evil.example";
    assert_eq!(post(&jar, "/secrets/set", &cross, other_site).await.0, 403);
    let no_cookie = post(&Jar::default(), "/secrets/set", &cross, &base()).await;
    assert_eq!(no_cookie.0, 403);

    let mcp = Mcp::connect(&base()).await;
    let listed = mcp.call_ok("secret_list", json!({})).await;
    assert!(
        listed["secrets"]
            .as_array()
            .unwrap()
            .iter()
            .any(|s| s["name"] == json!(name)),
        "{listed:#}"
    );
    assert!(!text(&listed).contains(&canary));

    let allowed = Recorder::start().await;
    let other = Recorder::start().await;
    let created = mcp
        .call_ok(
            "sandbox_create",
            json!({"allowOut": [format!("127.0.0.1:{}", allowed.port),
                                format!("127.0.0.1:{}", other.port)]}),
        )
        .await;
    let id = created["sandboxId"].as_str().unwrap().to_string();

    // Attaching checks its arguments.
    for (args, needle) in [
        (
            json!({"sandboxId": id, "name": name, "hosts": ["*"]}),
            "hosts",
        ),
        (json!({"sandboxId": id, "name": name, "hosts": []}), "hosts"),
        (
            json!({"sandboxId": id, "name": "NO_SUCH_SECRET", "hosts": ["api.example.com"]}),
            "no secret NO_SUCH_SECRET",
        ),
        (
            json!({"sandboxId": id, "name": "bad name", "hosts": ["api.example.com"]}),
            "secret name",
        ),
    ] {
        let error = mcp.call_err("sandbox_attach_secret", args.clone()).await;
        assert!(error.contains(needle), "{args}: {error}");
    }
    let attached = mcp
        .call_ok(
            "sandbox_attach_secret",
            json!({"sandboxId": id, "name": name,
                   "hosts": [format!("127.0.0.1:{}", allowed.port)]}),
        )
        .await;
    assert_eq!(attached["secrets"][0]["name"], json!(name), "{attached:#}");
    assert_eq!(attached["secrets"][0]["envVar"], json!(name));

    let (a, b) = (allowed.port, other.port);
    let command = format!("{}env; echo done", use_secret_commands(&name, a, b, true));
    let out = mcp
        .call_ok(
            "sandbox_exec",
            json!({"sandboxId": id, "command": command, "timeoutMs": 60000}),
        )
        .await;
    let stdout = out["stdout"].as_str().unwrap_or_default();
    assert!(
        stdout.contains("seen=handoff-stand-in-"),
        "the variable holds a stand-in: {out:#}"
    );
    assert!(stdout.trim_end().ends_with("done"), "{out:#}");
    assert!(
        !text(&out).contains(&canary),
        "the sandbox saw the value: {out:#}"
    );

    // The allowed host got the value from curl, git (inside Basic credentials) and Python.
    let heads = allowed.heads();
    let find = |path: &str| {
        heads
            .iter()
            .find(|h| h.contains(path))
            .cloned()
            .unwrap_or_else(|| panic!("no request to {path}: {heads:#?}\n{out:#}"))
    };
    assert!(
        find("/curl").contains(&format!("Bearer {canary}")),
        "{heads:#?}"
    );
    assert!(find("/python").contains(&canary), "{heads:#?}");
    let basic = heads
        .iter()
        .find(|h| h.contains("/repo.git") && h.contains(" Basic "))
        .unwrap_or_else(|| panic!("git sent no credentials after the challenge: {heads:#?}"));
    let encoded = basic
        .lines()
        .find_map(|l| l.strip_prefix("Authorization: Basic "))
        .or_else(|| {
            basic
                .lines()
                .find_map(|l| l.strip_prefix("authorization: Basic "))
        })
        .unwrap_or_else(|| panic!("git sent no credentials: {basic}"));
    use base64::Engine;
    let decoded = base64::engine::general_purpose::STANDARD
        .decode(encoded.trim())
        .unwrap();
    assert_eq!(
        String::from_utf8(decoded).unwrap(),
        format!("x-access-token:{canary}")
    );
    // The other host got the stand-in only.
    got_only_the_stand_in(&other.heads(), &canary);

    // Nothing handoff reports carries the value; the network log names the secret.
    let log = mcp
        .call_ok("sandbox_network_log", json!({"sandboxId": id}))
        .await;
    assert!(
        text(&log).contains(&format!("secret {name} swapped in")),
        "{log:#}"
    );
    let info = mcp.call_ok("sandbox_info", json!({"sandboxId": id})).await;
    for shown in [&log, &info, &attached] {
        assert!(!text(shown).contains(&canary));
    }
    // Nor any file of the sandbox: workspace, process logs, network log, the daemon's spec.
    let on_disk = with_sandboxes().0.sandboxes().join(&id);
    let spec = std::fs::read_to_string(on_disk.join("sandbox.json")).unwrap();
    assert!(spec.contains(&name), "{spec}");
    assert_eq!(found_below(&on_disk, &canary), None);

    // Detached: the next request carries the stand-in.
    let detached = mcp
        .call_ok(
            "sandbox_detach_secret",
            json!({"sandboxId": id, "name": name}),
        )
        .await;
    assert_eq!(detached["secrets"], json!([]));
    let again = format!(
        "export NO_PROXY= no_proxy=; curl -sS -k -m 10 https://127.0.0.1:{a}/after -H \"Authorization: Bearer stand-in\""
    );
    mcp.call_ok("sandbox_exec", json!({"sandboxId": id, "command": again}))
        .await;
    let after = allowed
        .heads()
        .into_iter()
        .find(|h| h.contains("/after"))
        .expect("the request after detaching");
    assert!(after.contains("Bearer stand-in") && !after.contains(&canary));
    let error = mcp
        .call_err(
            "sandbox_detach_secret",
            json!({"sandboxId": id, "name": name}),
        )
        .await;
    assert!(error.contains("not attached"), "{error}");

    // The owner deletes it; the page no longer lists it.
    let page = browse(&format!("{}/secrets", base()), &mut jar).await;
    let token = token_for(&page.body, "delete");
    let (status, _) = post(
        &jar,
        "/secrets/delete",
        &[("name", &name), ("token", &token)],
        &base(),
    )
    .await;
    assert_eq!(status, 303);
    let listed = mcp.call_ok("secret_list", json!({})).await;
    assert!(!text(&listed).contains(&name), "{listed:#}");
    mcp.call_ok("sandbox_delete", json!({"sandboxId": id}))
        .await;
}
