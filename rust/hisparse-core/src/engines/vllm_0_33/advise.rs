//! Advice above the check: the joint pass that re-runs `resolve_once` on
//! the configuration every fix of a report gives, so the fixes pass applied
//! alone and together, and the public entry points built on it.
//!
//! `resolve_advised` is the joint pass around one resolution: values that
//! depend on other fixes (the host pool for the block size another fix sets)
//! are sized for the configuration after all fixes too, and a fix whose result
//! another check then rejects takes that check's fix (`absorb`). The
//! settling of one report's fixes (`super::fixes::settle`) runs inside
//! every resolution; this module only calls resolution, never the reverse.

use super::args::{LoadError, ServeArgs};
use super::diagnostics::describe_fix;
use super::fixed_flags::fixed_flags;
use super::fixes::{apply_all, shallow};
use super::input::Hw;
use super::resolve::resolve_once;
use super::validate::{PoolAdvice, StartupNeed};
use crate::diagnostic::{apply_fix, Code, Diagnostic, FixOp};
use crate::gpu::GpuSpec;
use crate::model::ModelInfo;
use crate::path::{FieldPath, Seg};
use crate::report::Report;
use serde_json::json;

/// Resolve and validate a serve configuration.
///
/// Returns every error and warning at once, with fixes that pass alone and
/// together (see `super::fixes` and this module); `Err` only when the model's config file
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
/// shared-memory check (and refuses a GPU that is not NVIDIA), and the
/// layout rules for the GPUs of its usual server's node.
pub fn resolve_on(
    args: &ServeArgs,
    gpu: Option<&GpuSpec>,
) -> Result<(Report, Option<ModelInfo>), LoadError> {
    let (mut report, model) = resolve_advised(args, Hw::new(gpu, None), None, None)?;
    let fixed = fixed_flags(args, &report.errors);
    (report.fixed_flags, report.fixed_env) = (fixed.flags, fixed.env);
    Ok((report, model))
}

/// The joint pass: resolve, then size the host pool fixes for the
/// configuration that every fix of the report gives (a fix may change the
/// block size, the context or the dtype the start-up minimum depends on), so
/// that the fixes pass applied together. `advice` is a larger pool to offer
/// (the one that lets the GPUs bind) when the caller knows it.
pub(crate) fn resolve_advised(
    args: &ServeArgs,
    hw: Hw<'_>,
    advice: Option<&PoolAdvice>,
    machine: Option<MachineCheck<'_>>,
) -> Result<(Report, Option<ModelInfo>), LoadError> {
    let (mut report, mut model, needed) = resolve_checked(args, hw, advice, machine)?;
    if !shallow(args) {
        return Ok((report, model)); // no copies of values nested this deep (see `shallow`)
    }
    let Some(fixed) = fixed_args(args, &report) else {
        return Ok((report, model));
    };
    let given = needed.as_ref().map(|n| n.gib);
    let offered = match (given, advice) {
        (Some(n), Some(a)) => Some(n.max(a.gib)),
        (n, a) => n.or(a.map(|a| a.gib)),
    };
    if let Ok((_, _, Some(after))) = resolve_once(&fixed, hw, None) {
        // The other fixes change the blocks start-up counts (a block size, a
        // context, a dtype): the pool offered says which figures it is for.
        let recounted = needed.as_ref().is_some_and(|n| {
            (n.block_size, n.min_blocks, n.host_block_stride)
                != (after.block_size, after.min_blocks, after.host_block_stride)
        });
        let advised = advice.is_some_and(|a| a.gib >= after.gib);
        if offered.is_none_or(|o| o < after.gib) || (recounted && !advised) {
            let gib = given.map_or(after.gib, |g| g.max(after.gib));
            let counted = format!(
                "block_size {}: {} host blocks of {} B",
                after.block_size, after.min_blocks, after.host_block_stride
            );
            let what = if gib > after.gib {
                format!("{gib} GiB is the start-up minimum as given, and more than the {} GiB start-up needs once the other fixes of this report are applied ({counted})", after.gib)
            } else {
                format!("{gib} GiB is the start-up minimum once the other fixes of this report are applied ({counted})")
            };
            let joint = PoolAdvice {
                gib,
                holds: format!("{what}: it holds one max_model_len request at a time; size the pool for your concurrency with hisparse-check --plan (hisparse_rs.plan)"),
            };
            (report, model, _) = resolve_checked(args, hw, Some(&joint), machine)?;
        }
    }
    absorb(args, hw, machine, &mut report);
    Ok((report, model))
}

