//! The sandbox tools on a container backend: each sandbox in a container of its own, its
//! processes unprivileged, its daemon holding a key good for that sandbox alone, and its
//! network reachable only through the daemon's egress proxy.

use crate::{create, exec, mcp, stdout};
use handoff_tests::containers::{container_of, daemon_through_ingress};
use handoff_tests::http_server;
use handoff_tests::links::daemon_token_signed;
use handoff_tests::DAEMON_SECRET;
use serde_json::json;

#[tokio::test]
async fn a_sandbox_runs_in_a_container_of_its_own_as_an_unprivileged_user() {
    let mcp = mcp().await;
    let created = mcp
        .call_ok("sandbox_create", json!({"env": {"GREETING": "hi"}}))
        .await;
    let id = created["sandboxId"].as_str().unwrap().to_string();
    let isolation = &created["isolation"];
    assert_eq!(isolation["level"], "container", "{created:#}");
    assert_eq!(isolation["network"], "proxy-only", "{created:#}");

    let out = exec(
        &mcp,
        &id,
        "id -u; grep -E '^(CapEff|CapPrm|NoNewPrivs|Seccomp):' /proc/self/status; \
         echo $GREETING; pwd; (cat /proc/[0-9]*/environ 2>/dev/null | tr '\\0' '\\n' | grep -q SANDBOX_DAEMON_SECRET) \
         || echo no-daemon-env",
    )
    .await;
    let text = stdout(&out);
    let uid: u32 = text.lines().next().unwrap().trim().parse().unwrap();
    assert_ne!(uid, 0, "sandbox processes are not root: {out}");
    for line in [
        "CapPrm:\t0000000000000000",
        "CapEff:\t0000000000000000",
        "NoNewPrivs:\t1",
        "Seccomp:\t2",
        "hi",
        "/home/sandbox",
        "no-daemon-env",
    ] {
        assert!(text.lines().any(|l| l == line), "{line:?} in {out}");
    }

    mcp.call_ok(
        "sandbox_files_write",
        json!({"sandboxId": id, "path": "notes/a.txt", "content": "written by a tool"}),
    )
    .await;
    let read = mcp
        .call_ok(
            "sandbox_files_read",
            json!({"sandboxId": id, "path": "notes/a.txt"}),
        )
        .await;
    assert_eq!(read["content"], "written by a tool", "{read:#}");
    assert_eq!(
        stdout(&exec(&mcp, &id, "cat notes/a.txt").await),
        "written by a tool"
    );

    // The container the engine runs for it: started for this sandbox, with a key of its own.
    let container = container_of(&id);
    assert_eq!(container.var("HANDOFF_SANDBOX_ID").as_deref(), Some(&*id));
    let key = container
        .var("SANDBOX_DAEMON_SECRET")
        .expect("a daemon key");
    assert_ne!(key, DAEMON_SECRET);
    assert!(
        !container.env().iter().any(|e| e.contains(DAEMON_SECRET)),
        "the master secret never reaches a container"
    );
    let other = create(&mcp, json!({})).await;
    let neighbour = container_of(&other);
    assert_ne!(neighbour.id, container.id, "one container per sandbox");
    assert_ne!(neighbour.var("SANDBOX_DAEMON_SECRET"), Some(key));
}

#[tokio::test]
async fn a_containers_key_is_good_for_its_own_sandbox_only() {
    let mcp = mcp().await;
    let a = create(&mcp, json!({})).await;
    let b = create(&mcp, json!({})).await;
    let (ca, cb) = (container_of(&a), container_of(&b));
    // What whoever takes over container A holds.
    let key_a = ca.var("SANDBOX_DAEMON_SECRET").unwrap();
    let key_b = cb.var("SANDBOX_DAEMON_SECRET").unwrap();
    let address_b = cb.network_address();
    let path_b = format!("/v1/sandboxes/{b}");
    let path_a = format!("/v1/sandboxes/{a}");

    let forged = daemon_token_signed(key_a.as_bytes(), &b, 60);
    let (status, body) = daemon_through_ingress(&address_b, &path_b, &forged).await;
    assert_eq!(status, 401, "A's key signs nothing for B: {body}");
    let own = daemon_token_signed(key_a.as_bytes(), &a, 60);
    let (status, body) = daemon_through_ingress(&address_b, &path_a, &own).await;
    assert_eq!(status, 401, "B's daemon serves B only: {body}");
    let master = daemon_token_signed(DAEMON_SECRET.as_bytes(), &b, 60);
    let (status, body) = daemon_through_ingress(&address_b, &path_b, &master).await;
    assert_eq!(status, 401, "not even the master secret: {body}");
    let good = daemon_token_signed(key_b.as_bytes(), &b, 60);
    let (status, body) = daemon_through_ingress(&address_b, &path_b, &good).await;
    assert_eq!(status, 200, "B's own key works: {body}");
    assert!(body.contains(&b), "{body}");
}

