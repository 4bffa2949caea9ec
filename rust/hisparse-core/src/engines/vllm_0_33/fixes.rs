//! The fixes of one report, made to work together: each error's fix passes
//! when applied alone, and applying every error's fix, one after another in
//! report order, passes too.
//!
//! Each fix is written against the configuration as given, so it works alone.
//! Applied in sequence, fixes could disturb each other: removing a list item
//! shifts the paths of the items after it, removing a wrong value (`"x"` where
//! an object belongs) after another fix wrote into it would delete that write,
//! and two fixes could remove the same connector. [`settle`] merges and orders
//! the errors of a report:
//!
//! 1. an `unknown_key` whose value another error's fix moves or removes (the
//!    `host_pool_gib` that `host_pool_gib_misplaced` moves) is that error's;
//!    it is dropped, so each value is reported once;
//! 2. an error whose list-item removals and moves another error's fix also
//!    does (removing the second HiSparseConnector, when another fix removes
//!    both) keeps its message, loses its fix, and its hint names the fix that
//!    covers it;
//! 3. order: fixes that remove a value at an object key (a reset) first; then
//!    fixes that set values, by path; then fixes that remove list items or
//!    move values, from the last place in the document to the first, so no
//!    path a later fix names has shifted; errors without a fix last.
//!
//! Settling reads and edits diagnostics only; the joint pass that re-runs
//! resolution on the fixed configuration is [`super::advise`], above it.

use crate::diagnostic::{apply_fix, Code, Diagnostic, FixOp};
use crate::engines::vllm_0_33::args::ServeArgs;
use crate::path::{FieldPath, Seg};
use serde_json::Value;
use std::cmp::Ordering;

/// Merge and order the errors of one report (see the module docs). `doc` is
/// the JSON form of the serve args the fixes apply to.
pub(crate) fn settle(errors: &mut Vec<Diagnostic>, doc: &dyn Lookup) {
    // 1. A value reported by two errors belongs to the one that moves it.
    drop_taken_unknown_keys(errors);
    drop_sets_of_moved(errors);
    hisparse_takes_removed_top(errors);
    settle_inside_replaced(errors);

    // 2. One structural edit, one error.
    settle_filled_multis(errors, doc);
    remove_only_unwritten(errors, doc);
    settle_covered(errors);

    // 2c. A MultiConnector whose children the fixes remove together (each
    // removal alone leaves a sibling) is removed by the last of them.
    empty_together(errors, doc);

    // 2d. A fix that only edits inside what another fix removes whole is
    // settled by that removal (a top-level list the fixes empty is not wrapped
    // in a MultiConnector afterwards; a count is not set in a
    // speculative_config another fix removes).
    within_removed(errors, doc);

    // 3. Resets, then sets, then structural edits from the back; no fix last.
    // Turning HiSparse off comes with the structural edits, after any set.
    let class = |d: &Diagnostic| match class(&d.fix) {
        Class::Reset | Class::Set if turns_off(d.code) => Class::Structural,
        c => c,
    };
    errors.sort_by(|a, b| {
        let (ca, cb) = (class(a), class(b));
        ca.cmp(&cb).then_with(|| match ca {
            Class::Reset | Class::Set => cmp_paths(first_path(&a.fix), first_path(&b.fix)),
            Class::Structural => cmp_paths(anchor(&b.fix, doc), anchor(&a.fix, doc)),
            Class::None => Ordering::Equal,
        })
    });
}

/// An unknown_key error whose value another fix removes or moves is that fix's.
fn drop_taken_unknown_keys(errors: &mut Vec<Diagnostic>) {
    let taken: Vec<(usize, FieldPath)> = errors
        .iter()
        .enumerate()
        .flat_map(|(i, d)| {
            d.fix.iter().filter_map(move |op| match op {
                FixOp::Remove { path } => Some((i, path.clone())),
                FixOp::Move { from, .. } => Some((i, from.clone())),
                FixOp::Set { .. } => None,
            })
        })
        .collect();
    let mut index = 0;
    errors.retain(|d| {
        let me = index;
        index += 1;
        !(d.code == Code::UnknownKey && taken.iter().any(|(i, p)| *i != me && *p == d.path))
    });
}

/// A value set where another fix moves the user's own value (a missing
/// kv_role beside a misspelled `kv_rol: kv_consumer`, a missing host_pool_gib
/// held in an unknown key) is that move's: the
/// move keeps what the user wrote, so the report tells one story.
fn drop_sets_of_moved(errors: &mut Vec<Diagnostic>) {
    let moved_to: Vec<(usize, FieldPath)> = errors
        .iter()
        .enumerate()
        .flat_map(|(i, d)| {
            d.fix.iter().filter_map(move |op| match op {
                FixOp::Move { to, .. } => Some((i, to.clone())),
                _ => None,
            })
        })
        .collect();
    let mut index = 0;
    errors.retain(|d| {
        let me = index;
        index += 1;
        let sets_moved = |op: &FixOp| {
            matches!(op, FixOp::Set { path, .. } if moved_to.iter().any(|(i, to)| *i != me && to == path))
        };
        !(matches!(d.code, Code::MissingKvRole | Code::HostPoolGibMissing)
            && !d.fix.is_empty()
            && d.fix.iter().all(sets_moved))
    });
}

