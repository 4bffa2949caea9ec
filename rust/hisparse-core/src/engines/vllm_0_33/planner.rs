//! vLLM 0.33.0's figures for the capacity model of [`crate::plan`]: its
//! flags (tensor and data parallel sizes, `--gpu-memory-utilization`,
//! `--kv-cache-memory-bytes`, the host pool's place in `--kv-transfer-config`)
//! read into the host and GPU plans, the per-context sweep, and the
//! planner's diagnostics at vLLM 0.33.0's stages.

use crate::diagnostic::{Code, Diagnostic, FixOp};
use crate::engines::vllm_0_33::args::ServeArgs;
use crate::engines::vllm_0_33::diagnostics::VllmDiagnostic;
use crate::gpu::GpuSpec;
use crate::model::ModelInfo;
use crate::path::FieldPath;
use crate::plan::*;
use crate::report::{ModelSummary, Provenance, Report, ResolvedHiSparse};
use crate::sizes::{self, GpuLayout, ACTIVE_TAIL_PAGES, GIB};
use serde_json::{json, Value};

/// The plan of a resolved HiSparse configuration (`options` with the GPU filled in).
pub(crate) fn plan_resolved(
    args: &ServeArgs,
    options: &PlanOptions,
    report: &Report,
    h: &ResolvedHiSparse,
    model: &ModelInfo,
    gpu: Option<&GpuSpec>,
) -> Result<Plan, PlanError> {
    let mut plan = Planner::new(args, options, report, h, model)?.run();
    plan.gpu.spec = gpu.cloned();
    Ok(plan)
}

/// Everything the per-context figures share.
struct Planner<'a> {
    h: &'a ResolvedHiSparse,
    model: Option<ModelSummary>,
    context_length: u64,
    target_requests: Option<u64>,
    sizes: Sizes,
    host: HostPlan,
    gpu: GpuPlan,
    host_pool_path: Option<FieldPath>,
    /// The largest host_pool_gib the node's RAM pins, when it is given
    /// (Some(None): not even the start-up minimum fits).
    pool_cap: Option<Option<f64>>,
    /// Tokens a HiSparse resident group admits per request: vLLM's
    /// `max_in_flight_tokens`, capped by the context.
    in_flight_tokens: u64,
    warnings: Vec<Diagnostic>,
    figures: crate::plan::Figures,
}

/// vLLM 0.33.0's `max_in_flight_tokens` (config/vllm.py:588-609): two
/// concurrent batches (async scheduling, one pipeline stage) of
/// `vllm serve`'s default `max_num_batched_tokens` for the GPU's memory
/// (engine/arg_utils.py:2970-2997, OPENAI_API_SERVER: 16384 from 160 GiB,
/// 8192 from 70 GiB, else 2048; unknown GPU: 2048).
pub(crate) fn in_flight_tokens(gpu_memory_gib: Option<f64>) -> u64 {
    let batched = match gpu_memory_gib {
        Some(g) if g >= 160.0 => 16384,
        Some(g) if g >= 70.0 => 8192,
        _ => 2048,
    };
    2 * batched
}