#[tokio::test]
async fn sandbox_users_reach_the_network_only_through_the_egress_proxy() {
    let allowed = http_server("allowed-body").await;
    let blocked = http_server("must-not-arrive").await;
    let mcp = mcp().await;
    let id = create(&mcp, json!({"allowOut": [format!("127.0.0.1:{allowed}")]})).await;
    let container = container_of(&id);
    let own_address = container.network_address();
    let out = exec(
        &mcp,
        &id,
        &format!(
            "export NO_PROXY= no_proxy=; curl -sS -m 10 http://127.0.0.1:{allowed}/; echo; \
             curl -sS -m 10 http://127.0.0.1:{blocked}/; echo"
        ),
    )
    .await;
    let text = stdout(&out);
    assert!(text.contains("allowed-body"), "{out}");
    assert!(!text.contains("must-not-arrive"), "{out}");
    assert!(
        text.contains("blocked by the sandbox egress policy"),
        "{out}"
    );

    // Directly, a sandbox user reaches nothing beyond loopback, nor the sidecar's ports; root
    // in the container (the daemon) does.
    let probe = |host: &str, port: u16| {
        format!(
            "python3 -c 'import socket; socket.create_connection((\"{host}\", {port}), 3); \
             print(\"connected\")' 2>&1 | tail -1"
        )
    };
    for (host, port) in [
        (own_address.as_str(), 39001),
        ("127.0.0.1", 39001),
        ("127.0.0.1", 15000),
    ] {
        let out = exec(&mcp, &id, &probe(host, port)).await;
        let text = stdout(&out);
        assert!(
            !text.contains("connected") && text.contains("refused"),
            "{host}:{port} from the sandbox: {out}"
        );
    }
    let (code, text) = container.exec("0", &probe(&own_address, 39001));
    assert!(
        code == 0 && text.contains("connected"),
        "root reaches it: {text}"
    );

    let log = mcp
        .call_ok("sandbox_network_log", json!({"sandboxId": id}))
        .await;
    let entries = log["entries"].as_array().unwrap();
    assert_eq!(entries.len(), 2, "{log:#}");
    assert_eq!(entries[0]["verdict"], "blocked");
    assert_eq!(entries[1]["verdict"], "allowed");
}

#[tokio::test]
async fn a_preview_serves_a_server_inside_the_container() {
    let mcp = mcp().await;
    let id = create(&mcp, json!({})).await;
    mcp.call_ok(
        "sandbox_files_write",
        json!({"sandboxId": id, "path": "site/index.html", "content": "<h1>from a container</h1>"}),
    )
    .await;
    exec(
        &mcp,
        &id,
        "cd site && nohup python3 -m http.server 8000 --bind 127.0.0.1 > /tmp/server.log 2>&1 &",
    )
    .await;
    let preview = mcp
        .call_ok(
            "sandbox_preview_url",
            json!({"sandboxId": id, "port": 8000, "expiresInSeconds": 120}),
        )
        .await;
    let url = format!("{}index.html", preview["url"].as_str().unwrap());
    let client = handoff_tests::preview_client(&url);
    let mut last = String::new();
    for _ in 0..50 {
        let response = client.get(&url).send().await.unwrap();
        let status = response.status().as_u16();
        last = response.text().await.unwrap_or_default();
        if status == 200 {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(200)).await;
    }
    assert_eq!(last, "<h1>from a container</h1>");
}
