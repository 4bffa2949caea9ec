//! Resolution and validation: from [`ServeArgs`] to a [`Report`].
//!
//! This module reads the inputs (each JSON flag, the scalars, the model) and
//! checks their shape; [`super::validate`] then checks HiSparse itself.
//! Order follows vLLM 0.33.0 `VllmConfig.__post_init__`: `hisparse_config` is
//! inferred from a HiSparseConnector (PR 57041) *before* validation, so every
//! HiSparse check fires on the inferred path too, and all run in one pass.

use crate::config::args::{LoadError, ServeArgs};
use crate::config::connectors::{self, ConnectorTree};
use crate::config::model::{self, ModelInfo};
use crate::config::report::{ModelSummary, Report};
use crate::config::schema::{
    self, check_keys, closest, lax_bool, lax_int, quoted, type_error, ATTENTION_FIELDS,
    CACHE_DTYPES, COMPILATION_FIELDS, CUDAGRAPH_MODES, HISPARSE_FIELDS, PLATFORMS,
    SPECULATIVE_FIELDS,
};
use crate::config::validate::{self, PoolAdvice};
use crate::config::{fixes, misplaced};
use crate::diagnostic::{Code, Diagnostic, FixOp};
use crate::gpu::GpuSpec;
use crate::path::{FieldPath, Seg};
use serde_json::{json, Value};

/// The explicit `attention_config.hisparse_config`, as far as it parsed.
pub(crate) struct HiSparseInput {
    pub(crate) path: FieldPath,
    pub(crate) device_buffer_size: Option<u64>,
    pub(crate) eager_host_mirror: Option<bool>,
}

/// Scalars after their own checks; invalid ones fall back to vLLM's defaults
/// (their error is already recorded).
pub(crate) struct Scalars {
    pub(crate) tensor_parallel_size: i64,
    pub(crate) pipeline_parallel_size: i64,
    pub(crate) decode_context_parallel_size: i64,
    pub(crate) block_size: Option<u64>,
    pub(crate) max_model_len: Option<u64>,
    /// `--max-model-len auto` / -1: vLLM fits the context to memory.
    pub(crate) max_model_len_auto: bool,
    pub(crate) platform: String,
    pub(crate) kv_cache_dtype: Option<String>,
    pub(crate) v2_runner: Option<bool>,
}

/// Resolve and validate a serve configuration.
///
/// Returns every error and warning at once, with fixes that pass alone and
/// together (see `config::fixes`); `Err` only when the model's config file
/// cannot be read at all (an I/O problem, not a configuration one).
pub fn resolve(args: &ServeArgs) -> Result<Report, LoadError> {
    resolve_with_model(args).map(|(report, _)| report)
}

/// [`resolve`], also returning the model facts it read (after `--hf-overrides`),
/// for the capacity planner.
pub fn resolve_with_model(args: &ServeArgs) -> Result<(Report, Option<ModelInfo>), LoadError> {
    resolve_on(args, None)
}

/// [`resolve_with_model`] for a known GPU: adds vLLM's residency-resolver
/// shared-memory check (and refuses a GPU that is not NVIDIA).
pub fn resolve_on(
    args: &ServeArgs,
    gpu: Option<&GpuSpec>,
) -> Result<(Report, Option<ModelInfo>), LoadError> {
    resolve_advised(args, gpu, None)
}