impl<'a> Planner<'a> {
    fn new(
        args: &'a ServeArgs,
        options: &PlanOptions,
        report: &Report,
        h: &'a ResolvedHiSparse,
        model: &ModelInfo,
    ) -> Result<Self, PlanError> {
        let max_model_len = h.max_model_len.value;
        let context_length = options.context_length.unwrap_or(max_model_len);
        if context_length > max_model_len {
            return Err(PlanError::Option(format!(
                "--context-length {context_length} is longer than max_model_len {max_model_len}; raise --max-model-len or plan a shorter context"
            )));
        }
        let mut warnings = report.warnings.clone();
        let Some(row) = h.row_bytes.as_ref().map(|r| r.value) else {
            return Err(PlanError::Option(format!(
                "the host row size of kv_cache_dtype {} is not known, so there is nothing to plan",
                h.kv_cache_dtype.value
            )));
        };
        let layers = h.sparse_mla_layers.value;
        let target_layers = model.sparse_mla_layers.as_ref().map_or(layers, |l| l.value);
        let draft_layers = layers.saturating_sub(target_layers);
        // Hot-unit runs of the target layers, then the draft (MTP) layers, which
        // always run a full indexer (vLLM 0.33 deepseek_v2).
        let mut units = match &model.indexer_leaders {
            Some(l) if l.value.len() as u64 == u64::from(target_layers) => {
                sizes::hot_unit_runs(&l.value)
            }
            _ => vec![(1, u64::from(target_layers))],
        };
        let target_indexer_layers: u64 = units.iter().map(|(_, n)| n).sum();
        units.push((1, u64::from(draft_layers)));
        let indexer_layers =
            u32::try_from(target_indexer_layers.saturating_add(u64::from(draft_layers)))
                .unwrap_or(u32::MAX);
        let index_head_dim = model.index_head_dim.unwrap_or_else(|| {
            warnings.push(Diagnostic::warning(
                Code::PlanAssumption,
                FieldPath::root("model"),
                format!("{} gives no index_head_dim; the indexer key cache is sized for 128 (DeepSeek-V3.2, GLM-5)", model.name()),
            ));
            128
        });
        let indexer_row = sizes::indexer_row_bytes(index_head_dim);
        let block_size = h.block_size.value;
        let layout = GpuLayout::new(&units, block_size, row, indexer_row);
        let mla_bytes_per_token = u64::from(row).saturating_mul(u64::from(layers));
        let indexer_bytes_per_token =
            u64::from(indexer_row).saturating_mul(u64::from(indexer_layers));
        let sizes = Sizes {
            kv_cache_dtype: h.kv_cache_dtype.value.clone(),
            mla_row_bytes: row,
            indexer_row_bytes: indexer_row,
            sparse_mla_layers: layers,
            indexer_layers,
            draft_layers,
            mla_bytes_per_token,
            indexer_bytes_per_token,
            block_size,
            device_buffer_size: h.device_buffer_size.value,
            hot_buffer_bytes: u64::from(h.device_buffer_size.value)
                .saturating_mul(mla_bytes_per_token),
            hot_groups: layout.hot_groups,
            baseline_block_bytes: u64::from(block_size)
                .saturating_mul(mla_bytes_per_token.saturating_add(indexer_bytes_per_token)),
            hisparse_block_bytes: layout.block_bytes,
        };

        let (tp, dp) = tp_dp(args);
        let host = host_plan(args, options, h, &mut warnings);
        let gpu = gpu_plan(
            args,
            options,
            model,
            &sizes,
            tp,
            dp,
            target_indexer_layers,
            &mut warnings,
        );
        let host_pool_path = match &h.host_pool_gib.provenance {
            Provenance::Explicit { path } => FieldPath::parse(path).ok(),
            _ => None,
        };
        // A pool the planner suggests must pass the check: with the node's
        // RAM given, no larger than what its pools can pin.
        let pool_cap = match (host.host_memory_given, host.usable_host_memory_bytes) {
            (true, Some(usable)) => Some(
                largest_fitting_pool_gib(usable, host.pools_per_node, host.host_block_stride)
                    .filter(|c| *c >= host.min_host_pool_gib),
            ),
            _ => None,
        };
        let figures = figures(args, options, &gpu);
        Ok(Planner {
            h,
            model: report.model.clone(),
            context_length,
            target_requests: options.target_requests,
            sizes,
            host,
            gpu,
            host_pool_path,
            pool_cap,
            in_flight_tokens: in_flight_tokens(options.gpu_memory_gib),
            warnings,
            figures,
        })
    }

    /// Capacity at `context` tokens.
    fn point(&self, context: u64) -> PlanPoint {
        let s = &self.sizes;
        let bs = u64::from(s.block_size);
        let per_request_blocks = sizes::blocks_for(context, bs);
        let hot_blocks = sizes::blocks_for(u64::from(s.device_buffer_size), bs);
        // vLLM 0.33 get_hisparse_steady_state_concurrency (hisparse/layout.py:384-420):
        // a resident group takes its admission window (HiSparseResidentSpec,
        // kv_cache_interface.py:533-544) while a request is admitted and its
        // active tail once it reads from host; all requests but the one being
        // admitted are at steady state.
        let resident = sizes::blocks_for(context.min(self.in_flight_tokens), bs);
        let hisparse_blocks = per_request_blocks.saturating_add(
            s.hot_groups
                .saturating_mul(hot_blocks.saturating_add(resident.min(ACTIVE_TAIL_PAGES))),
        );
        let admission_blocks = per_request_blocks.saturating_add(
            s.hot_groups
                .saturating_mul(hot_blocks.saturating_add(resident)),
        );
        let seqs = self.gpu.max_num_seqs;
        let fit = |pool: u64, per: u64| pool.checked_div(per).unwrap_or(u64::MAX);
        let capped = |n: u64, limit: Limit| {
            if seqs < n {
                (seqs, Limit::MaxNumSeqs)
            } else {
                (n, limit)
            }
        };
        let baseline = self
            .gpu
            .baseline_blocks
            .map(|b| capped(fit(b, per_request_blocks), Limit::Gpu));
        let gpu_limit = self
            .gpu
            .hisparse_blocks
            .map(|b| match b.checked_sub(admission_blocks) {
                Some(rest) => fit(rest, hisparse_blocks).saturating_add(1),
                None => 0,
            });
        let host_limit = fit(self.host.host_blocks, per_request_blocks);
        let hisparse = match (gpu_limit, baseline) {
            (Some(g), Some((base, _))) => {
                let (n, limit) = if host_limit < g {
                    capped(host_limit, Limit::Host)
                } else {
                    capped(g, Limit::Gpu)
                };
                Some(if base > n {
                    (base, Limit::Baseline)
                } else {
                    (n, limit)
                })
            }
            _ => None,
        };
        let target = self
            .target_requests
            .or_else(|| gpu_limit.map(|g| g.min(seqs)));
        let stride = self.host.host_block_stride;
        let min_host_pool_gib = target.and_then(|n| {
            let blocks = n
                .saturating_mul(per_request_blocks)
                .max(self.host.min_host_blocks);
            let gib = sizes::min_pool_gib(blocks, stride);
            match self.pool_cap {
                Some(cap) => cap.map(|c| gib.min(c)),
                None => Some(gib),
            }
        });
        let min_host_pool_requests = target
            .zip(min_host_pool_gib)
            .map(|(n, gib)| n.min(fit(sizes::pool_blocks(gib, stride), per_request_blocks)));
        PlanPoint {
            context_length: context,
            host_kv_bytes_per_request: context.saturating_mul(s.mla_bytes_per_token),
            indexer_bytes_per_request: context.saturating_mul(s.indexer_bytes_per_token),
            baseline_gpu_bytes_per_request: per_request_blocks
                .saturating_mul(s.baseline_block_bytes),
            hisparse_gpu_blocks_per_request: hisparse_blocks,
            hisparse_gpu_bytes_per_request: hisparse_blocks.saturating_mul(s.hisparse_block_bytes),
            host_blocks_per_request: per_request_blocks,
            baseline_requests: baseline.map(|b| b.0),
            baseline_limit: baseline.map(|b| b.1),
            gpu_limit,
            host_limit,
            hisparse_requests: hisparse.map(|x| x.0),
            hisparse_limit: hisparse.map(|x| x.1),
            target_requests: target,
            min_host_pool_gib,
            min_host_pool_requests,
            host_to_device_ratio: None,
        }
    }

