use super::*;
use crate::json_cost::kept::tests::{any_value, pruned, SPEC};
use crate::json_cost::kept::{self, Keep};
use proptest::prelude::*;
use serde::de::IgnoredAny;
use serde_json::json;

/// All of `text` pruned to `skeleton` at once.
pub fn prune(text: &[u8], skeleton: &Value, max: usize) -> Result<Vec<u8>, Pruned> {
    let mut pruner = Pruner::new(skeleton, max)?;
    pruner.feed(text)?;
    pruner.finish()
}

/// `text` fed in pieces cut at `cuts` (positions taken modulo its length).
pub(crate) fn prune_in(
    text: &[u8],
    skeleton: &Value,
    cuts: &[usize],
    max: usize,
) -> Result<Vec<u8>, Pruned> {
    let mut at: Vec<usize> = cuts.iter().map(|c| c % (text.len() + 1)).collect();
    at.extend([0, text.len()]);
    at.sort_unstable();
    let mut pruner = Pruner::new(skeleton, max)?;
    for piece in at.windows(2) {
        pruner.feed(&text[piece[0]..piece[1]])?;
    }
    pruner.finish()
}

fn text(out: Result<Vec<u8>, Pruned>) -> String {
    String::from_utf8(out.unwrap()).unwrap()
}

const MESSAGE: Keep = Keep::Object(&[
    ("info", Keep::Object(&[("role", Keep::Scalar)])),
    (
        "parts",
        Keep::Array(&Keep::Object(&[
            ("type", Keep::Scalar),
            ("text", Keep::Scalar),
        ])),
    ),
]);

#[test]
fn only_the_named_parts_are_written_and_containers_elsewhere_become_null() {
    let skeleton = Keep::Array(&MESSAGE).skeleton();
    let input = br#" [ {"info": {"role": "assistant", "tokens": {"input": 5}},
        "parts": [{"type": "tool", "state": {"output": "a long output"}, "text": {"x": [1]}},
                  {"type": "text", "text": "Done \"now\" \u00e9", "metadata": [1, 2, 3]}],
        "extra": [[[]]]},
        {"parts": -1.5e+3, "info": null} ] "#;
    let expected = r#"[{"info":{"role":"assistant"},"parts":[{"type":"tool","text":null},{"type":"text","text":"Done \"now\" \u00e9"}]},{"parts":-1.5e+3,"info":null}]"#;
    assert_eq!(text(prune(input, &skeleton, usize::MAX)), expected);
    // Any cut of the text gives the same.
    for cut in 0..input.len() {
        assert_eq!(
            text(prune_in(input, &skeleton, &[cut], usize::MAX)),
            expected
        );
    }
}

