//! Test support for handoff: starts the real Worker bundle in workerd through `wrangler dev`
//! (one shared instance per test process, plus dedicated ones for restarts and special
//! configuration), talks MCP to it over raw HTTP and through rmcp's client, and provides the
//! local stand-ins for what cannot exist offline.

pub mod auth_proxy;
pub mod blackhole;
pub mod browser;
pub mod bundle;
pub mod callbacks;
pub mod containers;
pub mod daemon;
pub mod forge;
pub mod links;
pub mod llm;
pub mod load;
pub mod mcp;
pub mod oauth;
pub mod procs;
pub mod reaper;
pub mod relay;
pub mod runs;
pub mod secrets;
pub mod soak;
pub mod stack;
pub mod tls;
pub mod worker;
pub mod workers;

pub use mcp::{Mcp, RawResponse};
pub use worker::{Worker, WorkerOptions};

/// The API token every test instance accepts (principal `tests`).
pub const TOKEN: &str = "test-token-0123456789abcdef";
/// A second token (principal `other`) for checks that depend on the caller.
pub const OTHER_TOKEN: &str = "other-token-0123456789abcdef";
/// The secret shared by test Workers and test sandbox daemons.
pub const DAEMON_SECRET: &str = "test-daemon-secret-0123456789abcdef-0123";
/// The signing key of test instances (links).
pub const SIGNING_KEY: &str = "test-signing-key-0123456789abcdef-0123456789";
/// The key worker secrets are sealed with in the test deployment.
pub const SECRETS_KEY: &str = "test-secrets-key-0123456789abcdef-0123456789";
/// Previews of test instances live under `<label>.preview.localhost:<port>`.
pub const PREVIEW_BASE: &str = "preview.localhost";

/// An HTTP client that sends every `*.preview.localhost` request of `url` to 127.0.0.1, as
/// browsers do, so preview origins work without DNS.
pub fn preview_client(url: &str) -> reqwest::Client {
    let parsed = reqwest::Url::parse(url).expect("preview URL");
    let host = parsed.host_str().expect("host").to_string();
    let port = parsed.port().unwrap_or(80);
    reqwest::Client::builder()
        .resolve(&host, std::net::SocketAddr::from(([127, 0, 0, 1], port)))
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .expect("client")
}

/// The repository root.
pub fn root() -> std::path::PathBuf {
    let manifest = std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    manifest.parent().map(Into::into).unwrap_or(manifest)
}

/// A fresh scratch directory `<tmp>/handoff-<kind>-<pid>-<n>`. The first call of a process
/// also removes those that earlier test processes left behind (shared servers live in statics,
/// which are never dropped, so their directories outlive the process).
pub fn scratch_dir(kind: &str) -> std::path::PathBuf {
    static SWEPT: std::sync::Once = std::sync::Once::new();
    static NEXT: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
    let tmp = std::env::temp_dir();
    SWEPT.call_once(|| sweep_scratch(&tmp));
    let n = NEXT.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
    let dir = tmp.join(format!("handoff-{kind}-{}-{n}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("create a scratch directory");
    dir
}

/// Detaches every mount below `dir` (sandbox volumes a daemon left mounted when it was
/// killed), so the directory can be removed and nothing stays behind.
pub fn unmount_below(dir: &std::path::Path) {
    let prefix = format!("{}/", dir.display());
    let mounts = std::fs::read_to_string("/proc/mounts").unwrap_or_default();
    for line in mounts.lines() {
        let Some(point) = line.split(' ').nth(1) else {
            continue;
        };
        if point.starts_with(&prefix) {
            if let Ok(c) = std::ffi::CString::new(point) {
                // SAFETY: a valid C string; detaching a mount this test run made.
                unsafe {
                    libc::umount2(c.as_ptr(), libc::MNT_DETACH);
                }
            }
        }
    }
}

/// Removes a scratch directory, detaching what is mounted in it first.
pub fn remove_scratch(dir: &std::path::Path) {
    unmount_below(dir);
    let _ = std::fs::remove_dir_all(dir);
}

/// Removes `handoff-<kind>-<pid>-<n>` directories whose process is gone.
fn sweep_scratch(tmp: &std::path::Path) {
    let Ok(entries) = std::fs::read_dir(tmp) else {
        return;
    };
    for entry in entries.flatten() {
        let name = entry.file_name().to_string_lossy().into_owned();
        let Some(rest) = name.strip_prefix("handoff-") else {
            continue;
        };
        let mut fields = rest.rsplitn(3, '-');
        let (Some(n), Some(pid), Some(_kind)) = (fields.next(), fields.next(), fields.next())
        else {
            continue;
        };
        let ours = n.parse::<usize>().is_ok() && pid.parse::<u32>().is_ok();
        if ours && !std::path::Path::new("/proc").join(pid).exists() {
            remove_scratch(&entry.path());
        }
    }
}

/// Serves `app` on a free loopback port from a thread with its own runtime, for the life of the
/// process (test runtimes come and go with each test; shared servers must outlive them).
pub fn serve_forever(app: axum::Router) -> u16 {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    listener.set_nonblocking(true).expect("nonblocking");
    let port = listener.local_addr().expect("addr").port();
    std::thread::spawn(move || {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .expect("runtime");
        runtime.block_on(async move {
            let listener = tokio::net::TcpListener::from_std(listener).expect("listener");
            let _ = axum::serve(listener, app).await;
        });
    });
    port
}

/// A server on the host's loopback that answers every connection with one `200` carrying
/// `body`; returns its port.
pub async fn http_server(body: &'static str) -> u16 {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    tokio::spawn(async move {
        while let Ok((mut stream, _)) = listener.accept().await {
            let mut buf = [0u8; 4096];
            let _ = stream.read(&mut buf).await;
            let response = format!(
                "HTTP/1.1 200 OK\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
                body.len()
            );
            let _ = stream.write_all(response.as_bytes()).await;
        }
    });
    port
}