    fn run(mut self) -> Plan {
        let max_model_len = self.h.max_model_len.value;
        let mut contexts: Vec<u64> = std::iter::successors(Some(SWEEP_START), |c| c.checked_mul(2))
            .take_while(|c| *c < max_model_len)
            .chain([max_model_len, self.context_length])
            .collect();
        contexts.sort_unstable();
        contexts.dedup();
        let sweep: Vec<PlanPoint> = contexts.iter().map(|c| self.point(*c)).collect();
        let at_context = self.point(self.context_length);
        let mut errors = Vec::new();
        let path = self
            .host_pool_path
            .clone()
            .unwrap_or_else(|| FieldPath::root("host_pool_gib"));
        if let Some(e) = host_memory_error(
            &self.host,
            self.h,
            &path,
            self.gpu.kv_bytes_per_gpu.is_some(),
            None,
        ) {
            if self.host.host_memory_given {
                errors.push(e);
            } else {
                // This machine's RAM is not the serving node's: say so, do not fail on it.
                self.warnings.push(host_memory_not_given(
                    &self.host,
                    format!("{}; that is this machine's RAM, not necessarily the serving node's, so the plan does not fail on it", e.message),
                ));
            }
        }
        errors.extend(self.serves_no_requests(&at_context));
        let concurrency = Some(self.concurrency(&at_context));
        Plan {
            schema_version: PLAN_SCHEMA_VERSION,
            engine: crate::report::ENGINE_VLLM.to_owned(),
            engine_version: super::VERSION.to_owned(),
            vllm_version: super::VERSION.to_owned(),
            valid: errors.is_empty(),
            model: self.model.take(),
            context_length: self.context_length,
            max_model_len,
            sizes: self.sizes,
            host: self.host,
            gpu: self.gpu,
            at_context,
            sweep,
            errors,
            warnings: self.warnings,
            ignored_flags: Vec::new(),
            assumed: None,
            sglang: None,
            engine_log: None,
            figures: self.figures,
            concurrency,
        }
    }

    /// Why the GPU limit at `at` is what it is (issue 21 item 4, vllm#51041):
    /// the indexer blocks grow with the context, the hot-buffer and tail
    /// blocks of every hot group do not (hisparse/layout.py:384-420).
    fn concurrency(&self, at: &PlanPoint) -> crate::plan::Concurrency {
        let s = &self.sizes;
        let bs = u64::from(s.block_size);
        let per_token = at.host_blocks_per_request;
        let total = at.hisparse_gpu_blocks_per_request;
        let fixed = total.saturating_sub(per_token);
        let hot = sizes::blocks_for(u64::from(s.device_buffer_size), bs);
        let tail = (fixed / s.hot_groups.max(1)).saturating_sub(hot);
        let share = if total == 0 {
            0.0
        } else {
            fixed as f64 / total as f64
        };
        let fixed_rule = format!(
            "{} hot groups x ({hot} hot-buffer blocks (device_buffer_size {} / {bs}) + {tail} retained tail blocks) (vLLM 0.33 get_hisparse_steady_state_concurrency, v1/hisparse/layout.py:384-420)",
            s.hot_groups, s.device_buffer_size
        );
        let gpu = self.gpu.hisparse_blocks;
        let limit = match (gpu, at.gpu_limit) {
            (Some(b), Some(l)) => format!(
                "the GPU's {b} blocks hold {l} such requests (one of them being admitted holds its whole in-flight window instead of the tail)"
            ),
            _ => "the GPU's blocks are unknown (no GPU memory given)".to_owned(),
        };
        let why = format!(
            "one request holds {per_token} indexer blocks that grow with its context ({} tokens / {bs}) and {fixed} blocks that do not ({fixed_rule}): {:.0} % of it at this context; {limit}. At a shorter max_model_len the fixed blocks weigh more, so the requests grow less than the context shrinks: vLLM's \"Maximum concurrency\" is num_blocks / blocks per request, and its \"KV cache size: N tokens\" is that times max_model_len (v1/core/kv_cache_utils.py:1061-1128), not a per-token capacity (vllm#51041)",
            at.context_length,
            share * 100.0
        );
        crate::plan::Concurrency {
            unit: "blocks".to_owned(),
            gpu_units: gpu,
            per_token_units: per_token,
            fixed_units: fixed,
            fixed_rule,
            fixed_share: (share * 10_000.0).round() / 10_000.0,
            why,
        }
    }