/// A HiSparseConnector added beside the connectors another fix removes
/// whole (an ExampleConnector without HMA support, wrapped to make room
/// for it) takes their place instead: the removal would take it too.
fn hisparse_takes_removed_top(errors: &mut [Diagnostic]) {
    let top = FieldPath::root("kv_transfer_config");
    let removes_top = errors.iter().any(|d| {
        d.fix
            .iter()
            .any(|op| matches!(op, FixOp::Remove { path } if *path == top))
    });
    if removes_top {
        for d in errors.iter_mut() {
            if d.code != Code::HiSparseWithoutConnector
                || !d
                    .fix
                    .iter()
                    .any(|op| matches!(op, FixOp::Move { from, .. } if *from == top))
            {
                continue;
            }
            let child = d.fix.iter().find_map(|op| match op {
                FixOp::Set { path, value }
                    if matches!(path.0.last(), Some(Seg::Index(_)))
                        && value.get("kv_connector").and_then(Value::as_str)
                            == Some("HiSparseConnector") =>
                {
                    Some(value.clone())
                }
                _ => None,
            });
            if let Some(child) = child {
                d.fix = vec![FixOp::Set {
                    path: top.clone(),
                    value: child,
                }];
                d.hint = Some(format!(
                    "{}; with the other fixes of this report, which remove the connectors there, it is the only connector",
                    super::diagnostics::describe_fix(&d.fix)
                ));
            }
        }
    }
}

/// A value another fix replaces whole (an empty `connectors: {}` the fix of
/// hisparse_without_connector fills, a connector object it replaces) settles
/// the errors inside it: their edits name what is no longer there.
fn settle_inside_replaced(errors: &mut [Diagnostic]) {
    let replaced: Vec<(usize, FieldPath)> = errors
        .iter()
        .enumerate()
        .flat_map(|(i, d)| {
            d.fix.iter().filter_map(move |op| match op {
                FixOp::Set { path, value } if value.is_object() || value.is_array() => {
                    Some((i, path.clone()))
                }
                _ => None,
            })
        })
        .collect();
    for (me, d) in errors.iter_mut().enumerate() {
        let inside = |p: &FieldPath, r: &FieldPath| p.0.starts_with(&r.0);
        let by = replaced.iter().find(|(i, r)| {
            *i != me
                && !d.fix.is_empty()
                && inside(&d.path, r)
                && d.fix.iter().all(|op| match op {
                    FixOp::Set { path, .. } => inside(path, r),
                    // Removing what holds the replaced value would remove the new one too.
                    FixOp::Remove { path } => inside(path, r) || inside(r, path),
                    FixOp::Move { from, to } => inside(from, r) && inside(to, r),
                })
        });
        if let Some((_, r)) = by {
            d.hint = Some(format!(
                "{}; with the other fixes of this report, the value set at {r} replaces it",
                d.hint.as_deref().unwrap_or("see below")
            ));
            d.fix.clear();
        }
    }
}

/// An empty MultiConnector that another fix adds a child to is that fix's:
/// it is not empty after it (and, with a child that supports it, keeps the
/// hybrid KV cache manager on).
fn settle_filled_multis(errors: &mut [Diagnostic], doc: &dyn Lookup) {
    let filled: Vec<bool> = errors
        .iter()
        .enumerate()
        .map(|(i, d)| {
            let multi = match d.code {
                Code::EmptyMultiConnector => multi_of(&d.path),
                // connectors: [] (validate's check_hma): reported at M.kv_connector.
                Code::ConnectorWithoutHma
                    if doc.at(&d.path).and_then(Value::as_str) == Some("MultiConnector") =>
                {
                    d.path.parent()
                }
                _ => return false,
            };
            let lists = [
                multi.key("kv_connector_extra_config").key("connectors"),
                multi.key("connectors"),
            ];
            errors.iter().enumerate().any(|(j, other)| {
                j != i
                    && other
                        .fix
                        .iter()
                        .filter_map(|op| adds_connectors(op, doc))
                        .any(|path| lists.iter().any(|l| path.0.starts_with(&l.0)))
            })
        })
        .collect();
    for (d, filled) in errors.iter_mut().zip(filled) {
        if filled {
            d.fix.clear();
            d.hint = Some("another fix of this report adds a connector to it".to_owned());
        }
    }
}