#[test]
fn a_key_written_with_escapes_is_the_name_it_spells() {
    let skeleton = json!({"role": null});
    let out = prune(br#"{"r\u006fle":"user","ro\"le":1}"#, &skeleton, 100);
    assert_eq!(text(out), r#"{"r\u006fle":"user"}"#);
    // Repeated, both are written: whoever parses it holds the last, as from the whole text.
    let out = prune(br#"{"role":1,"role":2}"#, &skeleton, 100);
    assert_eq!(text(out), r#"{"role":1,"role":2}"#);
}

#[test]
fn what_is_kept_is_bounded_not_what_is_read() {
    let skeleton = json!([{"role": null}]);
    let heavy = format!(r#"{{"role":"user","output":"{}"}}"#, "x".repeat(1 << 20));
    let input = format!("[{}]", vec![heavy; 20].join(","));
    let out = prune(input.as_bytes(), &skeleton, 1024).unwrap();
    assert_eq!(out.len(), 1 + 20 * 16);
    let refused = prune(input.as_bytes(), &skeleton, 100);
    assert_eq!(refused, Err(Pruned::TooLarge { max: 100 }));
}

#[test]
fn text_that_is_not_json_is_refused_where_it_goes_wrong() {
    let skeleton = json!([null]);
    for (bad, at) in [
        (&b"[1,]"[..], 3),
        (b"[01]", 2),
        (b"[1.]", 3),
        (b"[-]", 2),
        (b"[tru]", 4),
        (b"[\"a\x01\"]", 3),
        (b"[\"\\x\"]", 3),
        (b"[\"\\u12g4\"]", 6),
        (b"[1} ", 2),
        (b"[1] 2", 4),
        (b"{\"a\" 1}", 5),
        (b"{1:2}", 1),
        (b"]", 0),
    ] {
        let refused = prune(bad, &skeleton, 100);
        assert!(
            matches!(refused, Err(Pruned::Invalid { at: a, .. }) if a == at),
            "{}: {refused:?}",
            String::from_utf8_lossy(bad)
        );
    }
    for unfinished in [&b""[..], b"[1", b"{\"a\":", b"\"abc", b"-", b"[1,2"] {
        assert!(prune(unfinished, &skeleton, 100).is_err());
    }
    assert_eq!(text(prune(b" 12e-3 ", &skeleton, 100)), "12e-3");
}

#[test]
fn nesting_is_read_to_the_pruners_depth_and_no_deeper() {
    let skeleton = json!({"kept": null});
    let nested = |n: usize| format!(r#"{{"other":{}{}}}"#, "[".repeat(n), "]".repeat(n));
    assert_eq!(
        text(prune(nested(MAX_DEPTH - 1).as_bytes(), &skeleton, 100)),
        "{}"
    );
    let refused = prune(nested(MAX_DEPTH).as_bytes(), &skeleton, 100);
    assert!(
        matches!(refused, Err(Pruned::Invalid { .. })),
        "{refused:?}"
    );
}

#[test]
fn a_skeleton_is_checked() {
    for bad in [
        json!([]),
        json!([null, null]),
        json!({"a": 1}),
        json!("x"),
        json!(false),
    ] {
        assert!(matches!(Pruner::new(&bad, 1), Err(Pruned::Skeleton(_))));
    }
}

/// What `skeleton` keeps of a parsed value (the reference, with `true` for the whole).
fn pruned_by(value: &Value, skeleton: &Value) -> Value {
    match (value, skeleton) {
        (value, Value::Bool(true)) => value.clone(),
        (Value::Array(items), Value::Array(each)) => {
            Value::Array(items.iter().map(|v| pruned_by(v, &each[0])).collect())
        }
        (Value::Object(map), Value::Object(fields)) => Value::Object(
            map.iter()
                .filter_map(|(k, v)| Some((k.clone(), pruned_by(v, fields.get(k)?))))
                .collect(),
        ),
        (Value::Array(_) | Value::Object(_), _) => Value::Null,
        (scalar, _) => scalar.clone(),
    }
}

#[test]
fn a_value_kept_whole_is_written_as_it_was() {
    let skeleton = json!([{"info": true, "parts": [{"state": {"input": true}}]}]);
    let input = br#"[{"info": {"a": [1, {"b\"c": {}}], "role": "user"}, "parts": [{"state":
        {"input": {"x": [[]], "": null}, "output": "dropped"}}, {"state": 7}]}]"#;
    let expected = r#"[{"info":{"a":[1,{"b\"c":{}}],"role":"user"},"parts":[{"state":{"input":{"x":[[]],"":null}}},{"state":7}]}]"#;
    for cut in 0..input.len() {
        assert_eq!(
            text(prune_in(input, &skeleton, &[cut], usize::MAX)),
            expected
        );
    }
}

proptest! {
    #[test]
    fn text_kept_whole_is_the_text(
        value in any_value(),
        cuts in proptest::collection::vec(any::<usize>(), 0..8),
    ) {
        let text = value.to_string();
        let out = prune_in(text.as_bytes(), &json!(true), &cuts, usize::MAX).unwrap();
        prop_assert_eq!(String::from_utf8(out).unwrap(), text);
    }

    #[test]
    fn pruned_text_parses_to_what_its_skeleton_keeps(
        value in any_value(),
        cuts in proptest::collection::vec(any::<usize>(), 0..8),
    ) {
        let skeleton = json!([{"a": true, "inner": {"list": [true]}, "list": [{"a": null}]}]);
        let text = value.to_string();
        let out = prune_in(text.as_bytes(), &skeleton, &cuts, usize::MAX).unwrap();
        let whole: Value = serde_json::from_str(&text).unwrap();
        let kept: Value = serde_json::from_slice(&out).unwrap();
        prop_assert_eq!(kept, pruned_by(&whole, &skeleton));
    }

    #[test]
    fn pruned_text_parses_to_what_the_whole_would(
        value in any_value(),
        cuts in proptest::collection::vec(any::<usize>(), 0..8),
    ) {
        let text = value.to_string();
        let out = prune_in(text.as_bytes(), &SPEC.skeleton(), &cuts, usize::MAX).unwrap();
        let whole: Value = serde_json::from_str(&text).unwrap();
        let kept = kept::parse(&out, &SPEC, usize::MAX).unwrap();
        prop_assert_eq!(kept, pruned(&whole, &SPEC));
    }

    #[test]
    fn any_bytes_are_refused_exactly_when_they_are_not_json(
        value in any_value(),
        edits in proptest::collection::vec((any::<usize>(), any::<u8>()), 1..4),
        cuts in proptest::collection::vec(any::<usize>(), 0..4),
    ) {
        let mut bytes = value.to_string().into_bytes();
        for (at, b) in edits {
            let at = at % (bytes.len() + 1);
            let some = b"[]{}\":,-0e.\\ u9an";
            bytes.insert(at, some[b as usize % some.len()]);
        }
        let out = prune_in(&bytes, &SPEC.skeleton(), &cuts, usize::MAX);
        let json = serde_json::from_slice::<IgnoredAny>(&bytes);
        prop_assert_eq!(out.is_ok(), json.is_ok(), "{}: {:?}", String::from_utf8_lossy(&bytes), out);
        if let Ok(whole) = kept::parse(&bytes, &SPEC, usize::MAX) {
            let out = out.unwrap();
            prop_assert_eq!(kept::parse(&out, &SPEC, usize::MAX).ok(), Some(whole));
        }
    }
}
