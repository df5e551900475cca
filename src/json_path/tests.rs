use super::*;
use proptest::prelude::*;
use serde::Deserialize;
use serde_json::json;
use std::collections::BTreeMap;

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
#[allow(dead_code)]
struct Params {
    limit: u32,
    #[serde(default)]
    files: Vec<File>,
    mode: Option<Mode>,
    #[serde(default)]
    env: BTreeMap<String, u32>,
    inner: Option<Inner>,
    #[serde(default)]
    grid: Vec<Vec<u8>>,
    shape: Option<Shape>,
    #[serde(default)]
    modes: Vec<Mode>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
#[allow(dead_code)]
struct File {
    path: String,
    size: Option<u64>,
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "snake_case")]
enum Mode {
    Fast,
    Careful,
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "snake_case")]
#[allow(dead_code)]
enum Shape {
    Circle { radius: u32 },
    Square(u32),
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
#[allow(dead_code)]
struct Inner {
    name: String,
    #[serde(default)]
    tags: Vec<String>,
}

/// The path and message `serde_path_to_error` gives, decoding from the value.
fn reference(value: &Value) -> (String, String) {
    match serde_path_to_error::deserialize::<_, Params>(value.clone()) {
        Ok(_) => panic!("{value} decoded"),
        Err(e) => (e.path().to_string(), e.into_inner().to_string()),
    }
}

fn ours(value: &Value) -> DecodeError {
    let Value::Object(map) = value.clone() else {
        panic!("not an object")
    };
    decode::<Params>(map).expect_err("must not decode")
}

#[test]
fn names_the_same_place_as_a_path_tracking_deserializer() {
    let cases = [
        json!({"limit": "ten"}),
        json!({"limit": -1}),
        json!({"limit": 5_000_000_000u64}),
        json!({"limit": 1.5}),
        json!({"limit": {"a": 1}}),
        json!({"limit": [1, 2]}),
        json!({"limit": null}),
        json!({}),
        json!({"limit": 1, "extra": true}),
        json!({"extra": true, "limit": 1}),
        json!({"limit": 1, "files": [{"path": "a"}, {"path": 7}]}),
        json!({"limit": 1, "files": [{"path": "a"}, {"size": 7}]}),
        json!({"limit": 1, "files": [{"path": "a", "size": "big"}]}),
        json!({"limit": 1, "files": [{"path": "a", "owner": "x"}]}),
        json!({"limit": 1, "files": {"path": "a"}}),
        json!({"limit": 1, "files": ["a"]}),
        json!({"limit": 1, "mode": "slow"}),
        json!({"limit": 1, "mode": 3}),
        json!({"limit": 1, "env": {"A": 1, "B": "two"}}),
        json!({"limit": 1, "env": {"quo\"te\\d": "x"}}),
        json!({"limit": 1, "env": {"ünï": -2}}),
        json!({"limit": 1, "inner": [1]}),
        json!({"limit": 1, "inner": {}}),
        json!({"limit": 1, "inner": {"name": "n", "tags": ["a", 1]}}),
        json!({"limit": 1, "inner": {"name": "n", "tags": ["a", "b"], "more": {"x": [1]}}}),
        json!({"limit": 1, "grid": [[1, 2], [3, 300]]}),
        json!({"limit": 1, "grid": [[1, 2], [3, [4]]]}),
        json!({"limit": 1, "grid": [[1, 2], "row"]}),
        json!({"limit": 1, "shape": {"circle": {"radius": "r"}}}),
        json!({"limit": 1, "shape": {"square": "s"}}),
        json!({"limit": 1, "shape": {"hexagon": 1}}),
        json!({"limit": 1, "shape": {"circle": {}}}),
        json!({"limit": 1, "shape": {"circle": 5}}),
        json!({"limit": 1, "shape": "hexagon"}),
        json!({"limit": 1, "shape": "circle"}),
        json!({"limit": 1, "shape": {"square": 1, "circle": {"radius": 1}}}),
        json!({"limit": 1, "mode": 33}),
        json!({"limit": 1, "mode": -4.5}),
        json!({"limit": 1, "mode": true}),
        json!({"limit": 1, "mode": [1]}),
        json!({"limit": 1, "mode": {}}),
        json!({"limit": 1, "modes": ["fast", "slow", "careful"]}),
        json!({"limit": 1, "modes": ["fast", "careful", "slow"]}),
        json!({"limit": 1, "modes": ["fast", 7]}),
        json!({"limit": 1, "modes": "fast"}),
        json!({"limit": "x", "modes": ["slow"]}),
        json!({"files": [{"path": "a"}], "limit": 1, "zzz": 0}),
        json!({"inner": []}),
        json!({"inner": ["n", [], 3]}),
        json!({"files": [["fast", null, null]]}),
    ];
    // Where decoding from text says more, or names the value itself rather than the variant
    // it should have been.
    let ours_differ = [
        (
            json!({"limit": 1, "shape": {"circle": 5}}),
            "shape.circle",
            "invalid type: integer `5`, expected struct variant Shape::Circle",
        ),
        (
            json!({"limit": 1, "shape": "circle"}),
            "shape",
            "invalid type: unit variant, expected struct variant",
        ),
        // An enum given a map wrong in two ways: the decoders look at the two in turn.
        (
            json!({"limit": 1, "shape": {"path": null, "tags": null}}),
            "shape",
            "unknown variant `path`, expected `circle` or `square`",
        ),
        (
            json!({"limit": 1, "shape": {"circle": null, "path": null}}),
            "shape.circle",
            "invalid type: null, expected struct variant Shape::Circle",
        ),
        // The text's decoder reads a struct variant's fields from an array too.
        (
            json!({"limit": 1, "shape": {"circle": []}}),
            "shape.circle",
            "invalid length 0, expected struct variant Shape::Circle with 1 element",
        ),
    ];
    let mismatches: Vec<String> = cases
        .iter()
        .filter_map(|case| {
            let (path, message) = match ours_differ.iter().find(|(c, _, _)| c == case) {
                Some((_, path, message)) => (path.to_string(), message.to_string()),
                None => reference(case),
            };
            let expected = DecodeError { path, message };
            let got = ours(case);
            (got != expected).then(|| format!("{case}: {got:?}, expected {expected:?}"))
        })
        .collect();
    assert!(mismatches.is_empty(), "{mismatches:#?}");
}

#[test]
fn messages_carry_no_position_in_the_rebuilt_text() {
    let error = ours(&json!({"limit": 1, "files": [{"path": 7}]}));
    assert_eq!(error.path, "files[0].path");
    assert_eq!(
        error.message,
        "invalid type: integer `7`, expected a string"
    );
}

#[test]
fn a_decodable_object_decodes() {
    let Value::Object(map) =
        json!({"limit": 3, "files": [{"path": "a", "size": 2}], "mode": "fast"})
    else {
        unreachable!()
    };
    let params: Params = decode(map).expect("decodes");
    assert_eq!(params.limit, 3);
    assert_eq!(params.files[0].size, Some(2));
    assert!(matches!(params.mode, Some(Mode::Fast)));
}

/// Values for one field, right or wrong for it.
fn field_value() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(json!(null)),
        Just(json!(true)),
        (-3i64..400).prop_map(Value::from),
        Just(json!(2.5)),
        Just(json!(5_000_000_000u64)),
        prop_oneof![
            Just("fast"),
            Just("careful"),
            Just("slow"),
            Just("circle"),
            Just("a\"b"),
            Just("ü")
        ]
        .prop_map(Value::from),
    ];
    leaf.prop_recursive(3, 24, 4, |inner| {
        prop_oneof![
            proptest::collection::vec(inner.clone(), 0..4).prop_map(Value::from),
            proptest::collection::btree_map(
                prop_oneof![
                    Just("path"),
                    Just("size"),
                    Just("name"),
                    Just("tags"),
                    Just("circle"),
                    Just("square"),
                    Just("radius"),
                    Just("x\"y")
                ]
                .prop_map(String::from),
                inner,
                0..3
            )
            .prop_map(|m| Value::Object(m.into_iter().collect())),
        ]
    })
}