/// The joint pass: resolve, then size the host pool fixes for the
/// configuration that every fix of the report gives (a fix may change the
/// block size, the context or the dtype the start-up minimum depends on), so
/// that the fixes pass applied together. `advice` is a larger pool to offer
/// (the one that lets the GPUs bind) when the caller knows it.
pub(crate) fn resolve_advised(
    args: &ServeArgs,
    gpu: Option<&GpuSpec>,
    advice: Option<&PoolAdvice>,
) -> Result<(Report, Option<ModelInfo>), LoadError> {
    let (mut report, mut model, needed) = resolve_once(args, gpu, advice)?;
    if !shallow(args) {
        return Ok((report, model)); // no copies of values nested this deep (see `shallow`)
    }
    let Some(fixed) = fixed_args(args, &report) else {
        return Ok((report, model));
    };
    let offered = match (needed, advice) {
        (Some(n), Some(a)) => Some(n.max(a.gib)),
        (n, a) => n.or(a.map(|a| a.gib)),
    };
    if let Ok((_, _, Some(after))) = resolve_once(&fixed, gpu, None) {
        if offered.is_none_or(|o| o < after) {
            let joint = PoolAdvice {
                gib: after,
                holds: format!("{after} GiB is the start-up minimum once the other fixes of this report are applied: it holds one max_model_len request at a time; size the pool for your concurrency with hisparse-check --plan (hisparse_rs.plan)"),
            };
            (report, model, _) = resolve_once(args, gpu, Some(&joint))?;
        }
    }
    absorb(args, gpu, &mut report);
    Ok((report, model))
}

/// Nesting up to which the joint pass copies the JSON fields (real serve
/// configurations nest under 10 levels; copies and edits of JSON recurse).
const JOINT_MAX_NESTING: usize = 64;

/// Whether every JSON field nests at most [`JOINT_MAX_NESTING`] levels
/// (measured without recursion).
fn shallow(args: &ServeArgs) -> bool {
    let mut stack: Vec<(&Value, usize)> = args
        .json_fields()
        .into_iter()
        .filter_map(|(_, v)| v.as_ref().map(|v| (v, 0)))
        .collect();
    while let Some((v, depth)) = stack.pop() {
        if depth > JOINT_MAX_NESTING {
            return false;
        }
        match v {
            Value::Array(items) => stack.extend(items.iter().map(|i| (i, depth + 1))),
            Value::Object(map) => stack.extend(map.values().map(|i| (i, depth + 1))),
            _ => {}
        }
    }
    true
}

/// Rounds of [`absorb`]: each can only add edits below what a fix wrote.
const ABSORB_ROUNDS: usize = 4;

