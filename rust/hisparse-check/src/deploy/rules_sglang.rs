//! SGLang 0.5.23 P/D pairs: what the decode server refuses when it first
//! bootstraps with a prefill server, on each (prefill, decode) pair, fixed
//! on the side without HiSparse: page sizes as each side resolves them (a
//! DSA model's is 64 x index_kpool whatever `--page-size` says,
//! arg_groups/model_overrides/deepseek_v2.py:150-176; conn.py:1320-1325),
//! the KV cache dtype (conn.py:1327-1335), the attention-TP mapping
//! (`_resolve_rank_mapping`, conn.py:1432-1464), the transfer backend, the
//! model, the context length.

use super::diag::{Edit, Pair, PairDiagnostic};
use super::facts::Checked;
use super::model::{EngineKind, Role};
use hisparse_core::stage::SglangStage;
use hisparse_core::Code;
use serde_json::{json, Value};

/// Every rule on SGLang's launches. Launches all of one mode (a decode
/// manifest copied for the prefill) have the mode fix applied first, so every
/// other mismatch is reported at once.
pub fn rules(all: &[Checked]) -> Vec<PairDiagnostic> {
    let s: Vec<&Checked> = all
        .iter()
        .filter(|c| c.launch.engine == EngineKind::Sglang && c.launch.role != Role::Standalone)
        .collect();
    let mut out = Vec::new();
    let mut roles: Vec<Role> = s.iter().map(|c| c.launch.role).collect();
    for (mine, want, word, theirs) in [
        (Role::Decode, Role::Prefill, "decode", "prefill"),
        (Role::Prefill, Role::Decode, "prefill", "decode"),
    ] {
        if !roles.contains(&mine) || roles.contains(&want) {
            continue;
        }
        // The natural side to turn: a decode without HiSparse, a prefill with it.
        let turn = s
            .iter()
            .position(|c| c.facts.hisparse == (mine == Role::Prefill))
            .filter(|_| s.len() > 1);
        let c = s[turn.unwrap_or(0)];
        let edits = match turn {
            Some(at) => {
                roles[at] = want;
                vec![Edit::Set {
                    flag: "--disaggregation-mode".into(),
                    value: theirs.into(),
                }]
            }
            None => vec![],
        };
        let msg = format!("every SGLang launch of this deployment runs --disaggregation-mode {word} and none {theirs}: its requests wait for a peer that is never there");
        out.push(
            Pair {
                code: Code::PdKvRoleUnpaired,
                stage: SglangStage::FirstRequest.into(),
                launch: &c.launch.name,
                field: "disaggregation_mode",
                given: json!(word),
                other: None,
                message: msg,
                engine_message: "the bootstrap never completes (no server of the other mode)",
            }
            .build(edits, Some(json!(theirs))),
        );
    }
    for (p, _) in s.iter().zip(&roles).filter(|(_, r)| **r == Role::Prefill) {
        for (d, _) in s.iter().zip(&roles).filter(|(_, r)| **r == Role::Decode) {
            pair(p, d, &mut out);
        }
    }
    out
}

struct Rule<'a> {
    code: Code,
    field: &'a str,
    mine: Value,
    theirs: Value,
    message: String,
    engine: String,
    edits: Vec<Edit>,
}

