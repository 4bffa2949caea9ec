//! Shared proptest strategies and helpers for the property tests in this
//! directory (`proptest_never_panics.rs`, `proptest_round_trip.rs`,
//! `proptest_fixes.rs`).
//!
//! Determinism: every config built by [`config`] uses a fixed RNG seed
//! ([`SEED`]) and a fixed case count, and writes no failure-persistence files,
//! so CI runs are reproducible and leave the tree clean. To explore other
//! inputs locally, set `PROPTEST_RNG_SEED=<u64>` and/or `PROPTEST_CASES=<n>`
//! (both are honoured when set).
#![allow(dead_code)]

use hisparse_core::ServeArgs;
use proptest::prelude::*;
use proptest::test_runner::{Config, RngSeed};
use serde_json::{json, Map, Number, Value};

/// Fixed RNG seed ("HiSparse" in ASCII).
pub const SEED: u64 = 0x4869_5370_6172_7365;

/// A deterministic proptest config with `cases` cases and no persistence files.
pub fn config(cases: u32) -> Config {
    let env = Config::default(); // parses PROPTEST_* variables
    let set = |k: &str| std::env::var_os(k).is_some();
    Config {
        cases: if set("PROPTEST_CASES") {
            env.cases
        } else {
            cases
        },
        rng_seed: if set("PROPTEST_RNG_SEED") {
            env.rng_seed
        } else {
            RngSeed::Fixed(SEED)
        },
        failure_persistence: None,
        // Bound shrinking so that a failure is reported in reasonable time.
        max_shrink_time: 30_000,
        max_shrink_iters: 2_000,
        ..env
    }
}

/// Hang bound of one case, in milliseconds: a hang detector, not a speed
/// target. A realistic case takes about 1 ms in a debug build; this bound is
/// far above what a loaded machine makes of that (a 500 ms bound once failed
/// a CI run on 2 busy cores), so reaching it means the code does not return.
pub const HANG_MS: u32 = 120_000;

/// Like [`config`], but the cases run in a forked child process that the
/// parent kills when one case makes no progress for `HANG_MS` plus a minute
/// (so [`guarded`] in the child fires first): a stack overflow (abort) or a
/// hang in the code under test becomes a test failure instead of killing or
/// stalling the whole test binary. Combine with [`guarded`] so that hangs are
/// caught in the child and shrinking stays bounded (the parent restarts a
/// killed child, and each child restarts its shrink limits, so kills alone
/// would make shrinking unbounded).
pub fn forked_config(cases: u32) -> Config {
    Config {
        timeout: HANG_MS + 60_000,
        // Bound shrinking by iterations, not time: the parent replays the
        // child's shrink steps, and a time-based bail in the child makes that
        // replay "run past the end" (proptest 1.x, fork mode).
        max_shrink_time: 0,
        max_shrink_iters: 64,
        ..config(cases)
    }
}

/// Run `check(&args)` on a worker thread and fail if it panics or does not
/// return within [`HANG_MS`]. A hung worker keeps spinning until the process
/// exits, so use this in forked tests: only the child keeps it.
pub fn guarded<T: Clone + Send + 'static>(
    args: &T,
    check: fn(&T) -> Result<(), TestCaseError>,
) -> Result<(), TestCaseError> {
    let args = args.clone();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let outcome = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| check(&args)));
        let _ = tx.send(outcome);
    });
    match rx.recv_timeout(std::time::Duration::from_millis(u64::from(HANG_MS))) {
        Ok(Ok(result)) => result,
        Ok(Err(payload)) => {
            let msg = payload
                .downcast_ref::<String>()
                .cloned()
                .or_else(|| payload.downcast_ref::<&str>().map(|s| (*s).to_owned()))
                .unwrap_or_else(|| "non-string panic payload".to_owned());
            Err(TestCaseError::fail(format!("panicked: {msg}")))
        }
        Err(_) => Err(TestCaseError::fail(format!(
            "did not return within {} s: a hang",
            HANG_MS / 1000
        ))),
    }
}

/// A generated value whose `Debug`, what proptest prints as the "minimal
/// failing input", is one line of JSON without the unset (null) fields: the
/// derived `Debug` of a `ServeArgs` pretty-prints every field and every JSON
/// node's type name, a hundred lines for one case. Use it as a pattern:
/// `fn t(Brief(args) in brief(arb_args()))`.
#[derive(Clone)]
pub struct Brief<T>(pub T);

impl<T: serde::Serialize> std::fmt::Debug for Brief<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let mut value = serde_json::to_value(&self.0).map_err(|_| std::fmt::Error)?;
        // The unset fields of the value, or of each part of a tuple.
        let parts = match &mut value {
            Value::Array(items) => items.iter_mut().collect(),
            other => vec![other],
        };
        for part in parts {
            if let Value::Object(fields) = part {
                fields.retain(|_, v| !v.is_null());
            }
        }
        let text = value.to_string();
        // At most 2000 characters: enough to rerun the case by hand.
        match text.char_indices().nth(2000) {
            Some((end, _)) => write!(
                f,
                "{} ... ({} characters)",
                &text[..end],
                text.chars().count()
            ),
            None => f.write_str(&text),
        }
    }
}

/// `strategy`, its values printed briefly on a failure (see [`Brief`]).
pub fn brief<S>(strategy: S) -> impl Strategy<Value = Brief<S::Value>>
where
    S: Strategy,
    S::Value: serde::Serialize,
{
    strategy.prop_map(Brief)
}

// ---------------------------------------------------------------------------
// Model configs (read at compile time: no file I/O in the tests).

pub const DSV32: &str = include_str!("../../../../tests/data/models/deepseek-v3.2/config.json");
pub const GLM5: &str = include_str!("../../../../tests/data/models/glm-5/config.json");
pub const DSV4_FLASH: &str =
    include_str!("../../../../tests/data/models/deepseek-v4-flash/config.json");
pub const LLAMA: &str = include_str!("../../../../tests/data/models/llama-3.1-8b/config.json");

pub fn parse(text: &str) -> Value {
    serde_json::from_str(text).expect("bundled model config is JSON")
}

/// The real DeepSeek-V3.2 `config.json`.
pub fn dsv32() -> Value {
    parse(DSV32)
}

