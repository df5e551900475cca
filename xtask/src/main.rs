//! `cargo xtask <command>`: the one entry point for setting up, building, running, testing and
//! benchmarking handoff. Every command installs what it needs first and skips what is present.

mod containers;
mod dev;
mod proc;
mod python;
mod screenshot;
mod setup;
mod shim;
mod test;
mod tidy;
mod worker;

use std::path::PathBuf;
use std::process::ExitCode;

const USAGE: &str = "\
usage: cargo xtask <command>

commands:
  dev      install tools, build the Worker and run handoff locally on http://127.0.0.1:8787
  test     install tools, build the Worker once and run every check and test
  bench    install tools, build the Worker and print performance figures
  load     200 opencode_run_task calls at once (keys, cut-off retries) against a fresh stack:
           runs lost and duplicated, acknowledgement p50/p99, runs per minute
           (HANDOFF_LOAD_CALLS, HANDOFF_LOAD_SESSIONS change the size)
  soak     an hour of mixed traffic (runs, sandboxes, polling, OAuth refreshes) against a fresh
           stack: the memory curve of workerd and the daemon, what was left afterwards
           (HANDOFF_SOAK_SECONDS changes the length)
  fuzz     every parser of outside input, 100,000 cases per target (HANDOFF_FUZZ_CASES)
  tidy     check the code base's structure (file sizes, SQL placement, layers, cycles)
  screenshot URL [--out FILE] [--width W] [--height H] [--dark]
           render a page at phone size (390 × 844) to a PNG with headless Chromium
  build    build the Worker bundle into build/ (used by wrangler.toml's [build] command)
  setup    only install the pinned tools (rustup target, cargo installs, npm packages)
";

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let result = match args.first().map(String::as_str) {
        Some("dev") => dev::run(&args[1..]),
        Some("test") => test::run(&args[1..]),
        Some("bench") => test::bench(&args[1..]),
        Some("load") => test::bench(&["load".to_string()]),
        Some("soak") => test::bench(&["soak".to_string()]),
        Some("fuzz") => test::fuzz(),
        Some("tidy") => tidy::run(),
        Some("screenshot") => screenshot::run(&args[1..]),
        Some("build") => setup::ensure().and_then(|tools| worker::build(&tools)),
        Some("setup") => setup::ensure().map(|_| ()),
        Some("help" | "--help" | "-h") | None => {
            print!("{USAGE}");
            return ExitCode::SUCCESS;
        }
        Some(other) => Err(format!("unknown command {other:?}\n\n{USAGE}")),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(message) => {
            eprintln!("xtask: {message}");
            ExitCode::FAILURE
        }
    }
}

/// The repository root (xtask lives one level below it).
pub fn root() -> PathBuf {
    let manifest = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    manifest.parent().map(PathBuf::from).unwrap_or(manifest)
}

pub type Result<T = ()> = std::result::Result<T, String>;