/// A connector that is an only child is removed with its parent (so no
/// MultiConnector is left empty); when another fix adds a child to that
/// parent, remove only the part of the chain nothing is written into.
fn remove_only_unwritten(errors: &mut [Diagnostic], doc: &dyn Lookup) {
    // (where from, where to): a move that adds what is already inside does not add.
    let adds: Vec<(Option<FieldPath>, FieldPath)> = errors
        .iter()
        .flat_map(|d| &d.fix)
        .filter_map(|op| {
            let to = adds_connectors(op, doc)?.clone();
            let from = match op {
                FixOp::Move { from, .. } => Some(from.clone()),
                _ => None,
            };
            Some((from, to))
        })
        .collect();
    for d in errors.iter_mut() {
        let [FixOp::Remove { path: removed }] = d.fix.as_slice() else {
            continue;
        };
        // The list items on the way from the removed connector down to this one.
        let items: Vec<FieldPath> = (removed.0.len() + 1..=d.path.0.len())
            .map(|n| FieldPath(d.path.0[..n].to_vec()))
            .filter(|p| matches!(p.0.last(), Some(Seg::Index(_))))
            .collect();
        let into = |p: &FieldPath| {
            adds.iter().any(|(from, w)| {
                w.0.starts_with(&p.0) && !from.as_ref().is_some_and(|f| f.0.starts_with(&p.0))
            })
        };
        if items.is_empty() || !into(removed) {
            continue;
        }
        if let Some(part) = items.into_iter().find(|p| !into(p)) {
            d.fix = vec![FixOp::Remove { path: part }];
        }
    }
}

/// Two fixes that edit the same structure: one gives way (the removal that
/// turns HiSparse off decides; else the one with fewer edits).
fn settle_covered(errors: &mut [Diagnostic]) {
    let anchors: Vec<Vec<FieldPath>> = errors.iter().map(|d| structural(&d.fix)).collect();
    let mut covered_by: Vec<Option<usize>> = vec![None; errors.len()];
    for x in 0..errors.len() {
        for y in 0..errors.len() {
            if x == y || anchors[x].is_empty() || covered_by[y].is_some() {
                continue;
            }
            let shared = anchors[x].iter().any(|a| anchors[y].contains(a));
            // Moving a connector out of what another fix removes is moot: the
            // removal decides (turning HiSparse off beats moving its connector).
            let moot = moves(&errors[x].fix)
                .any(|m| removes(&errors[y].fix).any(|r| m.0.starts_with(&r.0)));
            // Otherwise the error with fewer edits (structural, then all; on a
            // tie, the later one) gives way.
            let size = |i: usize| (anchors[i].len(), errors[i].fix.len());
            let yields = size(x) < size(y) || (size(x) == size(y) && x > y);
            let moot_back = moves(&errors[y].fix)
                .any(|m| removes(&errors[x].fix).any(|r| m.0.starts_with(&r.0)));
            // Turning HiSparse off decides over any other edit of its connectors.
            let (off_x, off_y) = (turns_off(errors[x].code), turns_off(errors[y].code));
            let yields = off_y || (yields && !off_x);
            if moot || (shared && yields && !moot_back) {
                covered_by[x] = Some(y);
                break;
            }
        }
    }
    let covering: Vec<Option<(Code, FieldPath)>> = covered_by
        .iter()
        .map(|c| c.map(|y| (errors[y].code, errors[y].path.clone())))
        .collect();
    for (d, cover) in errors.iter_mut().zip(covering) {
        if let Some((code, path)) = cover {
            d.fix.clear();
            d.hint = Some(format!(
                "{}; with the other fixes of this report, the fix of {} at {path} does it",
                d.hint.as_deref().unwrap_or("see below"),
                code.as_str()
            ));
        }
    }
}

/// The JSON form of `doc` with every error's fix applied in order.
pub(crate) fn apply_all(doc: &mut Value, errors: &[Diagnostic]) -> Result<(), String> {
    errors.iter().try_for_each(|d| apply_fix(doc, &d.fix))
}

/// Where `op` adds connectors: a list item it sets, or a children list it
/// moves a non-empty list into (`misplaced_connectors`).
fn adds_connectors<'a>(op: &'a FixOp, doc: &dyn Lookup) -> Option<&'a FieldPath> {
    let children = |p: &FieldPath| matches!(p.0.last(), Some(Seg::Key(k)) if k == "connectors");
    match op {
        FixOp::Set { path, .. } if matches!(path.0.last(), Some(Seg::Index(_))) => Some(path),
        FixOp::Set { path, value }
            if children(path) && value.as_array().is_some_and(|l| !l.is_empty()) =>
        {
            Some(path)
        }
        // A connector moved to the end of a list (too deep) adds to that list.
        FixOp::Move { to, .. } if matches!(to.0.last(), Some(Seg::Index(_))) => Some(to),
        FixOp::Move { from, to } if children(to) && !to.0.starts_with(&from.0) => doc
            .at(from)
            .and_then(Value::as_array)
            .is_some_and(|l| !l.is_empty())
            .then_some(to),
        _ => None,
    }
}