/// A fix that writes a value the other checks then reject (a misspelled
/// `cudagraph_mod` moved to `cudagraph_mode` holds "FULL") takes the fix of
/// that rejection too: an error the configuration after all fixes still has
/// at or below a field one fix wrote, fixed by edits of fields below it, is
/// appended to that fix, so it passes alone and together (a list wrapped in
/// a MultiConnector whose items then need fixes, too).
///
/// The configuration after all fixes names places as they are after every
/// removal; they are the places the fixes name only when no fix removes or
/// moves a list item, so below a list item only that case is absorbed.
fn absorb(args: &ServeArgs, gpu: Option<&GpuSpec>, report: &mut Report) {
    for _ in 0..ABSORB_ROUNDS {
        let Some(fixed) = fixed_args(args, report) else {
            return;
        };
        let Ok((after, _, _)) = resolve_once(&fixed, gpu, None) else {
            return;
        };
        let shifts = report.errors.iter().flat_map(|d| &d.fix).any(|op| {
            let p = match op {
                FixOp::Remove { path } => path,
                FixOp::Move { from, .. } => from,
                FixOp::Set { .. } => return false,
            };
            matches!(p.0.last(), Some(Seg::Index(_)))
        });
        // Paths every fix names, to tell a value one fix wrote whole (a list
        // wrapped in a MultiConnector) from one other fixes edit inside too.
        let named: Vec<FieldPath> = report
            .errors
            .iter()
            .flat_map(|d| &d.fix)
            .flat_map(|op| match op {
                FixOp::Set { path, .. } | FixOp::Remove { path } => [Some(path.clone()), None],
                FixOp::Move { from, to } => [Some(from.clone()), Some(to.clone())],
            })
            .flatten()
            .collect();
        let mut grown = false;
        // The errors after each fix alone, computed when first needed (per round).
        let mut alone: Vec<Option<Vec<Diagnostic>>> = vec![None; report.errors.len()];
        // An error of the configuration after every fix, named as the fix of
        // error `i` would name it: through the moves applied after that fix
        // (a list wrapped in a MultiConnector moves every item), undone last
        // first. A value moved to a field stays named there.
        let errors = &report.errors;
        let seen_by = |i: usize, e: &Diagnostic| -> Diagnostic {
            let later: Vec<&FixOp> = errors[i + 1..].iter().flat_map(|d| &d.fix).collect();
            // Undo one edit: a move takes what is below `to` back to `from`; a
            // list item taken out (removed or moved) shifts the later items back up.
            let unshift = |p: FieldPath, gone: &FieldPath| -> FieldPath {
                let Some((Seg::Index(r), list)) = gone.0.split_last() else {
                    return p;
                };
                let mut segs = p.0;
                if segs.len() > list.len() && segs[..list.len()] == *list {
                    if let Seg::Index(j) = &mut segs[list.len()] {
                        if *j >= *r {
                            *j += 1;
                        }
                    }
                }
                FieldPath(segs)
            };
            let back = |p: &FieldPath| {
                later.iter().rev().fold(p.clone(), |p, op| match op {
                    FixOp::Move { from, to } => match p.0.strip_prefix(to.0.as_slice()) {
                        Some(rest) if !rest.is_empty() => {
                            FieldPath([from.0.as_slice(), rest].concat())
                        }
                        _ => unshift(p, from),
                    },
                    FixOp::Remove { path } => unshift(p, path),
                    FixOp::Set { .. } => p,
                })
            };
            let mut e = e.clone();
            e.path = back(&e.path);
            for op in &mut e.fix {
                match op {
                    FixOp::Set { path, .. } | FixOp::Remove { path } => *path = back(path),
                    FixOp::Move { from, to } => {
                        *from = back(from);
                        *to = back(to);
                    }
                }
            }
            e
        };
        let mut additions: Vec<(usize, Vec<FixOp>)> = Vec::new();
        for found in after.errors.iter().filter(|e| !e.fix.is_empty()) {
            // e and its fix lie at or below `w`: through object keys only, or
            // anywhere inside a value one fix set whole and no other fix edits.
            let below = |e: &Diagnostic, w: &FieldPath, set_whole: bool| {
                let alone = set_whole
                    && named
                        .iter()
                        .filter(|p| p.0.starts_with(&w.0) || w.0.starts_with(&p.0))
                        .count()
                        == 1;
                let inside = |p: &FieldPath| {
                    p.0.starts_with(&w.0)
                        && (alone || p.0[w.0.len()..].iter().all(|s| matches!(s, Seg::Key(_))))
                };
                // Never an edit that removes what the fix wrote.
                let strictly = |p: &FieldPath| inside(p) && p.0.len() > w.0.len();
                (!shifts || w.0.iter().all(|s| matches!(s, Seg::Key(_))))
                    && inside(&e.path)
                    && e.fix.iter().all(|op| match op {
                        FixOp::Set { path, .. } => inside(path),
                        FixOp::Remove { path } => strictly(path),
                        FixOp::Move { from, to } => strictly(from) && inside(to),
                    })
            };
            let owner = (0..errors.len())
                .rev()
                .map(|i| (i, seen_by(i, found)))
                .find(|(i, e)| {
                    errors[*i].fix.iter().any(|op| match op {
                        FixOp::Set { path, .. } => below(e, path, true),
                        FixOp::Move { to, .. } => below(e, to, false),
                        FixOp::Remove { .. } => false,
                    })
                })
                // Or the fix that reveals it: applied alone, it leads to this very
                // error with this very fix (a kv_cache_dtype whose host rows the
                // pool check can size only once the fix sets it).
                // The alone fix may size a value for the configuration without
                // the other fixes: the larger of the two numbers serves both.
                .or_else(|| {
                    (0..errors.len()).find_map(|i| {
                        let e = seen_by(i, found);
                        // Revealed: the report as given does not have it.
                        if errors.iter().any(|d| d.code == e.code && d.path == e.path) {
                            return None;
                        }
                        let a = alone[i]
                            .get_or_insert_with(|| alone_errors(args, gpu, &errors[i]))
                            .iter()
                            .find(|a| a.code == e.code && a.path == e.path)?;
                        let ops = joint_ops(&a.fix, &e.fix)?;
                        Some((i, Diagnostic { fix: ops, ..e }))
                    })
                });
            if let Some((i, e)) = owner {
                additions.push((i, e.fix));
            }
        }
        for (i, ops) in additions {
            report.errors[i].fix.extend(ops);
            grown = true;
        }
        if !grown {
            return;
        }
    }
}