    /// A replica that serves no request at the planned context is not a plan
    /// that fits: the GPUs bind (the host pool always holds the one request
    /// start-up requires). The fix lowers max_model_len to the longest
    /// context one request fits in, when there is one.
    fn serves_no_requests(&self, at: &PlanPoint) -> Option<Diagnostic> {
        if at.hisparse_requests != Some(0) {
            return None;
        }
        let (s, g) = (&self.sizes, &self.gpu);
        let bs = u64::from(s.block_size);
        let kv = g.kv_bytes_per_gpu.unwrap_or(0);
        // Blocks admitting one request takes besides its context: the hot buffers
        // and the resident groups' in-flight windows (at most max_in_flight_tokens).
        let fixed = s.hot_groups.saturating_mul(
            sizes::blocks_for(u64::from(s.device_buffer_size), bs)
                .saturating_add(sizes::blocks_for(self.in_flight_tokens, bs)),
        );
        let longest = [
            g.hisparse_blocks.map(|b| b.saturating_sub(fixed)),
            g.baseline_blocks,
        ]
        .into_iter()
        .flatten()
        .max()
        .map(|blocks| blocks.saturating_mul(bs).min(self.h.max_model_len.value))
        .filter(|t| *t >= bs);
        let path = FieldPath::root("max_model_len");
        let mut d = Diagnostic::error(
            Code::PlanServesNoRequests,
            path.clone(),
            format!(
                "at {} tokens this DP replica serves no request: the GPUs bind (one request needs {} of GPU KV per GPU with HiSparse, {} without, and the KV room of each GPU is {:.2} GiB: {})",
                at.context_length,
                gib_text(at.hisparse_gpu_bytes_per_request),
                gib_text(at.baseline_gpu_bytes_per_request),
                kv as f64 / GIB,
                g.kv_source
            ),
        )
        .given(&json!(at.context_length));
        let more = "or use more tensor-parallel ranks or GPUs with more memory (if the weights estimate is too high, give --weights-gib or --kv-cache-memory-bytes from vLLM's start-up log)";
        match longest {
            Some(t) => {
                d = d
                    .allowed(format!("a context of at most {t} tokens on these GPUs"))
                    .hint(format!("lower max_model_len to {t}, the longest context one request fits in, {more}"))
                    .fix(vec![FixOp::Set { path, value: json!(t) }]);
            }
            None => {
                d = d
                    .allowed("at least one request's hot buffers in each GPU's KV room")
                    .hint(format!(
                        "the hot buffers alone do not fit: lower device_buffer_size, {more}"
                    ));
            }
        }
        Some(d)
    }
}

/// The warning that the pools were not checked against the serving node's
/// RAM (`--host-memory-gib` not given): the plan's, when they do not fit on
/// this machine, and the plain check's, whenever HiSparse pins a pool
/// ([`pinned_unchecked`]). One code, one hint.
pub(crate) fn host_memory_not_given(host: &HostPlan, message: String) -> Diagnostic {
    Diagnostic::warning(
        Code::HostMemoryNotGiven,
        FieldPath::root("host_memory_gib"),
        message,
    )
    .given(&json!(host.host_pool_gib))
    .hint("pass the serving node's RAM with --host-memory-gib (Python: host_memory_gib=) to check the pools against it (vLLM 0.33 checks them when the workers allocate them, after the weights have loaded)")
}

/// The plain check's [`host_memory_not_given`]: what the pools pin, unchecked.
pub(crate) fn pinned_unchecked(host: &HostPlan) -> Diagnostic {
    host_memory_not_given(
        host,
        format!(
            "host RAM was not checked: host_pool_gib {} pins {} on this node across {}, and without --host-memory-gib the check does not know the node's RAM",
            host.host_pool_gib,
            pinned_text(host),
            pools_text(host)
        ),
    )
}

/// What the node's pools pin; past 2^64 bytes (the bytes saturate) the GiB
/// as given, times the pools.
fn pinned_text(host: &HostPlan) -> String {
    let as_given = host.host_pool_gib * host.pools_per_node as f64;
    if as_given * GIB >= u64::MAX as f64 {
        format!("about {as_given:.0} GiB (past 2^64 bytes)")
    } else {
        gib_text(host.pinned_bytes_per_node)
    }
}

/// How many pools this node pins, and why (the pool mode).
pub(crate) fn pools_text(host: &HostPlan) -> String {
    match host.mode {
        PoolMode::Shared => format!(
            "{} pool{} (shared mode: one per DP replica)",
            host.pools_per_node,
            if host.pools_per_node == 1 { "" } else { "s" }
        ),
        PoolMode::Private if host.pools_per_node == 1 => {
            "1 pool (private mode: one per rank, 1 rank)".to_owned()
        }
        PoolMode::Private => format!(
            "{} pools (private mode: one per rank, {} ranks)",
            host.pools_per_node, host.pools_per_node
        ),
    }
}