/// Where fixes read values: the serve args (their JSON fields, without
/// copying them: a value can be nested deeper than a copy could recurse), or
/// a JSON document.
pub(crate) trait Lookup {
    fn at(&self, path: &FieldPath) -> Option<&Value>;
}

fn walk<'a>(v: &'a Value, segs: &[Seg]) -> Option<&'a Value> {
    segs.iter().try_fold(v, |v, seg| match seg {
        Seg::Key(k) => v.get(k.as_str()),
        Seg::Index(i) => v.get(*i),
    })
}

impl Lookup for Value {
    fn at(&self, path: &FieldPath) -> Option<&Value> {
        walk(self, &path.0)
    }
}

impl Lookup for ServeArgs {
    fn at(&self, path: &FieldPath) -> Option<&Value> {
        let (Seg::Key(first), rest) = path.0.split_first()? else {
            return None;
        };
        let field = self
            .json_fields()
            .into_iter()
            .find(|(name, _)| name == first)?
            .1;
        walk(field.as_ref()?, rest)
    }
}

/// The MultiConnector whose children list `list` is (`M.kv_connector_extra_config.connectors`
/// or, misplaced, `M.connectors`).
fn multi_of(list: &FieldPath) -> FieldPath {
    let up = list.parent();
    match up.0.last() {
        Some(Seg::Key(k)) if k == "kv_connector_extra_config" => up.parent(),
        _ => up,
    }
}

/// Nesting up to which the joint pass copies the JSON fields (real serve
/// configurations nest under 10 levels; copies and edits of JSON recurse).
const JOINT_MAX_NESTING: usize = 64;

