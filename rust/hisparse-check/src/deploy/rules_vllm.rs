//! vLLM 0.33.0 P/D pairs: what the NIXL handshake refuses, each rule on a
//! (prefill, decode) pair with a fix on one side (the side without
//! HiSparse): the compatibility-hash factors (nixl/metadata.py:146-216,
//! the factors at :186-203: model string, dtype, KV cache dtype as hashed,
//! the hybrid KV cache manager), the rules the decode's worker checks in
//! `_validate_remote_agent_handshake` (nixl/base_worker.py:2691-2790: the TP
//! and block-size ratios of kv_connector/utils.py:522-547, DCP sizes that
//! divide one another, no heterogeneous block size with a host buffer), a
//! producer for every consumer, and the prefill's max_model_len within the
//! decode's.

use super::diag::{Edit, Pair, PairDiagnostic};
use super::facts::Checked;
use super::model::{EngineKind, Role};
use hisparse_core::stage::VllmStage;
use hisparse_core::Code;
use serde_json::{json, Value};

/// vLLM's words (nixl/base_worker.py:1191-1207, the decode's handshake).
const HASH_MSG: &str = "NIXL compatibility hash mismatch. Local: <hash>, Remote: <hash>. Prefill and decode instances have incompatible configurations.";

/// The launches' roles as the rules read them: a deployment with consumers
/// and no producer (or the reverse) has its kv_role fix applied first, so
/// every other mismatch is reported at once.
fn roles(v: &[&Checked], out: &mut Vec<PairDiagnostic>) -> Vec<Role> {
    let mut roles: Vec<Role> = v.iter().map(|c| c.launch.role).collect();
    let has = |r: &[Role], want: Role| r.iter().any(|x| *x == want || *x == Role::Both);
    for (want, missing, new_role) in [
        (Role::Decode, Role::Prefill, "kv_producer"),
        (Role::Prefill, Role::Decode, "kv_consumer"),
    ] {
        if !roles.contains(&want) || has(&roles, missing) {
            continue;
        }
        // The natural side to turn: a consumer without HiSparse becomes the
        // producer; a producer with HiSparse becomes the consumer.
        let turn = v
            .iter()
            .position(|c| c.launch.role == want && (c.facts.hisparse == (want == Role::Prefill)));
        let at = turn.unwrap_or(0);
        let c = v[at];
        let (path, given) = match &c.facts.kv_role {
            Some((r, p)) => (p.clone(), r.clone()),
            None => ("kv_transfer_config.kv_role".to_owned(), String::new()),
        };
        let mut edits = Vec::new();
        if turn.is_some() && v.len() > 1 {
            if let Some(ktc) = c.facts.kv_transfer_config.clone() {
                let fixed = set_role(ktc, new_role);
                edits.push(Edit::Set {
                    flag: "--kv-transfer-config".into(),
                    value: fixed.to_string(),
                });
                roles[at] = missing;
            }
        }
        let role_word = if want == Role::Decode {
            "kv_consumer"
        } else {
            "kv_producer"
        };
        let message = format!(
            "every vLLM launch of this deployment is a {role_word} and none a {new_role}: the {role_word}s wait for KV that no instance sends"
        );
        out.push(
            Pair {
                code: Code::PdKvRoleUnpaired,
                stage: VllmStage::Handshake.into(),
                launch: &c.launch.name,
                field: &path,
                given: json!(given),
                other: None,
                message,
                engine_message: "no remote engine ever connects: requests wait for the KV transfer (no NIXL handshake takes place)",
            }
            .build(edits, Some(json!(new_role))),
        );
    }
    roles
}

/// `kv_role` of the transfer connector (and a MultiConnector's own) set to `role`.
fn set_role(mut ktc: Value, role: &str) -> Value {
    if ktc.get("kv_connector").and_then(Value::as_str) == Some("MultiConnector") {
        ktc["kv_role"] = json!(role);
        if let Some(children) = ktc
            .pointer_mut("/kv_connector_extra_config/connectors")
            .and_then(Value::as_array_mut)
        {
            for child in children {
                if child.get("kv_connector").and_then(Value::as_str) != Some("HiSparseConnector") {
                    child["kv_role"] = json!(role);
                }
            }
        }
    } else {
        ktc["kv_role"] = json!(role);
    }
    ktc
}

