//! Property-based fuzzing (proptest) of the parsers that read outside input. Each parser's own
//! tests call [`fuzz`] in a test named `fuzz_*`: `cargo xtask test` runs them with 2,000 cases
//! each, `cargo xtask fuzz` with `HANDOFF_FUZZ_CASES` (100,000) and prints the figures.
//! A failing case is shrunk and printed; `fuzz/regressions/` keeps the ones found so far, which
//! run first every time.

use proptest::prelude::*;
use proptest::test_runner::{Config, FileFailurePersistence, TestCaseError, TestRunner};
use std::fmt::Debug;
use std::time::{Duration, Instant};

/// Cases per target: `HANDOFF_FUZZ_CASES`, 2,000 by default.
fn cases() -> u32 {
    std::env::var("HANDOFF_FUZZ_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(2_000)
}

/// Runs `check` on `cases()` inputs drawn from `strategy`; panics with the shrunk input when a
/// check fails or panics. Prints the cases run and the slowest case (a hang shows there).
pub fn fuzz<S>(name: &str, strategy: S, check: impl Fn(S::Value) -> Result<(), TestCaseError>)
where
    S: Strategy,
    S::Value: Debug,
{
    let cases = cases();
    let mut runner = TestRunner::new(Config {
        cases,
        failure_persistence: Some(Box::new(FileFailurePersistence::Direct(
            regressions_file(name).leak(),
        ))),
        ..Config::default()
    });
    let started = Instant::now();
    let slowest = std::cell::Cell::new(Duration::ZERO);
    let result = runner.run(&strategy, |input| {
        let at = Instant::now();
        let outcome = check(input);
        slowest.set(slowest.get().max(at.elapsed()));
        outcome
    });
    if let Err(e) = result {
        panic!("fuzz {name}: {e}");
    }
    println!(
        "fuzz {name}: {cases} cases, 0 failures, slowest case {:.2} ms, {:.1} s",
        slowest.get().as_secs_f64() * 1000.0,
        started.elapsed().as_secs_f64()
    );
}

fn regressions_file(name: &str) -> String {
    format!("{}/fuzz/regressions/{name}.txt", env!("CARGO_MANIFEST_DIR"))
}

/// Text that mixes arbitrary characters with the pieces parsers care about.
pub fn hostile_text(pieces: &'static [&'static str]) -> impl Strategy<Value = String> {
    let piece = prop_oneof![
        3 => proptest::sample::select(pieces).prop_map(str::to_string),
        1 => any::<String>(),
        2 => "[ -~]{0,8}",
    ];
    proptest::collection::vec(piece, 0..12).prop_map(|parts| parts.concat())
}

/// Arbitrary bytes, up to `max` of them.
pub fn bytes(max: usize) -> impl Strategy<Value = Vec<u8>> {
    proptest::collection::vec(any::<u8>(), 0..max)
}

/// Arbitrary JSON values, nested a few levels.
pub fn json() -> impl Strategy<Value = serde_json::Value> {
    use serde_json::Value;
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        any::<i64>().prop_map(Value::from),
        any::<f64>().prop_map(Value::from),
        hostile_text(&[
            "2.0",
            "jsonrpc",
            "method",
            "id",
            "params",
            "tools/call",
            "initialize"
        ])
        .prop_map(Value::String),
    ];
    leaf.prop_recursive(4, 64, 8, |inner| {
        prop_oneof![
            proptest::collection::vec(inner.clone(), 0..6).prop_map(Value::Array),
            proptest::collection::btree_map(
                proptest::sample::select(
                    &[
                        "jsonrpc",
                        "id",
                        "method",
                        "params",
                        "name",
                        "arguments",
                        "result",
                        "error",
                        "_meta",
                        "cursor",
                        "task",
                        "x",
                    ][..]
                )
                .prop_map(str::to_string),
                inner,
                0..6
            )
            .prop_map(|m| Value::Object(m.into_iter().collect())),
        ]
    })
}

#[cfg(test)]
mod targets;