/// Whether every JSON field nests at most [`JOINT_MAX_NESTING`] levels
/// (measured without recursion).
pub(crate) fn shallow(args: &ServeArgs) -> bool {
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

#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
enum Class {
    Reset,
    Set,
    Structural,
    None,
}

/// Removing a connector (the top-level one, or a list item) shifts or drops
/// what other fixes name; removing any other value only resets it.
fn removes_structure(path: &FieldPath) -> bool {
    matches!(path.0.last(), Some(Seg::Index(_)))
        || matches!(path.0.as_slice(), [Seg::Key(k)] if k == "kv_transfer_config")
}

fn class(fix: &[FixOp]) -> Class {
    fix.iter()
        .map(|op| match op {
            FixOp::Remove { path } if removes_structure(path) => Class::Structural,
            FixOp::Remove { .. } => Class::Reset,
            FixOp::Set { .. } => Class::Set,
            FixOp::Move { .. } => Class::Structural,
        })
        .max()
        .unwrap_or(Class::None)
}

/// Errors whose fix turns HiSparse off (the model cannot use it).
fn turns_off(code: Code) -> bool {
    matches!(
        code,
        Code::ModelNotDsa | Code::DeepseekV4Unsupported | Code::IndexTopkTooLarge
    )
}

/// See step 2d of [`settle`]. Removing a connector settles what is inside it;
/// removing a whole object (turning a feature off: `speculative_config` for a
/// model without MTP layers) makes sets inside it moot, which would bring it
/// back without its other fields. Removing any other value only resets it for
/// the sets inside (`"x"` where an object belongs).
fn within_removed(errors: &mut [Diagnostic], doc: &dyn Lookup) {
    let under = |p: &FieldPath, r: &FieldPath| p.0.starts_with(&r.0);
    let ops_paths = |op: &FixOp| match op {
        FixOp::Set { path, .. } | FixOp::Remove { path } => vec![path.clone()],
        FixOp::Move { from, to } => vec![from.clone(), to.clone()],
    };
    let covered: Vec<Option<(Code, FieldPath)>> = (0..errors.len())
        .map(|y| {
            let fix = &errors[y].fix;
            // What a fix moves out of a removed value before the removal goes
            // with it: an error inside it is not settled (a HiSparseConnector
            // moved up out of a nested MultiConnector still needs its kv_role).
            let moved_out = |r: &FieldPath| {
                errors.iter().flat_map(|e| &e.fix).any(|op| {
                    matches!(op, FixOp::Move { from, .. }
                        if from.0.len() > r.0.len() && under(from, r) && under(&errors[y].path, from))
                })
            };
            let settled_by = |r: &FieldPath| {
                if fix.is_empty() || moved_out(r) {
                    return false;
                }
                if removes_structure(r) {
                    return under(&errors[y].path, r)
                        && fix.iter().flat_map(ops_paths).all(|p| under(&p, r));
                }
                doc.at(r).is_some_and(Value::is_object)
                    && fix.iter().all(|op| {
                        matches!(op, FixOp::Set { path, .. } if path.0.len() > r.0.len() && under(path, r))
                    })
            };
            errors.iter().enumerate().find_map(|(x, e)| {
                let r = e.fix.iter().find_map(|op| match op {
                    FixOp::Remove { path } if x != y && settled_by(path) => Some(path),
                    _ => None,
                })?;
                Some((e.code, r.clone()))
            })
        })
        .collect();
    for (d, cover) in errors.iter_mut().zip(covered) {
        if let Some((code, removed)) = cover {
            d.fix.clear();
            d.hint = Some(format!(
                "{}; with the other fixes of this report, the fix of {} removes {removed}, which settles this",
                d.hint.as_deref().unwrap_or("see below"),
                code.as_str()
            ));
        }
    }
    // A fix that also sets values inside an object another fix removes whole
    // (a num_speculative_tokens in the speculative_config an invalid value
    // removes) would bring it back without its other fields: together, those
    // sets are left out (the removal settles what they did).
    let objects: Vec<(usize, FieldPath)> = errors
        .iter()
        .enumerate()
        .flat_map(|(x, e)| {
            e.fix.iter().filter_map(move |op| match op {
                FixOp::Remove { path }
                    if !removes_structure(path) && doc.at(path).is_some_and(Value::is_object) =>
                {
                    Some((x, path.clone()))
                }
                _ => None,
            })
        })
        .collect();
    for (y, d) in errors.iter_mut().enumerate() {
        let inside = |op: &FixOp| {
            objects.iter().find(|(x, r)| {
                *x != y
                    && matches!(op, FixOp::Set { path, .. } if path.0.len() > r.0.len() && under(path, r))
            })
        };
        let Some((_, removed)) = d.fix.iter().find_map(inside) else {
            continue;
        };
        let removed = removed.clone();
        if d.fix.iter().all(|op| inside(op).is_some()) {
            continue; // settled whole above
        }
        d.fix.retain(|op| inside(op).is_none());
        d.hint = Some(format!(
            "{}; with the other fixes of this report, which remove {removed}, only {}",
            d.hint.as_deref().unwrap_or("apply the fix"),
            super::diagnostics::describe_fix(&d.fix)
        ));
    }
}

/// See step 2c of [`settle`]. Repeats while a removal empties the list above.
fn empty_together(errors: &mut [Diagnostic], doc: &dyn Lookup) {
    // Bounded: each round adds a removal one level up the tree.
    for _ in 0..crate::engines::vllm_0_33::connectors::MAX_DEPTH + 2 {
        let gone = gone_paths(errors);
        let added = added_connectors(errors, doc);
        let Some(multi) = emptied(doc, &gone, &added) else {
            return;
        };
        let removal = removal_of(doc, &multi, &added);
        let Some(owner) = removal_owner(errors, doc, &multi, &removal) else {
            return;
        };
        errors[owner].fix.push(FixOp::Remove { path: removal });
    }
}

/// The structures the fixes remove or move a list item out of.
fn gone_paths(errors: &[Diagnostic]) -> Vec<FieldPath> {
    errors
        .iter()
        .flat_map(|d| &d.fix)
        .filter_map(|op| match op {
            FixOp::Remove { path } if removes_structure(path) => Some(path.clone()),
            FixOp::Move { from, .. } if matches!(from.0.last(), Some(Seg::Index(_))) => {
                Some(from.clone())
            }
            _ => None,
        })
        .collect()
}

/// Where the fixes add connectors: (where from, for a move; where to).
fn added_connectors<'a>(
    errors: &'a [Diagnostic],
    doc: &dyn Lookup,
) -> Vec<(Option<&'a FieldPath>, &'a FieldPath)> {
    errors
        .iter()
        .flat_map(|d| &d.fix)
        .filter_map(|op| {
            let to = adds_connectors(op, doc)?;
            let from = match op {
                FixOp::Move { from, .. } => Some(from),
                _ => None,
            };
            Some((from, to))
        })
        .collect()
}

/// The length of the list at `p` (0 when there is none).
fn list_len(doc: &dyn Lookup, p: &FieldPath) -> usize {
    doc.at(p).and_then(Value::as_array).map_or(0, Vec::len)
}

/// A connector's children lists (a top-level list is its own).
fn lists_of(doc: &dyn Lookup, m: &FieldPath) -> Vec<FieldPath> {
    if m.0.len() == 1 && doc.at(m).is_some_and(Value::is_array) {
        vec![m.clone()]
    } else {
        [
            m.key("kv_connector_extra_config").key("connectors"),
            m.key("connectors"),
        ]
        .to_vec()
    }
}

/// The connector a children list belongs to (a top-level list is its own).
fn owner_of(list: &FieldPath) -> FieldPath {
    if list.0.len() == 1 {
        list.clone()
    } else {
        multi_of(list)
    }
}

