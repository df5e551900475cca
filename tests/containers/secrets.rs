//! Secrets at a container's egress: the daemon in the sandbox's container opens HTTPS itself for
//! the secret's host (trusting the upstream's CA from `HANDOFF_CONTAINER_UPSTREAM_CA`) and swaps
//! the value in; the sandbox's processes, its files and the container's environment only ever
//! hold the stand-in, and the sandbox user cannot read the key of the CA it trusts.

use crate::{mcp, stack, stdout};
use handoff_tests::containers::container_of;
use handoff_tests::oauth::owner_browser;
use handoff_tests::secrets::{got_only_the_stand_in, set_secret, suffix, use_secret_commands};
use handoff_tests::tls::Recorder;
use serde_json::json;

#[tokio::test]
async fn a_secret_is_swapped_in_at_the_containers_egress_and_never_enters_it() {
    let base = stack().url();
    let canary = format!("canary-{}", suffix());
    let name = format!("CANARY_{}", suffix().to_uppercase());
    let mut jar = owner_browser(&base).await;
    set_secret(&base, &mut jar, &name, &canary).await;

    let mcp = mcp().await;
    let allowed = Recorder::start().await;
    let other = Recorder::start().await;
    let (a, b) = (allowed.port, other.port);
    let created = mcp
        .call_ok(
            "sandbox_create",
            json!({"allowOut": [format!("127.0.0.1:{a}"), format!("127.0.0.1:{b}")]}),
        )
        .await;
    let id = created["sandboxId"].as_str().unwrap().to_string();
    mcp.call_ok(
        "sandbox_attach_secret",
        json!({"sandboxId": id, "name": name, "hosts": [format!("127.0.0.1:{a}")]}),
    )
    .await;

    let command = format!(
        "{}key=$(dirname \"$(dirname \"$SSL_CERT_FILE\")\")/ca-key.pem; echo \"key=$key\"; \
         cat \"$key\" >/dev/null 2>&1 && echo key-readable; \
         env; echo done",
        use_secret_commands(&name, a, b, false)
    );
    let out = mcp
        .call_ok(
            "sandbox_exec",
            json!({"sandboxId": id, "command": command, "timeoutMs": 90000}),
        )
        .await;
    let text = stdout(&out);
    assert!(text.contains("seen=handoff-stand-in-"), "{out:#}");
    assert!(text.trim_end().ends_with("done"), "{out:#}");
    assert!(
        !out.to_string().contains(&canary),
        "the sandbox saw it: {out:#}"
    );
    assert!(
        !text.contains("key-readable"),
        "the sandbox user reads its CA's key: {out:#}"
    );
    let key = text
        .lines()
        .find_map(|l| l.strip_prefix("key="))
        .expect("the key's path")
        .to_string();

    let heads = allowed.heads();
    for path in ["/curl", "/python"] {
        let head = heads
            .iter()
            .find(|h| h.contains(path))
            .unwrap_or_else(|| panic!("no request to {path}: {heads:#?}\n{out:#}"));
        assert!(head.contains(&canary), "{path}: {head}");
    }
    got_only_the_stand_in(&other.heads(), &canary);

    // Nowhere in the container: not its environment, not a file, not a process's environment.
    let container = container_of(&id);
    assert!(!container.env().iter().any(|e| e.contains(&canary)));
    let (code, _) = container.exec("root", &format!("test -s {key}"));
    assert_eq!(
        code, 0,
        "the CA's key is where the sandbox was refused it: {key}"
    );
    let (_, found) = container.exec(
        "root",
        &format!(
            "grep -rlsF -- '{canary}' /home /tmp /var /etc /run /root /opt /srv 2>/dev/null; \
             cat /proc/[0-9]*/environ 2>/dev/null | tr '\\0' '\\n' | grep -cF -- '{canary}'; \
             echo end"
        ),
    );
    assert_eq!(
        found.trim(),
        "0\nend",
        "the value in the container: {found}"
    );

    let log = mcp
        .call_ok("sandbox_network_log", json!({"sandboxId": id}))
        .await;
    assert!(
        log.to_string()
            .contains(&format!("secret {name} swapped in")),
        "{log:#}"
    );
    assert!(!log.to_string().contains(&canary));
    mcp.call_ok("sandbox_delete", json!({"sandboxId": id}))
        .await;
}