/// Mostly DeepSeek-V3.2, sometimes another DSA model, DeepSeek-V4 or a non-DSA model.
pub fn model_config() -> impl Strategy<Value = Value> {
    prop_oneof![
        12 => Just(DSV32),
        2 => Just(GLM5),
        1 => Just(DSV4_FLASH),
        1 => Just(LLAMA),
    ]
    .prop_map(parse)
}

// ---------------------------------------------------------------------------
// Arbitrary JSON.

pub const INTERESTING_STRINGS: &[&str] = &[
    "",
    " ",
    "$VAR",
    "${POOL}",
    "$HOST_POOL_GIB",
    "$5",
    "$",
    " $X ",
    "${}",
    "kv_both",
    "kv_producer",
    "kv_consumer",
    "kv_bot",
    "MultiConnector",
    "HiSparseConnector",
    "HiSparseConector",
    "NixlConnector",
    "auto",
    "fp8",
    "fp8_ds_mla",
    "bfloat16",
    "float16",
    "FULL",
    "full",
    "PIECEWISE",
    "cuda",
    "rocm",
    "cpu",
    "cuda ",
    "1",
    "0",
    "-1",
    " 42 ",
    "1e400",
    "-1e400",
    "nan",
    "NaN",
    "inf",
    "-inf",
    "1_000",
    "64",
    "0x10",
    "true",
    "yes",
    "off",
    "{}",
    "[]",
    "null",
    "{\"a\": 1}",
    "[1, 2",
    "{",
    "a.b",
    "x[0]",
    "[\"q\"]",
    "[0]",
    "\"",
    "\\",
    "]",
    "é",
    "日本語",
    "🦀",
    "\u{0}",
    "\u{7f}",
    "\u{200b}",
    "\u{feff}",
    "mtp",
    "deepseek_mtp",
    "recompute",
    "fail",
    "9223372036854775808",
    "-9223372036854775809",
    "18446744073709551616",
];

pub const KNOWN_KEYS: &[&str] = &[
    "kv_connector",
    "kv_role",
    "kv_connector_extra_config",
    "connectors",
    "host_pool_gib",
    "kv_connector_module_path",
    "engine_id",
    "kv_buffer_device",
    "kv_port",
    "enable_permute_local_kv",
    "kv_load_failure_policy",
    "kv_buffer_size",
    "kv_rol",
    "kv_extra_config",
    "hisparse_config",
    "device_buffer_size",
    "eager_host_mirror",
    "backend",
    "num_speculative_tokens",
    "method",
    "model",
    "cudagraph_mode",
    "mode",
    "index_topk",
    "num_hidden_layers",
    "max_position_embeddings",
    "layer_types",
    "text_config",
    "torch_dtype",
    "dtype",
    "num_nextn_predict_layers",
    "architectures",
    "model_type",
];

pub fn arb_string() -> impl Strategy<Value = String> {
    prop_oneof![
        4 => prop::sample::select(INTERESTING_STRINGS).prop_map(str::to_owned),
        2 => "\\PC{0,16}",
        1 => any::<String>(),
        1 => "[$a-zA-Z_{}0-9 .\\[\\]\"\\\\]{0,12}",
    ]
}

pub fn arb_key() -> impl Strategy<Value = String> {
    prop_oneof![
        3 => prop::sample::select(KNOWN_KEYS).prop_map(str::to_owned),
        2 => arb_string(),
    ]
}

pub fn float(f: f64) -> Value {
    Value::Number(Number::from_f64(f).expect("finite"))
}

pub fn arb_number() -> impl Strategy<Value = Value> {
    prop_oneof![
        2 => any::<i64>().prop_map(Value::from),
        1 => any::<u64>().prop_map(Value::from),
        2 => prop::sample::select(vec![
            0i64, 1, -1, 2, 64, 2048, 4096, 32768, 32769, i64::MIN, i64::MAX, i32::MAX as i64,
            u32::MAX as i64, 1 << 32, 1 << 53,
        ])
        .prop_map(Value::from),
        1 => Just(Value::from(u64::MAX)),
        2 => any::<f64>().prop_filter_map("finite", |f| Number::from_f64(f).map(Value::Number)),
        1 => prop::sample::select(vec![
            0.0f64, -0.0, 0.5, 1.0, 64.0, 1e308, -1e308, f64::MAX, f64::MIN, 5e-324, 1e-300,
            4096.0, 4096.5, 9.0e15, 1.8446744073709552e19, 0.1, 2.0 / 3.0,
        ])
        .prop_map(float),
    ]
}

/// Any JSON value: up to 5 levels deep, about 64 nodes.
pub fn arb_json() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        1 => Just(Value::Null),
        1 => any::<bool>().prop_map(Value::Bool),
        3 => arb_number(),
        3 => arb_string().prop_map(Value::String),
    ];
    leaf.prop_recursive(5, 64, 6, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..6).prop_map(Value::Array),
            prop::collection::vec((arb_key(), inner), 0..6)
                .prop_map(|kv| Value::Object(kv.into_iter().collect())),
        ]
    })
}

/// A value for a JSON-valued `ServeArgs` field: parsed JSON, or flag text
/// (valid JSON text, or arbitrary text that is usually not JSON).
pub fn arb_json_field() -> impl Strategy<Value = Value> {
    prop_oneof![
        8 => arb_json(),
        1 => arb_json().prop_map(|v| Value::String(v.to_string())),
        1 => arb_string().prop_map(Value::String),
    ]
}

pub fn arb_i64() -> impl Strategy<Value = i64> {
    prop_oneof![
        2 => any::<i64>(),
        2 => prop::sample::select(vec![
            i64::MIN, i64::MIN + 1, -65, -64, -2, -1, 0, 1, 2, 3, 8, 63, 64, 65, 128, 4096,
            131072, 163840, 163841, 1 << 31, 1 << 32, 1 << 53, i64::MAX - 1, i64::MAX,
        ]),
        1 => -10i64..300_000,
    ]
}

fn opt<S: Strategy>(s: S) -> impl Strategy<Value = Option<S::Value>> {
    prop::option::weighted(0.7, s)
}