/// A MultiConnector (or top-level list) whose every child the fixes take,
/// which no fix gives a child and no fix removes whole.
fn emptied(
    doc: &dyn Lookup,
    gone: &[FieldPath],
    added: &[(Option<&FieldPath>, &FieldPath)],
) -> Option<FieldPath> {
    let len = |p: &FieldPath| list_len(doc, p);
    let lists_of = |m: &FieldPath| lists_of(doc, m);
    gone.iter().map(|p| owner_of(&p.parent())).find(|m| {
        let lists = lists_of(m);
        let within = |p: &FieldPath| lists.iter().any(|l| p.0.starts_with(&l.0));
        // Another fix gives it a child (not one of its own moved between its lists).
        let own = |p: &FieldPath| lists.contains(p) || lists.contains(&p.parent());
        if added
            .iter()
            .any(|(from, to)| within(to) && !from.is_some_and(own))
        {
            return false;
        }
        let total: usize = lists.iter().map(len).sum();
        let taken = lists
            .iter()
            .flat_map(|l| (0..len(l)).map(move |i| l.index(i)))
            .filter(|item| gone.iter().any(|g| item.0.starts_with(&g.0)))
            .count();
        total > 0 && taken == total && !gone.iter().any(|g| m.0.starts_with(&g.0))
    })
}

/// The removal of an emptied MultiConnector: itself if a sibling stays, else
/// its parent's, up the tree.
fn removal_of(
    doc: &dyn Lookup,
    multi: &FieldPath,
    added: &[(Option<&FieldPath>, &FieldPath)],
) -> FieldPath {
    let len = |p: &FieldPath| list_len(doc, p);
    let lists_of = |m: &FieldPath| lists_of(doc, m);
    let mut removal = multi.clone();
    while let Some((Seg::Index(_), list)) = removal.0.split_last() {
        let parent = owner_of(&FieldPath(list.to_vec()));
        let lists = lists_of(&parent);
        let siblings: usize = lists.iter().map(len).sum();
        let receives = added.iter().any(|(_, to)| {
            lists.iter().any(|l| to.0.starts_with(&l.0)) && !to.0.starts_with(&removal.0)
        });
        if siblings > 1 || receives {
            break;
        }
        removal = parent;
    }
    removal
}

/// The fix that takes the removal: among those that take a child of
/// `multi`, the last applied that keeps HiSparse on when applied alone.
fn removal_owner(
    errors: &[Diagnostic],
    doc: &dyn Lookup,
    multi: &FieldPath,
    removal: &FieldPath,
) -> Option<usize> {
    let lists_of = |m: &FieldPath| lists_of(doc, m);
    let lists = lists_of(multi);
    let owns = |d: &Diagnostic| {
        d.fix.iter().any(|op| match op {
            FixOp::Remove { path } | FixOp::Move { from: path, .. } => {
                lists.iter().any(|l| path.0.starts_with(&l.0))
            }
            FixOp::Set { .. } => false,
        })
    };
    // HiSparseConnectors the removal would take with it. Applied alone, the
    // owner's fix must not turn HiSparse off: each must be one it moves
    // out, or a second one another fix removes, or the owner turns it off.
    let sites = hisparse_paths(doc, removal);
    let extra_removed = |p: &FieldPath| {
        errors.iter().any(|d| {
            d.code == Code::MultipleHiSparseConnectors
                && removes(&d.fix).any(|r| p.0.starts_with(&r.0))
        })
    };
    let safe = |d: &Diagnostic| {
        turns_off(d.code)
            || sites
                .iter()
                .all(|site| moves(&d.fix).any(|m| site.0.starts_with(&m.0)) || extra_removed(site))
    };
    // The last applied: a fix that turns HiSparse off if one takes part,
    // else one that moves a connector out, else the one removing the first child.
    errors
        .iter()
        .enumerate()
        .filter(|(_, d)| owns(d) && safe(d))
        .min_by(|(_, a), (_, b)| {
            turns_off(b.code)
                .cmp(&turns_off(a.code))
                .then_with(|| moves(&b.fix).count().cmp(&moves(&a.fix).count()))
                .then_with(|| cmp_paths(anchor(&a.fix, doc), anchor(&b.fix, doc)))
        })
        .map(|(i, _)| i)
}

/// Paths of the HiSparseConnectors at or below `root` in `doc` (bounded by
/// the document, walked without recursion).
fn hisparse_paths(doc: &dyn Lookup, root: &FieldPath) -> Vec<FieldPath> {
    let mut found = Vec::new();
    let mut stack: Vec<(FieldPath, &Value)> = doc
        .at(root)
        .map(|v| (root.clone(), v))
        .into_iter()
        .collect();
    while let Some((path, v)) = stack.pop() {
        match v {
            Value::Object(obj) => {
                if obj.get("kv_connector").and_then(Value::as_str) == Some("HiSparseConnector") {
                    found.push(path.clone());
                }
                stack.extend(obj.iter().map(|(k, v)| (path.key(k), v)));
            }
            Value::Array(items) => {
                stack.extend(items.iter().enumerate().map(|(i, v)| (path.index(i), v)))
            }
            _ => {}
        }
    }
    found
}

