use super::*;
use crate::json_cost::tests::measured;
use proptest::prelude::*;
use serde_json::json;

const LEAF: Keep = Keep::Scalar;
const INNER: Keep = Keep::Object(&[("a", LEAF), ("list", Keep::Array(&LEAF))]);
pub(crate) const SPEC: Keep = Keep::Array(&Keep::Object(&[
    ("a", LEAF),
    ("inner", INNER),
    ("list", Keep::Array(&INNER)),
]));

/// What `keep` keeps of a parsed value: the reference the streaming parse must equal.
pub(crate) fn pruned(value: &Value, keep: &Keep) -> Value {
    match (value, keep) {
        (Value::Array(items), Keep::Array(each)) => {
            Value::Array(items.iter().map(|v| pruned(v, each)).collect())
        }
        (Value::Object(map), Keep::Object(fields)) => Value::Object(
            map.iter()
                .filter_map(|(k, v)| {
                    let (_, keep) = fields.iter().find(|(name, _)| name == k)?;
                    Some((k.clone(), pruned(v, keep)))
                })
                .collect(),
        ),
        (Value::Array(_) | Value::Object(_), _) => Value::Null,
        (scalar, _) => scalar.clone(),
    }
}

pub(crate) fn any_value() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        any::<i64>().prop_map(Value::from),
        (-1e9f64..1e9).prop_map(Value::from),
        "[a-z\"\\\\é]{0,12}".prop_map(Value::String),
    ];
    leaf.prop_recursive(4, 64, 6, |inner| {
        prop_oneof![
            proptest::collection::vec(inner.clone(), 0..6).prop_map(Value::Array),
            proptest::collection::vec(
                (
                    prop_oneof![Just("a"), Just("inner"), Just("list"), Just("b")],
                    inner
                ),
                0..5
            )
            .prop_map(|m| Value::Object(m.into_iter().map(|(k, v)| (k.to_string(), v)).collect())),
        ]
    })
}

proptest! {
    #[test]
    fn what_is_kept_is_the_value_pruned(value in any_value()) {
        let text = value.to_string();
        let kept = parse(text.as_bytes(), &SPEC, usize::MAX).unwrap();
        // Against the text parsed whole (its floats read back exactly as the parse reads them).
        let whole: Value = serde_json::from_str(&text).unwrap();
        prop_assert_eq!(kept, pruned(&whole, &SPEC));
        // Counting alone reckons what building does.
        let only_counted = pass(text.as_bytes(), &SPEC, usize::MAX, false).1;
        prop_assert_eq!(only_counted, pass(text.as_bytes(), &SPEC, usize::MAX, true).1);
    }
}

/// What the kept tree really takes, as counted by the test allocator, against the reckoning.
fn taken_and_reckoned(text: &str, keep: &Keep) -> (usize, usize) {
    let ((value, reckoned), kept, _) = measured(|| counted(text.as_bytes(), keep, usize::MAX));
    assert!(value.is_ok(), "{text:.200}");
    drop(value);
    (kept, reckoned)
}