/// One fix for both configurations: the same edits at the same places, a
/// number set to the larger of the two values. None when they differ otherwise.
fn joint_ops(alone: &[FixOp], joint: &[FixOp]) -> Option<Vec<FixOp>> {
    if alone.len() != joint.len() {
        return None;
    }
    alone
        .iter()
        .zip(joint)
        .map(|(a, j)| match (a, j) {
            (
                FixOp::Set {
                    path: pa,
                    value: va,
                },
                FixOp::Set {
                    path: pj,
                    value: vj,
                },
            ) if pa == pj => {
                let value = match (va.as_u64(), vj.as_u64(), va.as_f64(), vj.as_f64()) {
                    (Some(x), Some(y), _, _) => json!(x.max(y)),
                    (_, _, Some(x), Some(y)) => json!(x.max(y)),
                    _ if va == vj => va.clone(),
                    _ => return None,
                };
                Some(FixOp::Set {
                    path: pa.clone(),
                    value,
                })
            }
            _ if a == j => Some(a.clone()),
            _ => None,
        })
        .collect()
}

/// The errors `args` has after `d`'s fix alone (none when it does not apply).
fn alone_errors(args: &ServeArgs, gpu: Option<&GpuSpec>, d: &Diagnostic) -> Vec<Diagnostic> {
    if d.fix.is_empty() {
        return Vec::new();
    }
    let mut doc = args.normalized().0.into_owned().to_json();
    if crate::diagnostic::apply_fix(&mut doc, &d.fix).is_err() {
        return Vec::new();
    }
    let Ok(one) = ServeArgs::from_json(doc) else {
        return Vec::new();
    };
    resolve_once(&one, gpu, None).map_or_else(|_| Vec::new(), |(r, _, _)| r.errors)
}

/// `args` with every error's fix of `report` applied in order; None when
/// there is nothing to apply or the result is not serve args.
pub(crate) fn fixed_args(args: &ServeArgs, report: &Report) -> Option<ServeArgs> {
    if report.errors.iter().all(|e| e.fix.is_empty()) {
        return None;
    }
    let mut doc = args.normalized().0.into_owned().to_json();
    fixes::apply_all(&mut doc, &report.errors).ok()?;
    ServeArgs::from_json(doc).ok()
}