fn pair(p: &Checked, d: &Checked, out: &mut Vec<PairDiagnostic>) {
    let (fix, keep) = if p.facts.hisparse && !d.facts.hisparse {
        (d, p)
    } else {
        (p, d)
    };
    let (f, k) = (&fix.facts, &keep.facts);
    let mut rules = Vec::new();
    let dsa = |c: &Checked| {
        c.facts
            .model
            .as_ref()
            .is_some_and(|m| m.index_topk.is_some())
    };
    if f.page_size != k.page_size {
        // A DSA model's page size is the model override's: --page-size does not change it.
        let edits = if dsa(fix) {
            vec![]
        } else {
            vec![Edit::Set {
                flag: "--page-size".into(),
                value: k.page_size.to_string(),
            }]
        };
        rules.push(Rule { code: Code::PdPageSizeMismatch, field: "page_size", mine: json!(f.page_size), theirs: json!(k.page_size), message: format!("page size resolves to {} here and {} on the other side (a DSA model's is set by SGLang itself, whatever --page-size says)", f.page_size, k.page_size), engine: format!("Page size mismatch: prefill server has page_size={}, but decode server has page_size={}. Both servers must use the same --page-size value.", p.facts.page_size, d.facts.page_size), edits });
    }
    if f.transfer_backend != k.transfer_backend {
        rules.push(Rule { code: Code::PdTransferBackendMismatch, field: "disaggregation_transfer_backend", mine: json!(f.transfer_backend), theirs: json!(k.transfer_backend), message: format!("transfer backend {} here and {} on the other side: the two KV managers do not speak to each other", f.transfer_backend, k.transfer_backend), engine: "the bootstrap fails: each side's KV manager is its own backend's".into(), edits: vec![Edit::Set { flag: "--disaggregation-transfer-backend".into(), value: k.transfer_backend.clone() }] });
    }
    if let Some(engine) = attn_tp_refusal(&p.facts, &d.facts) {
        let edits = attn_tp_fix(f, k.attn_tp);
        rules.push(Rule { code: Code::PdAttentionTpMismatch, field: "tp_size", mine: json!(f.attn_tp), theirs: json!(k.attn_tp), message: format!("attention TP {} here and {} on the other side (tp / dp with --enable-dp-attention): {}", f.attn_tp, k.attn_tp, if p.facts.kv_sharding { "the prefill shards its MLA KV over its attention-TP ranks (--enable-kv-cache-sharding), so both sides need the same attention TP" } else { "a decode attention TP above the prefill's must be a multiple of it, or some decode ranks map to a prefill rank that does not exist" }), engine, edits });
    }
    if f.kv_cache_dtype != k.kv_cache_dtype {
        rules.push(Rule { code: Code::PdKvCacheDtypeMismatch, field: "kv_cache_dtype", mine: json!(f.kv_cache_dtype), theirs: json!(k.kv_cache_dtype), message: format!("the KV cache dtype resolves to {} here and {} on the other side: the transferred KV bytes would be read as the wrong type", f.kv_cache_dtype, k.kv_cache_dtype), engine: format!("KV cache dtype mismatch: prefill server has kv_cache_dtype={}, but decode server has kv_cache_dtype={}. Both servers must use the same --kv-cache-dtype value.", p.facts.kv_cache_dtype, d.facts.kv_cache_dtype), edits: vec![Edit::Set { flag: "--kv-cache-dtype".into(), value: k.kv_cache_dtype.clone() }] });
    }
    let id = |c: &Checked| {
        c.facts.model.as_ref().map(|m| {
            (
                m.architecture.clone(),
                m.sparse_mla_layers.as_ref().map(|s| s.value),
                m.kv_lora_rank,
                m.qk_rope_head_dim,
            )
        })
    };
    if let (Some(a), Some(b)) = (id(fix), id(keep)) {
        if a != b {
            rules.push(Rule {
                code: Code::PdModelMismatch,
                field: "model_path",
                mine: json!(f.model_given),
                theirs: json!(k.model_given),
                message:
                    "the two sides load different models (architecture or KV dimensions differ)"
                        .into(),
                engine: "the KV layouts differ: the transfer fails".into(),
                edits: vec![],
            });
        }
    }
    let (pl, dl) = (p.facts.context_len, d.facts.context_len);
    for r in rules {
        out.push(
            Pair {
                code: r.code,
                stage: SglangStage::FirstRequest.into(),
                launch: &fix.launch.name,
                field: r.field,
                given: r.mine,
                other: Some((&keep.launch.name, r.field, r.theirs.clone())),
                message: r.message,
                engine_message: &r.engine,
            }
            .build(r.edits, Some(r.theirs)),
        );
    }
    if let (Some(pl), Some(dl)) = (pl, dl) {
        if pl > dl {
            out.push(
                Pair { code: Code::PdContextLengthExceedsDecode, stage: SglangStage::FirstRequest.into(), launch: &p.launch.name, field: "context_length", given: json!(pl), other: Some((&d.launch.name, "context_length", json!(dl))), message: format!("the prefill server takes prompts of up to {pl} tokens, the decode server only {dl}"), engine_message: "the decode server rejects a request longer than its context length" }
                    .build(vec![Edit::Set { flag: "--context-length".into(), value: dl.to_string() }], Some(json!(dl))),
            );
        }
    }
}

/// What the decode's `_resolve_rank_mapping` (disaggregation/common/conn.py:1432-1464)
/// does with a prefill of another attention TP, when it fails: with the
/// prefill's `--enable-kv-cache-sharding` (MLA) it asserts equal sizes
/// (:1441-1449); with a larger decode attention TP D than the prefill's P it
/// maps decode rank r to prefill rank (r % D) // (D // P) (:1458-1464), a rank
/// the prefill lacks unless P divides D. A smaller decode TP reads from the
/// first of its prefill ranks (MLA: :1484-1489).
fn attn_tp_refusal(p: &super::facts::Facts, d: &super::facts::Facts) -> Option<String> {
    let (pa, da) = (p.attn_tp.max(1), d.attn_tp.max(1));
    if pa == da {
        return None;
    }
    if p.kv_sharding {
        return Some(format!("MLA KV cache sharding requires equal prefill/decode attn TP sizes, got prefill={pa} decode={da}"));
    }
    if da > pa && da % pa != 0 {
        let top = (da - 1) / (da / pa);
        return Some(format!("decode rank {} maps to prefill attention-TP rank {top}, which a prefill of attention TP {pa} does not have: its bootstrap never completes", da - 1));
    }
    None
}

/// The fix side's attention TP made `want`: its `--dp-size` under DP
/// attention (keeping its GPUs), else its `--tp-size`.
fn attn_tp_fix(f: &super::facts::Facts, want: i64) -> Vec<Edit> {
    if f.dp_attention && want > 0 && f.tp % want == 0 {
        return vec![Edit::Set {
            flag: "--dp-size".into(),
            value: (f.tp / want).to_string(),
        }];
    }
    if !f.dp_attention {
        return vec![Edit::Set {
            flag: "--tp-size".into(),
            value: want.to_string(),
        }];
    }
    vec![]
}