/// `ServeArgs` whose JSON-valued fields come from `json`, `hf_config` from
/// `hf_config`, and every scalar field is arbitrary.
pub fn arb_args_with(
    json: BoxedStrategy<Value>,
    hf_config: BoxedStrategy<Option<Value>>,
) -> impl Strategy<Value = ServeArgs> {
    let jsons = (
        opt(json.clone()),
        opt(json.clone()),
        opt(json.clone()),
        opt(json.clone()),
        opt(json),
        hf_config,
        opt(arb_string()),
    );
    let ints = (
        opt(arb_i64()),
        opt(arb_i64()),
        opt(arb_i64()),
        opt(arb_i64()),
        opt(arb_i64()),
        opt(arb_i64()),
        opt(arb_i64()),
    );
    let rest = (
        opt(arb_string()),
        opt(any::<bool>()),
        opt(any::<bool>()),
        opt(arb_string()),
        opt(arb_string()),
    );
    (jsons, ints, rest).prop_map(
        |(
            (kv, att, spec, comp, hfo, hf_config, model),
            (tp, pp, dp, dcp, block, mml, seqs),
            (dtype, isl, hybrid, v2, platform),
        )| ServeArgs {
            model,
            hf_config,
            hf_overrides: hfo,
            kv_transfer_config: kv,
            attention_config: att,
            speculative_config: spec,
            compilation_config: comp,
            tensor_parallel_size: tp,
            pipeline_parallel_size: pp,
            data_parallel_size: dp,
            decode_context_parallel_size: dcp,
            kv_cache_dtype: dtype,
            block_size: block,
            max_model_len: mml,
            max_num_seqs: seqs,
            scheduler_reserve_full_isl: isl,
            disable_hybrid_kv_cache_manager: hybrid,
            vllm_use_v2_model_runner: v2,
            platform,
            ..ServeArgs::default()
        },
    )
}

/// Fully arbitrary `ServeArgs` with `hf_config` always given (arbitrary JSON
/// or a real model config), so `resolve` does no file I/O.
pub fn arb_args() -> impl Strategy<Value = ServeArgs> {
    arb_args_with(
        arb_json_field().boxed(),
        prop_oneof![3 => arb_json(), 1 => model_config()]
            .prop_map(Some)
            .boxed(),
    )
}

// ---------------------------------------------------------------------------
// Realistic configurations: MultiConnector trees with HiSparseConnector
// children and plausible (sometimes wrong) values everywhere.

fn sel(values: Vec<Value>) -> impl Strategy<Value = Value> {
    prop::sample::select(values)
}

fn connector_name() -> impl Strategy<Value = Value> {
    prop_oneof![
        6 => Just(json!("HiSparseConnector")),
        4 => Just(json!("NixlConnector")),
        2 => sel(vec![
            json!("MooncakeStoreConnector"),
            json!("LMCacheConnectorV1"),
            json!("OffloadingConnector"),
            json!("HiSparseConector"),
            json!("NixlConector"),
            json!("MyConnector"),
            json!("MultiConnector"),
        ]),
        1 => sel(vec![Value::Null, json!(42), json!(["HiSparseConnector"])]),
    ]
}

fn kv_role() -> impl Strategy<Value = Value> {
    prop_oneof![
        8 => sel(vec![json!("kv_both"), json!("kv_consumer"), json!("kv_producer")]),
        1 => sel(vec![json!("kv_bot"), json!("both"), json!(""), json!("KV_BOTH")]),
        1 => sel(vec![Value::Null, json!(3), json!(true)]),
    ]
}

fn host_pool_gib() -> impl Strategy<Value = Value> {
    prop_oneof![
        6 => sel(vec![json!(64), json!(128), json!(8), json!(700), json!(1024), json!(0.5), json!(12.5)]),
        2 => sel(vec![
            json!(0), json!(-8), json!("64"), json!(" 1_28 "), json!("$POOL"), json!(true),
            json!(false), json!(1e308), Value::Null, json!("nan"), json!("inf"), json!([64]),
            json!(1e-9),
        ]),
    ]
}

fn extra_config() -> impl Strategy<Value = Value> {
    let object = (
        prop::option::weighted(0.85, host_pool_gib()),
        prop::option::weighted(
            0.15,
            sel(vec![json!({"backends": ["x"]}), json!(1), json!("$X")]),
        ),
    )
        .prop_map(|(pool, junk)| {
            let mut m = Map::new();
            if let Some(p) = pool {
                m.insert("host_pool_gib".into(), p);
            }
            if let Some(j) = junk {
                m.insert("some_option".into(), j);
            }
            Value::Object(m)
        });
    prop_oneof![
        12 => object,
        1 => sel(vec![Value::Null, json!("x"), json!([]), json!(5)]),
    ]
}

/// Optional extra top-level keys of a connector object (typos, removed
/// fields, wrongly typed fields).
fn connector_junk() -> impl Strategy<Value = (String, Value)> {
    prop_oneof![
        Just(("kv_rol".to_owned(), json!("kv_both"))),
        Just(("kv_extra_config".to_owned(), json!({"host_pool_gib": 64}))),
        Just(("kv_buffer_size".to_owned(), json!(1e9))),
        Just(("zzz".to_owned(), json!(null))),
        Just(("kv_port".to_owned(), json!("x"))),
        Just(("kv_port".to_owned(), json!(14579))),
        Just(("kv_connector_module_path".to_owned(), json!(""))),
        Just(("kv_connector_module_path".to_owned(), json!("my.module"))),
        Just(("kv_connector_module_path".to_owned(), json!(7))),
        Just(("kv_load_failure_policy".to_owned(), json!("retry"))),
        Just(("kv_buffer_device".to_owned(), json!(null))),
        Just(("engine_id".to_owned(), json!(5))),
        Just(("enable_permute_local_kv".to_owned(), json!("maybe"))),
        Just((
            "kv_connector_extra_config".to_owned(),
            json!({"host_pool_gib": 96})
        )),
    ]
}