/// One resolution: the report (errors settled, see `config::fixes`), the
/// model facts and the start-up minimum host pool when the sizes are known.
fn resolve_once(
    args: &ServeArgs,
    gpu: Option<&GpuSpec>,
    advice: Option<&PoolAdvice>,
) -> Result<(Report, Option<ModelInfo>, Option<f64>), LoadError> {
    let (normalized, mut d) = args.normalized();
    if !d.is_empty() {
        // Flags that are not JSON: report them alone rather than guess around them.
        return Ok((Report::from_diagnostics(d), None, None));
    }
    let args: &ServeArgs = &normalized;
    scan_shell_variables(args, &mut d);

    let tree = match &args.kv_transfer_config {
        None | Some(Value::Null) => ConnectorTree::default(),
        Some(v) => connectors::walk(v, &mut d),
    };
    let explicit = parse_attention(args.attention_config.as_ref(), &mut d);
    let num_speculative_tokens = parse_speculative(args.speculative_config.as_ref(), &mut d);
    let cudagraph_mode = parse_compilation(args.compilation_config.as_ref(), &mut d);
    let scalars = check_scalars(args, &mut d);

    let loaded = args.load_hf_config()?;
    let overrides = match &args.hf_overrides {
        None | Some(Value::Null) => None,
        Some(o @ Value::Object(_)) => Some(o),
        Some(other) => {
            d.push(
                type_error(&FieldPath::root("hf_overrides"), "an object", other).fix(vec![
                    FixOp::Remove {
                        path: FieldPath::root("hf_overrides"),
                    },
                ]),
            );
            None
        }
    };
    let model = loaded.as_ref().map(|(cfg, source)| {
        let info = match overrides {
            Some(o) => {
                let mut merged = Value::clone(cfg);
                model::deep_merge(&mut merged, o);
                model::read(&merged, Some(o))
            }
            None => model::read(cfg, None),
        };
        (info, source.clone())
    });
    if let (Some((info, _)), Some(len)) = (&model, scalars.max_model_len) {
        check_max_model_len(info, len, &mut d);
    }

    let enabled = explicit.is_some() || !tree.sites.is_empty();
    let mut needed_gib = None;
    let hisparse = if enabled {
        let misplaced = misplaced::find(args, &tree);
        let ctx = validate::Ctx {
            args,
            tree: &tree,
            explicit: explicit.as_ref(),
            model: model.as_ref().map(|(m, _)| m),
            num_speculative_tokens,
            cudagraph_mode: cudagraph_mode.as_deref(),
            scalars: &scalars,
            gpu,
            advice,
            misplaced: &misplaced,
        };
        ctx.validate(&mut d, &mut needed_gib)
    } else {
        None
    };

    let mut report = Report::from_diagnostics(d);
    fixes::settle(&mut report.errors, args);
    report.hisparse_enabled = enabled;
    report.model = model.as_ref().map(|(info, source)| ModelSummary {
        source: source.clone(),
        architecture: info.architecture.clone(),
        model_type: info.model_type.clone(),
    });
    report.gpu = gpu.cloned();
    report.hisparse = if report.valid { hisparse } else { None };
    Ok((report, model.map(|(info, _)| info), needed_gib))
}

fn scan_shell_variables(args: &ServeArgs, d: &mut Vec<Diagnostic>) {
    for (name, value) in args.json_fields() {
        if let Some(v) = value {
            schema::find_shell_variables(v, &FieldPath::root(name), d);
        }
    }
    for (name, value) in [
        ("model", &args.model),
        ("revision", &args.revision),
        ("kv_cache_dtype", &args.kv_cache_dtype),
        ("platform", &args.platform),
    ] {
        if let Some(text) = value {
            schema::find_shell_variables(&Value::String(text.clone()), &FieldPath::root(name), d);
        }
    }
}

