//! The KV cache dtypes of a DSA launch under HiSparse: the DSA backends
//! HiSparse allows for each (arg_groups/hisparse_hook.py:18-61) and the dtype
//! that replaces one DSA refuses (arg_groups/overrides.py:541-544). Read by
//! the resolve rules (`rules_resolve`, the dtype rule's fix) and the check
//! rules (`rules_check`, the backend rule checks the fixed dtype).

use super::resolution::Resolution;
use crate::diagnostic::FixOp;
use crate::path::FieldPath;
use serde_json::{json, Value};

fn set(attr: &str, value: Value) -> FixOp {
    FixOp::Set {
        path: FieldPath::root(attr),
        value,
    }
}

/// The DSA backends HiSparse allows on CUDA for a KV dtype (hisparse_hook.py:18-37).
pub fn allowed_backends(hip: bool, dtype: &str) -> &'static [&'static str] {
    if hip {
        return &["aiter", "tilelang", "triton"];
    }
    match dtype {
        "bfloat16" => &["flashmla_sparse"],
        "fp8_e4m3" => &["flashinfer_sparse_mla", "flashmla_kv"],
        _ => &["flashinfer_sparse_mla", "flashmla_kv", "flashmla_sparse"],
    }
}

/// The dtypes to try in place of a refused `given`, the user's precision
/// first: (the name to set, what it resolves to). 8-bit or smaller (`fp8_*`,
/// `fp4_*`, `mxfp*`, `nvfp4`, `int8`, `int4`): fp8_e4m3, the one 8-bit DSA
/// dtype; else `auto` (what this GPU resolves it to), then the others.
fn candidates(given: Option<&str>, auto: &'static str) -> [(&'static str, &'static str); 3] {
    let low = given.unwrap_or("").to_ascii_lowercase();
    let small = ["fp8", "fp4", "mxfp", "nvfp", "int8", "int4"]
        .iter()
        .any(|p| low.starts_with(p));
    if small {
        [
            ("fp8_e4m3", "fp8_e4m3"),
            ("auto", auto),
            ("bfloat16", "bfloat16"),
        ]
    } else {
        [
            ("auto", auto),
            ("fp8_e4m3", "fp8_e4m3"),
            ("bfloat16", "bfloat16"),
        ]
    }
}

/// The kv_cache_dtype that replaces one DSA refuses: the one of the user's
/// precision first (issue 22 item 7: `fp8_e5m2`, any 8-bit or smaller dtype,
/// becomes `fp8_e4m3`, not `auto`, which is bfloat16 below SM 10; a 16-bit or
/// wider one becomes `auto`), unless a DSA
/// backend given explicitly is one HiSparse refuses with that dtype
/// (`--dsa-prefill-backend flashmla_kv` on SM 9.0, where auto is
/// bfloat16): then the dtype that backend takes; where no dtype takes every
/// backend given, the first dtype and the backends it refuses removed, so the fix passes.
/// Returns the fix and the dtype it resolves to (the backend rule below checks
/// that one, so every fix at once passes).
pub(crate) fn dsa_dtype_fix(r: &Resolution<'_>) -> (Vec<FixOp>, &'static str) {
    let auto = if r.sm_major >= 10 && !r.hip {
        "fp8_e4m3"
    } else {
        "bfloat16"
    };
    let first = candidates(r.args.kv_cache_dtype.as_deref(), auto)[0];
    if !r.args.hisparse_on() {
        return (vec![set("kv_cache_dtype", json!(first.0))], first.1);
    }
    let given = [
        ("dsa_prefill_backend", r.args.dsa_prefill_backend.as_deref()),
        ("dsa_decode_backend", r.args.dsa_decode_backend.as_deref()),
    ];
    let refused = |dtype: &str| {
        let allowed = allowed_backends(r.hip, dtype);
        given
            .iter()
            .filter(|(_, b)| b.is_some_and(|b| !allowed.contains(&b)))
            .map(|(attr, _)| *attr)
            .collect::<Vec<_>>()
    };
    for (name, dtype) in candidates(r.args.kv_cache_dtype.as_deref(), auto) {
        if refused(dtype).is_empty() {
            return (vec![set("kv_cache_dtype", json!(name))], dtype);
        }
    }
    let (name, dtype) = first;
    let mut ops = vec![set("kv_cache_dtype", json!(name))];
    ops.extend(refused(dtype).into_iter().map(|attr| FixOp::Remove {
        path: FieldPath::root(attr),
    }));
    (ops, dtype)
}
