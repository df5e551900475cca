//! `cargo xtask dev`: the whole stack on this machine. Builds the Worker, makes sure `.dev.vars`
//! holds a local API token and signing key, runs `wrangler dev` on 127.0.0.1 with persistent
//! state in `.wrangler/state`, and stops everything on Ctrl-C.

use crate::proc::{self, Server};
use crate::{root, setup, worker, Result};
use std::io::Read;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

const DEFAULT_PORT: u16 = 8787;

pub fn run(args: &[String]) -> Result {
    let port = parse_port(args)?;
    let tools = setup::ensure()?;
    worker::build(&tools)?;
    worker::build_daemon(&tools)?;
    let (token, daemon_secret) = ensure_dev_vars()?;

    let stop = Arc::new(AtomicBool::new(false));
    let flag = stop.clone();
    ctrlc::set_handler(move || flag.store(true, Ordering::SeqCst))
        .map_err(|e| format!("could not install the Ctrl-C handler: {e}"))?;

    let daemon_port = port + 1;
    let sandboxes = root().join(".handoff/sandboxes");
    let mut daemon_cmd = std::process::Command::new(worker::daemon_binary());
    daemon_cmd
        .arg("--listen")
        .arg(format!("127.0.0.1:{daemon_port}"))
        .arg("--root")
        .arg(&sandboxes)
        .env("SANDBOX_DAEMON_SECRET", &daemon_secret);
    let mut daemon = Server::spawn("the sandbox daemon", &mut daemon_cmd)?;
    proc::wait_for_http(
        daemon_port,
        "/v1/health",
        Duration::from_secs(30),
        &mut daemon,
    )?;

    let mut cmd = tools.command(tools.wrangler());
    cmd.args(["dev", "--local", "--ip", "127.0.0.1", "--port"])
        .arg(port.to_string())
        .arg("--var")
        .arg(format!("SANDBOX_DAEMON_URL:http://127.0.0.1:{daemon_port}"))
        .arg("--show-interactive-dev-session=false")
        .current_dir(root())
        .env("WRANGLER_SEND_METRICS", "false")
        .env("CLOUDFLARE_CF_FETCH_ENABLED", "false");
    let mut server = Server::spawn("wrangler dev", &mut cmd)?;
    proc::wait_for_http(port, "/health", Duration::from_secs(120), &mut server)?;

    let url = format!("http://127.0.0.1:{port}/mcp");
    println!(
        "\nhandoff is running.\n\n  MCP endpoint: {url}\n  API token:    {token}  (in .dev.vars)\n\n\
         Add it to Claude Code:\n  claude mcp add --transport http handoff {url} --header \"Authorization: Bearer {token}\"\n\n\
         Press Ctrl-C to stop.\n"
    );
    loop {
        if stop.load(Ordering::SeqCst) {
            println!("\nxtask: stopping");
            server.stop();
            daemon.stop();
            return Ok(());
        }
        if let Some(status) = server.exited() {
            daemon.stop();
            return Err(format!("wrangler dev exited ({status})"));
        }
        if let Some(status) = daemon.exited() {
            server.stop();
            return Err(format!("the sandbox daemon exited ({status})"));
        }
        std::thread::sleep(Duration::from_millis(200));
    }
}

fn parse_port(args: &[String]) -> Result<u16> {
    match args {
        [] => Ok(DEFAULT_PORT),
        [flag, value] if flag == "--port" => value
            .parse()
            .map_err(|_| format!("--port needs a number, got {value:?}")),
        _ => Err("usage: cargo xtask dev [--port N]".into()),
    }
}

/// Creates `.dev.vars` (or adds what it lacks); returns the local API token and the daemon secret.
fn ensure_dev_vars() -> Result<(String, String)> {
    let path = root().join(".dev.vars");
    let mut text = std::fs::read_to_string(&path).unwrap_or_default();
    if text.is_empty() {
        text.push_str(
            "# Local secrets for `cargo xtask dev`, created on first start. Never commit this file.\n\
             # Every variable is documented in .dev.vars.example.\n",
        );
    }
    let mut changed = false;
    if value_of(&text, "HANDOFF_API_TOKENS").is_none() {
        text.push_str(&format!(
            "HANDOFF_API_TOKENS=local:hnd_{}\n",
            random_token()?
        ));
        changed = true;
    }
    if value_of(&text, "HANDOFF_SIGNING_KEY").is_none() {
        text.push_str(&format!("HANDOFF_SIGNING_KEY={}\n", random_token()?));
        changed = true;
    }
    if value_of(&text, "SANDBOX_DAEMON_SECRET").is_none() {
        text.push_str(&format!("SANDBOX_DAEMON_SECRET={}\n", random_token()?));
        changed = true;
    }
    if changed {
        std::fs::write(&path, &text).map_err(|e| format!("writing {}: {e}", path.display()))?;
        println!("xtask: wrote local secrets (API token, signing key, daemon secret) to .dev.vars");
    }
    let tokens = value_of(&text, "HANDOFF_API_TOKENS").unwrap_or_default();
    let first = tokens
        .split([',', ' '])
        .find(|t| !t.is_empty())
        .unwrap_or_default();
    let token = first.split_once(':').map_or(first, |(_, t)| t).to_string();
    Ok((
        token,
        value_of(&text, "SANDBOX_DAEMON_SECRET").unwrap_or_default(),
    ))
}

fn value_of(text: &str, key: &str) -> Option<String> {
    text.lines()
        .filter_map(|line| {
            line.trim()
                .strip_prefix(key)?
                .trim_start()
                .strip_prefix('=')
        })
        .map(|v| v.trim().trim_matches('"').to_string())
        .find(|v| !v.is_empty())
}

/// 32 random bytes from the OS as 64 hex characters.
fn random_token() -> Result<String> {
    let mut bytes = [0u8; 32];
    std::fs::File::open("/dev/urandom")
        .and_then(|mut f| f.read_exact(&mut bytes))
        .map_err(|e| format!("reading /dev/urandom: {e}"))?;
    Ok(bytes.iter().map(|b| format!("{b:02x}")).collect())
}