fn parse_attention(value: Option<&Value>, d: &mut Vec<Diagnostic>) -> Option<HiSparseInput> {
    let root = FieldPath::root("attention_config");
    let obj = match value? {
        Value::Null => return None,
        Value::Object(obj) => obj,
        other => {
            d.push(
                type_error(&root, "an object", other)
                    .fix(vec![FixOp::Remove { path: root.clone() }]),
            );
            return None;
        }
    };
    check_keys(obj, ATTENTION_FIELDS, &[], "AttentionConfig", &root, d);
    let path = root.key("hisparse_config");
    let hs = match obj.get("hisparse_config")? {
        Value::Null => return None,
        Value::Object(hs) => hs,
        other => {
            d.push(
                type_error(&path, "an object (HiSparseConfig) or null", other)
                    .hint(format!(
                        "write {path} as an object, e.g. {{}} for the defaults"
                    ))
                    .fix(vec![FixOp::Set {
                        path: path.clone(),
                        value: json!({}),
                    }]),
            );
            return Some(HiSparseInput {
                path,
                device_buffer_size: None,
                eager_host_mirror: None,
            });
        }
    };
    check_keys(hs, HISPARSE_FIELDS, &[], "HiSparseConfig", &path, d);
    let dbs_path = path.key("device_buffer_size");
    let device_buffer_size = match hs.get("device_buffer_size") {
        None | Some(Value::Null) => None,
        Some(v) => match lax_int(v) {
            Some(n) if n > 0 => Some(n as u64),
            Some(_) => {
                d.push(
                    Diagnostic::error(
                        Code::InvalidValue,
                        dbs_path.clone(),
                        format!("{dbs_path} must be greater than 0"),
                    )
                    .given(v)
                    .allowed("an integer > 0, or null for the default")
                    .hint(format!("remove {dbs_path} to use the default"))
                    .fix(vec![FixOp::Remove {
                        path: dbs_path.clone(),
                    }]),
                );
                None
            }
            None => {
                d.push(
                    type_error(&dbs_path, "an integer", v)
                        .hint(format!("remove {dbs_path} to use the default"))
                        .fix(vec![FixOp::Remove {
                            path: dbs_path.clone(),
                        }]),
                );
                None
            }
        },
    };
    let mirror_path = path.key("eager_host_mirror");
    let eager_host_mirror = match hs.get("eager_host_mirror") {
        None => None,
        Some(v) => match lax_bool(v) {
            Some(b) => Some(b),
            None => {
                d.push(
                    type_error(&mirror_path, "a boolean", v).fix(vec![FixOp::Remove {
                        path: mirror_path.clone(),
                    }]),
                );
                None
            }
        },
    };
    Some(HiSparseInput {
        path,
        device_buffer_size,
        eager_host_mirror,
    })
}

/// Returns `num_speculative_tokens` when speculative decoding is configured.
fn parse_speculative(value: Option<&Value>, d: &mut Vec<Diagnostic>) -> Option<Option<u64>> {
    let root = FieldPath::root("speculative_config");
    let obj = match value? {
        Value::Null => return None,
        Value::Object(obj) => obj,
        other => {
            d.push(
                type_error(&root, "an object", other)
                    .fix(vec![FixOp::Remove { path: root.clone() }]),
            );
            return None;
        }
    };
    check_keys(obj, SPECULATIVE_FIELDS, &[], "SpeculativeConfig", &root, d);
    let path = root.key("num_speculative_tokens");
    match obj.get("num_speculative_tokens") {
        None | Some(Value::Null) => Some(None),
        Some(v) => match lax_int(v) {
            Some(n) if n > 0 => Some(Some(n as u64)),
            _ => {
                d.push(
                    Diagnostic::error(
                        Code::InvalidValue,
                        path.clone(),
                        format!("{path} must be an integer greater than 0"),
                    )
                    .given(v)
                    .allowed("an integer > 0")
                    .fix(vec![FixOp::Set {
                        path,
                        value: json!(1),
                    }]),
                );
                Some(Some(1))
            }
        },
    }
}

