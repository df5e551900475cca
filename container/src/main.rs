//! handoff-sandboxd: the sandbox daemon's command line. Parses its configuration, finds out what
//! isolation the host gives, adopts existing sandboxes and serves the `/v1` API of the
//! `handoff_sandbox` library.

use handoff_sandbox::sandbox::cgroup::Cgroups;
use handoff_sandbox::sandbox::detect;
use handoff_sandbox::sandbox::isolation::Wanted;
use handoff_sandbox::{auth, routes, sandbox};
use handoff_wire::Limits;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;

const USAGE: &str = "\
usage: handoff-sandboxd [--listen ADDR] [--root DIR] [--isolation auto|namespaces|container]
                        [--bwrap PATH] [--uid-base N] [--tools-dir DIR]
                        [--memory-mb N] [--pids N] [--cpu-millis N] [--disk-mb N]
                        [--dangerously-skip-isolation]

  --listen      address to serve the API on (default 127.0.0.1:3000)
  --root        directory that holds the sandboxes (default ./sandboxes); one daemon each
  --isolation   auto (default): namespaces (bubblewrap, as root); without them the daemon
                starts but runs no sandbox and says what is missing;
                namespaces: refuse to start without them;
                container: namespaces if possible, else the container this daemon runs in is
                the boundary (processes still unprivileged and seccomp-filtered)
  --bwrap       absolute path of bubblewrap (default: /usr/bin/bwrap, /usr/local/bin/bwrap)
  --uid-base    first host user id for sandboxes; sandbox n runs as N + n (default 3000000).
                Two daemons on one host need bases further apart than either's sandboxes
                (a second daemon with the same base refuses to start); `port`: 3000000 +
                1000 x the --listen port, so daemons told apart by port have users apart
  --tools-dir   a host directory of programs (e.g. opencode) shown read-only at
                /opt/handoff/bin in every sandbox, first on PATH
  --memory-mb, --pids, --cpu-millis   per-sandbox limits (defaults 2048, 1024, 2000)
  --disk-mb     disk for each sandbox's workspace and logs, its own ext4 volume (default
                10240; 0 for none)
  --dangerously-skip-isolation   DEVELOPMENT ONLY: run sandbox commands as plain host
                processes with the host file system and network in reach

environment:
  SANDBOX_DAEMON_SECRET   shared with the Worker, at least 32 characters (required); in a
                          container, a key for its one sandbox only
  HANDOFF_SANDBOX_ID      serve this one sandbox and no other (a container of its own)
";

struct Config {
    listen: String,
    root: PathBuf,
    tools: Option<PathBuf>,
    isolation: Wanted,
    bwrap: Option<PathBuf>,
    uid_base: u32,
    disk_bytes: u64,
    limits: Limits,
    secret: String,
    pinned: Option<String>,
}

