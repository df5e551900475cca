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
    let token = ensure_dev_vars()?;

    let stop = Arc::new(AtomicBool::new(false));
    let flag = stop.clone();
    ctrlc::set_handler(move || flag.store(true, Ordering::SeqCst))
        .map_err(|e| format!("could not install the Ctrl-C handler: {e}"))?;

    let mut cmd = tools.command(tools.wrangler());
    cmd.args(["dev", "--local", "--ip", "127.0.0.1", "--port"])
        .arg(port.to_string())
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
            return Ok(());
        }
        if let Some(status) = server.exited() {
            return Err(format!("wrangler dev exited ({status})"));
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

/// Creates `.dev.vars` (or adds what it lacks) and returns the local API token.
fn ensure_dev_vars() -> Result<String> {
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
    if changed {
        std::fs::write(&path, &text).map_err(|e| format!("writing {}: {e}", path.display()))?;
        println!("xtask: wrote a local API token and signing key to .dev.vars");
    }
    let tokens = value_of(&text, "HANDOFF_API_TOKENS").unwrap_or_default();
    let first = tokens
        .split([',', ' '])
        .find(|t| !t.is_empty())
        .unwrap_or_default();
    Ok(first.split_once(':').map_or(first, |(_, t)| t).to_string())
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