/// Every rule on vLLM's launches.
pub fn rules(all: &[Checked]) -> Vec<PairDiagnostic> {
    let v: Vec<&Checked> = all
        .iter()
        .filter(|c| c.launch.engine == EngineKind::Vllm && c.launch.role != Role::Standalone)
        .collect();
    let mut out = Vec::new();
    let roles = roles(&v, &mut out);
    let is = |i: usize, r: Role| roles[i] == r || roles[i] == Role::Both;
    for p in 0..v.len() {
        for d in 0..v.len() {
            if p != d
                && is(p, Role::Prefill)
                && is(d, Role::Decode)
                && !(roles[p] == Role::Both && roles[d] == Role::Both && d < p)
            {
                pair(v[p], v[d], &mut out);
            }
        }
    }
    out
}

/// Which of the two the fix edits: the one without HiSparse (the prefill when both or neither have it).
fn sides<'a>(p: &'a Checked, d: &'a Checked) -> (&'a Checked, &'a Checked) {
    if p.facts.hisparse && !d.facts.hisparse {
        (d, p)
    } else {
        (p, d)
    }
}

fn pair(p: &Checked, d: &Checked, out: &mut Vec<PairDiagnostic>) {
    let (fix, keep) = sides(p, d);
    let (f, k) = (&fix.facts, &keep.facts);
    let mk = |code,
              field: &str,
              given: Value,
              want: Value,
              msg: String,
              engine: &str,
              edits: Vec<Edit>|
     -> PairDiagnostic {
        Pair {
            code,
            stage: VllmStage::Handshake.into(),
            launch: &fix.launch.name,
            field,
            given,
            other: Some((&keep.launch.name, field, want.clone())),
            message: msg,
            engine_message: engine,
        }
        .build(edits, Some(want))
    };
    if let (Some(a), Some(b)) = (&f.model_given, &k.model_given) {
        if a != b {
            let msg = format!("the two sides name the model differently ({a:?} and {b:?}): vLLM hashes the model string itself into the NIXL compatibility hash, so they do not connect even when both are the same weights");
            out.push(mk(
                Code::PdModelMismatch,
                "model",
                json!(a),
                json!(b),
                msg,
                HASH_MSG,
                vec![],
            ));
            if let Some(last) = out.last_mut() {
                let h = format!("on {}: serve the model as {b:?}, as the other side names it (mount the weights at the same path, or give both the same Hugging Face id)", fix.launch.name);
                last.diagnostic.hint = Some(h);
            }
        }
    }
    if f.dtype != k.dtype {
        let msg = format!("dtype {} here and {} on the other side: the model dtype is a compatibility-hash factor", f.dtype, k.dtype);
        out.push(mk(
            Code::PdDtypeMismatch,
            "dtype",
            json!(f.dtype),
            json!(k.dtype),
            msg,
            HASH_MSG,
            vec![Edit::Set {
                flag: "--dtype".into(),
                value: k.dtype.clone(),
            }],
        ));
    }
    if f.kv_cache_dtype != k.kv_cache_dtype {
        let msg = format!("the KV cache dtype is hashed as {} here and {} on the other side (vLLM hashes the string it keeps: auto stays auto, fp8 on a sparse-MLA model becomes fp8_ds_mla, DeepSeek-V3.2 reads bfloat16 as auto): the cache dtype is a compatibility-hash factor", f.kv_cache_dtype, k.kv_cache_dtype);
        let edits = vec![Edit::Set {
            flag: "--kv-cache-dtype".into(),
            value: k.kv_cache_dtype.clone(),
        }];
        out.push(mk(
            Code::PdKvCacheDtypeMismatch,
            "kv_cache_dtype",
            json!(f.kv_cache_dtype),
            json!(k.kv_cache_dtype),
            msg,
            HASH_MSG,
            edits,
        ));
    }
    if f.hma != k.hma {
        let on = |b: bool| if b { "on" } else { "off" };
        let msg = format!("the hybrid KV cache manager is {} here and {} on the other side (HiSparse needs it on; vLLM turns it on unless --disable-hybrid-kv-cache-manager is given or a connector without SupportsHMA is configured): whether it is on is a compatibility-hash factor", on(f.hma), on(k.hma));
        let edit = if k.hma {
            Edit::Switch {
                on: "--no-disable-hybrid-kv-cache-manager".into(),
                off: "--disable-hybrid-kv-cache-manager".into(),
            }
        } else {
            Edit::Switch {
                on: "--disable-hybrid-kv-cache-manager".into(),
                off: "--no-disable-hybrid-kv-cache-manager".into(),
            }
        };
        out.push(mk(
            Code::PdHybridKvCacheManagerMismatch,
            "disable_hybrid_kv_cache_manager",
            json!(!f.hma),
            json!(!k.hma),
            msg,
            HASH_MSG,
            vec![edit],
        ));
    }
    if f.speculative != k.speculative {
        let say = |s: &Option<Value>| {
            s.as_ref().map_or_else(
                || "none".to_owned(),
                |v| v["method"].as_str().unwrap_or("?").to_owned(),
            )
        };
        let msg = format!("speculative decoding {} here and {} on the other side: a hidden-state speculator's method, draft model and draft KV dtype are compatibility-hash factors (num_speculative_tokens is not)", say(&f.speculative), say(&k.speculative));
        let edits = k.speculative_given.as_ref().map_or_else(Vec::new, |v| {
            vec![Edit::Set {
                flag: "--speculative-config".into(),
                value: v.to_string(),
            }]
        });
        out.push(mk(
            Code::PdSpeculativeMismatch,
            "speculative_config",
            json!(f.speculative_given),
            json!(k.speculative_given),
            msg,
            HASH_MSG,
            edits,
        ));
        if k.speculative_given.is_none() {
            if let Some(last) = out.last_mut() {
                last.diagnostic.hint = Some(format!(
                    "on {}: remove --speculative-config (the other side runs none)",
                    fix.launch.name
                ));
            }
        }
    }
    block_rule(p, d, out);
    tp_rule(p, d, out);
    context_rule(p, d, out);
}