fn parse() -> Result<Config, String> {
    let mut config = Config {
        listen: "127.0.0.1:3000".into(),
        root: PathBuf::from("sandboxes"),
        tools: None,
        isolation: Wanted::Auto,
        bwrap: None,
        uid_base: 3_000_000,
        disk_bytes: 10240 * 1024 * 1024,
        limits: Limits {
            memory_bytes: Some(2048 * 1024 * 1024),
            pids: Some(1024),
            cpu_millis: Some(2000),
            disk_bytes: None,
        },
        secret: std::env::var("SANDBOX_DAEMON_SECRET").unwrap_or_default(),
        pinned: std::env::var("HANDOFF_SANDBOX_ID")
            .ok()
            .filter(|id| !id.is_empty()),
    };
    let mut by_port = false;
    let mut args = std::env::args().skip(1);
    while let Some(flag) = args.next() {
        if flag == "--help" || flag == "-h" {
            return Err(USAGE.into());
        }
        if flag == "--dangerously-skip-isolation" {
            config.isolation = Wanted::Dangerous;
            continue;
        }
        let value = args
            .next()
            .ok_or_else(|| format!("{flag} needs a value\n\n{USAGE}"))?;
        let number = || {
            value
                .parse::<u64>()
                .map_err(|_| format!("{flag} needs a number, got {value:?}"))
        };
        match flag.as_str() {
            "--listen" => config.listen = value.clone(),
            "--root" => config.root = PathBuf::from(&value),
            "--isolation" if config.isolation == Wanted::Dangerous => {}
            "--isolation" => {
                config.isolation = match value.as_str() {
                    "auto" => Wanted::Auto,
                    "namespaces" => Wanted::Namespaces,
                    "container" => Wanted::Container,
                    "none" => {
                        return Err("--isolation none is gone: sandboxes without isolation \
                                    are for development only; say so with \
                                    --dangerously-skip-isolation"
                            .into())
                    }
                    _ => {
                        return Err(format!(
                            "--isolation must be auto, namespaces or container\n\n{USAGE}"
                        ))
                    }
                }
            }
            "--bwrap" => config.bwrap = Some(PathBuf::from(&value)),
            "--uid-base" if value == "port" => by_port = true,
            "--uid-base" => {
                by_port = false;
                config.uid_base = u32::try_from(number()?)
                    .ok()
                    .filter(|&b| (1000..=4_000_000_000).contains(&b))
                    .ok_or_else(|| "--uid-base must be between 1000 and 4000000000".to_string())?
            }
            "--tools-dir" => config.tools = Some(PathBuf::from(&value)),
            "--memory-mb" => config.limits.memory_bytes = Some(number()? * 1024 * 1024),
            "--pids" => config.limits.pids = Some(number()?),
            "--cpu-millis" => config.limits.cpu_millis = Some(number()?),
            "--disk-mb" => config.disk_bytes = number()? * 1024 * 1024,
            _ => return Err(format!("unknown option {flag}\n\n{USAGE}")),
        }
    }
    if by_port {
        config.uid_base = port_uid_base(&config.listen)?;
    }
    if let Some(id) = config.pinned.as_deref().filter(|id| !sandbox::valid_id(id)) {
        return Err(format!("HANDOFF_SANDBOX_ID {id:?} is not a sandbox id"));
    }
    if config.secret.len() < 32 {
        return Err("SANDBOX_DAEMON_SECRET must be set to at least 32 characters (the Worker holds the same value)".into());
    }
    Ok(config)
}

/// `--uid-base port`: a base of its own for each port a daemon listens on (one port, one
/// daemon), clear of the default base's range and under 4,000,000,000 for every port.
fn port_uid_base(listen: &str) -> Result<u32, String> {
    let port = listen
        .rsplit(':')
        .next()
        .and_then(|p| p.parse::<u16>().ok())
        .ok_or_else(|| {
            format!("--uid-base port needs --listen to end in a port, got {listen:?}")
        })?;
    Ok(3_000_000 + u32::from(port) * 1000)
}

#[tokio::main]
async fn main() -> ExitCode {
    match run().await {
        Ok(()) => ExitCode::SUCCESS,
        Err(message) => {
            eprintln!("handoff-sandboxd: {message}");
            ExitCode::FAILURE
        }
    }
}

async fn run() -> Result<(), String> {
    let config = parse()?;
    // In a container of one sandbox's own the container is the boundary: nothing to share.
    let _users = if sandbox::privileged() && config.pinned.is_none() {
        Some(claim_users(config.uid_base)?)
    } else {
        None
    };
    std::fs::create_dir_all(&config.root)
        .map_err(|e| format!("cannot create {}: {e}", config.root.display()))?;
    let root = config
        .root
        .canonicalize()
        .map_err(|e| format!("{}: {e}", config.root.display()))?;
    let _root = claim_root(&root)?;
    let host = detect::detect(
        &root,
        config.isolation,
        config.bwrap.as_deref(),
        sandbox::Registry::probe_uid(config.uid_base),
    )
    .await?;
    let cgroups = Cgroups::detect(config.limits.clone());
    let tools = match &config.tools {
        Some(dir) => Some(
            dir.canonicalize()
                .map_err(|e| format!("--tools-dir {}: {e}", dir.display()))?,
        ),
        None => None,
    };
    let registry = sandbox::Registry::open(
        root.clone(),
        tools,
        host,
        cgroups,
        config.uid_base,
        config.disk_bytes,
        config.pinned.clone(),
    )
    .map_err(|e| format!("cannot open {}: {e}", root.display()))?;
    let isolation = registry.isolation();
    let verifier = auth::Verifier::new(config.secret.as_bytes(), config.pinned.clone())?;
    let listener = tokio::net::TcpListener::bind(&config.listen)
        .await
        .map_err(|e| format!("cannot listen on {}: {e}", config.listen))?;
    let address = listener.local_addr().map_err(|e| e.to_string())?;
    println!(
        "handoff-sandboxd {} listening on http://{address}\n  sandboxes: {} ({} adopted)\n  isolation: {} — {}\n  network: {}\n  limits: {}",
        env!("CARGO_PKG_VERSION"),
        root.display(),
        registry.count(),
        isolation.level,
        isolation.filesystem,
        isolation.network,
        describe_limits(&isolation.limits),
    );
    for note in &isolation.notes {
        println!("  WARNING: {note}");
    }
    let registry = Arc::new(registry);
    let app = Arc::new(routes::App {
        registry: registry.clone(),
        verifier,
    });
    // Replies are small and written in pieces: without TCP_NODELAY, Nagle's algorithm and
    // the peer's delayed ACK can hold the last piece back for 40 ms.
    let listener = axum::serve::ListenerExt::tap_io(listener, |tcp| {
        let _ = tcp.set_nodelay(true);
    });
    let served = axum::serve(listener, routes::router(app))
        .with_graceful_shutdown(shutdown())
        .await
        .map_err(|e| e.to_string());
    registry.shutdown().await;
    served
}