fn leaf_connector() -> impl Strategy<Value = Value> {
    (
        prop::option::weighted(0.95, connector_name()),
        prop::option::weighted(0.85, kv_role()),
        prop::option::weighted(0.8, extra_config()),
        prop::option::weighted(0.2, connector_junk()),
    )
        .prop_map(|(name, role, extra, junk)| {
            let mut m = Map::new();
            if let Some(n) = name {
                m.insert("kv_connector".into(), n);
            }
            if let Some(r) = role {
                m.insert("kv_role".into(), r);
            }
            if let Some(e) = extra {
                m.insert("kv_connector_extra_config".into(), e);
            }
            if let Some((k, v)) = junk {
                m.insert(k, v);
            }
            Value::Object(m)
        })
}

/// A connector tree: leaves, or MultiConnectors (up to 4 levels) whose
/// children are listed in the right place or in one of the wrong ones.
pub fn connector_tree() -> impl Strategy<Value = Value> {
    leaf_connector().prop_recursive(4, 24, 3, |inner| {
        let child = prop_oneof![
            12 => inner,
            1 => sel(vec![Value::Null, json!("NixlConnector"), json!(7), json!([])]),
        ];
        (
            prop::collection::vec(child, 0..4),
            prop::option::weighted(0.9, kv_role()),
            0u8..20,
            prop::option::weighted(0.1, extra_config()),
        )
            .prop_map(|(children, role, placement, extra)| {
                let mut m = Map::new();
                m.insert("kv_connector".into(), json!("MultiConnector"));
                if let Some(r) = role {
                    m.insert("kv_role".into(), r);
                }
                let mut extra = match extra {
                    Some(Value::Object(e)) => e,
                    _ => Map::new(),
                };
                match placement {
                    // Misplaced beside kv_connector.
                    0 => {
                        m.insert("connectors".into(), Value::Array(children));
                    }
                    // A single connector object instead of a list.
                    1 => {
                        let first = children.into_iter().next().unwrap_or(json!({}));
                        extra.insert("connectors".into(), first);
                    }
                    2 => {
                        extra.insert("connectors".into(), Value::Null);
                    }
                    3 => {
                        extra.insert("connectors".into(), json!("x"));
                    }
                    // Both places, different children in each.
                    4 => {
                        let mut rest = children;
                        let misplaced = rest.split_off(rest.len() / 2);
                        m.insert("connectors".into(), Value::Array(misplaced));
                        extra.insert("connectors".into(), Value::Array(rest));
                    }
                    _ => {
                        extra.insert("connectors".into(), Value::Array(children));
                    }
                }
                if !extra.is_empty() || placement != 0 {
                    m.insert("kv_connector_extra_config".into(), Value::Object(extra));
                }
                Value::Object(m)
            })
    })
}

/// `--kv-transfer-config`: a tree, a bare list of connectors, flag text or null.
pub fn kv_transfer_config() -> impl Strategy<Value = Value> {
    prop_oneof![
        12 => connector_tree(),
        1 => prop::collection::vec(leaf_connector(), 1..3).prop_map(Value::Array),
        1 => connector_tree().prop_map(|t| Value::String(t.to_string())),
        1 => Just(Value::Null),
    ]
}

pub fn attention_config() -> impl Strategy<Value = Value> {
    let dbs = sel(vec![
        Value::Null,
        json!(0),
        json!(-1),
        json!(1),
        json!(2048),
        json!(4095),
        json!(4096),
        json!(4097),
        json!(6144),
        json!(8192),
        json!(32768),
        json!(32769),
        json!(40000),
        json!("4096"),
        json!(4096.0),
        json!(4096.5),
        json!(true),
        json!("x"),
    ]);
    let mirror = sel(vec![
        json!(true),
        json!(false),
        json!("yes"),
        json!(2),
        Value::Null,
        json!("maybe"),
    ]);
    let hs = (
        prop::option::weighted(0.5, dbs),
        prop::option::weighted(0.3, mirror),
        prop::option::weighted(0.05, Just(json!(64))),
    )
        .prop_map(|(d, e, junk)| {
            let mut m = Map::new();
            if let Some(d) = d {
                m.insert("device_buffer_size".into(), d);
            }
            if let Some(e) = e {
                m.insert("eager_host_mirror".into(), e);
            }
            if let Some(j) = junk {
                m.insert("device_buffer".into(), j);
            }
            Value::Object(m)
        });
    prop_oneof![
        6 => hs.prop_map(|hs| json!({"hisparse_config": hs})),
        1 => sel(vec![Value::Null, json!("x"), json!(5), json!([]), json!(true)])
            .prop_map(|hs| json!({"hisparse_config": hs})),
        1 => Just(json!({"backnd": "FLASHMLA_SPARSE"})),
        1 => Just(json!({"backend": "FLASHMLA_SPARSE"})),
        1 => Just(json!(5)),
    ]
}

pub fn speculative_config() -> impl Strategy<Value = Value> {
    let method = sel(vec![
        json!("mtp"),
        json!("deepseek_mtp"),
        json!("eagle"),
        json!("ngram"),
    ]);
    let n = sel(vec![
        json!(0),
        json!(-1),
        json!(1),
        json!(2),
        json!(3),
        json!(7),
        json!(15),
        json!(16),
        json!(100),
        json!(4294967295u64),
        json!("2"),
        Value::Null,
        json!("x"),
        json!(2.0),
    ]);
    prop_oneof![
        6 => (prop::option::weighted(0.7, method), prop::option::weighted(0.7, n)).prop_map(
            |(m, n)| {
                let mut o = Map::new();
                if let Some(m) = m {
                    o.insert("method".into(), m);
                }
                if let Some(n) = n {
                    o.insert("num_speculative_tokens".into(), n);
                }
                Value::Object(o)
            }
        ),
        1 => Just(json!({"num_spec_tokens": 2})),
        1 => Just(json!([1])),
    ]
}

pub fn compilation_config() -> impl Strategy<Value = Value> {
    prop_oneof![
        6 => sel(vec![
            json!("FULL"), json!("full"), json!("PIECEWISE"), json!("FULL_AND_PIECEWISE"),
            json!("FULL_DECODE_ONLY"), json!("NONE"), json!("FULL_AND_PIECEWSE"), json!("xyz"),
            json!(0), json!(1), json!(2), json!(7), json!(-1), Value::Null, json!(true),
            json!(2.0),
        ])
        .prop_map(|m| json!({"cudagraph_mode": m})),
        1 => Just(json!({"mode": 3})),
        1 => Just(json!({"cudagraph_mod": "FULL"})),
        1 => Just(json!("FULL")),
    ]
}