/// The pinned pools must fit in 95 % of the node's host RAM (vLLM 0.33
/// `check_hisparse_host_memory`); the error's fix lowers host_pool_gib (at
/// `path`) to the largest size that fits, if that size still starts, or to
/// `advice` (the pool that lets the GPUs bind, which the plain check knows
/// with the GPU memory) when that is smaller and starts: the one place the
/// RAM fix's hint is worded. None when they fit or the RAM is unknown.
pub(crate) fn host_memory_error(
    host: &HostPlan,
    h: &ResolvedHiSparse,
    path: &FieldPath,
    gpu_memory_known: bool,
    advice: Option<&crate::engines::vllm_0_33::validate::PoolAdvice>,
) -> Option<Diagnostic> {
    let usable = host.usable_host_memory_bytes?;
    if host.pinned_bytes_per_node <= usable {
        return None;
    }
    let gib = |b: u64| b as f64 / GIB;
    let pools = pools_text(host);
    let largest = largest_fitting_pool_gib(usable, host.pools_per_node, host.host_block_stride);
    let mut diag = Diagnostic::error(
        Code::HostMemoryExceeded,
        path.clone(),
        format!(
            "host_pool_gib {} pins {} on this node across {pools}, more than the {:.1} GiB usable (95 % of {:.1} GiB host RAM, {}){}",
            host.host_pool_gib,
            pinned_text(host),
            gib(usable),
            gib(host.host_memory_bytes.unwrap_or(0)),
            host.host_memory_source,
            fits_alone_note(host).unwrap_or_default()
        ),
    )
    .given(&json!(host.host_pool_gib));
    // A size suffix vLLM expanded (`128G` for 128 GiB) that fits as the number
    // meant: that is the fix, as the host_pool_implausible warning says.
    let meant = crate::pytext::suffixed_size(host.host_pool_gib)
        .map(|(n, suffix, _)| (n, suffix))
        .filter(|(n, _)| {
            let n = *n as f64;
            largest.is_some_and(|g| n <= g) && n >= host.min_host_pool_gib
        });
    if let Some((n, suffix)) = meant {
        return Some(
            diag.allowed(format!(
                "{} <= host_pool_gib <= {} (start-up minimum .. what fits in host RAM)",
                host.min_host_pool_gib,
                largest.unwrap_or(n as f64)
            ))
            .hint(format!(
                "set {path} to {n}: {n}{suffix} is a size suffix vLLM expands, and host_pool_gib is already in GiB"
            ))
            .fix(vec![FixOp::Set {
                path: path.clone(),
                value: json!(n),
            }]),
        );
    }
    let smaller = |fits: f64| advice.filter(|a| a.gib < fits && a.gib >= host.min_host_pool_gib);
    match largest.filter(|g| *g >= host.min_host_pool_gib) {
        Some(fits) if smaller(fits).is_some() => {
            let a = smaller(fits)?;
            diag = diag
                .allowed(format!(
                    "{} <= host_pool_gib <= {fits} (start-up minimum .. what fits in host RAM)",
                    host.min_host_pool_gib
                ))
                .hint(format!(
                    "set {path} to {}: {}; the most this node's RAM pins is {fits} GiB, nearly all of it, which leaves no room for the OS and vLLM's own host memory",
                    a.gib, a.holds
                ))
                .fix(vec![FixOp::Set {
                    path: path.clone(),
                    value: sizes::gib_json(a.gib),
                }]);
        }
        Some(fits) => {
            diag = diag
                .allowed(format!(
                    "{} <= host_pool_gib <= {fits} (start-up minimum .. what fits in host RAM)",
                    host.min_host_pool_gib
                ))
                .hint(format!("set {path} to {fits}, the most this node's RAM pins ({} per node: nearly all of the 95 % vLLM allows, with little left for the rest of the host); {}", gib_text(host.usable_host_memory_bytes.unwrap_or(0)),
                    // With the GPU known, the check has offered the GPU-binding
                    // pool already when it is the smaller one.
                    if gpu_memory_known {
                        "the pool that lets the GPUs bind is no smaller here (hisparse-check --plan shows the sweep)"
                    } else {
                        "a pool sized for your concurrency is usually far smaller: hisparse-check --plan with --gpu shows the pool that lets the GPUs bind"
                    }))
                .fix(vec![FixOp::Set {
                    path: path.clone(),
                    value: sizes::gib_json(fits),
                }]);
        }
        None => diag = no_pool_fits(diag, host, h, path, largest, &pools),
    }
    Some(diag)
}

/// [`host_memory_error`]'s fix when not even the start-up minimum pool fits
/// in the node's RAM: the largest pool that fits with a context short enough
/// for its blocks, or no fix but fewer replicas or more RAM.
fn no_pool_fits(
    mut diag: Diagnostic,
    host: &HostPlan,
    h: &ResolvedHiSparse,
    path: &FieldPath,
    largest: Option<f64>,
    pools: &str,
) -> Diagnostic {
    diag = diag.allowed(format!(
        "at least {} GiB per pool to start, which {pools} cannot pin",
        host.min_host_pool_gib
    ));
    let others = "run fewer DP replicas per node, or use a node with more RAM";
    // The pool that fits starts with a shorter context: lower max_model_len
    // to the longest one its blocks hold (a whole number of blocks).
    let bs = u64::from(h.block_size.value);
    let shorter = largest.map(|g| {
        let blocks = sizes::pool_blocks(g, host.host_block_stride);
        (g, sizes::longest_context(blocks, bs))
    });
    match shorter.filter(|(_, t)| *t >= bs && *t < h.max_model_len.value) {
        Some((fits, t)) => {
            diag = diag
                .hint(format!("set {path} to {fits}, the largest pool this node's RAM pins, and lower max_model_len to {t} tokens, the longest context whose start-up minimum it holds (one request at a time); or {others}"))
                .fix(vec![
                    FixOp::Set {
                        path: path.clone(),
                        value: sizes::gib_json(fits),
                    },
                    FixOp::Set {
                        path: FieldPath::root("max_model_len"),
                        value: json!(t),
                    },
                ]);
        }
        None => {
            diag = diag.hint(format!(
                "no host_pool_gib and max_model_len fix this on this node (not even one {bs}-token block of context starts in what its RAM pins): {others}"
            ));
        }
    }
    diag
}

