//! `cargo xtask dev [--port N] [--demo] [--dangerously-skip-isolation]`: the whole stack on this
//! machine. Builds the Worker and the sandbox daemon, makes sure `.dev.vars` holds local secrets
//! (mode 0600), starts the daemon (with OpenCode on its tools path) and `wrangler dev` on
//! 127.0.0.1 with persistent state in `.wrangler/state` (another `--port`: state of its own, see
//! [`State`]), and stops everything on Ctrl-C.
//! `--demo` adds the scripted LLM and a local forge with a broken repository, so a whole run —
//! task in, pull request out — works with no keys at all. The daemon isolates sandboxes with
//! bubblewrap and needs root for it; without root it runs no sandbox and says so, unless
//! `--dangerously-skip-isolation` (development only) is given.

use crate::proc::{self, Server};
use crate::{containers, root, setup, worker, Result};
use std::io::{BufRead, BufReader, Read};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

const DEFAULT_PORT: u16 = 8787;

/// Where a stack keeps what outlives it. The default port keeps the folders it always had;
/// another port gets folders of its own, so two stacks from one checkout never share the
/// Durable Objects' storage (two workerd processes writing one SQLite file), the daemon's
/// sandboxes (its root is locked: the second daemon would refuse to start) or the demo's forge.
struct State {
    /// wrangler's `--persist-to`.
    wrangler: std::path::PathBuf,
    /// The daemon's `--root`.
    sandboxes: std::path::PathBuf,
    /// The demo stand-ins' folder (the forge's repositories).
    demo: std::path::PathBuf,
}

impl State {
    fn of(port: u16) -> State {
        let (wrangler, handoff) = if port == DEFAULT_PORT {
            (".wrangler/state".to_string(), ".handoff".to_string())
        } else {
            (
                format!(".wrangler/state-{port}"),
                format!(".handoff/port-{port}"),
            )
        };
        let handoff = root().join(handoff);
        State {
            wrangler: root().join(wrangler),
            sandboxes: handoff.join("sandboxes"),
            demo: handoff.join("demo"),
        }
    }
}

struct Options {
    port: u16,
    demo: bool,
    skip_isolation: bool,
    containers: bool,
}

pub fn run(args: &[String]) -> Result {
    let options = parse(args)?;
    let tools = setup::ensure()?;
    worker::build(&tools)?;
    worker::build_daemon(&tools)?;
    let secrets = ensure_dev_vars()?;

    let stop = Arc::new(AtomicBool::new(false));
    let flag = stop.clone();
    ctrlc::set_handler(move || flag.store(true, Ordering::SeqCst))
        .map_err(|e| format!("could not install the Ctrl-C handler: {e}"))?;

    let mut servers: Vec<Server> = Vec::new();
    let result = start_all(&tools, &options, &secrets, &mut servers).and_then(|()| loop {
        if stop.load(Ordering::SeqCst) {
            println!("\nxtask: stopping");
            return Ok(());
        }
        for server in servers.iter_mut() {
            if let Some(status) = server.exited() {
                return Err(format!("{} exited ({status})", server.name()));
            }
        }
        std::thread::sleep(Duration::from_millis(200));
    });
    for server in servers.iter_mut().rev() {
        server.stop();
    }
    result
}