/// What a value's decoder says of a struct variant given as an array, which the text's decoder
/// reads as the variant's fields in order.
const ARRAY_FOR_VARIANT: &str = "invalid type: sequence, expected struct variant";

proptest! {
    #[test]
    fn random_objects_are_named_like_the_reference(
        fields in proptest::collection::btree_map(
            prop_oneof![
                Just("limit"),
                Just("files"),
                Just("mode"),
                Just("env"),
                Just("inner"),
                Just("grid"),
                Just("shape"),
                Just("modes"),
                Just("other")
            ]
            .prop_map(String::from),
            field_value(),
            0..5,
        )
    ) {
        let value = Value::Object(fields.into_iter().collect());
        let reference = serde_path_to_error::deserialize::<_, Params>(value.clone());
        let Value::Object(map) = value.clone() else { unreachable!() };
        let ours = decode::<Params>(map);
        match (reference, ours) {
            (Ok(_), Ok(_)) => {}
            (Err(expected), Err(got)) => {
                let path = expected.path().to_string();
                let message = expected.into_inner().to_string();
                // The known differences: a variant's name given where its fields were expected
                // (named as the value), and struct variants named with their type.
                let unit_for_struct = message.contains("unit variant, expected struct variant")
                    && path.starts_with(&format!("{}.", got.path));
                // An enum given a map wrong in two ways: the decoders look at the two in turn.
                let two_faults = message == "invalid value: map, expected map with a single key"
                    && (got.path == path || got.path.starts_with(&format!("{path}.")));
                // The text's decoder also reads a struct variant's fields from an array.
                let array_variant = message == ARRAY_FOR_VARIANT && got.path.starts_with(&path);
                prop_assert!(
                    got.path == path || unit_for_struct || two_faults || array_variant,
                    "{value}: {got:?} against {path} {message}"
                );
                // A struct variant: the text's decoder names it, and reads an array for it.
                let variant_named = message.contains("expected struct variant")
                    && got.message.contains("expected struct variant");
                prop_assert!(
                    got.message == message || variant_named || two_faults || array_variant,
                    "{value}: {got:?} against {message}"
                );
            }
            (Err(expected), Ok(_)) if expected.inner().to_string() == ARRAY_FOR_VARIANT => {}
            (reference, ours) => prop_assert!(false, "{value}: {reference:?} against {ours:?}"),
        }
    }
}

#[test]
fn names_a_field_deep_in_an_mcp_request() {
    let params = json!({
        "protocolVersion": "2025-06-18",
        "capabilities": {"roots": {"listChanged": "yes"}},
        "clientInfo": {"name": "c", "version": "1"}
    });
    let Value::Object(map) = params.clone() else {
        unreachable!()
    };
    let error = decode::<rmcp::model::InitializeRequestParams>(map).expect_err("bad params");
    let reference =
        serde_path_to_error::deserialize::<_, rmcp::model::InitializeRequestParams>(params)
            .expect_err("bad params");
    assert_eq!(error.path, "capabilities.roots.listChanged");
    assert_eq!(error.path, reference.path().to_string());
    assert_eq!(error.message, reference.into_inner().to_string());
}