/// This daemon's claim on its sandboxes' host users, held for as long as it runs: an abstract
/// Unix socket named for `--uid-base`, which the kernel releases with the process however it
/// ends. Two daemons giving their sandboxes the same users could signal each other's processes,
/// and a stop waits for (in a container, ends) every process of the user it stops.
fn claim_users(uid_base: u32) -> Result<std::os::unix::net::UnixListener, String> {
    use std::os::linux::net::SocketAddrExt;
    use std::os::unix::net::{SocketAddr, UnixListener};
    let name = format!("handoff-sandboxd-users-{uid_base}");
    let taken = |e: std::io::Error| match e.kind() {
        std::io::ErrorKind::AddrInUse => format!(
            "another handoff-sandboxd on this host already gives its sandboxes the host users \
             from {uid_base}: two daemons must not share users (each could signal, and on a stop \
             end, the other's sandboxes); start this one with another --uid-base"
        ),
        _ => format!("cannot claim the host users from {uid_base}: {e}"),
    };
    let address = SocketAddr::from_abstract_name(name.as_bytes()).map_err(taken)?;
    UnixListener::bind_addr(&address).map_err(taken)
}

/// This daemon's claim on its root, held for as long as it runs: a lock on `.daemon.lock` in it
/// (not a sandbox id, so never adopted). Two daemons on one root would adopt, stop and delete
/// each other's sandboxes.
fn claim_root(root: &std::path::Path) -> Result<std::fs::File, String> {
    use std::os::unix::fs::OpenOptionsExt;
    let path = root.join(".daemon.lock");
    let file = std::fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .mode(0o600)
        .open(&path)
        .map_err(|e| format!("cannot open {}: {e}", path.display()))?;
    match file.try_lock() {
        Ok(()) => Ok(file),
        Err(std::fs::TryLockError::WouldBlock) => Err(format!(
            "another handoff-sandboxd already serves the sandboxes in {}: two daemons on one \
             root would adopt, stop and delete each other's; give this one another --root",
            root.display()
        )),
        Err(std::fs::TryLockError::Error(e)) => Err(format!("cannot lock {}: {e}", path.display())),
    }
}

fn describe_limits(l: &Limits) -> String {
    let mut parts = Vec::new();
    if let Some(m) = l.memory_bytes {
        parts.push(format!("memory {} MiB", m / (1024 * 1024)));
    }
    if let Some(p) = l.pids {
        parts.push(format!("{p} processes"));
    }
    if let Some(c) = l.cpu_millis {
        parts.push(format!("{:.1} CPUs", c as f64 / 1000.0));
    }
    if let Some(d) = l.disk_bytes {
        parts.push(format!("disk {} MiB", d / (1024 * 1024)));
    }
    if parts.is_empty() {
        "none enforced".into()
    } else {
        parts.join(", ")
    }
}

async fn shutdown() {
    use tokio::signal::unix::{signal, SignalKind};
    let mut term = match signal(SignalKind::terminate()) {
        Ok(s) => s,
        Err(_) => return std::future::pending().await,
    };
    tokio::select! {
        _ = term.recv() => {}
        _ = tokio::signal::ctrl_c() => {}
    }
}

#[cfg(test)]
mod tests {
    use super::port_uid_base;

    #[test]
    fn each_port_has_a_uid_base_of_its_own_clear_of_the_default_range() {
        assert_eq!(port_uid_base("127.0.0.1:4000"), Ok(7_000_000));
        assert_eq!(port_uid_base("[::1]:1"), Ok(3_001_000));
        assert!(port_uid_base("127.0.0.1:65535").is_ok_and(|b| b < 4_000_000_000));
        assert!(port_uid_base("127.0.0.1").is_err());
    }
}