/// The connectors a fix moves away (a value moved out first is kept).
fn moves(fix: &[FixOp]) -> impl Iterator<Item = &FieldPath> {
    fix.iter().filter_map(|op| match op {
        FixOp::Move { from, .. } if removes_structure(from) => Some(from),
        _ => None,
    })
}

/// The connectors a fix removes.
fn removes(fix: &[FixOp]) -> impl Iterator<Item = &FieldPath> {
    fix.iter().filter_map(|op| match op {
        FixOp::Remove { path } if removes_structure(path) => Some(path),
        _ => None,
    })
}

/// The list items a fix removes and the values it moves away.
fn structural(fix: &[FixOp]) -> Vec<FieldPath> {
    fix.iter()
        .filter_map(|op| match op {
            FixOp::Remove { path } if removes_structure(path) => Some(path.clone()),
            FixOp::Move { from, .. } => Some(from.clone()),
            _ => None,
        })
        .collect()
}

fn first_path(fix: &[FixOp]) -> Option<&FieldPath> {
    fix.first().map(|op| match op {
        FixOp::Set { path, .. } | FixOp::Remove { path } => path,
        FixOp::Move { from, .. } => from,
    })
}

/// The last place in the document a structural fix touches: what it removes
/// or moves away, and where it moves to unless that is an append at the end
/// of a list (an append is not shifted by removals before it).
fn anchor<'a>(fix: &'a [FixOp], doc: &dyn Lookup) -> Option<&'a FieldPath> {
    fix.iter()
        .flat_map(|op| match op {
            FixOp::Remove { path } => [Some(path), None],
            // Where a move lands counts only in another list item: keys do not shift.
            FixOp::Move { from, to } => {
                let parent = from.parent();
                let elsewhere = to.0.starts_with(&parent.0)
                    && to.0[parent.0.len()..]
                        .iter()
                        .any(|s| matches!(s, Seg::Index(_)))
                    || !to.0.starts_with(&parent.0)
                        && to.0.iter().any(|s| matches!(s, Seg::Index(_)));
                [Some(from), (elsewhere && !is_append(to, doc)).then_some(to)]
            }
            FixOp::Set { .. } => [None, None],
        })
        .flatten()
        .max_by(|a, b| cmp_paths(Some(a), Some(b)))
}

/// Whether `path` names the position just past the end of a list in `doc`.
fn is_append(path: &FieldPath, doc: &dyn Lookup) -> bool {
    let Some((Seg::Index(i), parent)) = path.0.split_last() else {
        return false;
    };
    doc.at(&FieldPath(parent.to_vec()))
        .and_then(Value::as_array)
        .is_some_and(|l| *i >= l.len())
}