/// The deviation inside a [`host_memory_error`]'s message when every pool
/// fits alone (one problem, one diagnostic: it was a warning of its own,
/// `host_pools_fit_alone`, repeating the error's figures): vLLM 0.33 checks
/// each pool by itself against 95 % of the RAM available when its rank
/// allocates it (`check_hisparse_host_memory`, `v1/hisparse/runtime.py:195`,
/// called per pool at :256, :384 and :403), so the pools that hisparse_rs
/// refuses together may start there. None for one pool, or one too large
/// alone (vLLM refuses it too).
fn fits_alone_note(host: &HostPlan) -> Option<String> {
    let usable = host.usable_host_memory_bytes?;
    if host.pools_per_node < 2 || host.pool_bytes > usable || host.pinned_bytes_per_node <= usable {
        return None;
    }
    Some(format!(
        "; each pool ({}) fits alone, and vLLM 0.33 checks each pool alone as its rank allocates it, after the weights have loaded (check_hisparse_host_memory): it may start with these pools, with more than 95 % of the node's available RAM pinned, or fail at a later rank's allocation; hisparse_rs checks the node's pools together (deviation {})",
        gib_text(host.pool_bytes),
        Code::HostPoolsFitAlone.as_str()
    ))
}

/// TP and DP sizes as given, at least 1.
fn tp_dp(args: &ServeArgs) -> (u64, u64) {
    let size = |n: Option<i64>| n.unwrap_or(1).max(1) as u64;
    (
        size(args.tensor_parallel_size),
        size(args.data_parallel_size),
    )
}

/// The host pools of a resolved configuration on this node: mode, blocks,
/// bytes, and what this node pins against its RAM: `--host-memory-gib`, else
/// this machine's `MemAvailable` (or a warning that it could not be read).
pub(crate) fn host_plan(
    args: &ServeArgs,
    options: &PlanOptions,
    h: &ResolvedHiSparse,
    warnings: &mut Vec<Diagnostic>,
) -> HostPlan {
    let mut host = node_pools(args, options, h);
    if options.host_memory_gib.is_some() {
        return host;
    }
    match host_memory_available() {
        Some(b) => {
            host.host_memory_bytes = Some(b);
            host.usable_host_memory_bytes = Some(usable(b));
            host.host_memory_source = "this machine's MemAvailable (/proc/meminfo), what vLLM checks on the node it runs on; --host-memory-gib gives the serving node's".to_owned();
        }
        None => warnings.push(
            Diagnostic::warning(
                Code::HostMemoryUnknown,
                FieldPath::root("host_memory_gib"),
                "this machine's host RAM could not be read (/proc/meminfo), so the pinned pools are not checked against it",
            )
            .hint("pass --host-memory-gib (Python: host_memory_gib=) with the serving node's RAM"),
        ),
    }
    host
}

/// The pinned bytes the check allows of `bytes` of RAM (95 %).
fn usable(bytes: u64) -> u64 {
    (bytes as f64 * HOST_MEMORY_FRACTION) as u64
}

