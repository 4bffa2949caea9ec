//! The plain check's refusal of weights that leave no GPU KV room, when the
//! GPU memory is known (`--gpu`, `--gpu-memory-gib`): the planner's figure
//! (`planner::gpu_plan`, the weights per GPU against `gpu_memory_gib x
//! gpu_memory_utilization`), made an error. vLLM 0.33 finds out after the
//! weights have loaded, when its workers size the KV cache
//! (v1/core/kv_cache_planning.py, "No available memory for the cache blocks").

use super::args::ServeArgs;
use super::diagnostics::VllmDiagnostic;
use super::planner::plan_resolved;
use crate::diagnostic::{Code, Diagnostic, FixOp};
use crate::gpu::GpuSpec;
use crate::model::ModelInfo;
use crate::plan::{Plan, PlanOptions};
use crate::report::{Report, ResolvedHiSparse};
use crate::sizes::GIB;
use serde_json::json;

/// The largest tensor parallel size the fix tries (vLLM 0.33 has no bound;
/// a GPU-count search needs one).
const MAX_TP: u64 = 64;

/// The `no_gpu_kv_room` error of a resolved configuration, when the GPU
/// memory is known and the weights per GPU leave no KV room; its fix raises
/// tensor_parallel_size to the smallest size that divides the attention
/// heads and leaves room (more GPUs: the weights per GPU must shrink), when
/// one does. None when the plan does not run or leaves room.
pub(crate) fn no_kv_room(
    args: &ServeArgs,
    options: &PlanOptions,
    report: &Report,
    h: &ResolvedHiSparse,
    model: &ModelInfo,
    gpu: Option<&GpuSpec>,
) -> Option<Diagnostic> {
    let plan = |a: &ServeArgs| plan_resolved(a, options, report, h, model, gpu).ok();
    let p = plan(args)?;
    let w = room_warning(&p)?;
    let mut e = Diagnostic::error(Code::NoGpuKvRoom, w.path.clone(), w.message.clone())
        .allowed("weights per GPU below gpu_memory_gib x gpu_memory_utilization");
    if let Some(u) = args.gpu_memory_utilization {
        e = e.given(&json!(u));
    }
    let tp = p.gpu.tensor_parallel_size.max(1);
    let heads = model.dims.num_attention_heads.unwrap_or(0);
    // Within one node when its GPUs are known: a replica over the node's GPUs
    // is gpus_per_node_exceeded's, and tensor parallelism over nodes is not
    // the fix to offer first.
    let top = options.gpus_per_node.unwrap_or(MAX_TP).min(MAX_TP);
    let larger = (tp + 1..=top.min(heads)).filter(|t| heads % t == 0);
    // The deployment's GPUs kept where they can be (issue 22): DP x TP the
    // same, fewer replicas of more GPUs, unless this node's replicas are given.
    let dp = args.data_parallel_size.unwrap_or(1).max(1).unsigned_abs();
    let pinned = args.data_parallel_size_local.is_some() || args.data_parallel_rank.is_some();
    let fits = larger.into_iter().find_map(|t| {
        let mut doc = args.normalized().0.into_owned().to_json();
        doc["tensor_parallel_size"] = json!(t);
        let fewer = (dp > 1 && !pinned && (dp * tp) % t == 0 && dp * tp >= t).then(|| dp * tp / t);
        if let Some(n) = fewer {
            doc["data_parallel_size"] = json!(n);
        }
        let a = ServeArgs::from_json(doc).ok()?;
        let q = plan(&a)?;
        room_warning(&q).is_none().then_some((t, fewer, q))
    });
    let others = "a quantized checkpoint or GPUs with more memory also do; if the weights estimate is too high, give --weights-gib or --kv-cache-memory-bytes from vLLM's start-up log";
    match fits {
        Some((t, fewer, q)) => {
            let per_gpu = |p: &Plan| p.gpu.weights_bytes_per_gpu.unwrap_or(0) as f64 / GIB;
            let mut ops = vec![FixOp::Set {
                path: crate::path::FieldPath::root("tensor_parallel_size"),
                value: json!(t),
            }];
            let (flags, kept) = match fewer {
                Some(n) => {
                    ops.push(FixOp::Set {
                        path: crate::path::FieldPath::root("data_parallel_size"),
                        value: json!(n),
                    });
                    (
                        format!("--tensor-parallel-size {t} --data-parallel-size {n}"),
                        format!(
                            " and {n} DP replica{} instead of {dp}, the same {} GPUs",
                            if n == 1 { "" } else { "s" },
                            dp * tp
                        ),
                    )
                }
                None => (format!("--tensor-parallel-size {t}"), String::new()),
            };
            e = e
                .hint(format!(
                    "use tensor_parallel_size {t}{kept} (vllm serve: {flags}): more GPUs per replica, {:.1} GiB of weights on each instead of {:.1} GiB, the smallest size that divides the {heads} attention heads and leaves KV room; {others}",
                    per_gpu(&q),
                    per_gpu(&p)
                ))
                .fix(ops);
        }
        None => {
            let node = if options.gpus_per_node.is_some_and(|n| n < MAX_TP) {
                " (a node's GPUs, --gpus-per-node)"
            } else {
                ""
            };
            e = e.hint(format!(
                "no tensor parallel size up to {}{node} leaves KV room for these weights: {others}",
                top.min(heads.max(tp))
            ));
        }
    }
    Some(e)
}

/// The planner's note that the weights leave no KV room.
pub(crate) fn room_warning(p: &Plan) -> Option<&Diagnostic> {
    p.warnings.iter().find(|w| w.code == Code::NoGpuKvRoom)
}
