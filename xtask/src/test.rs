//! `cargo xtask test` and `cargo xtask bench`: install, build the Worker once, then run the tidy
//! checks (fmt, the structure checks of `tidy.rs`, clippy on native and wasm32), the unit tests and the integration tests that drive
//! the real Worker in workerd; or the benchmark that prints figures.

use crate::{containers, proc, python, root, setup, worker, Result};
use std::process::Command;
use std::time::Instant;

pub fn run(args: &[String]) -> Result {
    let started = Instant::now();
    let tools = setup::ensure()?;
    setup::ensure_debian(&[setup::CHROMIUM])?;
    worker::build(&tools)?;
    worker::build_daemon(&tools)?;
    let cargo = || {
        let mut cmd = tools.command("cargo");
        cmd.current_dir(root());
        cmd
    };
    step("rustfmt", cargo().args(["fmt", "--all", "--", "--check"]))?;
    println!("xtask: == tidy ==");
    crate::tidy::run()?;
    step(
        "clippy (native)",
        cargo().args([
            "clippy",
            "--workspace",
            "--all-targets",
            "--",
            "-D",
            "warnings",
        ]),
    )?;
    // The served wasm, then the variants `bench bundle-split` weighs (kept compiling, or the
    // bench breaks unseen).
    for features in [
        None,
        Some("bundle-front"),
        Some("bundle-objects"),
        Some("bundle-front,bundle-one-tool"),
    ] {
        let mut clippy = cargo();
        clippy.args([
            "clippy",
            "-p",
            "handoff",
            "--target",
            "wasm32-unknown-unknown",
        ]);
        let name = match features {
            Some(features) => {
                clippy.args(["--features", features]);
                format!("clippy (wasm32, --features {features})")
            }
            None => "clippy (wasm32)".to_string(),
        };
        step(&name, clippy.args(["--", "-D", "warnings"]))?;
    }
    step(
        "unit tests",
        cargo().args([
            "test",
            "-p",
            "handoff",
            "-p",
            "handoff-wire",
            "-p",
            "handoff-sandbox",
            "-p",
            "xtask",
            "--lib",
            "--bins",
        ]),
    )?;
    // The test support's own unit tests (the scripted model, the forge, the reaper's protocol).
    step(
        "test-support unit tests",
        cargo().args(["test", "-p", "handoff-tests", "--lib"]),
    )?;
    python::ensure()?;
    let mut integration = cargo();
    integration
        .env("HANDOFF_PYTHON", python::interpreter())
        .args(["test", "-p", "handoff-tests", "--test", "it", "--"])
        .args(args);
    if std::env::var_os("RUST_TEST_THREADS").is_none() {
        integration.env("RUST_TEST_THREADS", integration_threads().to_string());
    }
    step("integration tests", &mut integration)?;
    container_lane(&tools, &cargo, args)?;
    println!(
        "xtask: all checks passed in {:.0} s",
        started.elapsed().as_secs_f64()
    );
    Ok(())
}

/// How many integration tests run at once unless `RUST_TEST_THREADS` says: one more than the
/// cores. Many tests spend part of their time waiting on timers, agents and restarts, so with
/// one test per core the cores were idle 40 % of the time (2 cores: 811 s with 2
/// tests at once, 632 s with 3, 618 s with 4).
fn integration_threads() -> usize {
    std::thread::available_parallelism().map_or(2, |n| n.get()) + 1
}

pub fn bench(args: &[String]) -> Result {
    let tools = setup::ensure()?;
    worker::build(&tools)?;
    worker::build_daemon(&tools)?;
    if args.first().map(String::as_str) == Some("bundle-split") {
        worker::build_split_variants(&tools)?;
    }
    let mut cmd = tools.command("cargo");
    // The client's own cost is microseconds next to the server's milliseconds, so it runs in
    // the dev profile the tests already built rather than in a long optimized build.
    cmd.current_dir(root())
        .args(["run", "-p", "handoff-tests", "--bin", "bench", "--"])
        .args(args);
    // The sandbox figures include the container backend wherever the lane can run.
    let wants_sandboxes = matches!(
        args.first().map(String::as_str),
        None | Some("all" | "sandboxes" | "containers")
    );
    let lane = match containers::unavailable() {
        Some(why) if wants_sandboxes => {
            println!("xtask: sandboxes in containers will not be measured: {why}");
            None
        }
        None if wants_sandboxes => {
            cmd.envs(containers::Lane::test_env());
            Some(containers::ensure(&tools)?)
        }
        _ => None,
    };
    let result = proc::run(&mut cmd);
    if let Some(mut engine) = lane.and_then(containers::Lane::into_engine) {
        engine.stop();
    }
    result
}

/// The container lane: sandboxes in real containers from the project's image. It runs wherever
/// an engine can (the project installs and starts one as root); elsewhere it says why not.
fn container_lane(tools: &setup::Tools, cargo: &dyn Fn() -> Command, args: &[String]) -> Result {
    if let Some(why) = containers::unavailable() {
        println!("xtask: == container lane: NOT RUN: {why} ==");
        return Ok(());
    }
    let lane = containers::ensure(tools)?;
    let mut tests = cargo();
    tests
        .args(["test", "-p", "handoff-tests", "--test", "containers", "--"])
        .args(args)
        .envs(containers::Lane::test_env());
    let result = step("container lane", &mut tests);
    if let Some(mut engine) = lane.into_engine() {
        engine.stop();
    }
    result
}

fn step(name: &str, cmd: &mut Command) -> Result {
    println!("xtask: == {name} ==");
    let started = Instant::now();
    proc::run(cmd)?;
    println!(
        "xtask: {name} passed in {:.0} s",
        started.elapsed().as_secs_f64()
    );
    Ok(())
}

/// `cargo xtask fuzz`: every fuzz target of the Worker and the daemon with
/// `HANDOFF_FUZZ_CASES` cases each (100,000 unless set), printing cases, failures and the
/// slowest case per target. `cargo xtask test` runs the same targets with 2,000 cases.
pub fn fuzz() -> Result {
    let cases = std::env::var("HANDOFF_FUZZ_CASES").unwrap_or_else(|_| "100000".into());
    if !cases.parse::<u32>().is_ok_and(|n| n > 0) {
        return Err(format!(
            "HANDOFF_FUZZ_CASES must be a positive whole number of cases, not {cases:?}"
        ));
    }
    println!("xtask: fuzzing every parser of outside input, {cases} cases per target");
    let started = Instant::now();
    // Every package is fuzzed even when an earlier one fails, so one run reports every failure.
    let mut failed = Vec::new();
    for package in ["handoff", "handoff-sandbox"] {
        let mut cmd = Command::new("cargo");
        cmd.current_dir(root())
            .args(["test", "--quiet", "-p", package, "--lib", "fuzz_", "--"])
            .args(["--nocapture", "--test-threads", "2"])
            .env("HANDOFF_FUZZ_CASES", &cases);
        if let Err(e) = proc::run(&mut cmd) {
            failed.push(format!("{package}: {e}"));
        }
    }
    println!(
        "xtask: fuzzing done in {:.0} s",
        started.elapsed().as_secs_f64()
    );
    if failed.is_empty() {
        Ok(())
    } else {
        Err(format!("fuzzing failed in {}", failed.join("; ")))
    }
}