/// Returns the normalized `cudagraph_mode` name when one is given.
fn parse_compilation(value: Option<&Value>, d: &mut Vec<Diagnostic>) -> Option<String> {
    let root = FieldPath::root("compilation_config");
    let obj = match value? {
        Value::Null => return None,
        Value::Object(obj) => obj,
        other => {
            d.push(
                type_error(&root, "an object", other)
                    .fix(vec![FixOp::Remove { path: root.clone() }]),
            );
            return None;
        }
    };
    check_keys(obj, COMPILATION_FIELDS, &[], "CompilationConfig", &root, d);
    let path = root.key("cudagraph_mode");
    let v = obj.get("cudagraph_mode")?;
    // pydantic takes enum values (0, 1, 2 are NONE, PIECEWISE, FULL); vLLM upper-cases names.
    let name = match v {
        Value::Null => return None,
        Value::String(s) => CUDAGRAPH_MODES
            .iter()
            .find(|m| m.eq_ignore_ascii_case(s))
            .copied(),
        Value::Number(n) => n
            .as_u64()
            .and_then(|i| ["NONE", "PIECEWISE", "FULL"].get(i as usize).copied()),
        _ => None,
    };
    if name.is_none() {
        let mut diag = Diagnostic::error(
            Code::InvalidValue,
            path.clone(),
            format!("{path} is not a CUDAGraphMode"),
        )
        .given(v)
        .allowed(format!("one of {}", quoted(CUDAGRAPH_MODES)));
        let best = v
            .as_str()
            .and_then(|s| closest(&s.to_ascii_uppercase(), CUDAGRAPH_MODES))
            .unwrap_or("FULL_AND_PIECEWISE");
        diag = diag.fix(vec![FixOp::Set {
            path,
            value: json!(best),
        }]);
        d.push(diag);
    }
    name.map(str::to_owned)
}