/// The local sandbox daemon on `port + 1`, sandboxes under [`State::sandboxes`].
fn start_daemon(options: &Options, secrets: &Secrets, servers: &mut Vec<Server>) -> Result {
    let daemon_port = options.port + 1;
    let mut daemon_cmd = Command::new(worker::daemon_binary());
    daemon_cmd
        .arg("--listen")
        .arg(format!("127.0.0.1:{daemon_port}"))
        .arg("--root")
        .arg(State::of(options.port).sandboxes)
        .arg("--tools-dir")
        .arg(root().join("node_modules/opencode-linux-x64/bin"))
        // Host users of its own, told apart by port like the tests' daemons: a stack from
        // another checkout (`--port`) would otherwise find them claimed and refuse to start.
        .args(["--uid-base", "port"])
        .env("SANDBOX_DAEMON_SECRET", &secrets.daemon);
    if options.skip_isolation {
        daemon_cmd.arg("--dangerously-skip-isolation");
    } else if !crate::setup::is_root() {
        println!(
            "xtask: WARNING: not running as root, so the sandbox daemon cannot isolate sandboxes and \
             will run none (sandbox tools and runs fail with a message). Run as root (sudo), or for \
             development only pass --dangerously-skip-isolation."
        );
    }
    let daemon = servers.push_mut(Server::spawn("the sandbox daemon", &mut daemon_cmd)?);
    proc::wait_for_http(daemon_port, "/v1/health", Duration::from_secs(30), daemon)
}

fn start_all(
    tools: &setup::Tools,
    options: &Options,
    secrets: &Secrets,
    servers: &mut Vec<Server>,
) -> Result {
    let port = options.port;
    let mut vars = Vec::new();
    if options.containers {
        let lane = containers::ensure(tools)?;
        if let Some(engine) = lane.into_engine() {
            servers.push(engine);
        }
        vars.push(format!(
            "HANDOFF_CONTAINER_UPSTREAM_PROXY:{}",
            containers::UPSTREAM_PROXY
        ));
    } else {
        start_daemon(options, secrets, servers)?;
        vars.push(format!("SANDBOX_DAEMON_URL:http://127.0.0.1:{}", port + 1));
    }
    // Previews get origins of their own: browsers resolve *.localhost to this machine.
    if !secrets.preview_configured {
        vars.push(format!(
            "HANDOFF_PREVIEW_URL:http://preview.localhost:{port}"
        ));
    }
    let demo = if options.demo {
        let (server, demo) = start_demo(tools, &State::of(port).demo)?;
        servers.push(server);
        for (key, value) in demo["vars"].as_object().into_iter().flatten() {
            vars.push(format!("{key}:{}", value.as_str().unwrap_or_default()));
        }
        Some(demo)
    } else {
        None
    };

    let mut cmd = tools.command(tools.wrangler());
    cmd.args(["dev", "--local", "--ip", "127.0.0.1", "--port"])
        .arg(port.to_string())
        .arg("--show-interactive-dev-session=false")
        .current_dir(root())
        .env("WRANGLER_SEND_METRICS", "false")
        .env("CLOUDFLARE_CF_FETCH_ENABLED", "false")
        .arg("--persist-to")
        .arg(State::of(port).wrangler);
    if options.containers {
        cmd.arg("--config")
            .arg(containers::wrangler_config()?)
            .envs(containers::Lane::wrangler_env());
    }
    for var in &vars {
        cmd.arg("--var").arg(var);
    }
    // With containers, wrangler builds the sandbox image first (a few minutes the first time).
    let startup = if options.containers { 900 } else { 120 };
    let wrangler = servers.push_mut(Server::spawn("wrangler dev", &mut cmd)?);
    proc::wait_for_http(port, "/health", Duration::from_secs(startup), wrangler)?;

    let url = format!("http://127.0.0.1:{port}/mcp");
    let token = &secrets.api_token;
    let passphrase = &secrets.passphrase;
    println!(
        "\nhandoff is running.\n\n  MCP endpoint:      {url}\n  API token:         {token}  (in .dev.vars)\n  \
         Owner passphrase:  {passphrase}  (OAuth consent page; in .dev.vars)\n\n\
         Add it to Claude Code:\n  claude mcp add --transport http handoff {url} --header \"Authorization: Bearer {token}\"\n\
         OAuth clients (MCP Inspector, VS Code, …) can connect with the URL alone and approve with the passphrase.\n"
    );
    match demo {
        Some(demo) => {
            deploy_example_workers(port, token)?;
            println!(
                "DEMO MODE — the model is a scripted stand-in and the git forge is local; nothing leaves this machine.\n\
                 Ask your assistant to call opencode_run_task with:\n  repository: {}\n  task: {}\n\
                 and to poll opencode_get_result until it completes: it fixes the bug and opens a pull request on the local forge.\n\n\
                 Background workers (examples/workers/): workers_run daily-digest writes a digest (outputs/digest.md; it\n\
                 also runs on weekday mornings); workers_run triage-issue proposes a label and a reply, then waits in\n\
                 pending_approval: approve it with workers_approve (or on its run page) and it posts the comment.\n",
                demo["repository"].as_str().unwrap_or_default(),
                demo["task"].as_str().unwrap_or_default(),
            )
        }
        None => println!(
            "Runs need a model and a forge: put ANTHROPIC_API_KEY (or OPENAI_API_KEY) and GITHUB_TOKEN in .dev.vars\n\
             (see .dev.vars.example), or try `cargo xtask dev --demo` for a keyless demo.\n"
        ),
    }
    println!("Press Ctrl-C to stop.\n");
    Ok(())
}