#[test]
fn the_reckoning_is_never_below_what_is_kept() {
    let message = json!({
        "info": {"role": "assistant", "tokens": {"input": 10, "output": 2}, "cost": 0.5},
        "parts": [{"type": "tool", "tool": "edit", "state": {
            "status": "completed", "title": "src/lib.rs",
            "input": {"filePath": "src/lib.rs", "content": "x".repeat(50_000)},
            "output": "y".repeat(80_000),
            "metadata": {"diff": "z".repeat(80_000), "many": (0..2_000).collect::<Vec<_>>()}
        }}]
    });
    const MESSAGE: Keep = Keep::Object(&[
        (
            "info",
            Keep::Object(&[
                ("role", LEAF),
                ("tokens", Keep::Object(&[("input", LEAF), ("output", LEAF)])),
                ("cost", LEAF),
            ]),
        ),
        (
            "parts",
            Keep::Array(&Keep::Object(&[
                ("type", LEAF),
                ("tool", LEAF),
                (
                    "state",
                    Keep::Object(&[
                        ("status", LEAF),
                        ("title", LEAF),
                        ("input", Keep::Object(&[("filePath", LEAF)])),
                    ]),
                ),
            ])),
        ),
    ]);
    let list = Value::Array(vec![message; 40]).to_string();
    let shapes = [
        (list.clone(), Keep::Array(&MESSAGE)),
        ("[{},{},{}]".to_string(), Keep::Array(&Keep::Object(&[]))),
        (
            format!("[{}0]", "{\"a\":\"x\",\"list\":[1,2,3]},".repeat(10_000)),
            SPEC,
        ),
        (format!("[{}0]", "1,".repeat(100_000)), Keep::Array(&LEAF)),
        (format!("{{\"a\":\"{}\"}}", "é".repeat(100_000)), INNER),
    ];
    for (text, keep) in shapes {
        let (kept, reckoned) = taken_and_reckoned(&text, &keep);
        assert!(reckoned >= kept, "{reckoned} < {kept}: {text:.80}");
        assert!(
            reckoned <= 4 * kept + 1024,
            "{reckoned} far above {kept}: {text:.80}"
        );
    }
    // Forty heavy tool calls keep their titles: a sliver of their text.
    let (kept, _) = taken_and_reckoned(&list, &Keep::Array(&MESSAGE));
    assert!(kept * 50 < list.len(), "{kept} of {}", list.len());
}

#[test]
fn too_much_kept_is_refused_as_it_is_built() {
    let text = format!("[{}{{}}]", "{},".repeat(1_000_000));
    let keep = Keep::Array(&Keep::Object(&[]));
    let max = 1024 * 1024;
    let (refused, _, peak) = measured(|| parse(text.as_bytes(), &keep, max));
    match refused {
        Err(Refused::TooLarge { bytes, max: m }) => assert!(bytes > m && m == max),
        other => panic!("{other:?}"),
    }
    // Refused by counting alone: nothing was built.
    assert!(peak < 64 * 1024, "{peak}");
    // Skipped, the same text costs nothing.
    assert_eq!(parse(text.as_bytes(), &LEAF, max).unwrap(), Value::Null);
}

#[test]
fn what_is_not_json_is_refused_as_such_however_deep() {
    for text in ["[1,", "{\"a\":}", "[1] 2", ""] {
        assert!(
            matches!(
                parse(text.as_bytes(), &SPEC, usize::MAX),
                Err(Refused::Invalid(_))
            ),
            "{text}"
        );
    }
    // What is skipped is skipped without a stack as deep as the text.
    let deep = format!("[{{\"b\":{}{}}}]", "[".repeat(100_000), "]".repeat(100_000));
    assert_eq!(
        parse(deep.as_bytes(), &SPEC, usize::MAX).unwrap(),
        json!([{}])
    );
    let unclosed = format!("[{{\"b\":{}}}]", "[".repeat(100_000));
    assert!(matches!(
        parse(unclosed.as_bytes(), &SPEC, usize::MAX),
        Err(Refused::Invalid(_))
    ));
}

#[test]
fn no_text_is_reckoned_more_than_the_most_per_byte() {
    const DENSE: Keep = Keep::Array(&Keep::Object(&[("", LEAF), ("a", LEAF)]));
    for text in [
        format!("[{}{{\"\":0}}]", "{\"\":0},".repeat(1_000)),
        format!("[{}{{\"a\":\"\"}}]", "{\"a\":\"\"},".repeat(1_000)),
        format!("[{}\"\"]", "\"\",".repeat(1_000)),
        "{\"\":0}".to_string(),
    ] {
        let (_, reckoned) = counted(text.as_bytes(), &DENSE, usize::MAX);
        assert!(
            reckoned <= text.len() * MOST_PER_BYTE,
            "{reckoned}: {text:.40}"
        );
    }
}