/// Document order: keys by name, list items by index, a path before the
/// paths inside it.
fn cmp_paths(a: Option<&FieldPath>, b: Option<&FieldPath>) -> Ordering {
    let (Some(a), Some(b)) = (a, b) else {
        return a.is_some().cmp(&b.is_some());
    };
    for (x, y) in a.0.iter().zip(&b.0) {
        let o = match (x, y) {
            (Seg::Key(x), Seg::Key(y)) => x.cmp(y),
            (Seg::Index(x), Seg::Index(y)) => x.cmp(y),
            (Seg::Key(_), Seg::Index(_)) => Ordering::Less,
            (Seg::Index(_), Seg::Key(_)) => Ordering::Greater,
        };
        if o != Ordering::Equal {
            return o;
        }
    }
    a.0.len().cmp(&b.0.len())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engines::vllm_0_33::diagnostics::VllmDiagnostic;
    use serde_json::json;

    fn p(s: &str) -> FieldPath {
        FieldPath::parse(s).unwrap()
    }

    fn err(code: Code, path: &str, fix: Vec<FixOp>) -> Diagnostic {
        Diagnostic::error(code, p(path), "x").fix(fix)
    }

    #[test]
    fn list_removals_run_from_the_back_after_the_sets() {
        let doc = json!({"k": {"c": [{}, {}, {}]}});
        let mut errors = vec![
            err(
                Code::ConnectorNotObject,
                "k.c[0]",
                vec![FixOp::Remove { path: p("k.c[0]") }],
            ),
            err(
                Code::MissingKvRole,
                "k.c[1].kv_role",
                vec![FixOp::Set {
                    path: p("k.c[1].kv_role"),
                    value: json!("kv_both"),
                }],
            ),
            err(
                Code::ConnectorNotObject,
                "k.c[2]",
                vec![FixOp::Remove { path: p("k.c[2]") }],
            ),
            err(Code::ConnectorsNotList, "k.d", vec![]),
        ];
        settle(&mut errors, &doc);
        let order: Vec<String> = errors.iter().map(|e| e.path.to_string()).collect();
        assert_eq!(order, ["k.c[1].kv_role", "k.c[2]", "k.c[0]", "k.d"]);
        let mut fixed = doc.clone();
        apply_all(&mut fixed, &errors).unwrap();
        assert_eq!(fixed, json!({"k": {"c": [{"kv_role": "kv_both"}]}}));
    }

    #[test]
    fn a_removal_another_fix_also_does_is_covered_by_it() {
        let doc = json!({"k": {"c": [{}, {}, {}]}});
        let both = vec![
            FixOp::Remove { path: p("k.c[2]") },
            FixOp::Remove { path: p("k.c[0]") },
        ];
        let mut errors = vec![
            err(
                Code::MultipleHiSparseConnectors,
                "k.c[2]",
                vec![FixOp::Remove { path: p("k.c[2]") }],
            ),
            err(Code::ModelNotDsa, "model", both),
        ];
        settle(&mut errors, &doc);
        assert!(errors
            .iter()
            .find(|e| e.code == Code::MultipleHiSparseConnectors)
            .unwrap()
            .fix
            .is_empty());
        let mut fixed = doc.clone();
        apply_all(&mut fixed, &errors).unwrap();
        assert_eq!(fixed, json!({"k": {"c": [{}]}}));
    }

    #[test]
    fn a_top_level_list_the_fixes_empty_is_not_wrapped_afterwards() {
        // Both connectors removed (one turns HiSparse off, one lacks HMA support):
        // kv_transfer_config goes, and wrapping it in a MultiConnector is moot.
        let doc = json!({"kv_transfer_config": [{"kv_connector": "HiSparseConnector"}, {"kv_connector": "ExampleConnector"}]});
        let mut errors = vec![
            err(
                Code::ConnectorWithoutHma,
                "kv_transfer_config[1].kv_connector",
                vec![FixOp::Remove {
                    path: p("kv_transfer_config[1]"),
                }],
            ),
            err(
                Code::DeepseekV4Unsupported,
                "model",
                vec![FixOp::Remove {
                    path: p("kv_transfer_config[0]"),
                }],
            ),
            err(
                Code::ConnectorsListAtTopLevel,
                "kv_transfer_config",
                vec![
                    FixOp::Move {
                        from: p("kv_transfer_config"),
                        to: p("kv_transfer_config.kv_connector_extra_config.connectors"),
                    },
                    FixOp::Set {
                        path: p("kv_transfer_config.kv_connector"),
                        value: json!("MultiConnector"),
                    },
                ],
            ),
        ];
        settle(&mut errors, &doc);
        let mut fixed = doc.clone();
        apply_all(&mut fixed, &errors).unwrap();
        assert_eq!(fixed, json!({}));
        let wrap = errors
            .iter()
            .find(|e| e.code == Code::ConnectorsListAtTopLevel)
            .unwrap();
        assert!(
            wrap.fix.is_empty()
                && wrap
                    .hint
                    .as_deref()
                    .unwrap()
                    .contains("removes kv_transfer_config")
        );
    }

    #[test]
    fn a_reset_runs_before_the_sets_inside_it() {
        let doc = json!({"k": {"extra": "x"}});
        let mut errors = vec![
            err(
                Code::HostPoolGibMissing,
                "k.extra.host_pool_gib",
                vec![FixOp::Set {
                    path: p("k.extra.host_pool_gib"),
                    value: json!(8),
                }],
            ),
            err(
                Code::InvalidType,
                "k.extra",
                vec![FixOp::Remove { path: p("k.extra") }],
            ),
        ];
        settle(&mut errors, &doc);
        let mut fixed = doc.clone();
        apply_all(&mut fixed, &errors).unwrap();
        assert_eq!(fixed, json!({"k": {"extra": {"host_pool_gib": 8}}}));
    }

    #[test]
    fn an_unknown_key_whose_value_another_fix_moves_is_dropped() {
        let doc = json!({"a": {"host_pool_gib": 256}});
        let mut errors = vec![
            err(
                Code::UnknownKey,
                "a.host_pool_gib",
                vec![FixOp::Remove {
                    path: p("a.host_pool_gib"),
                }],
            ),
            err(
                Code::HostPoolGibMisplaced,
                "a.host_pool_gib",
                vec![FixOp::Move {
                    from: p("a.host_pool_gib"),
                    to: p("b.host_pool_gib"),
                }],
            ),
        ];
        settle(&mut errors, &doc);
        assert_eq!(errors.len(), 1);
        assert_eq!(errors[0].code, Code::HostPoolGibMisplaced);
    }
}