/// Deploys the example workers of `examples/workers/` to the running handoff (the demo binary
/// speaks MCP to it).
fn deploy_example_workers(port: u16, token: &str) -> Result {
    let mut cmd = Command::new(root().join("target/debug/handoff-demo"));
    cmd.arg("deploy-workers")
        .arg(format!("http://127.0.0.1:{port}"))
        .arg(token);
    proc::run(&mut cmd).map_err(|e| format!("deploying the example workers: {e}"))
}

/// Starts the demo stand-ins and reads the line that says where they are.
fn start_demo(
    tools: &setup::Tools,
    folder: &std::path::Path,
) -> Result<(Server, serde_json::Value)> {
    let mut build = tools.command("cargo");
    build
        .args([
            "build",
            "--quiet",
            "-p",
            "handoff-tests",
            "--bin",
            "handoff-demo",
        ])
        .current_dir(root());
    proc::run(&mut build)?;
    let mut cmd = Command::new(root().join("target/debug/handoff-demo"));
    cmd.arg(folder).stdout(Stdio::piped());
    let mut server = Server::spawn("the demo stand-ins", &mut cmd)?;
    let stdout = server
        .take_stdout()
        .ok_or_else(|| "the demo printed nothing".to_string())?;
    let mut line = String::new();
    BufReader::new(stdout)
        .read_line(&mut line)
        .map_err(|e| format!("reading the demo's address line: {e}"))?;
    let demo: serde_json::Value = serde_json::from_str(&line)
        .map_err(|e| format!("the demo's address line is not JSON ({e}): {line}"))?;
    Ok((server, demo))
}

fn parse(args: &[String]) -> Result<Options> {
    let mut options = Options {
        port: DEFAULT_PORT,
        demo: false,
        skip_isolation: false,
        containers: false,
    };
    let mut args = args.iter();
    while let Some(arg) = args.next() {
        match arg.as_str() {
            "--demo" => options.demo = true,
            "--dangerously-skip-isolation" => options.skip_isolation = true,
            "--containers" => options.containers = true,
            "--port" => {
                let value = args.next().ok_or("--port needs a number")?;
                options.port = value
                    .parse()
                    .map_err(|_| format!("--port needs a number, got {value:?}"))?;
            }
            other => {
                return Err(format!(
                    "unknown option {other:?}; usage: cargo xtask dev [--port N] [--demo] \
                     [--containers] [--dangerously-skip-isolation]"
                ))
            }
        }
    }
    Ok(options)
}

struct Secrets {
    api_token: String,
    daemon: String,
    passphrase: String,
    /// `.dev.vars` names its own preview base (a tunnel, say).
    preview_configured: bool,
}

