//! The bounds and all-or-nothing rules of issue 10, as properties (docs/limits.md):
//! fixes never half-apply and never create what they remove; the
//! filtered config.json parse reads the model exactly as a full parse does;
//! numbers a field cannot hold are reported, not fatal. Fixed seeds (`common`).

mod common;

use common::*;
use hisparse_core::diagnostic::{apply_fix, depth};
use hisparse_core::limits::MAX_JSON_DEPTH;
use hisparse_core::model::{self, MODEL_KEYS};
use hisparse_core::{FieldPath, FixOp, Seg, ServeArgs};
use proptest::prelude::*;
use serde_json::{json, Value};

/// Paths into documents like `arb_json`'s: keys from a small set (so they
/// often exist) and small indices (so they are often in range).
fn arb_path() -> impl Strategy<Value = FieldPath> {
    let seg = prop_oneof![
        3 => prop::sample::select(vec!["a", "b", "kv_role", ""]).prop_map(|k| Seg::Key(k.to_owned())),
        1 => (0usize..4).prop_map(Seg::Index),
    ];
    prop::collection::vec(seg, 1..6).prop_map(FieldPath)
}

fn arb_op() -> impl Strategy<Value = FixOp> {
    prop_oneof![
        (arb_path(), arb_json()).prop_map(|(path, value)| FixOp::Set { path, value }),
        arb_path().prop_map(|path| FixOp::Remove { path }),
        (arb_path(), arb_path()).prop_map(|(from, to)| FixOp::Move { from, to }),
    ]
}

fn arb_doc() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![Just(json!(1)), Just(json!("s")), Just(Value::Null)];
    leaf.prop_recursive(4, 32, 4, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..4).prop_map(Value::Array),
            prop::collection::vec(
                (prop::sample::select(vec!["a", "b", "kv_role"]), inner),
                0..4
            )
            .prop_map(|kv| Value::Object(kv.into_iter().map(|(k, v)| (k.to_owned(), v)).collect())),
        ]
    })
    .prop_map(|v| json!({"a": v.clone(), "b": [v]}))
}

/// The value at `path`, if it exists.
fn at<'a>(doc: &'a Value, path: &FieldPath) -> Option<&'a Value> {
    path.0.iter().try_fold(doc, |cur, seg| match seg {
        Seg::Key(k) => cur.get(k.as_str()),
        Seg::Index(i) => cur.get(*i),
    })
}

proptest! {
    #![proptest_config(config(512))]

    /// A fix either applies whole or leaves the document exactly as it was,
    /// and the result never nests deeper than the bound.
    #[test]
    fn fixes_are_all_or_nothing(doc in arb_doc(), ops in prop::collection::vec(arb_op(), 1..4)) {
        let mut edited = doc.clone();
        match apply_fix(&mut edited, &ops) {
            Ok(()) => prop_assert!(depth(&edited) <= MAX_JSON_DEPTH),
            Err(_) => prop_assert_eq!(&edited, &doc),
        }
    }

    /// Removing a path that does not exist changes nothing (no null appears
    /// anywhere); removing one that does leaves it absent.
    #[test]
    fn remove_creates_nothing(doc in arb_doc(), path in arb_path()) {
        let mut edited = doc.clone();
        apply_fix(&mut edited, &[FixOp::Remove { path: path.clone() }]).unwrap();
        if at(&doc, &path).is_none() {
            prop_assert_eq!(&edited, &doc);
        } else if let [Seg::Key(_)] | [.., Seg::Key(_)] = path.0.as_slice() {
            prop_assert!(at(&edited, &path).is_none());
        }
    }

    /// The filtered parse keeps exactly what the resolver reads: model facts
    /// from it equal those from a full parse, whatever else the file holds.
    #[test]
    fn filtered_config_parse_reads_the_same_model(
        base in model_config(),
        noise in prop::collection::vec((arb_key(), arb_json()), 0..8),
        text_noise in prop::collection::vec((arb_key(), arb_json()), 0..4),
    ) {
        let mut cfg = base;
        let obj = cfg.as_object_mut().unwrap();
        for (k, v) in noise {
            obj.insert(k, v);
        }
        let text = obj.entry("text_config").or_insert_with(|| json!({}));
        if let Some(t) = text.as_object_mut() {
            for (k, v) in text_noise {
                t.insert(k, v);
            }
        }
        let bytes = cfg.to_string();
        let full: Value = serde_json::from_str(&bytes).unwrap();
        let kept = model::parse_config(bytes.as_bytes()).unwrap();
        prop_assert_eq!(model::read(&kept, None), model::read(&full, None));
        // Nothing outside MODEL_KEYS (and text_config) is built.
        for k in kept.as_object().unwrap().keys() {
            prop_assert!(k == "text_config" || MODEL_KEYS.contains(&k.as_str()), "{k}");
        }
    }

    /// A number no field can hold is an invalid_value error for that field;
    /// the other fields are read as given.
    #[test]
    fn out_of_range_numbers_are_reported(tp in prop_oneof![Just(json!(1e30)), Just(json!(u64::MAX)), Just(json!(2.5)), Just(json!(-1e300))]) {
        let doc = json!({"tensor_parallel_size": tp, "block_size": 64, "kv_cache_dtype": "fp8_ds_mla"});
        let (args, errors) = ServeArgs::from_json_reporting(&doc).unwrap();
        prop_assert_eq!(errors.len(), 1);
        prop_assert_eq!(errors[0].code.as_str(), "invalid_value");
        prop_assert_eq!(errors[0].path.to_string(), "tensor_parallel_size");
        prop_assert_eq!(args.block_size, Some(64));
        prop_assert_eq!(args.tensor_parallel_size, None);
    }
}

#[test]
fn wrong_kinds_and_unknown_keys_still_fail_the_parse() {
    assert!(ServeArgs::from_json_reporting(&json!({"tensor_parallel_size": "eight"})).is_err());
    assert!(ServeArgs::from_json_reporting(&json!({"no_such_flag": 1})).is_err());
    let (args, errors) =
        ServeArgs::from_json_reporting(&json!({"tensor_parallel_size": 8})).unwrap();
    assert!(errors.is_empty() && args.tensor_parallel_size == Some(8));
}

#[test]
fn suggestions_skip_names_longer_than_any_real_one() {
    use hisparse_core::engines::vllm_0_33::schema::closest;
    let long = "kv_role".repeat(200_000); // 1.4 MB
    assert_eq!(closest(&long, &["kv_role", "kv_connector"]), None);
    assert_eq!(
        closest("kv_rol", &["kv_role", "kv_connector"]),
        Some("kv_role")
    );
}
