//! Fuzzing the egress proxy at the byte level: mutated HTTP/1 requests (request lines, absolute
//! and authority targets naming loopback in its many spellings, credential paths with dot
//! segments and encodings, smuggling headers, pipelined requests, random bytes) are written to
//! a live proxy listener, the way a process in a sandbox would. Whatever the bytes:
//! - every connection gets an HTTP answer or is closed, within seconds (no hang);
//! - nothing reaches a loopback listener the policy forbids;
//! - what reaches the credential's upstream is under the credential's path, clean, with the
//!   real credential header once and never the sandbox's own;
//! - the proxy keeps serving afterwards.

use super::{spawn, Credentials, Log, Served};
use crate::fuzz_tests::run;
use handoff_wire::{EgressCredential, SandboxSpec};
use proptest::prelude::*;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::time::timeout;

const REAL: &str = "real-fuzz-credential";

struct FuzzSandbox {
    credentials: Arc<Credentials>,
    log: Log,
}

impl Served for FuzzSandbox {
    fn spec(&self) -> SandboxSpec {
        SandboxSpec::default()
    }
    fn credentials(&self) -> &Credentials {
        &self.credentials
    }
    fn log(&self) -> &Log {
        &self.log
    }
    fn authority(&self) -> Option<Arc<super::Authority>> {
        None
    }
}

/// A loopback listener that counts the connections it gets (none may come).
async fn forbidden() -> (u16, Arc<AtomicUsize>) {
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let port = listener.local_addr().expect("port").port();
    let count = Arc::new(AtomicUsize::new(0));
    let seen = count.clone();
    tokio::spawn(async move {
        while let Ok((_socket, _)) = listener.accept().await {
            seen.fetch_add(1, Ordering::SeqCst);
        }
    });
    (port, count)
}