/// [`host_plan`] without this machine's RAM: the node's RAM is
/// `--host-memory-gib` or unknown ("unknown", None). The plain check's
/// warning that the RAM was not checked needs only the pools, so it never
/// reads `/proc/meminfo` (a read per call, in the kernel, costs what the
/// rest of a check does).
pub(crate) fn node_pools(
    args: &ServeArgs,
    options: &PlanOptions,
    h: &ResolvedHiSparse,
) -> HostPlan {
    let (tp, dp) = tp_dp(args);
    let platform = args.platform.as_deref().unwrap_or("cuda");
    let parallel = sizes::Parallel {
        tp: tp as i64,
        ..sizes::Parallel::of(args)
    };
    let shared = sizes::shared_host_pool(
        platform,
        parallel,
        args.distributed_executor_backend.as_deref(),
    );
    // This node pins the pools of the DP replicas it runs: --data-parallel-size-local
    // when given, else vLLM's even share over --nnodes (`Parallel::dp_local`,
    // vllm/engine/arg_utils.py:2442-2535), each replica spread over the nodes
    // it spans (`nnodes_within_dp`, vllm/config/parallel.py:811).
    let nnodes = args.nnodes.unwrap_or(1).max(1);
    let nodes = match args.data_parallel_size_local {
        Some(n) => format!(" (--data-parallel-size-local {n})"),
        None if nnodes > 1 => format!(" ({nnodes} nodes)"),
        None => String::new(),
    };
    let replicas = match parallel.dp_local() {
        1 => "1 DP replica".to_owned(),
        n => format!("{n} DP replicas"),
    };
    let (mode, mode_rule, pools_per_node) = if shared {
        (
            PoolMode::Shared,
            format!("the {tp} TP ranks of each DP replica share one pool (vLLM 0.33 use_shared_hisparse_host_pool: CUDA, TP > 1, no PP/DCP, mp executor, a replica within one node); {replicas} on this node{nodes}"),
            parallel.pools_on_this_node(1),
        )
    } else {
        let ranks = parallel.pools_on_this_node(tp);
        (
            PoolMode::Private,
            if tp > 1 {
                format!("each of the {tp} x {dp} ranks pins its own pool, a full copy: MLA KV is replicated across TP ranks (vLLM 0.33 shares a pool only under the mp executor, with a replica on one node); {ranks} of them on this node{nodes}")
            } else {
                format!("one pool per rank (TP 1); {replicas} on this node{nodes}")
            },
            ranks,
        )
    };
    let host_block_bytes = h.host_block_bytes.as_ref().map_or(0, |r| r.value);
    let stride = h
        .host_block_stride
        .as_ref()
        .map_or(host_block_bytes, |r| r.value);
    let host_pool_gib = h.host_pool_gib.value;
    let pool = pool_bytes(host_pool_gib, stride);
    let (host_memory_bytes, host_memory_source) = match options.host_memory_gib {
        Some(g) => (
            Some(gib_bytes(g)),
            options
                .host_memory_source
                .clone()
                .unwrap_or_else(|| "given with --host-memory-gib".to_owned()),
        ),
        None => (None, "unknown".to_owned()),
    };
    let speculative_model = args
        .speculative_config
        .as_ref()
        .and_then(|s| s.get("method").or_else(|| s.get("model")))
        .and_then(Value::as_str)
        .filter(|m| !(*m == "mtp" || m.ends_with("_mtp")));
    HostPlan {
        mode,
        mode_rule,
        host_pool_gib,
        host_block_bytes,
        host_block_stride: stride,
        host_blocks: h.host_blocks.as_ref().map_or(0, |r| r.value),
        min_host_blocks: h.min_host_blocks.value,
        min_host_pool_gib: sizes::min_pool_gib(h.min_host_blocks.value, stride),
        pool_bytes: pool,
        pools_per_node,
        pinned_bytes_per_node: pool.saturating_mul(pools_per_node),
        host_memory_bytes,
        host_memory_source,
        usable_host_memory_bytes: host_memory_bytes.map(usable),
        host_memory_given: options.host_memory_gib.is_some(),
        draft_model: speculative_model.map(|m| {
            format!("speculative draft {m} keeps its KV on the GPU: HiSparse pools hold the target model's (and its MTP layers') KV only")
        }),
    }
}

/// What the plan's figures are (issue 21 item 3): the KV room measured
/// (the engine log's "Available KV cache memory", `--kv-cache-memory-bytes`),
/// computed from measured weights (`--weights-gib`, "Model loading took") as
/// GPU x utilization - weights (estimated: vLLM also profiles activations and
/// CUDA graphs), or unknown; the host pool is vLLM's arithmetic on `host_pool_gib`.
fn figures(args: &ServeArgs, options: &PlanOptions, gpu: &GpuPlan) -> crate::plan::Figures {
    use crate::plan::FigureKind as K;
    let measured_room =
        options.available_kv_cache_gib.is_some() || args.kv_cache_memory_bytes.is_some();
    let weights = gpu.weights_bytes_per_gpu.map(|_| {
        if gpu.weights_estimated {
            K::Estimated
        } else {
            K::Measured
        }
    });
    let kv_room = match gpu.kv_bytes_per_gpu {
        None => K::Unknown,
        Some(_) if measured_room => K::Measured,
        Some(_) => K::Estimated,
    };
    crate::plan::Figures::new(kv_room, weights, K::Exact)
}

/// Where `weights_gib` came from: the user, or an engine log's "Model loading took".
fn weights_given(measured_in: Option<&str>) -> String {
    match measured_in {
        Some(log) => format!(
            "measured: \"Model loading took X GiB\" in {log} (v1/worker/gpu_model_runner.py:5089)"
        ),
        None => "given with --weights-gib".to_owned(),
    }
}