/// Plausible `--hf-overrides`; with `extreme`, also huge and odd integers.
pub fn hf_overrides(extreme: bool) -> BoxedStrategy<Value> {
    let mut ints = vec![
        Value::Null,
        json!(0),
        json!(-1),
        json!(1),
        json!(61),
        json!(512),
        json!(2048),
        json!(4096),
        json!(16384),
        json!(40000),
        json!(163840),
        json!("2048"),
        json!(2048.5),
    ];
    if extreme {
        ints.extend([
            json!(u32::MAX),
            json!(u32::MAX as u64 + 1),
            json!(i64::MAX),
            json!(u64::MAX),
            json!(1e300),
        ]);
    }
    let int = move || sel(ints.clone());
    let fields = (
        prop::option::weighted(0.3, int()),
        prop::option::weighted(0.3, int()),
        prop::option::weighted(0.3, int()),
        prop::option::weighted(
            0.1,
            sel(vec![
                json!(["DeepseekV4ForCausalLM"]),
                json!(["LlamaForCausalLM"]),
                json!([]),
            ]),
        ),
        prop::option::weighted(
            0.1,
            sel(vec![
                json!("float16"),
                json!("bfloat16"),
                json!("float32"),
                json!(5),
            ]),
        ),
        prop::option::weighted(0.15, sel(vec![json!(0), json!(1), json!(3), json!(-1)])),
        prop::option::weighted(
            0.1,
            sel(vec![
                json!({"index_topk": 1024}),
                json!({"layer_types": ["deepseek_sparse_attention", "linear_attention"]}),
                json!("x"),
            ]),
        ),
        prop::option::weighted(
            0.05,
            sel(vec![
                json!([
                    "deepseek_sparse_attention",
                    "full_attention",
                    "deepseek_sparse_attention"
                ]),
                json!([]),
                json!("all"),
            ]),
        ),
    )
        .prop_map(
            |(topk, layers, mpe, arch, dtype, nextn, text, layer_types)| {
                let mut m = Map::new();
                for (k, v) in [
                    ("index_topk", topk),
                    ("num_hidden_layers", layers),
                    ("max_position_embeddings", mpe),
                    ("architectures", arch),
                    ("torch_dtype", dtype),
                    ("num_nextn_predict_layers", nextn),
                    ("text_config", text),
                    ("layer_types", layer_types),
                ] {
                    if let Some(v) = v {
                        m.insert(k.into(), v);
                    }
                }
                Value::Object(m)
            },
        );
    prop_oneof![
        8 => fields,
        1 => Just(json!({"index_topk": 1024}).to_string()).prop_map(Value::String),
        1 => sel(vec![json!(5), json!([]), Value::Null]),
    ]
    .boxed()
}

fn pick<T: Clone + std::fmt::Debug + 'static>(values: Vec<T>) -> impl Strategy<Value = T> {
    prop::sample::select(values)
}

/// tensor_parallel_size, pipeline_parallel_size, data_parallel_size,
/// decode_context_parallel_size, block_size, max_model_len, max_num_seqs.
pub type Scalars = (
    Option<i64>,
    Option<i64>,
    Option<i64>,
    Option<i64>,
    Option<i64>,
    Option<i64>,
    Option<i64>,
);

/// Scalars in plausible ranges (some invalid), never astronomically large.
pub fn realistic_scalars() -> BoxedStrategy<Scalars> {
    (
        prop::option::weighted(0.4, pick(vec![1i64, 2, 4, 8, 0, -1])),
        prop::option::weighted(0.15, pick(vec![1i64, 2, 0])),
        prop::option::weighted(0.2, pick(vec![1i64, 2, 8, 0, -3])),
        prop::option::weighted(0.15, pick(vec![1i64, 2, 0])),
        prop::option::weighted(
            0.3,
            pick(vec![0i64, -64, 1, 16, 32, 63, 64, 128, 256, 1024, 65536]),
        ),
        prop::option::weighted(
            0.4,
            pick(vec![
                -1i64, -2, 0, 1, 4096, 8192, 131072, 163840, 163841, 1_000_000, 10_000_000,
            ]),
        ),
        prop::option::weighted(0.2, pick(vec![1i64, 256, 0, -1])),
    )
        .boxed()
}

/// Scalars anywhere in i64.
pub fn extreme_scalars() -> BoxedStrategy<Scalars> {
    (
        opt(arb_i64()),
        opt(arb_i64()),
        opt(arb_i64()),
        opt(arb_i64()),
        opt(arb_i64()),
        opt(arb_i64()),
        opt(arb_i64()),
    )
        .boxed()
}

