//! handoff-egress: the network sidecar workerd starts beside every container when handoff runs
//! its sandboxes in real containers locally (`cargo xtask dev --containers`, the tests). It
//! owns the network namespace the sandbox container joins, and does what workerd's container
//! runtime asks of such a sidecar:
//!
//! - on `--http-ingress-address` (workerd connects from the Docker gateway): `PUT /egress` (the
//!   container's egress settings), `GET /ca` (a CA certificate) and `CONNECT 127.0.0.1:<port>`
//!   (a stream to a port of the container — how workerd reaches the sandbox daemon), refusing
//!   anything from inside the namespace itself;
//! - a firewall (`firewall.rs`, it has `NET_ADMIN`): inside the namespace only root — the
//!   sandbox daemon — may open connections beyond loopback, so sandbox users get out only
//!   through the daemon's egress proxy, which applies each sandbox's rules and logs every
//!   destination, as on the local backend;
//! - a CONNECT proxy for the daemon (`forward.rs`) into workerd's egress service, so the daemon
//!   reaches the host (the Worker on its loopback) the way a Cloudflare container reaches the
//!   internet.
//!
//! It does not intercept TLS or redirect traffic transparently (Cloudflare's own sidecar does;
//! the Worker uses no outbound handlers).

mod firewall;
mod forward;
mod ingress;

use std::process::ExitCode;

const USAGE: &str = "\
usage: handoff-egress --http-ingress-address ADDR [--http-egress-port N]
                      [--docker-gateway-cidr CIDR] [--ca FILE] [other workerd flags, ignored]
";

pub struct Config {
    pub ingress: std::net::SocketAddr,
    /// workerd's egress service port on the Docker gateway.
    pub egress_port: Option<u16>,
    pub ca: std::path::PathBuf,
}

fn parse() -> Result<Config, String> {
    let mut ingress = None;
    let mut egress_port = None;
    let mut ca = std::path::PathBuf::from("/etc/handoff-egress/ca.pem");
    let mut args = std::env::args().skip(1);
    while let Some(flag) = args.next() {
        match flag.as_str() {
            "--http-ingress-address" => {
                let value = args.next().ok_or(USAGE)?;
                ingress =
                    Some(value.parse().map_err(|_| {
                        format!("--http-ingress-address {value:?} is not host:port")
                    })?);
            }
            "--ca" => ca = args.next().ok_or(USAGE)?.into(),
            "--http-egress-port" => {
                let value = args.next().ok_or(USAGE)?;
                egress_port = Some(
                    value
                        .parse()
                        .map_err(|_| format!("--http-egress-port {value:?} is not a port"))?,
                );
            }
            // A flag of Cloudflare's sidecar with a value this one does not use.
            "--docker-gateway-cidr" => {
                args.next();
            }
            "--help" | "-h" => return Err(USAGE.into()),
            _ => {}
        }
    }
    Ok(Config {
        ingress: ingress.ok_or_else(|| format!("--http-ingress-address is required\n\n{USAGE}"))?,
        egress_port,
        ca,
    })
}

#[tokio::main]
async fn main() -> ExitCode {
    let config = match parse() {
        Ok(config) => config,
        Err(message) => {
            eprintln!("handoff-egress: {message}");
            return ExitCode::FAILURE;
        }
    };
    // Fails closed: without its firewall the namespace is not started at all (the sandbox
    // would otherwise run with direct network access nobody asked for).
    match firewall::install(config.ingress.port()) {
        Ok(()) => println!(
            "handoff-egress: only root may connect beyond loopback in this network namespace"
        ),
        Err(e) => {
            eprintln!("handoff-egress: cannot install the firewall: {e}");
            return ExitCode::FAILURE;
        }
    }
    match (config.egress_port, forward::gateway()) {
        (Some(port), Some(gateway)) => {
            let egress = std::net::SocketAddr::from((gateway, port));
            tokio::spawn(async move {
                if let Err(e) = forward::serve(egress).await {
                    eprintln!("handoff-egress: {e}");
                }
            });
        }
        _ => {
            eprintln!("handoff-egress: no egress port or gateway: the daemon cannot reach the host")
        }
    }
    match ingress::serve(config).await {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("handoff-egress: {e}");
            ExitCode::FAILURE
        }
    }
}
