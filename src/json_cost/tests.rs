//! The reckoning checked against what `serde_json` really allocates, counted per thread by a
//! global allocator of this test binary.

use super::*;
use serde_json::json;
use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;

struct Counting;

thread_local! {
    static LIVE: Cell<usize> = const { Cell::new(0) };
    static PEAK: Cell<usize> = const { Cell::new(0) };
}

fn count(grown: usize, shrunk: usize) {
    let _ = LIVE.try_with(|live| {
        let now = (live.get() + grown).saturating_sub(shrunk);
        live.set(now);
        let _ = PEAK.try_with(|peak| peak.set(peak.get().max(now)));
    });
}

// SAFETY: every call is passed on to the system allocator unchanged; only sizes are counted.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        count(layout.size(), 0);
        System.alloc(layout)
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        count(0, layout.size());
        System.dealloc(ptr, layout)
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        count(new_size, layout.size());
        System.realloc(ptr, layout, new_size)
    }
}

#[global_allocator]
static COUNTING: Counting = Counting;

/// Bytes `f` left allocated on this thread, and the most it had allocated at once, beyond what
/// was allocated before.
pub(crate) fn measured<T>(f: impl FnOnce() -> T) -> (T, usize, usize) {
    let before = LIVE.with(Cell::get);
    PEAK.with(|peak| peak.set(before));
    let out = f();
    let kept = LIVE.with(Cell::get).saturating_sub(before);
    let peak = PEAK.with(Cell::get).saturating_sub(before);
    (out, kept, peak)
}

/// The reckoning of `text` and what parsing it took at its peak.
pub(crate) fn reckoned_and_taken(text: &str) -> (usize, usize) {
    let reckoned = tree_bytes(text.as_bytes());
    let (value, _, peak) = measured(|| serde_json::from_str::<Value>(text));
    drop(value);
    (reckoned, peak)
}

fn repeated(unit: &str, times: usize) -> String {
    format!("[{}]", vec![unit; times].join(","))
}

#[test]
fn the_reckoning_is_never_below_the_tree_and_not_far_above_it() {
    let big_object = format!(
        "{{{}}}",
        (0..5000)
            .map(|i| format!("\"key{i}\":{i}"))
            .collect::<Vec<_>>()
            .join(",")
    );
    let message = json!({
        "info": {"id": "msg_1", "role": "assistant", "time": {"created": 1, "completed": 2},
                 "tokens": {"input": 10, "output": 5, "reasoning": 0, "cache": {"read": 0, "write": 0}},
                 "cost": 0.01, "finish": "tool-calls", "modelID": "m", "providerID": "p"},
        "parts": [
            {"id": "prt_1", "type": "text", "text": "Looking at the test.\n\"quoted\" \u{e9}"},
            {"id": "prt_2", "type": "tool", "tool": "bash", "callID": "c1",
             "state": {"status": "completed", "input": {"command": "cargo test"},
                       "output": "ok", "title": "cargo test", "metadata": {}, "time": {"start": 1, "end": 2}}}
        ]
    })
    .to_string();
    let shapes = [
        ("numbers", repeated("0", 100_000)),
        ("small objects", repeated(r#"{"a":0}"#, 20_000)),
        ("empty arrays", repeated("[]", 50_000)),
        ("strings", repeated(r#""some text\n""#, 20_000)),
        ("one big object", big_object),
        ("messages", repeated(&message, 2_000)),
    ];
    for (name, text) in shapes {
        let (reckoned, taken) = reckoned_and_taken(&text);
        println!(
            "{name}: {} bytes of text, {taken} taken, {reckoned} reckoned",
            text.len()
        );
        assert!(
            reckoned >= taken,
            "{name}: reckoned {reckoned} < taken {taken}"
        );
        assert!(
            reckoned <= taken * 4,
            "{name}: reckoned {reckoned} is over 4x the {taken} taken"
        );
    }
}

#[test]
fn deep_text_is_reckoned_without_a_deep_stack() {
    let text = "[".repeat(1_000_000) + &"]".repeat(1_000_000);
    let (reckoned, _, peak) = measured(|| tree_bytes(text.as_bytes()));
    assert!(peak <= MAX_DEPTH * 64, "took {peak} bytes");
    assert!(reckoned > 0);
    assert!(serde_json::from_str::<Value>(&text).is_err());
}

#[test]
fn too_large_text_is_refused_before_it_is_parsed() {
    let text = repeated(r#"{"a":0}"#, 10_000);
    let (refused, _, peak) = measured(|| parse(text.as_bytes(), 1024 * 1024));
    match refused {
        Err(Refused::TooLarge { bytes, max }) => {
            assert!(bytes > max);
            let said = Refused::TooLarge { bytes, max }.to_string();
            assert!(said.contains("more than the 1.0 MiB allowed"), "{said}");
        }
        other => panic!("{other:?}"),
    }
    assert!(peak < 64 * 1024, "took {peak} bytes before refusing");
    assert!(matches!(parse(b"[1,", 1024), Err(Refused::Invalid(_))));
    assert_eq!(parse(b"[1]", 1024).unwrap(), json!([1]));
}