/// The prefill's max_model_len within the decode's (the decode refuses a longer prompt).
fn context_rule(p: &Checked, d: &Checked, out: &mut Vec<PairDiagnostic>) {
    if let (Some(pl), Some(dl)) = (p.facts.context_len, d.facts.context_len) {
        if pl > dl {
            let msg = format!("the prefill side takes prompts of up to {pl} tokens, the decode side only {dl}: a request the prefill accepts fails when its KV reaches the decode");
            out.push(
                Pair {
                    code: Code::PdContextLengthExceedsDecode,
                    stage: VllmStage::Handshake.into(),
                    launch: &p.launch.name,
                    field: "max_model_len",
                    given: json!(pl),
                    other: Some((&d.launch.name, "max_model_len", json!(dl))),
                    message: msg,
                    engine_message:
                        "the decode instance rejects a request longer than its max_model_len",
                }
                .build(
                    vec![Edit::Set {
                        flag: "--max-model-len".into(),
                        value: dl.to_string(),
                    }],
                    Some(json!(dl)),
                ),
            );
        }
    }
}

/// The block sizes the two workers exchange (the kernel block sizes, see
/// `Facts::block_size`): the decode (the local side of the pull handshake)
/// needs a multiple of the prefill's (`TransferTopology.block_size_ratio`,
/// kv_connector/utils.py:541-547; "Only nP < nD supported currently",
/// nixl/base_worker.py:3065), and equal ones with a host buffer
/// (base_worker.py:2780-2786).
fn block_rule(p: &Checked, d: &Checked, out: &mut Vec<PairDiagnostic>) {
    let (pb, db) = (p.facts.block_size.max(1), d.facts.block_size.max(1));
    let host = d.facts.host_buffer && pb != db;
    if db % pb == 0 && !host {
        return;
    }
    let (fix, keep) = sides(p, d);
    let engine = if host {
        "Heterogeneous block sizes are not supported with host buffer".to_owned()
    } else {
        format!("Local block size {db} is not divisible by remote block size {pb} or vice versa.")
    };
    let msg = format!("the prefill transfers blocks of {pb} tokens, the decode {db}: the decode's NIXL worker needs its block size a multiple of the prefill's{} (checked in the handshake at the first request that crosses; block sizes are left out of the hash)", if host { ", and equal ones with kv_buffer_device cpu" } else { "" });
    out.push(
        Pair {
            code: Code::PdBlockSizeMismatch,
            stage: VllmStage::Handshake.into(),
            launch: &fix.launch.name,
            field: "block_size",
            given: json!(fix.facts.block_size),
            other: Some((
                &keep.launch.name,
                "block_size",
                json!(keep.facts.block_size),
            )),
            message: msg,
            engine_message: &engine,
        }
        .build(
            vec![Edit::Set {
                flag: "--block-size".into(),
                value: keep.facts.block_size.to_string(),
            }],
            Some(json!(keep.facts.block_size)),
        ),
    );
}