/// Creates `.dev.vars` (or adds what it lacks): a local API token and the keys the Worker signs
/// with. Provider keys are the user's to add.
fn ensure_dev_vars() -> Result<Secrets> {
    let path = root().join(".dev.vars");
    let mut text = std::fs::read_to_string(&path).unwrap_or_default();
    if text.is_empty() {
        text.push_str(
            "# Local secrets for `cargo xtask dev`, created on first start. Never commit this file.\n\
             # Every variable is documented in .dev.vars.example.\n",
        );
    }
    let mut added = Vec::new();
    for (key, prefix) in [
        ("HANDOFF_API_TOKENS", "local:hnd_"),
        ("HANDOFF_SIGNING_KEY", ""),
        ("HANDOFF_SECRETS_KEY", ""),
        ("SANDBOX_DAEMON_SECRET", ""),
        ("PROXY_JWT_SECRET", ""),
        ("HANDOFF_OWNER_PASSPHRASE", "owner-"),
    ] {
        if value_of(&text, key).is_none() {
            text.push_str(&format!("{key}={prefix}{}\n", random_token()?));
            added.push(key);
        }
    }
    if !added.is_empty() || !private(&path) {
        write_private(&path, &text).map_err(|e| format!("writing {}: {e}", path.display()))?;
        println!(
            "xtask: wrote local secrets to .dev.vars ({})",
            added.join(", ")
        );
    }
    let tokens = value_of(&text, "HANDOFF_API_TOKENS").unwrap_or_default();
    let first = tokens
        .split([',', ' '])
        .find(|t| !t.is_empty())
        .unwrap_or_default();
    Ok(Secrets {
        api_token: first.split_once(':').map_or(first, |(_, t)| t).to_string(),
        daemon: value_of(&text, "SANDBOX_DAEMON_SECRET").unwrap_or_default(),
        passphrase: value_of(&text, "HANDOFF_OWNER_PASSPHRASE").unwrap_or_default(),
        preview_configured: value_of(&text, "HANDOFF_PREVIEW_URL").is_some(),
    })
}

/// Whether only the owner can read `path`.
fn private(path: &std::path::Path) -> bool {
    use std::os::unix::fs::PermissionsExt;
    std::fs::metadata(path).is_ok_and(|m| m.permissions().mode() & 0o077 == 0)
}

/// Writes `text` to `path` readable and writable by its owner only (also when it existed).
fn write_private(path: &std::path::Path, text: &str) -> std::io::Result<()> {
    use std::io::Write;
    use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
    let mut file = std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(0o600)
        .open(path)?;
    file.set_permissions(std::fs::Permissions::from_mode(0o600))?;
    file.write_all(text.as_bytes())
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

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    #[test]
    fn a_stack_on_another_port_keeps_its_state_apart() {
        let default = State::of(DEFAULT_PORT);
        assert_eq!(default.wrangler, root().join(".wrangler/state"));
        assert_eq!(default.sandboxes, root().join(".handoff/sandboxes"));
        let other = State::of(8797);
        for (mine, theirs) in [
            (&other.wrangler, &default.wrangler),
            (&other.sandboxes, &default.sandboxes),
            (&other.demo, &default.demo),
        ] {
            assert!(
                !mine.starts_with(theirs) && !theirs.starts_with(mine),
                "{} and {} overlap",
                mine.display(),
                theirs.display()
            );
        }
    }

    #[test]
    fn local_secrets_are_written_for_the_owner_only() {
        let path = std::env::temp_dir().join(format!("handoff-dev-vars-{}", std::process::id()));
        std::fs::write(&path, "OLD=1\n").unwrap();
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o644)).unwrap();
        assert!(!private(&path));
        write_private(&path, "KEY=value\n").unwrap();
        let mode = std::fs::metadata(&path).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o600);
        assert!(private(&path));
        assert_eq!(std::fs::read_to_string(&path).unwrap(), "KEY=value\n");
        let _ = std::fs::remove_file(&path);
    }
}