fn check_scalars(args: &ServeArgs, d: &mut Vec<Diagnostic>) -> Scalars {
    let at_least_one = |name: &str, v: Option<i64>, d: &mut Vec<Diagnostic>| -> i64 {
        match v {
            Some(n) if n < 1 => {
                let path = FieldPath::root(name);
                d.push(
                    Diagnostic::error(
                        Code::InvalidValue,
                        path.clone(),
                        format!("{name} must be at least 1"),
                    )
                    .given(&json!(n))
                    .allowed("an integer >= 1")
                    .fix(vec![FixOp::Set {
                        path,
                        value: json!(1),
                    }]),
                );
                1
            }
            Some(n) => n,
            None => 1,
        }
    };
    if let Some(u) = args.gpu_memory_utilization {
        if !(u > 0.0 && u <= 1.0) {
            let path = FieldPath::root("gpu_memory_utilization");
            d.push(
                Diagnostic::error(
                    Code::InvalidValue,
                    path.clone(),
                    "gpu_memory_utilization must be greater than 0 and at most 1 (a fraction of each GPU's memory)",
                )
                .given(&json!(u))
                .allowed("0 < gpu_memory_utilization <= 1 (vLLM 0.33 CacheConfig; default 0.92)")
                .fix(vec![FixOp::Remove { path }]),
            );
        }
    }
    if let Some(b) = args.kv_cache_memory_bytes.filter(|b| *b < 0) {
        let path = FieldPath::root("kv_cache_memory_bytes");
        d.push(
            Diagnostic::error(
                Code::InvalidValue,
                path.clone(),
                "kv_cache_memory_bytes must not be negative",
            )
            .given(&json!(b))
            .allowed("a number of bytes per GPU (20G = 20 x 2^30), or unset to use gpu_memory_utilization")
            .fix(vec![FixOp::Remove { path }]),
        );
    }
    let tensor_parallel_size = at_least_one("tensor_parallel_size", args.tensor_parallel_size, d);
    at_least_one("data_parallel_size", args.data_parallel_size, d);
    at_least_one("max_num_seqs", args.max_num_seqs, d);
    let pipeline_parallel_size =
        at_least_one("pipeline_parallel_size", args.pipeline_parallel_size, d);
    let decode_context_parallel_size = at_least_one(
        "decode_context_parallel_size",
        args.decode_context_parallel_size,
        d,
    );

    let block_size = match args.block_size {
        Some(b) if b <= 0 => {
            let path = FieldPath::root("block_size");
            d.push(
                Diagnostic::error(
                    Code::InvalidValue,
                    path.clone(),
                    "block_size must be greater than 0",
                )
                .given(&json!(b))
                .allowed("an integer > 0")
                .fix(vec![FixOp::Remove { path }]),
            );
            None
        }
        other => other.map(|b| b as u64),
    };
    let max_model_len = match args.max_model_len {
        None | Some(-1) => None,
        Some(n) if n <= 0 => {
            let path = FieldPath::root("max_model_len");
            d.push(
                Diagnostic::error(
                    Code::InvalidValue,
                    path.clone(),
                    "max_model_len must be a positive number of tokens, or -1 for auto",
                )
                .given(&json!(n))
                .allowed("an integer > 0, or -1 / \"auto\"")
                .fix(vec![FixOp::Remove { path }]),
            );
            None
        }
        Some(n) => Some(n as u64),
    };
    let platform = match args.platform.as_deref() {
        None => "cuda".to_owned(),
        Some(p) if PLATFORMS.contains(&p) => p.to_owned(),
        Some(p) => {
            let path = FieldPath::root("platform");
            d.push(
                Diagnostic::error(
                    Code::InvalidValue,
                    path.clone(),
                    format!("unknown platform \"{p}\""),
                )
                .given(&json!(p))
                .allowed(format!("one of {}", quoted(PLATFORMS)))
                .fix(vec![FixOp::Set {
                    path,
                    value: json!(closest(p, PLATFORMS).unwrap_or("cuda")),
                }]),
            );
            "cuda".to_owned()
        }
    };
    let kv_cache_dtype = match args.kv_cache_dtype.as_deref() {
        Some(t) if !CACHE_DTYPES.contains(&t) => {
            let path = FieldPath::root("kv_cache_dtype");
            d.push(
                Diagnostic::error(
                    Code::InvalidValue,
                    path.clone(),
                    format!(
                        "\"{t}\" is not a kv_cache_dtype vLLM {} accepts",
                        crate::VLLM_VERSION
                    ),
                )
                .given(&json!(t))
                .allowed(format!("one of {}", quoted(CACHE_DTYPES)))
                .fix(vec![FixOp::Set {
                    path,
                    value: json!(closest(t, CACHE_DTYPES).unwrap_or("auto")),
                }]),
            );
            None
        }
        other => other.map(str::to_owned),
    };
    // vLLM envs: maybe_convert_bool = bool(int(value)).
    let v2_runner = match args.vllm_use_v2_model_runner.as_deref() {
        None => None,
        Some(s) => match s.trim().parse::<i64>() {
            Ok(n) => Some(n != 0),
            Err(_) => {
                let path = FieldPath::root("VLLM_USE_V2_MODEL_RUNNER");
                d.push(
                    Diagnostic::error(Code::InvalidValue, path.clone(), format!("VLLM_USE_V2_MODEL_RUNNER={s:?} is not an integer; vLLM {} fails to start on it", crate::VLLM_VERSION))
                        .given(&json!(s))
                        .allowed("\"1\", \"0\", or unset")
                        .hint("unset VLLM_USE_V2_MODEL_RUNNER")
                        .fix(vec![FixOp::Remove { path }]),
                );
                None
            }
        },
    };
    Scalars {
        tensor_parallel_size,
        pipeline_parallel_size,
        max_model_len_auto: args.max_model_len == Some(-1),
        decode_context_parallel_size,
        block_size,
        max_model_len,
        platform,
        kv_cache_dtype,
        v2_runner,
    }
}

fn check_max_model_len(info: &ModelInfo, len: u64, d: &mut Vec<Diagnostic>) {
    let Some(limit) = &info.max_position_embeddings else {
        return;
    };
    if len > limit.value {
        let path = FieldPath::root("max_model_len");
        d.push(
            Diagnostic::error(
                Code::MaxModelLenTooLarge,
                path.clone(),
                format!(
                    "max_model_len {len} is longer than the model's {} ({})",
                    limit.value, limit.source
                ),
            )
            .given(&json!(len))
            .allowed(format!("at most {}", limit.value))
            .fix(vec![FixOp::Set {
                path,
                value: json!(limit.value),
            }]),
        );
    }
}