/// The largest size within `own` that divides `other` or that `other`
/// divides, a power of two first (what model head counts split by).
fn compatible_size(own: i64, other: i64) -> i64 {
    // Bounded trials (limits.rs): a size beyond them is the launch's own error already.
    let top = own.min(hisparse_core::limits::MAX_DIVISOR_TRIALS as i64);
    let fits = |k: i64| other % k == 0 || k % other == 0;
    (1..=top)
        .rev()
        .find(|k| k.count_ones() == 1 && fits(*k))
        .or_else(|| (1..=top).rev().find(|k| fits(*k)))
        .unwrap_or(1)
}

/// TP and DCP: each side's size divides the other's. The decode's worker
/// asserts it in `TransferTopology.tp_ratio` (kv_connector/utils.py:522-539,
/// from `_validate_remote_agent_handshake`, nixl/base_worker.py:2720) and for
/// DCP in the handshake itself (base_worker.py:2706-2712). A prefill TP above
/// the decode's is allowed for MLA (the models HiSparse serves). The
/// prefill's fix: the largest size within its own that fits.
fn tp_rule(p: &Checked, d: &Checked, out: &mut Vec<PairDiagnostic>) {
    for (field, flag, pt, dt) in [
        (
            "tensor_parallel_size",
            "--tensor-parallel-size",
            p.facts.tp.max(1),
            d.facts.tp.max(1),
        ),
        (
            "decode_context_parallel_size",
            "--decode-context-parallel-size",
            p.facts.dcp.max(1),
            d.facts.dcp.max(1),
        ),
    ] {
        if dt % pt == 0 || pt % dt == 0 {
            continue;
        }
        let k = compatible_size(pt, dt);
        let (msg, engine) = if field == "tensor_parallel_size" {
            (format!("prefill TP {pt} and decode TP {dt}: vLLM's NIXL handshake maps decode ranks to prefill ranks only when one TP size divides the other"),
             if dt >= pt { format!("Local tensor parallel size {dt} is not divisible by remote tensor parallel size {pt}.") } else { format!("Remote tensor parallel size {pt} is not divisible by local tensor parallel size {dt}.") })
        } else {
            (format!("prefill DCP {pt} and decode DCP {dt}: vLLM's NIXL handshake needs DCP sizes that divide one another"),
             format!("DCP sizes must divide one another: local={dt}, remote={pt}"))
        };
        out.push(
            Pair {
                code: Code::PdTensorParallelUnsupported,
                stage: VllmStage::Handshake.into(),
                launch: &p.launch.name,
                field,
                given: json!(pt),
                other: Some((&d.launch.name, field, json!(dt))),
                message: msg,
                engine_message: &engine,
            }
            .build(
                vec![Edit::Set {
                    flag: flag.into(),
                    value: k.to_string(),
                }],
                Some(json!(k)),
            ),
        );
    }
}