/// A check of a resolved configuration against the machines it runs on (the
/// node's host RAM, [`super::check`]): it adds its errors to a valid report.
/// The joint pass runs it on every configuration a fix gives, so a fix whose
/// result it rejects takes its fix too ([`absorb`]).
pub(crate) type MachineCheck<'a> = &'a dyn Fn(&ServeArgs, Option<&ModelInfo>, &mut Report);

/// [`resolve_once`], then the machine check, when there is one.
fn resolve_checked(
    args: &ServeArgs,
    hw: Hw<'_>,
    advice: Option<&PoolAdvice>,
    machine: Option<MachineCheck<'_>>,
) -> Result<(Report, Option<ModelInfo>, Option<StartupNeed>), LoadError> {
    let (mut report, model, needed) = resolve_once(args, hw, advice)?;
    if let Some(check) = machine {
        check(args, model.as_ref(), &mut report);
    }
    Ok((report, model, needed))
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
fn absorb(args: &ServeArgs, hw: Hw<'_>, machine: Option<MachineCheck<'_>>, report: &mut Report) {
    // The errors this pass added to the report (revealed by the fixes together).
    let mut added: Vec<Diagnostic> = Vec::new();
    for _ in 0..ABSORB_ROUNDS {
        let Some(fixed) = fixed_args(args, report) else {
            return;
        };
        let Ok((after, _, _)) = resolve_checked(&fixed, hw, None, machine) else {
            return;
        };
        let shifts = shifts(report);
        let named = named_paths(report);
        let mut grown = false;
        // The errors after each fix alone, computed when first needed (per round).
        let mut alone: Vec<Option<Vec<Diagnostic>>> = vec![None; report.errors.len()];
        let errors = &report.errors;
        let mut additions: Vec<(usize, Diagnostic)> = Vec::new();
        let mut revealed: Vec<Diagnostic> = Vec::new();
        for found in after.errors.iter().filter(|e| !e.fix.is_empty()) {
            let below = |e: &Diagnostic, w: &FieldPath, set_whole: bool| {
                below(e, w, set_whole, &named, shifts)
            };
            let seen_by = |i: usize, e: &Diagnostic| seen_by(errors, i, e);
            // A layout over the node's GPUs is its own error (revealed), and
            // its fix owns nothing: it counts the GPUs of the configuration as
            // given, which another fix (a tensor parallel size) may change.
            let own = found.code != Code::GpusPerNodeExceeded;
            let owner = (0..if own { errors.len() } else { 0 })
                .rev()
                .filter(|i| errors[*i].code != Code::GpusPerNodeExceeded)
                .map(|i| (i, seen_by(i, found)))
                .find(|(i, e)| {
                    let e = probe(e);
                    errors[*i].fix.iter().any(|op| match op {
                        FixOp::Set { path, .. } => below(&e, path, true),
                        FixOp::Move { to, .. } => below(&e, to, false),
                        FixOp::Remove { .. } => false,
                    })
                })
                // Or the fix that reveals it: applied alone, it leads to this very
                // error with this very fix (a kv_cache_dtype whose host rows the
                // pool check can size only once the fix sets it).
                // The alone fix may size a value for the configuration without
                // the other fixes: the larger of the two numbers serves both.
                // Never the machine check's (the node's RAM against a pool no
                // fix writes, weights that leave no GPU KV room): the pools pin
                // as much whatever block size the revealing fix sets, so it is
                // an error of its own (revealed), not folded into that fix.
                .or_else(|| {
                    if !own || matches!(found.code, Code::HostMemoryExceeded | Code::NoGpuKvRoom) {
                        return None;
                    }
                    (0..errors.len())
                        .filter(|i| errors[*i].code != Code::GpusPerNodeExceeded)
                        .find_map(|i| {
                            let e = seen_by(i, found);
                            // Revealed: the report as given does not have it.
                            if errors.iter().any(|d| d.code == e.code && d.path == e.path) {
                                return None;
                            }
                            let a = alone[i]
                                .get_or_insert_with(|| alone_errors(args, hw, machine, &errors[i]))
                                .iter()
                                .find(|a| a.code == e.code && a.path == e.path)?;
                            let ops = joint_ops(&a.fix, &e.fix)?;
                            Some((i, Diagnostic { fix: ops, ..e }))
                        })
                });
            match owner {
                Some((i, e)) => additions.push((i, e)),
                // An error no fix owns that the fixes together reveal (the node's
                // RAM against a pool no fix writes, behind two or more other
                // errors; a host_pool_gib missing once connectors have moved
                // through list items) is an error of this report too, applied
                // last, where the configuration after the others names it.
                // (Once: a revealed error whose fix does not settle it is not added
                // again. An error of the report as given with the same code, path and
                // fix is another value that a removal shifted there: it is added.)
                None if !added.contains(found) => revealed.push(found.clone()),
                None => {}
            }
        }
        let fixed_len = fixed.max_model_len;
        if absorb_additions(args, hw, machine, report, additions, fixed_len) {
            grown = true;
        }
        shortest_length(report);
        added.extend(revealed.iter().cloned());
        if report.insert_revealed(revealed) {
            grown = true;
        }
        if !grown {
            return;
        }
    }
}

/// Whether a fix of the report removes or moves a list item (so places
/// below a list item are named differently after every removal).
fn shifts(report: &Report) -> bool {
    report.errors.iter().flat_map(|d| &d.fix).any(|op| {
        let p = match op {
            FixOp::Remove { path } => path,
            FixOp::Move { from, .. } => from,
            FixOp::Set { .. } => return false,
        };
        matches!(p.0.last(), Some(Seg::Index(_)))
    })
}

/// Paths every fix names, to tell a value one fix wrote whole (a list
/// wrapped in a MultiConnector) from one other fixes edit inside too.
fn named_paths(report: &Report) -> Vec<FieldPath> {
    report
        .errors
        .iter()
        .flat_map(|d| &d.fix)
        .flat_map(|op| match op {
            FixOp::Set { path, .. } | FixOp::Remove { path } => [Some(path.clone()), None],
            FixOp::Move { from, to } => [Some(from.clone()), Some(to.clone())],
        })
        .flatten()
        .collect()
}

/// An error of the configuration after every fix, named as the fix of
/// error `i` would name it: through the moves applied after that fix
/// (a list wrapped in a MultiConnector moves every item), undone last
/// first. A value moved to a field stays named there.
fn seen_by(errors: &[Diagnostic], i: usize, e: &Diagnostic) -> Diagnostic {
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
                Some(rest) if !rest.is_empty() => FieldPath([from.0.as_slice(), rest].concat()),
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
}

/// e and its fix lie at or below `w`: through object keys only, or
/// anywhere inside a value one fix set whole and no other fix edits.
fn below(
    e: &Diagnostic,
    w: &FieldPath,
    set_whole: bool,
    named: &[FieldPath],
    shifts: bool,
) -> bool {
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
}

/// The RAM cap belongs to the fix that writes the pool; the shorter
/// max_model_len it may come with lies elsewhere, and comes along.
fn probe(e: &Diagnostic) -> Diagnostic {
    if e.code != Code::HostMemoryExceeded {
        return e.clone();
    }
    let fix = e
        .fix
        .iter()
        .filter(|op| matches!(op, FixOp::Set { path, .. } if *path == e.path))
        .cloned()
        .collect();
    Diagnostic { fix, ..e.clone() }
}

/// Appends each owned error's fix to the fix that owns it; whether any was.
fn absorb_additions(
    args: &ServeArgs,
    hw: Hw<'_>,
    machine: Option<MachineCheck<'_>>,
    report: &mut Report,
    additions: Vec<(usize, Diagnostic)>,
    fixed_len: Option<i64>,
) -> bool {
    let mut grown = false;
    for (i, e) in additions {
        let d = &mut report.errors[i];
        let hint = d.hint.as_deref().unwrap_or("apply the fix");
        match (e.code, e.fix.as_slice()) {
            // The node's RAM lowers the value this fix writes: say so.
            (Code::HostMemoryExceeded, [FixOp::Set { value, .. }, rest @ ..]) => {
                let shorter = rest.iter().find_map(|op| match op {
                    FixOp::Set { path, value } if path.to_string() == "max_model_len" => {
                        Some(format!(", with max_model_len lowered to {value}, the longest context that pool starts"))
                    }
                    _ => None,
                });
                d.hint = Some(format!(
                    "{hint}; on this node, as {value}: the largest host_pool_gib whose pools its RAM pins{} ({}, host_memory_exceeded)",
                    shorter.unwrap_or_default(),
                    e.message
                ));
                let cap = value.as_f64();
                merge_sets(&mut d.fix, e.fix);
                shorten_to_pass(args, hw, machine, d, cap, fixed_len);
                grown = true;
                continue;
            }
            // A misspelled host_pool_gib inside what this fix moves is renamed too.
            (Code::HostPoolGibMisplaced, _) => {
                if let Some(then) = &e.hint {
                    d.hint = Some(format!("{hint}; then {then}"));
                }
            }
            _ => {}
        }
        let before = d.fix.clone();
        let described = d.hint.as_deref() == Some(describe_fix(&before).as_str());
        if merge_sets(&mut d.fix, e.fix) && described {
            // A value this fix wrote is refused by another rule: the fix
            // writes the value that passes instead, and says why.
            d.hint = Some(format!(
                "{}: {} would be refused too ({}: {})",
                describe_fix(&d.fix),
                replaced_values(&before, &d.fix),
                e.code.as_str(),
                e.message
            ));
        }
        grown = true;
    }
    grown
}

/// Append `ops` to `fix`, where a set of a path `fix` already sets (with no
/// edit in between at, above or below that path) replaces that value: a fix
/// sets each path once, to the value that passes. True when one was replaced.
fn merge_sets(fix: &mut Vec<FixOp>, ops: Vec<FixOp>) -> bool {
    let mut replaced = false;
    for op in ops {
        if let FixOp::Set { path, value } = &op {
            let touches = |o: &FixOp| match o {
                FixOp::Set { path: p, .. } | FixOp::Remove { path: p } => {
                    p.0.starts_with(&path.0) || path.0.starts_with(&p.0)
                }
                FixOp::Move { from, to } => [from, to]
                    .iter()
                    .any(|p| p.0.starts_with(&path.0) || path.0.starts_with(&p.0)),
            };
            if let Some(FixOp::Set { path: p, value: v }) =
                fix.iter_mut().rev().find(|o| touches(o))
            {
                if p == path {
                    *v = value.clone();
                    replaced = true;
                    continue;
                }
            }
        }
        fix.push(op);
    }
    replaced
}

/// The values of `before` that `after` replaced, in words (`"int8_per_token_head"`).
fn replaced_values(before: &[FixOp], after: &[FixOp]) -> String {
    let words: Vec<String> = before
        .iter()
        .zip(after)
        .filter_map(|(b, a)| match (b, a) {
            (FixOp::Set { value: vb, .. }, FixOp::Set { value: va, .. }) if vb != va => {
                Some(vb.to_string())
            }
            _ => None,
        })
        .collect();
    words.join(", ")
}

/// Two fixes that set max_model_len take the shorter length: each passes
/// with it (a length the model allows, that the GPUs and the node's RAM
/// start), where applied in report order the later would undo the other.
fn shortest_length(report: &mut Report) {
    let len_path = FieldPath::root("max_model_len");
    let sets = |d: &Diagnostic| -> Vec<u64> {
        d.fix
            .iter()
            .filter_map(|op| match op {
                FixOp::Set { path, value } if *path == len_path => value.as_u64(),
                _ => None,
            })
            .collect()
    };
    let Some(shortest) = report.errors.iter().flat_map(sets).min() else {
        return;
    };
    for d in &mut report.errors {
        let mut lowered = false;
        for op in &mut d.fix {
            if let FixOp::Set { path, value } = op {
                if *path == len_path && value.as_u64().is_some_and(|v| v > shortest) {
                    *value = json!(shortest);
                    lowered = true;
                }
            }
        }
        if lowered {
            d.hint = Some(format!(
                "{}; max_model_len as {shortest}, the length another fix of this report needs",
                d.hint.as_deref().unwrap_or("apply the fix")
            ));
        }
    }
}

/// A pool fix that the node's RAM caps (`cap` GiB) may no longer start the
/// context as given, alone: then it also lowers max_model_len to the longest
/// context the capped pool starts (or the one another fix of the report sets,
/// `joint_len`, when shorter), so it passes alone and together; when no
/// context starts in it, the fix is withdrawn and says the node cannot run it.
fn shorten_to_pass(
    args: &ServeArgs,
    hw: Hw<'_>,
    machine: Option<MachineCheck<'_>>,
    d: &mut Diagnostic,
    cap: Option<f64>,
    joint_len: Option<i64>,
) {
    let len_path = FieldPath::root("max_model_len");
    if d.fix
        .iter()
        .any(|op| matches!(op, FixOp::Set { path, .. } if *path == len_path))
    {
        return; // the RAM fix already lowers it
    }
    let Some(cap) = cap else { return };
    let mut doc = args.normalized().0.into_owned().to_json();
    if apply_fix(&mut doc, &d.fix).is_err() {
        return;
    }
    let Ok(alone) = ServeArgs::from_json(doc) else {
        return;
    };
    let Ok((r, _, needed)) = resolve_checked(&alone, hw, None, machine) else {
        return;
    };
    if !r
        .errors
        .iter()
        .any(|e| e.code == d.code && e.path == d.path)
    {
        return;
    }
    let longest = needed.map(|n| {
        let blocks = crate::sizes::pool_blocks(cap, n.host_block_stride);
        (
            crate::sizes::longest_context(blocks, u64::from(n.block_size)),
            u64::from(n.block_size),
        )
    });
    let joint = joint_len
        .and_then(|l| u64::try_from(l).ok())
        .filter(|l| *l > 0);
    match longest {
        Some((t, bs)) if t >= bs => {
            let t = joint.map_or(t, |j| t.min(j));
            d.fix.push(FixOp::Set {
                path: len_path,
                value: json!(t),
            });
            d.hint = Some(format!(
                "{}; and lower max_model_len to {t}: the start-up minimum at the length as given does not fit in the pool this node's RAM pins",
                d.hint.as_deref().unwrap_or("apply the fix")
            ));
        }
        _ => {
            d.fix.clear();
            d.hint = Some(format!(
                "cannot be fixed on this node: the start-up minimum of host_pool_gib does not fit in what its RAM pins ({}); run fewer DP replicas per node, or use a node with more RAM",
                d.message
            ));
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
fn alone_errors(
    args: &ServeArgs,
    hw: Hw<'_>,
    machine: Option<MachineCheck<'_>>,
    d: &Diagnostic,
) -> Vec<Diagnostic> {
    if d.fix.is_empty() {
        return Vec::new();
    }
    let mut doc = args.normalized().0.into_owned().to_json();
    if apply_fix(&mut doc, &d.fix).is_err() {
        return Vec::new();
    }
    let Ok(one) = ServeArgs::from_json(doc) else {
        return Vec::new();
    };
    resolve_checked(&one, hw, None, machine).map_or_else(|_| Vec::new(), |(r, _, _)| r.errors)
}

/// `args` with every error's fix of `report` applied in order; None when
/// there is nothing to apply or the result is not serve args.
pub(crate) fn fixed_args(args: &ServeArgs, report: &Report) -> Option<ServeArgs> {
    if report.errors.iter().all(|e| e.fix.is_empty()) {
        return None;
    }
    let mut doc = args.normalized().0.into_owned().to_json();
    apply_all(&mut doc, &report.errors).ok()?;
    ServeArgs::from_json(doc).ok()
}