#[allow(clippy::too_many_arguments)]
fn gpu_plan(
    args: &ServeArgs,
    options: &PlanOptions,
    model: &ModelInfo,
    sizes: &Sizes,
    tp: u64,
    dp: u64,
    target_indexer_layers: u64,
    warnings: &mut Vec<Diagnostic>,
) -> GpuPlan {
    let utilization = args
        .gpu_memory_utilization
        .unwrap_or(DEFAULT_GPU_MEMORY_UTILIZATION);
    let mut weights_bytes_per_gpu = None;
    let mut weights_source = None;
    let mut weights_estimated = false;
    let measured_in = options.measured_in.as_deref();
    let (kv, kv_source) = if let Some(g) = options.available_kv_cache_gib {
        if let Some(w) = options.weights_gib {
            weights_bytes_per_gpu = Some(gib_bytes(w));
            weights_source = Some(weights_given(measured_in));
        }
        (
            Some(gib_bytes(g)),
            format!(
                "measured: \"Available KV cache memory: {g} GiB\" in {} (v1/worker/gpu_worker.py:773, after vLLM profiled the weights, activations and CUDA graphs; logged to 0.01 GiB)",
                measured_in.unwrap_or("the engine log")
            ),
        )
    } else if let Some(b) = args.kv_cache_memory_bytes {
        (
            Some(b.max(0) as u64),
            "kv_cache_memory_bytes (vLLM flag; vLLM then ignores gpu_memory_utilization)"
                .to_owned(),
        )
    } else if let Some(gpu) = options.gpu_memory_gib {
        let weights = weights_per_gpu(
            args,
            options,
            (model, sizes, target_indexer_layers),
            (tp, dp),
            (&mut weights_source, &mut weights_estimated),
            warnings,
        );
        weights_bytes_per_gpu = weights;
        kv_room(gpu, utilization, weights, warnings)
    } else {
        (
            None,
            "unknown: pass --gpu-memory-gib or --kv-cache-memory-bytes".to_owned(),
        )
    };
    let (max_num_seqs, max_num_seqs_source) = max_num_seqs(args, options);
    let blocks = |per: u64| kv.and_then(|k| k.checked_div(per));
    GpuPlan {
        tensor_parallel_size: tp,
        data_parallel_size: dp,
        kv_bytes_per_gpu: kv,
        kv_source,
        gpu_memory_gib: options.gpu_memory_gib,
        gpu_memory_utilization: utilization,
        weights_bytes_per_gpu,
        weights_source,
        weights_estimated,
        max_num_seqs,
        max_num_seqs_source,
        baseline_blocks: blocks(sizes.baseline_block_bytes),
        hisparse_blocks: blocks(sizes.hisparse_block_bytes),
        spec: None,
    }
}

/// The weights per GPU for a GPU of known memory: given (--weights-gib), else
/// estimated from config.json (a warning when they cannot be); sets where
/// the figure comes from and whether it is an estimate.
fn weights_per_gpu(
    args: &ServeArgs,
    options: &PlanOptions,
    (model, sizes, target_indexer_layers): (&ModelInfo, &Sizes, u64),
    (tp, dp): (u64, u64),
    (weights_source, weights_estimated): (&mut Option<String>, &mut bool),
    warnings: &mut Vec<Diagnostic>,
) -> Option<u64> {
    let measured_in = options.measured_in.as_deref();
    match options.weights_gib {
        Some(w) => {
            *weights_source = Some(weights_given(measured_in));
            Some(gib_bytes(w))
        }
        None => {
            match estimate_weights(model, target_indexer_layers, u64::from(sizes.draft_layers)) {
                Ok(w) => {
                    *weights_estimated = true;
                    *weights_source = Some(format!(
                    "estimated from config.json: {:.1} B parameters, {}; vLLM's start-up log is exact (pass --weights-gib)",
                    (w.dense_params as f64 + w.expert_params as f64) / 1e9,
                    w.rule
                ));
                    Some(w.bytes_per_gpu(tp, dp, args.enable_expert_parallel == Some(true)))
                }
                Err(why) => {
                    warnings.push(
                    Diagnostic::warning(
                        Code::WeightsUnknown,
                        FieldPath::root("weights_gib"),
                        format!("the model weights cannot be estimated ({why}), so the GPU KV room is unknown"),
                    )
                    .hint("pass --weights-gib (per GPU, from vLLM's \"Model loading took X GiB\") or --kv-cache-memory-bytes"),
                );
                    None
                }
            }
        }
    }
}

/// The GPU KV room: the GPU's memory x gpu_memory_utilization less the
/// weights (a warning when they leave none), and where the figure comes from.
fn kv_room(
    gpu: f64,
    utilization: f64,
    weights: Option<u64>,
    warnings: &mut Vec<Diagnostic>,
) -> (Option<u64>, String) {
    match weights {
        Some(w) => {
            let budget = (gpu * GIB * utilization) as u64;
            if w >= budget {
                warnings.push(
                    Diagnostic::warning(
                        Code::NoGpuKvRoom,
                        FieldPath::root("gpu_memory_utilization"),
                        format!(
                            "the weights ({:.1} GiB per GPU) leave no KV room in {gpu} GiB x gpu_memory_utilization {utilization}",
                            w as f64 / GIB
                        ),
                    )
                    .hint("use more tensor-parallel ranks, a quantized checkpoint, or GPUs with more memory"),
                );
            }
            (
                Some(budget.saturating_sub(w)),
                format!("gpu_memory_gib x gpu_memory_utilization - weights per GPU ({gpu} GiB x {utilization}); an upper bound: vLLM also reserves activation and CUDA-graph memory, its start-up log gives the exact KV size (--kv-cache-memory-bytes)"),
            )
        }
        None => (None, "unknown: the weights per GPU are unknown".to_owned()),
    }
}

/// max_num_seqs and where it comes from: given, else vLLM's default for the GPU.
fn max_num_seqs(args: &ServeArgs, options: &PlanOptions) -> (u64, String) {
    match args.max_num_seqs {
        Some(n) => (n.max(1) as u64, "given with --max-num-seqs".to_owned()),
        None => match options.gpu_memory_gib {
            Some(g) if g >= 70.0 => (1024, "vLLM 0.33 default on GPUs with 70 GiB or more".to_owned()),
            Some(_) => (256, "vLLM 0.33 default on GPUs under 70 GiB".to_owned()),
            None => (256, "vLLM 0.33 default when the GPU is unknown (1024 on GPUs with 70 GiB or more: pass --gpu-memory-gib or --max-num-seqs)".to_owned()),
        },
    }
}