/// Mostly valid HiSparse deployments: a HiSparseConnector alone or beside a
/// NixlConnector in a MultiConnector, sensible sizes and optional settings.
pub fn clean_args() -> impl Strategy<Value = ServeArgs> {
    let pool = sel(vec![
        json!(64),
        json!(128),
        json!(256),
        json!(700),
        json!(1024),
        json!(12.5),
        json!(0.5),
    ]);
    let hisparse = pool.prop_map(|p| {
        json!({"kv_connector": "HiSparseConnector", "kv_role": "kv_both",
            "kv_connector_extra_config": {"host_pool_gib": p}})
    });
    let kv = (hisparse, 0u8..4, any::<bool>()).prop_map(|(hs, shape, consumer)| {
        let nixl = json!({"kv_connector": "NixlConnector",
            "kv_role": if consumer { "kv_consumer" } else { "kv_both" }});
        match shape {
            0 => hs,
            1 => json!({"kv_connector": "MultiConnector", "kv_role": "kv_both",
                "kv_connector_extra_config": {"connectors": [hs]}}),
            _ => json!({"kv_connector": "MultiConnector",
                "kv_role": if consumer { "kv_consumer" } else { "kv_both" },
                "kv_connector_extra_config": {"connectors": [nixl, hs]}}),
        }
    });
    let attention = (
        prop::option::of(pick(vec![4096u64, 6144, 8192, 12288, 32768])),
        prop::option::of(any::<bool>()),
    )
        .prop_map(|(dbs, mirror)| {
            let mut hs = Map::new();
            if let Some(d) = dbs {
                hs.insert("device_buffer_size".into(), json!(d));
            }
            if let Some(m) = mirror {
                hs.insert("eager_host_mirror".into(), json!(m));
            }
            json!({"hisparse_config": hs})
        });
    let spec = prop_oneof![
        pick(vec![1u64, 2, 3]).prop_map(|n| json!({"method": "mtp", "num_speculative_tokens": n})),
        Just(json!({"method": "deepseek_mtp"})),
    ];
    (
        (
            kv,
            prop::option::weighted(0.4, attention),
            prop::option::weighted(0.3, spec),
            prop::option::weighted(0.1, Just(json!({"cudagraph_mode": "FULL_AND_PIECEWISE"}))),
            prop_oneof![3 => Just(DSV32), 1 => Just(GLM5)].prop_map(parse),
        ),
        (
            prop::option::weighted(0.5, pick(vec![1i64, 8])),
            prop::option::weighted(0.2, pick(vec![1i64, 2])),
            prop::option::weighted(0.4, pick(vec![64i64, 128])),
            prop::option::weighted(0.5, pick(vec![-1i64, 4096, 65536, 131072, 163840])),
            prop::option::weighted(0.5, pick(vec!["auto", "fp8", "fp8_ds_mla", "bfloat16"])),
        ),
    )
        .prop_map(
            |((kv, att, spec, comp, hf), (tp, dp, block, mml, dtype))| ServeArgs {
                hf_config: Some(hf),
                kv_transfer_config: Some(kv),
                attention_config: att,
                speculative_config: spec,
                compilation_config: comp,
                tensor_parallel_size: tp,
                data_parallel_size: dp,
                block_size: block,
                max_model_len: mml,
                kv_cache_dtype: dtype.map(str::to_owned),
                ..ServeArgs::default()
            },
        )
}

/// Realistic serve configurations against real model configs: one third
/// [`clean_args`], the rest messier. With `extreme`, scalars range over all
/// of i64 and `hf_overrides` may hold huge integers.
pub fn realistic_args(extreme: bool) -> impl Strategy<Value = ServeArgs> {
    prop_oneof![1 => clean_args().boxed(), 2 => messy_args(extreme).boxed()]
}

fn messy_args(extreme: bool) -> impl Strategy<Value = ServeArgs> {
    let jsons = (
        prop::option::weighted(0.9, kv_transfer_config()),
        prop::option::weighted(0.35, attention_config()),
        prop::option::weighted(0.2, speculative_config()),
        prop::option::weighted(0.15, compilation_config()),
        prop::option::weighted(0.2, hf_overrides(extreme)),
        model_config(),
    );
    let scalars = if extreme {
        extreme_scalars()
    } else {
        realistic_scalars()
    };
    let rest = (
        prop::option::weighted(
            0.4,
            pick(vec![
                "auto",
                "fp8",
                "fp8_ds_mla",
                "bfloat16",
                "float16",
                "fp8_e4m3",
                "nvfp4_ds_mla",
                "fp9",
                "FP8",
                "",
                "$DTYPE",
            ]),
        ),
        prop::option::weighted(0.1, any::<bool>()),
        prop::option::weighted(0.1, any::<bool>()),
        prop::option::weighted(0.15, pick(vec!["1", "0", " 1 ", "true", "", "2", "-0"])),
        prop::option::weighted(0.2, pick(vec!["cuda", "rocm", "cpu", "cud", "tpu", "CUDA"])),
    );
    (jsons, scalars, rest).prop_map(
        |(
            (kv, att, spec, comp, hfo, hf_config),
            (tp, pp, dp, dcp, block, mml, seqs),
            (dtype, isl, hybrid, v2, platform),
        )| ServeArgs {
            model: None,
            hf_config: Some(hf_config),
            hf_overrides: hfo,
            kv_transfer_config: kv,
            attention_config: att,
            speculative_config: spec,
            compilation_config: comp,
            tensor_parallel_size: tp,
            pipeline_parallel_size: pp,
            data_parallel_size: dp,
            decode_context_parallel_size: dcp,
            kv_cache_dtype: dtype.map(str::to_owned),
            block_size: block,
            max_model_len: mml,
            max_num_seqs: seqs,
            scheduler_reserve_full_isl: isl,
            disable_hybrid_kv_cache_manager: hybrid,
            vllm_use_v2_model_runner: v2.map(str::to_owned),
            platform: platform.map(str::to_owned),
            ..ServeArgs::default()
        },
    )
}

// ---------------------------------------------------------------------------
// Deeply nested values.

/// A MultiConnector chain `depth` levels deep around one HiSparseConnector,
/// built iteratively (`json!` with an expression would serialize, and so
/// recurse, through the whole subtree).
pub fn multiconnector_chain(depth: usize) -> Value {
    let mut v = json!({"kv_connector": "HiSparseConnector", "kv_role": "kv_both",
        "kv_connector_extra_config": {"host_pool_gib": 64}});
    for _ in 0..depth {
        let mut extra = Map::new();
        extra.insert("connectors".into(), Value::Array(vec![v]));
        let mut m = Map::new();
        m.insert("kv_connector".into(), json!("MultiConnector"));
        m.insert("kv_role".into(), json!("kv_both"));
        m.insert("kv_connector_extra_config".into(), Value::Object(extra));
        v = Value::Object(m);
    }
    v
}

/// Drop a value without recursion (serde_json's `Drop` recurses once per
/// nesting level, which overflows small stacks on deep values).
pub fn drop_iteratively(v: Value) {
    let mut stack = vec![v];
    while let Some(v) = stack.pop() {
        match v {
            Value::Array(items) => stack.extend(items),
            Value::Object(map) => stack.extend(map.into_iter().map(|(_, v)| v)),
            _ => {}
        }
    }
}

// ---------------------------------------------------------------------------
// Realistic mistakes: a clean deployment with one to four of the mistakes
// users make (issue 10's field reports and the vectors), for properties that
// need configurations a person would write rather than arbitrary trees.

