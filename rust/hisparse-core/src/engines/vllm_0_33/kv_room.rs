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
    let larger = (tp + 1..=MAX_TP.min(heads)).filter(|t| heads % t == 0);
    let fits = larger.into_iter().find_map(|t| {
        let mut doc = args.normalized().0.into_owned().to_json();
        doc["tensor_parallel_size"] = json!(t);
        let a = ServeArgs::from_json(doc).ok()?;
        let q = plan(&a)?;
        room_warning(&q).is_none().then_some((t, q))
    });
    let others = "a quantized checkpoint or GPUs with more memory also do; if the weights estimate is too high, give --weights-gib or --kv-cache-memory-bytes from vLLM's start-up log";
    match fits {
        Some((t, q)) => {
            let per_gpu = |p: &Plan| p.gpu.weights_bytes_per_gpu.unwrap_or(0) as f64 / GIB;
            e = e
                .hint(format!(
                    "use tensor_parallel_size {t} (vllm serve: --tensor-parallel-size {t}): more GPUs per replica, {:.1} GiB of weights on each instead of {:.1} GiB, the smallest size that divides the {heads} attention heads and leaves KV room; {others}",
                    per_gpu(&q),
                    per_gpu(&p)
                ))
                .fix(vec![FixOp::Set {
                    path: crate::path::FieldPath::root("tensor_parallel_size"),
                    value: json!(t),
                }]);
        }
        None => {
            e = e.hint(format!(
                "no tensor parallel size up to {} leaves KV room for these weights: {others}",
                MAX_TP.min(heads.max(tp))
            ));
        }
    }
    Some(e)
}

/// The planner's note that the weights leave no KV room.
pub(crate) fn room_warning(p: &Plan) -> Option<&Diagnostic> {
    p.warnings.iter().find(|w| w.code == Code::NoGpuKvRoom)
}
