//! Property-based fuzzing (proptest) of the daemon's parsers of outside input: workspace paths
//! (every file route), the egress credential proxy's path check and the Worker's bearer
//! tokens; the egress proxy itself is fuzzed with raw requests in `egress/fuzz.rs`.
//! `cargo xtask test` runs 2,000 cases per target, `cargo xtask fuzz` many more
//! (`HANDOFF_FUZZ_CASES`); see the Worker's `src/fuzz/` for the rest.

use crate::auth::Verifier;
use crate::egress::credentials::clean_path;
use crate::files::resolve;
use handoff_wire::WORKSPACE;
use proptest::prelude::*;
use proptest::test_runner::{Config, TestRunner};
use std::path::Component;

pub(crate) fn run<S: Strategy>(
    name: &str,
    strategy: S,
    check: impl Fn(S::Value) -> Result<(), TestCaseError>,
) where
    S::Value: std::fmt::Debug,
{
    let cases = std::env::var("HANDOFF_FUZZ_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(2_000);
    let started = std::time::Instant::now();
    let mut runner = TestRunner::new(Config {
        cases,
        failure_persistence: None,
        ..Config::default()
    });
    if let Err(e) = runner.run(&strategy, check) {
        panic!("fuzz {name}: {e}");
    }
    println!(
        "fuzz daemon_{name}: {cases} cases, 0 failures, {:.1} s",
        started.elapsed().as_secs_f64()
    );
}

fn text(pieces: &'static [&'static str]) -> impl Strategy<Value = String> {
    let piece = prop_oneof![
        3 => proptest::sample::select(pieces).prop_map(str::to_string),
        1 => any::<String>(),
    ];
    proptest::collection::vec(piece, 0..12).prop_map(|parts| parts.concat())
}

#[test]
fn fuzz_workspace_paths() {
    let pieces = &[
        "..",
        ".",
        "/",
        "//",
        "a",
        "\0",
        "\\",
        "~",
        "%2e",
        "/home/sandbox",
        "/home/sandbox2",
        "/etc/passwd",
        " ",
    ];
    run("workspace_paths", text(pieces), |path| {
        if let Ok(resolved) = resolve(&path) {
            // Never outside the workspace: no parent, root or prefix components.
            prop_assert!(
                resolved
                    .relative
                    .components()
                    .all(|c| matches!(c, Component::Normal(_))),
                "{path:?} → {resolved:?}"
            );
            prop_assert!(resolved.display.starts_with(WORKSPACE), "{resolved:?}");
            prop_assert!(!path.contains('\0'));
        }
        Ok(())
    });
}

#[test]
fn fuzz_egress_credential_paths() {
    let pieces = &[
        "/", "..", ".", "%2e", "%2E", "%2f", "%5c", "\\", "?", "v1", "repos", "%",
    ];
    run("egress_credential_paths", text(pieces), |path| {
        if clean_path(&path) {
            let path = path.split('?').next().unwrap_or_default();
            let lower = path.to_ascii_lowercase();
            prop_assert!(path.starts_with('/') && !path.contains('\\'), "{path:?}");
            prop_assert!(!lower.contains("%2e") && !lower.contains("%2f"), "{path:?}");
            prop_assert!(path.split('/').all(|s| s != ".." && s != "."), "{path:?}");
        }
        Ok(())
    });
}

#[test]
fn fuzz_bearer_tokens() {
    let verifier = Verifier::new(b"fuzz-daemon-secret-0123456789abcdef", None).unwrap();
    let pieces = &[
        "Bearer ", "eyJ", ".", "alg", "none", "HS256", "=", "-", "_", " ",
    ];
    run("bearer_tokens", text(pieces), |header| {
        // Nothing this deployment did not sign opens a sandbox.
        prop_assert!(
            verifier.check(Some(&header), "sbx_fuzz").is_err(),
            "{header:?}"
        );
        Ok(())
    });
}