/// One mistake, applied to a clean `ServeArgs`.
#[derive(Clone, Copy, Debug)]
pub enum Mistake {
    PoolMissing,
    PoolOnMulti,
    PoolInMultiExtra,
    PoolInHisparseConfig,
    PoolBesideConnector,
    PoolMisspelled,
    PoolOnNixl,
    PoolTooSmall,
    PoolZero,
    PoolWithUnit,
    PoolShellVariable,
    RoleMissing,
    RoleTypo,
    RoleKeyTypo,
    ExtraKeyTypo,
    ConnectorTypo,
    RemovedField,
    TopLevelList,
    NestedTwoDeep,
    LmcacheChild,
    TwoHiSparse,
    ConnectorsBesideName,
    HisparseConfigOnly,
    BlockSize16,
    PipelineParallel,
    DecodeContextParallel,
    Rocm,
    NoReserveFullIsl,
    HybridManagerOff,
    V2RunnerOff,
    ContextTooLong,
    DtypeUnknown,
    DtypeNotSparse,
    HeadsNotDivided,
    CudagraphFull,
    CudagraphKeyTypo,
    BufferTooSmall,
    BufferTooLarge,
    BufferOnConnector,
    BufferInAttention,
    DeepSpeculation,
    NotDsaModel,
}

const MISTAKES: &[Mistake] = &[
    Mistake::PoolMissing,
    Mistake::PoolOnMulti,
    Mistake::PoolInMultiExtra,
    Mistake::PoolInHisparseConfig,
    Mistake::PoolBesideConnector,
    Mistake::PoolMisspelled,
    Mistake::PoolOnNixl,
    Mistake::PoolTooSmall,
    Mistake::PoolZero,
    Mistake::PoolWithUnit,
    Mistake::PoolShellVariable,
    Mistake::RoleMissing,
    Mistake::RoleTypo,
    Mistake::RoleKeyTypo,
    Mistake::ExtraKeyTypo,
    Mistake::ConnectorTypo,
    Mistake::RemovedField,
    Mistake::TopLevelList,
    Mistake::NestedTwoDeep,
    Mistake::LmcacheChild,
    Mistake::TwoHiSparse,
    Mistake::ConnectorsBesideName,
    Mistake::HisparseConfigOnly,
    Mistake::BlockSize16,
    Mistake::PipelineParallel,
    Mistake::DecodeContextParallel,
    Mistake::Rocm,
    Mistake::NoReserveFullIsl,
    Mistake::HybridManagerOff,
    Mistake::V2RunnerOff,
    Mistake::ContextTooLong,
    Mistake::DtypeUnknown,
    Mistake::DtypeNotSparse,
    Mistake::HeadsNotDivided,
    Mistake::CudagraphFull,
    Mistake::CudagraphKeyTypo,
    Mistake::BufferTooSmall,
    Mistake::BufferTooLarge,
    Mistake::BufferOnConnector,
    Mistake::BufferInAttention,
    Mistake::DeepSpeculation,
    Mistake::NotDsaModel,
];

/// The HiSparseConnector object of a P/D tree built by [`mistaken_args`].
fn hisparse_of(kv: &mut Value) -> Option<&mut Map<String, Value>> {
    if kv.get("kv_connector").and_then(Value::as_str) == Some("HiSparseConnector") {
        return kv.as_object_mut();
    }
    let list = kv
        .pointer_mut("/kv_connector_extra_config/connectors")?
        .as_array_mut()?;
    list.iter_mut()
        .find(|c| c.get("kv_connector").and_then(Value::as_str) == Some("HiSparseConnector"))?
        .as_object_mut()
}