/// The credential's upstream: keeps every request head it gets and answers 200.
async fn upstream() -> (u16, Arc<Mutex<Vec<String>>>) {
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let port = listener.local_addr().expect("port").port();
    let heads = Arc::new(Mutex::new(Vec::new()));
    let kept = heads.clone();
    tokio::spawn(async move {
        while let Ok((mut socket, _)) = listener.accept().await {
            let kept = kept.clone();
            tokio::spawn(async move {
                let mut head = Vec::new();
                let mut buf = [0u8; 4096];
                while !head.windows(4).any(|w| w == b"\r\n\r\n") && head.len() < 70_000 {
                    match timeout(Duration::from_secs(5), socket.read(&mut buf)).await {
                        Ok(Ok(n)) if n > 0 => head.extend_from_slice(&buf[..n]),
                        _ => break,
                    }
                }
                kept.lock()
                    .unwrap_or_else(|p| p.into_inner())
                    .push(String::from_utf8_lossy(&head).into_owned());
                let _ = socket
                    .write_all(b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\nConnection: close\r\n\r\n")
                    .await;
            });
        }
    });
    (port, heads)
}

/// Sends `bytes` and reads the answer: `Err` when the connection neither answers nor closes.
async fn exchange(proxy: u16, bytes: &[u8]) -> Result<Vec<u8>, String> {
    let mut socket = TcpStream::connect(("127.0.0.1", proxy))
        .await
        .map_err(|e| e.to_string())?;
    // The proxy may answer and close before reading it all.
    let _ = socket.write_all(bytes).await;
    let mut answer = Vec::new();
    let mut buf = [0u8; 8192];
    let mut wait = Duration::from_secs(1);
    loop {
        match timeout(wait, socket.read(&mut buf)).await {
            Ok(Ok(0)) | Ok(Err(_)) => return Ok(answer),
            Ok(Ok(n)) => {
                answer.extend_from_slice(&buf[..n]);
                wait = Duration::from_millis(30);
            }
            // Answered, and the connection is kept open for more: done.
            Err(_) if !answer.is_empty() => return Ok(answer),
            Err(_) => {
                // An incomplete request waits for more: ending it must end the connection.
                let _ = socket.shutdown().await;
                return match timeout(Duration::from_secs(3), socket.read(&mut buf)).await {
                    Ok(Ok(n)) => Ok(buf[..n].to_vec()),
                    Ok(Err(_)) => Ok(Vec::new()),
                    Err(_) => Err("neither answered nor closed".into()),
                };
            }
        }
    }
}

/// `piece` with `{f}` standing for the forbidden listener's port.
fn at_port(piece: &str, f: u16) -> String {
    piece.replace("{f}", &f.to_string())
}

fn requests(forbidden: u16) -> impl Strategy<Value = Vec<u8>> {
    let f = forbidden;
    let targets: Vec<String> = [
        "http://127.0.0.1:{f}/",
        "127.0.0.1:{f}",
        "localhost:{f}",
        "http://localhost:{f}/x",
        "http://LOCALHOST:{f}/",
        "http://[::ffff:127.0.0.1]:{f}/",
        "[::ffff:7f00:1]:{f}",
        "http://[::1]:{f}/",
        "http://0x7f000001:{f}/",
        "http://0x7f.0.0.1:{f}/",
        "http://2130706433:{f}/",
        "http://0177.0.0.1:{f}/",
        "http://127.1:{f}/",
        "http://0:{f}/",
        "0.0.0.0:{f}",
        "http://[::]:{f}/",
        "http://127.0.0.1.:{f}/",
        "http://model.fuzz@127.0.0.1:{f}/v1/",
        "http://127.0.0.1:{f}@model.fuzz/v1/",
        "http://model.fuzz/v1/chat",
        "http://model.fuzz:80/v1/x?q=../../",
        "http://MODEL.FUZZ/v1/",
        "http://model.fuzz/v1/../admin",
        "http://model.fuzz/v1/%2e%2e/admin",
        "http://model.fuzz/v1/%2E./admin",
        "http://model.fuzz/v1/..%2fadmin",
        "http://model.fuzz/v1\\..\\admin",
        "http://model.fuzz/v1//x",
        "http://model.fuzz/v1",
        "http://model.fuzz/v2/",
        "http://model.fuzz:8080/v1/",
        "https://model.fuzz/v1/",
        "/v1/",
        "*",
        "//127.0.0.1:{f}/",
    ]
    .iter()
    .map(|t| at_port(t, f))
    .collect();
    let method = prop_oneof![
        4 => proptest::sample::select(vec!["GET", "POST", "CONNECT", "PUT", "get", "OPTIONS"])
            .prop_map(str::to_string),
        1 => any::<String>(),
    ];
    let target = prop_oneof![
        6 => proptest::sample::select(targets),
        1 => any::<String>(),
    ];
    let version = proptest::sample::select(vec![
        " HTTP/1.1\r\n",
        " HTTP/1.0\r\n",
        " HTTP/2.0\r\n",
        " HTTP/1.1\n",
        "\r\n",
        "  HTTP/1.1\r\n",
    ]);
    let headers: Vec<String> = [
        "Host: 127.0.0.1:{f}\r\n",
        "Host: model.fuzz\r\n",
        "X-Key: stolen\r\n",
        "x-key: stolen\r\n",
        "X-Key: stolen\r\n\tfolded\r\n",
        "Transfer-Encoding: chunked\r\n",
        "Transfer-Encoding: chunked, identity\r\n",
        "Content-Length: 5\r\n",
        "Content-Length: 0\r\n",
        "Content-Length: -1\r\n",
        "Connection: x-key, upgrade\r\nUpgrade: websocket\r\n",
        "Proxy-Authorization: Basic Zm9vOmJhcg==\r\n",
        ": empty\r\n",
        "\r\n",
        "0\r\n\r\n",
        "hello",
    ]
    .iter()
    .map(|h| at_port(h, f))
    .collect();
    let header = prop_oneof![
        6 => proptest::sample::select(headers),
        1 => any::<String>(),
    ];
    let headers = proptest::collection::vec(header, 0..5).prop_map(|h| h.concat());
    let one =
        (method, target, version, headers).prop_map(|(m, t, v, h)| format!("{m} {t}{v}{h}\r\n"));
    proptest::collection::vec(one, 1..3).prop_map(|parts| parts.concat().into_bytes())
}

/// A request the credential's upstream got: under its path, clean, with the real credential
/// once (never a value the sandbox sent under its name) and no proxy headers.
fn check_upstream_head(head: &str) -> Result<(), String> {
    // A connection the proxy opened and closed again before it sent a whole head (its client
    // went away): nothing to check beyond what arrived.
    let Some((line, _)) = head.split_once("\r\n") else {
        return Ok(());
    };
    let target = line.split(' ').nth(1).unwrap_or_default();
    if !target.starts_with("/api/") || !super::credentials::clean_path(target) {
        return Err(format!("the upstream got {target:?}"));
    }
    if !head.contains("\r\n\r\n") {
        return Ok(());
    }
    let target = head.split(' ').nth(1).unwrap_or_default();
    if !target.starts_with("/api/") || !super::credentials::clean_path(target) {
        return Err(format!("the upstream got {target:?}"));
    }
    let keys: Vec<&str> = head
        .lines()
        .filter_map(|l| l.split_once(':'))
        .filter(|(name, _)| name.trim().eq_ignore_ascii_case("x-key"))
        .map(|(_, value)| value.trim())
        .collect();
    if keys != [REAL] {
        return Err(format!("the upstream got the keys {keys:?}"));
    }
    let hop = head
        .lines()
        .filter_map(|l| l.split_once(':'))
        .any(|(name, _)| {
            name.eq_ignore_ascii_case("proxy-authorization")
                || name.eq_ignore_ascii_case("proxy-connection")
        });
    if hop {
        return Err("a proxy header reached the upstream".into());
    }
    Ok(())
}

#[test]
fn fuzz_egress_proxy_requests() {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("runtime");
    let dir = std::env::temp_dir().join(format!("handoff-fuzz-egress-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("temp dir");
    let (proxy, (forbidden_port, reached), heads) = rt.block_on(async {
        let (upstream_port, heads) = upstream().await;
        let credentials = Arc::new(Credentials::default());
        let grant = credentials
            .grant(&[EgressCredential {
                prefix: "http://model.fuzz/v1/".into(),
                upstream: format!("http://127.0.0.1:{upstream_port}/api/"),
                header: format!("X-Key: {REAL}"),
            }])
            .expect("grant");
        // In effect for the whole run.
        std::mem::forget(grant);
        let sandbox = Arc::new(FuzzSandbox {
            credentials,
            log: Log::open(dir.join("egress.jsonl")),
        });
        let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
        listener.set_nonblocking(true).expect("nonblocking");
        let port = listener.local_addr().expect("port").port();
        spawn(sandbox, listener).expect("proxy");
        (port, forbidden().await, heads)
    });
    run("egress_proxy_requests", requests(forbidden_port), |bytes| {
        let before = reached.load(Ordering::SeqCst);
        let answer = rt.block_on(exchange(proxy, &bytes));
        let answer = answer.map_err(|e| {
            TestCaseError::fail(format!("{e}: {:?}", String::from_utf8_lossy(&bytes)))
        })?;
        prop_assert!(
            answer.is_empty() || answer.starts_with(b"HTTP/1."),
            "{:?} → {:?}",
            String::from_utf8_lossy(&bytes),
            String::from_utf8_lossy(&answer)
        );
        let sent = String::from_utf8_lossy(&bytes);
        prop_assert_eq!(
            reached.load(Ordering::SeqCst),
            before,
            "reached loopback: {:?}",
            sent
        );
        let arrived = std::mem::take(&mut *heads.lock().unwrap_or_else(|p| p.into_inner()));
        for head in arrived {
            check_upstream_head(&head)
                .map_err(|e| TestCaseError::fail(format!("{e}: {sent:?} → {head:?}")))?;
        }
        Ok(())
    });
    // Late arrivals (a pipelined request forwarded after its case ended) are checked too.
    std::thread::sleep(Duration::from_millis(500));
    assert_eq!(reached.load(Ordering::SeqCst), 0);
    for head in heads.lock().unwrap_or_else(|p| p.into_inner()).iter() {
        check_upstream_head(head).unwrap_or_else(|e| panic!("{e}: {head:?}"));
    }
    // Still serving: a plain request to a forbidden place is refused with 403.
    let again = format!("GET http://127.0.0.1:{forbidden_port}/ HTTP/1.1\r\nHost: x\r\n\r\n");
    let answer = rt
        .block_on(exchange(proxy, again.as_bytes()))
        .expect("answer");
    assert!(
        answer.starts_with(b"HTTP/1.1 403"),
        "{}",
        String::from_utf8_lossy(&answer)
    );
    std::fs::remove_dir_all(&dir).ok();
}