fn apply_mistake(args: &mut ServeArgs, m: Mistake, pool: Value) {
    let kv = args.kv_transfer_config.get_or_insert_with(|| json!({}));
    let take_pool = |kv: &mut Value| -> Value {
        hisparse_of(kv)
            .and_then(|hs| hs.get_mut("kv_connector_extra_config"))
            .and_then(Value::as_object_mut)
            .and_then(|e| e.remove("host_pool_gib"))
            .unwrap_or(pool.clone())
    };
    fn attention(args: &mut ServeArgs) -> &mut Map<String, Value> {
        let a = args.attention_config.get_or_insert_with(|| json!({}));
        if !a.is_object() {
            *a = json!({});
        }
        a.as_object_mut().expect("an object")
    }
    match m {
        Mistake::PoolMissing => {
            take_pool(kv);
        }
        Mistake::PoolOnMulti | Mistake::PoolInMultiExtra => {
            let p = take_pool(kv);
            if kv.get("kv_connector").and_then(Value::as_str) == Some("MultiConnector") {
                if matches!(m, Mistake::PoolOnMulti) {
                    kv["host_pool_gib"] = p;
                } else {
                    kv["kv_connector_extra_config"]["host_pool_gib"] = p;
                }
            } else if let Some(hs) = hisparse_of(kv) {
                hs.insert("host_pool_gib".into(), p);
            }
        }
        Mistake::PoolInHisparseConfig => {
            let p = take_pool(kv);
            let a = attention(args);
            a.entry("hisparse_config").or_insert(json!({}))["host_pool_gib"] = p;
        }
        Mistake::PoolBesideConnector => {
            let p = take_pool(kv);
            if let Some(hs) = hisparse_of(kv) {
                hs.insert("host_pool_gib".into(), p);
            }
        }
        Mistake::PoolMisspelled => {
            let p = take_pool(kv);
            if let Some(hs) = hisparse_of(kv) {
                hs.entry("kv_connector_extra_config").or_insert(json!({}))["host_pool_gb"] = p;
            }
        }
        Mistake::PoolOnNixl => {
            let p = take_pool(kv);
            if let Some(list) = kv
                .pointer_mut("/kv_connector_extra_config/connectors")
                .and_then(Value::as_array_mut)
            {
                if let Some(nixl) = list
                    .iter_mut()
                    .find(|c| c["kv_connector"] == "NixlConnector")
                {
                    nixl["kv_connector_extra_config"] = json!({"host_pool_gib": p});
                }
            }
        }
        Mistake::PoolTooSmall
        | Mistake::PoolZero
        | Mistake::PoolWithUnit
        | Mistake::PoolShellVariable => {
            let value = match m {
                Mistake::PoolTooSmall => json!(4),
                Mistake::PoolZero => json!(0),
                Mistake::PoolWithUnit => json!("128GiB"),
                _ => json!("$HOST_POOL_GIB"),
            };
            if let Some(hs) = hisparse_of(kv) {
                hs.entry("kv_connector_extra_config").or_insert(json!({}))["host_pool_gib"] = value;
            }
        }
        Mistake::RoleMissing | Mistake::RoleTypo | Mistake::RoleKeyTypo => {
            if let Some(hs) = hisparse_of(kv) {
                let role = hs.remove("kv_role").unwrap_or(json!("kv_both"));
                match m {
                    Mistake::RoleTypo => {
                        hs.insert("kv_role".into(), json!("kv_bot"));
                    }
                    Mistake::RoleKeyTypo => {
                        hs.insert("kv_rol".into(), role);
                    }
                    _ => {}
                }
            }
        }
        Mistake::ExtraKeyTypo => {
            if let Some(hs) = hisparse_of(kv) {
                if let Some(extra) = hs.remove("kv_connector_extra_config") {
                    hs.insert("kv_extra_config".into(), extra);
                }
            }
        }
        Mistake::ConnectorTypo => {
            if let Some(hs) = hisparse_of(kv) {
                hs.insert("kv_connector".into(), json!("HiSparseConector"));
            }
        }
        Mistake::RemovedField => {
            if let Some(hs) = hisparse_of(kv) {
                hs.insert("kv_buffer_size".into(), json!(1e9));
            }
        }
        Mistake::TopLevelList => {
            let children = kv
                .pointer("/kv_connector_extra_config/connectors")
                .cloned()
                .unwrap_or_else(|| json!([kv.clone()]));
            *kv = children;
        }
        Mistake::NestedTwoDeep => {
            if let Some(list) = kv
                .pointer_mut("/kv_connector_extra_config/connectors")
                .and_then(Value::as_array_mut)
            {
                if let Some(i) = list
                    .iter()
                    .position(|c| c["kv_connector"] == "HiSparseConnector")
                {
                    let hs = list[i].take();
                    list[i] = json!({"kv_connector": "MultiConnector", "kv_role": "kv_both",
                        "kv_connector_extra_config": {"connectors": [hs]}});
                }
            }
        }
        Mistake::LmcacheChild | Mistake::TwoHiSparse => {
            let extra = if matches!(m, Mistake::LmcacheChild) {
                json!({"kv_connector": "LMCacheConnectorV1", "kv_role": "kv_both"})
            } else {
                json!({"kv_connector": "HiSparseConnector", "kv_role": "kv_both",
                    "kv_connector_extra_config": {"host_pool_gib": 32}})
            };
            match kv
                .pointer_mut("/kv_connector_extra_config/connectors")
                .and_then(Value::as_array_mut)
            {
                Some(list) => list.push(extra),
                None => {
                    *kv = json!({"kv_connector": "MultiConnector", "kv_role": "kv_both",
                        "kv_connector_extra_config": {"connectors": [kv.clone(), extra]}});
                }
            }
        }
        Mistake::ConnectorsBesideName => {
            if let Some(obj) = kv.as_object_mut() {
                if let Some(list) = obj
                    .get_mut("kv_connector_extra_config")
                    .and_then(Value::as_object_mut)
                    .and_then(|e| e.remove("connectors"))
                {
                    obj.insert("connectors".into(), list);
                }
            }
        }
        Mistake::HisparseConfigOnly => {
            args.kv_transfer_config = None;
            attention(args)
                .entry("hisparse_config")
                .or_insert(json!({}));
        }
        Mistake::BlockSize16 => args.block_size = Some(16),
        Mistake::PipelineParallel => args.pipeline_parallel_size = Some(2),
        Mistake::DecodeContextParallel => args.decode_context_parallel_size = Some(2),
        Mistake::Rocm => args.platform = Some("rocm".into()),
        Mistake::NoReserveFullIsl => args.scheduler_reserve_full_isl = Some(false),
        Mistake::HybridManagerOff => args.disable_hybrid_kv_cache_manager = Some(true),
        Mistake::V2RunnerOff => args.vllm_use_v2_model_runner = Some("0".into()),
        Mistake::ContextTooLong => args.max_model_len = Some(10_000_000),
        Mistake::DtypeUnknown => args.kv_cache_dtype = Some("fp8_ds_mlaa".into()),
        Mistake::DtypeNotSparse => args.kv_cache_dtype = Some("fp8_e5m2".into()),
        Mistake::HeadsNotDivided => args.tensor_parallel_size = Some(6),
        Mistake::CudagraphFull => args.compilation_config = Some(json!({"cudagraph_mode": "FULL"})),
        Mistake::CudagraphKeyTypo => {
            args.compilation_config = Some(json!({"cudagraph_mod": "FULL"}))
        }
        Mistake::BufferTooSmall | Mistake::BufferTooLarge => {
            let v = if matches!(m, Mistake::BufferTooSmall) {
                1000
            } else {
                40_000
            };
            attention(args)
                .entry("hisparse_config")
                .or_insert(json!({}))["device_buffer_size"] = json!(v);
        }
        Mistake::BufferOnConnector => {
            if let Some(hs) = hisparse_of(kv) {
                hs.entry("kv_connector_extra_config").or_insert(json!({}))["device_buffer_size"] =
                    json!(6144);
            }
        }
        Mistake::BufferInAttention => {
            attention(args).insert("device_buffer_size".into(), json!(6144));
        }
        Mistake::DeepSpeculation => {
            args.speculative_config = Some(json!({"method": "mtp", "num_speculative_tokens": 20}))
        }
        Mistake::NotDsaModel => args.hf_config = Some(parse(LLAMA)),
    }
}

/// A clean deployment with one to four realistic mistakes.
pub fn mistaken_args() -> impl Strategy<Value = ServeArgs> {
    (
        clean_args(),
        prop::collection::vec(prop::sample::select(MISTAKES.to_vec()), 1..5),
        sel(vec![json!(256), json!(12.5), json!(128)]),
    )
        .prop_map(|(mut args, mistakes, pool)| {
            for m in mistakes {
                apply_mistake(&mut args, m, pool.clone());
            }
            args
        })
}
