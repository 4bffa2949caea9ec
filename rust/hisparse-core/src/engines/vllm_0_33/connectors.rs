//! The `--kv-transfer-config` connector tree: validate every node and find
//! `HiSparseConnector` at any depth of nested `MultiConnector`s.
//!
//! vLLM 0.33.0's `KVTransferConfig.has_connector` looks one MultiConnector
//! level deep and crashes on malformed children; this walk is iterative (an
//! explicit stack, so hostile nesting cannot overflow it), bounded by
//! [`MAX_DEPTH`], and reports every problem with its exact path.

use crate::diagnostic::{Code, Diagnostic, FixOp};
use crate::engines::vllm_0_33::diagnostics::VllmDiagnostic;
use crate::engines::vllm_0_33::schema::is_host_pool_key;
use crate::engines::vllm_0_33::schema::{
    check_keys, closest, kind, lax_bool, lax_int, quoted, type_error, KNOWN_CONNECTORS, KV_ROLES,
    KV_TRANSFER_FIELDS, KV_TRANSFER_REMOVED,
};
use crate::engines::vllm_0_33::stages::VllmStage;
use crate::path::FieldPath;
use serde_json::{json, Map, Value};

/// Deepest MultiConnector nesting accepted (the top-level connector is depth
/// 0). Deeper trees get a `max_depth_exceeded` error instead of being walked.
pub const MAX_DEPTH: usize = 16;

pub const HISPARSE: &str = "HiSparseConnector";
pub const MULTI: &str = "MultiConnector";

/// A `HiSparseConnector` found in the tree.
#[derive(Clone, Debug, PartialEq)]
pub struct HiSparseSite {
    /// Path of the connector object, e.g. `kv_transfer_config.kv_connector_extra_config.connectors[1]`.
    pub path: FieldPath,
    /// Its `kv_connector_extra_config.host_pool_gib`, as written.
    pub host_pool_gib: Option<Value>,
    /// A `host_pool_gib` under a misspelled key of this connector (its
    /// `unknown_key` error carries the fix), so "missing" would mislead.
    pub host_pool_misplaced: bool,
    /// Fix operations that remove this connector and leave a valid tree
    /// (a MultiConnector left without children is removed too).
    pub removal: Vec<FixOp>,
}

/// What the walk learned.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct ConnectorTree {
    /// Every HiSparseConnector, in document order.
    pub sites: Vec<HiSparseSite>,
    /// The top-level `kv_connector`, when it is a string.
    pub top_connector: Option<String>,
    /// Every connector that is not a MultiConnector, in document order.
    pub leaves: Vec<Leaf>,
    /// MultiConnectors with `connectors: []`: vLLM starts with them but turns
    /// the hybrid KV cache manager off.
    pub empty_multis: Vec<Leaf>,
    /// Path of every connector object walked (MultiConnectors too), in document order.
    pub nodes: Vec<FieldPath>,
}

/// A connector that is not a MultiConnector (what vLLM instantiates).
#[derive(Clone, Debug, PartialEq)]
pub struct Leaf {
    pub path: FieldPath,
    pub name: String,
    /// Loaded from `kv_connector_module_path`, so its capabilities are unknown.
    pub custom_module: bool,
    /// Fix operations that remove it and leave a valid tree.
    pub removal: Vec<FixOp>,
}

/// Registered connectors that do not implement `SupportsHMA` (vLLM 0.33
/// `KVConnectorFactory.supports_hma_config`): with one of them anywhere in the
/// tree, vLLM turns the hybrid KV cache manager off, which HiSparse needs.
pub const CONNECTORS_WITHOUT_HMA: &[&str] = &[
    "ExampleConnector",
    "LMCacheConnectorV1",
    "LMCacheMPConnector",
    "FlexKVConnectorV1",
    "HF3FSKVConnector",
];

struct Node<'a> {
    value: &'a Value,
    path: FieldPath,
    depth: usize,
    /// Role of the closest ancestor that has one (a child without a role inherits nothing in
    /// vLLM, but it is the best fix to suggest).
    parent_role: Option<String>,
    /// Whether any ancestor is a `kv_producer`.
    under_producer: bool,
    /// Path whose removal deletes this node without leaving an empty MultiConnector.
    removal: FieldPath,
}

/// Walk `kv_transfer_config`, pushing diagnostics for every malformed node.
pub fn walk(root: &Value, out: &mut Vec<Diagnostic>) -> ConnectorTree {
    let mut tree = ConnectorTree::default();
    // The top-level MultiConnector's children list (path, length): where a
    // too-deep HiSparseConnector should move to.
    let (mut stack, mut top_list) = roots(root, &mut tree, out);
    let mut depth_reported = false;
    while let Some(node) = stack.pop() {
        let Value::Object(obj) = node.value else {
            not_object(&node, out);
            continue;
        };
        tree.nodes.push(node.path.clone());
        let role = check_fields(obj, &node, out);
        let connector = node_connector(obj);
        let is_producer = node.under_producer || role.as_deref() == Some("kv_producer");
        let extra = obj
            .get("kv_connector_extra_config")
            .and_then(Value::as_object);
        let extra_path = node.path.key("kv_connector_extra_config");

        if node.depth == 0 && connector == Some(MULTI) {
            top_list = top_children(obj, &node.path);
        }
        if let Some(name) = connector.filter(|c| *c != MULTI) {
            push_leaf(&mut tree, obj, &node, name);
        }
        if connector == Some(HISPARSE) {
            let site = site(
                top_list.as_ref(),
                &node,
                extra,
                role.as_deref(),
                is_producer,
                out,
            );
            tree.sites.push(site);
        }

        let (children, children_path, misspelled_list) =
            children(obj, &node.path, extra, &extra_path, connector, out);
        if connector != Some(MULTI) {
            if let Some(d) = children_ignored(obj, &node.path, children, &children_path, connector)
            {
                out.push(d);
            }
            continue;
        }
        if let Some(key) = misspelled_list {
            out.extend(misspelled_list_error(
                &node,
                &extra_path,
                &children_path,
                key,
            ));
        }
        let items = match children {
            Some(Value::Array(items)) if !items.is_empty() => items,
            Some(Value::Array(_)) | None => {
                no_children(&node, extra, &children_path, &mut tree, out);
                continue;
            }
            Some(other) => {
                let parent_role = role.clone().or_else(|| node.parent_role.clone());
                if let Some(child) =
                    not_a_list(&node, &children_path, other, parent_role, is_producer, out)
                {
                    stack.push(child);
                }
                continue;
            }
        };
        if node.depth + 1 > MAX_DEPTH {
            if !depth_reported {
                depth_reported = true;
                out.push(max_depth_exceeded(&children_path));
            }
            continue;
        }
        push_children(&mut stack, items, &children_path, &node, &role, is_producer);
    }
    report_multiple(&tree.sites, out);
    tree
}

/// The connector a node names: a name under a misspelled key counts, and a
/// misspelled HiSparseConnector is read as one.
fn node_connector(obj: &Map<String, Value>) -> Option<&str> {
    // A name under a misspelled key (its missing_kv_connector or unknown_key
    // error renames the key) counts, so a HiSparseConnector stays one.
    let connector = obj
        .get("kv_connector")
        .and_then(Value::as_str)
        .or_else(|| misspelled_connector(obj).map(|(_, name)| name));
    // A misspelled HiSparseConnector (its unknown_connector error carries the
    // fix) is validated as HiSparse, so every error shows up in one pass.
    match connector {
        Some(name) if is_hisparse_typo(name) => Some(HISPARSE),
        other => other,
    }
}

/// Records a node that names a connector other than MultiConnector as a leaf.
fn push_leaf(tree: &mut ConnectorTree, obj: &Map<String, Value>, node: &Node, name: &str) {
    let custom_module = obj
        .get("kv_connector_module_path")
        .and_then(Value::as_str)
        .is_some_and(|m| !m.is_empty());
    tree.leaves.push(Leaf {
        path: node.path.clone(),
        name: name.to_owned(),
        custom_module,
        removal: vec![FixOp::Remove {
            path: node.removal.clone(),
        }],
    });
}

/// MultiConnectors nested deeper than [`MAX_DEPTH`] (reported once).
fn max_depth_exceeded(children_path: &FieldPath) -> Diagnostic {
    Diagnostic::error(
        Code::MaxDepthExceeded,
        children_path.clone(),
        format!("MultiConnectors are nested more than {MAX_DEPTH} levels deep here"),
    )
    .allowed(format!("at most {MAX_DEPTH} levels of MultiConnector nesting"))
    .hint("flatten the tree: put the child connectors directly into the top-level MultiConnector's connectors list")
}

/// Pushes a MultiConnector's children onto the walk's stack.
fn push_children<'a>(
    stack: &mut Vec<Node<'a>>,
    items: &'a [Value],
    children_path: &FieldPath,
    node: &Node,
    role: &Option<String>,
    is_producer: bool,
) {
    // Reverse so children pop (and are reported) in document order.
    for (i, child) in items.iter().enumerate().rev() {
        let child_path = children_path.index(i);
        stack.push(Node {
            value: child,
            removal: if items.len() > 1 {
                child_path.clone()
            } else {
                node.removal.clone()
            },
            path: child_path,
            depth: node.depth + 1,
            parent_role: role.clone().or_else(|| node.parent_role.clone()),
            under_producer: is_producer,
        });
    }
}
/// A connector that is not a MultiConnector but lists children: vLLM
/// ignores them (a warning, whose fix makes it a MultiConnector).
fn children_ignored(
    obj: &Map<String, Value>,
    path: &FieldPath,
    children: Option<&Value>,
    children_path: &FieldPath,
    connector: Option<&str>,
) -> Option<Diagnostic> {
    if let (Some(Value::Array(items)), Some(name)) = (children, connector) {
        if !items.is_empty() && obj.get("connectors").is_none() {
            return Some(
                Diagnostic::warning(
                    Code::ConnectorsKeyIgnored,
                    children_path.clone(),
                    format!(
                        "{name} is not a MultiConnector, so vLLM ignores its {} child connectors",
                        items.len()
                    ),
                )
                .hint(format!(
                    "set {} to \"{MULTI}\" to use them",
                    path.key("kv_connector")
                )),
            );
        }
    }
    None
}

/// A MultiConnector whose only list is under a misspelled key: the error
/// that renames it, and vLLM's crash without it.
fn misspelled_list_error(
    node: &Node<'_>,
    extra_path: &FieldPath,
    children_path: &FieldPath,
    key: &str,
) -> [Diagnostic; 2] {
    let connectors = extra_path.key("connectors");
    let error = Diagnostic::error(
            Code::EmptyMultiConnector,
            connectors.clone(),
            format!("the MultiConnector at {} has no connectors list, but a {key} list, which vLLM does not read", node.path),
        )
        .allowed("a list of connector objects under connectors")
        .hint(format!("{children_path} reads as a misspelling of connectors: rename it to {connectors}, keeping its connectors"))
        .fix(vec![FixOp::Move {
            from: children_path.clone(),
            to: connectors.clone(),
        }]);
    let crash = vllm_crash(
        &connectors,
        "AssertionError (MultiConnector asserts a connectors list) when it creates the connectors, after the model has loaded",
    ).stage(VllmStage::Workers);
    [error, crash]
}

/// Children that are not a list: a connector object meant as the one child
/// (its fix wraps it in a list; returned, to be checked where it is), or
/// anything else, which is no child.
fn not_a_list<'a>(
    node: &Node<'_>,
    children_path: &FieldPath,
    children: &'a Value,
    parent_role: Option<String>,
    is_producer: bool,
    out: &mut Vec<Diagnostic>,
) -> Option<Node<'a>> {
    if let obj @ Value::Object(one) = children {
        let d = type_error(children_path, "a list of connector objects", obj);
        // A connector object is meant as the one child (checked where it
        // is, since the fix moves it into a list); anything else is no child.
        if one.get("kv_connector").is_some_and(Value::is_string) {
            out.push(
                d.hint(format!(
                    "wrap the single connector in a list: {children_path} = [{{...}}]"
                ))
                .fix(vec![FixOp::Move {
                    from: children_path.clone(),
                    to: children_path.index(0),
                }]),
            );
            if node.depth < MAX_DEPTH {
                return Some(Node {
                    value: obj,
                    path: children_path.clone(),
                    depth: node.depth + 1,
                    parent_role,
                    under_producer: is_producer,
                    removal: node.removal.clone(),
                });
            }
        } else {
            out.push(
                d.hint("it is not a connector object either: remove the MultiConnector, or list its connectors")
                    .fix(vec![FixOp::Remove { path: node.removal.clone() }]),
            );
        }
        return None;
    }
    let other = children;
    let d = Diagnostic::error(
        Code::ConnectorsNotList,
        children_path.clone(),
        format!(
            "{children_path} must be a list of connector objects, got {}",
            kind(other)
        ),
    )
    .given(other)
    .allowed("a non-empty list of connector objects")
    .hint(
        "write the child connectors as a JSON list of objects, each with kv_connector and kv_role",
    );
    out.push(d);
    if node.depth == 0 && other.is_null() {
        out.push(vllm_crash(
            children_path,
            "TypeError (it iterates over null)",
        ));
    }
    None
}

/// The walk's first nodes, and the top-level children list (path, length):
/// the top-level object, or a top-level list's items (its fix wraps the list
/// in a MultiConnector, so they are checked as its children, where they are).
fn roots<'a>(
    root: &'a Value,
    tree: &mut ConnectorTree,
    out: &mut Vec<Diagnostic>,
) -> (Vec<Node<'a>>, Option<(FieldPath, usize)>) {
    let top = FieldPath::root("kv_transfer_config");
    let mut top_list: Option<(FieldPath, usize)> = None;
    let mut stack = Vec::new();
    if let Value::Array(items) = root {
        // Its fix wraps the list in a MultiConnector: check the items as its
        // children, where they are, so every error shows up in one pass.
        out.push(top_level_list(&top, root, items));
        top_list = Some((top.clone(), items.len()));
        for (i, child) in items.iter().enumerate().rev() {
            stack.push(Node {
                value: child,
                path: top.index(i),
                depth: 1,
                parent_role: None,
                under_producer: false,
                removal: if items.len() > 1 {
                    top.index(i)
                } else {
                    top.clone()
                },
            });
        }
    } else {
        if let Some(name) = root.get("kv_connector").and_then(Value::as_str) {
            tree.top_connector = Some(name.to_owned());
        }
        stack.push(Node {
            value: root,
            path: top.clone(),
            depth: 0,
            parent_role: None,
            under_producer: false,
            removal: top,
        });
    }
    (stack, top_list)
}

/// Where a node's children are read from: the list, its path, and the
/// misspelled key (`conectors`) it is under when that is the list meant.
fn children<'a>(
    obj: &'a Map<String, Value>,
    path: &FieldPath,
    extra: Option<&'a Map<String, Value>>,
    extra_path: &FieldPath,
    connector: Option<&str>,
    out: &mut Vec<Diagnostic>,
) -> (Option<&'a Value>, FieldPath, Option<&'a str>) {
    let mut misspelled_list = None;
    // A list under a misspelled key (`conectors`): vLLM reads none of it.
    let misspelled = extra
        .filter(|_| connector == Some(MULTI))
        .and_then(misspelled_children);
    let listed = extra.and_then(|e| e.get("connectors"));
    // No connectors list (vLLM asserts one), but a list under the
    // misspelled key: those are the children meant, walked where they
    // are; the rename below is their fix.
    let meant = misspelled.filter(|_| obj.get("connectors").is_none() && listed.is_none());
    let (children, children_path) = match (meant, listed, obj.get("connectors")) {
        (Some((key, list)), _, _) => {
            misspelled_list = Some(key);
            (Some(list), extra_path.key(key))
        }
        // An empty list beside misplaced children: the misplaced_connectors
        // fix moves them in, so they are the children.
        (None, Some(Value::Array(c)), Some(m)) if c.is_empty() => (Some(m), path.key("connectors")),
        (None, Some(c), _) => {
            // Beside a connectors list (even `[]`, which vLLM starts
            // with): vLLM ignores the misspelled ones.
            if let (Some((key, list)), true) = (misspelled, c.is_array()) {
                out.push(ignored_children(extra_path, key, list));
            }
            (Some(c), extra_path.key("connectors"))
        }
        // Misplaced `connectors` (reported by check_fields): walk them where they are.
        (None, None, Some(c)) => (Some(c), path.key("connectors")),
        (None, None, None) => (None, extra_path.key("connectors")),
    };
    (children, children_path, misspelled_list)
}

/// A MultiConnector without children: `connectors: []` starts (a warning,
/// and the tree remembers it), no list at all is an error.
fn no_children(
    node: &Node<'_>,
    extra: Option<&Map<String, Value>>,
    children_path: &FieldPath,
    tree: &mut ConnectorTree,
    out: &mut Vec<Diagnostic>,
) {
    let hint = format!(
        "list the connectors in {children_path}, e.g. [{{\"kv_connector\": \"{HISPARSE}\", \"kv_role\": \"kv_both\", \"kv_connector_extra_config\": {{\"host_pool_gib\": 64}}}}], or remove the MultiConnector"
    );
    let removal = vec![FixOp::Remove {
        path: node.removal.clone(),
    }];
    // What vLLM reads is kv_connector_extra_config.connectors (a
    // misplaced list beside it is reported by check_fields).
    if extra.is_some_and(|e| e.contains_key("connectors")) {
        // connectors: [] starts: a MultiConnector that moves nothing,
        // and without the hybrid KV cache manager (vLLM 0.33
        // MultiConnector.all_children_support_hma is False for no children).
        out.push(
            Diagnostic::warning(
                Code::EmptyMultiConnector,
                children_path.clone(),
                format!("the MultiConnector at {} has no child connectors: vLLM {} starts with it, transfers no KV, and turns the hybrid KV cache manager off", node.path, crate::engines::vllm_0_33::VERSION),
            )
            .hint(hint)
            .fix(removal.clone()),
        );
        tree.empty_multis.push(Leaf {
            path: node.path.clone(),
            name: MULTI.to_owned(),
            custom_module: false,
            removal,
        });
    } else {
        out.push(
            Diagnostic::error(
                Code::EmptyMultiConnector,
                children_path.clone(),
                format!("the MultiConnector at {} has no connectors list", node.path),
            )
            .allowed("a list of connector objects")
            .hint(hint)
            .fix(removal),
        );
        out.push(vllm_crash(
            children_path,
            "AssertionError (MultiConnector asserts a connectors list) when it creates the connectors, after the model has loaded",
        ).stage(VllmStage::Workers));
    }
}

/// vLLM 0.33 `KVTransferConfig.has_connector` (vllm/config/kv_transfer.py:148):
/// the top-level connector, or a direct child of a top-level MultiConnector.
pub fn vllm_has_connector(root: &Value, name: &str) -> bool {
    let named = |v: &Value| v.get("kv_connector").and_then(Value::as_str) == Some(name);
    named(root)
        || (root.get("kv_connector").and_then(Value::as_str) == Some(MULTI)
            && root
                .get("kv_connector_extra_config")
                .and_then(|e| e.get("connectors"))
                .and_then(Value::as_array)
                .is_some_and(|children| children.iter().any(named)))
}

fn top_level_list(top: &FieldPath, root: &Value, items: &[Value]) -> Diagnostic {
    let roles: Vec<&str> = items
        .iter()
        .filter_map(|c| c.get("kv_role").and_then(Value::as_str))
        .collect();
    let role = match roles.first() {
        Some(first) if roles.iter().all(|r| r == first) && KV_ROLES.contains(first) => *first,
        _ => "kv_both",
    };
    let wrapped = json!({
        "kv_connector": MULTI,
        "kv_role": role,
        "kv_connector_extra_config": {"connectors": root},
    });
    // The list moves (so other fixes of its items stay in it), then the
    // MultiConnector's own fields; an empty list is no connector at all.
    let fix = if items.is_empty() {
        vec![FixOp::Remove { path: top.clone() }]
    } else {
        vec![
            FixOp::Move {
                from: top.clone(),
                to: top.key("kv_connector_extra_config").key("connectors"),
            },
            FixOp::Set {
                path: top.key("kv_connector"),
                value: json!(MULTI),
            },
            FixOp::Set {
                path: top.key("kv_role"),
                value: json!(role),
            },
        ]
    };
    Diagnostic::error(
        Code::ConnectorsListAtTopLevel,
        top.clone(),
        "kv_transfer_config is a JSON list, but it must be one connector object; several connectors go inside a MultiConnector",
    )
    .given(root)
    .allowed("an object such as {\"kv_connector\": \"MultiConnector\", \"kv_role\": ..., \"kv_connector_extra_config\": {\"connectors\": [...]}}")
    .hint(format!("wrap the list in a MultiConnector: --kv-transfer-config '{wrapped}'"))
    .fix(fix)
}

fn not_object(node: &Node<'_>, out: &mut Vec<Diagnostic>) {
    if node.depth == 0 {
        out.push(type_error(&node.path, "an object", node.value));
        return;
    }
    // A bare connector name ("NixlConnector") is most likely meant as that connector.
    let fix = match node
        .value
        .as_str()
        .and_then(|n| closest(n, KNOWN_CONNECTORS))
    {
        Some(name) => FixOp::Set {
            path: node.path.clone(),
            value: json!({"kv_connector": name, "kv_role": suggested_role(Some(name), node)}),
        },
        None => FixOp::Remove {
            path: node.removal.clone(),
        },
    };
    out.push(
        Diagnostic::error(
            Code::ConnectorNotObject,
            node.path.clone(),
            format!(
                "{} must be a connector object, got {}",
                node.path,
                kind(node.value)
            ),
        )
        .given(node.value)
        .allowed("an object with kv_connector and kv_role")
        .fix(vec![fix]),
    );
    if node.depth == 1 {
        out.push(vllm_crash(
            &node.path,
            "AttributeError (KVTransferConfig.has_connector calls .get on each child)",
        ));
    }
}

/// vLLM 0.33.0 crashes on this input instead of reporting it.
fn vllm_crash(path: &FieldPath, how: &str) -> Diagnostic {
    Diagnostic::warning(
        Code::Vllm033Crash,
        path.clone(),
        format!(
            "vLLM {} does not report this: it raises {how} at start-up",
            crate::engines::vllm_0_33::VERSION
        ),
    )
}

/// Check one connector object's own fields; returns its valid `kv_role`.
fn check_fields(
    obj: &Map<String, Value>,
    node: &Node<'_>,
    out: &mut Vec<Diagnostic>,
) -> Option<String> {
    let path = &node.path;
    misplaced_connectors(obj, path, out);
    check_keys(
        obj,
        KV_TRANSFER_FIELDS,
        KV_TRANSFER_REMOVED,
        "KVTransferConfig",
        path,
        out,
    );

    let connector = connector_name(obj, path, out);
    let module_path = module_path(obj, path, out);
    if let (Some(name), None) = (connector, module_path) {
        if !KNOWN_CONNECTORS.contains(&name) {
            out.push(unknown_connector(path, name));
        }
    }
    let misspelled = misspelled_connector(obj);
    if node.depth > 0
        && connector.is_none()
        && !matches!(obj.get("kv_connector"), Some(v) if !v.is_null())
    {
        out.push(missing_connector(
            path,
            node,
            misspelled,
            module_path.is_some(),
        ));
    }
    // The name under a misspelled key is the connector the fixes give.
    let connector = connector.or(misspelled.map(|(_, name)| name));

    let role = role(obj, path, connector, node, out);
    if connector.is_some() && obj.get("kv_role").is_none_or(Value::is_null) {
        out.push(missing_role(path, connector, node));
    }

    other_fields(obj, path, node, out);
    role
}

/// Child connectors written directly in a connector, not in its
/// kv_connector_extra_config (the fix moves them there).
fn misplaced_connectors(obj: &Map<String, Value>, path: &FieldPath, out: &mut Vec<Diagnostic>) {
    if let Some(misplaced) = obj.get("connectors") {
        let to = path.key("kv_connector_extra_config").key("connectors");
        out.push(
            Diagnostic::error(
                Code::MisplacedConnectors,
                path.key("connectors"),
                format!("child connectors belong in {to}, not directly in {path}"),
            )
            .given(misplaced)
            .allowed(format!(
                "connectors inside {}",
                path.key("kv_connector_extra_config")
            ))
            .fix(vec![FixOp::Move {
                from: path.key("connectors"),
                to,
            }]),
        );
    }
}

/// The connector's `kv_connector`, when it is a string.
fn connector_name<'a>(
    obj: &'a Map<String, Value>,
    path: &FieldPath,
    out: &mut Vec<Diagnostic>,
) -> Option<&'a str> {
    match obj.get("kv_connector") {
        None | Some(Value::Null) => None,
        Some(Value::String(s)) => Some(s.as_str()),
        Some(other) => {
            out.push(type_error(&path.key("kv_connector"), "a string", other));
            None
        }
    }
}

/// The connector's `kv_connector_module_path`, when it is a non-empty string.
fn module_path<'a>(
    obj: &'a Map<String, Value>,
    path: &FieldPath,
    out: &mut Vec<Diagnostic>,
) -> Option<&'a str> {
    match obj.get("kv_connector_module_path") {
        None | Some(Value::Null) => None,
        Some(Value::String(s)) if s.is_empty() => {
            out.push(
                Diagnostic::error(
                    Code::InvalidValue,
                    path.key("kv_connector_module_path"),
                    "kv_connector_module_path cannot be an empty string",
                )
                .given(&json!(""))
                .allowed("a Python module path, or null")
                .fix(vec![FixOp::Remove {
                    path: path.key("kv_connector_module_path"),
                }]),
            );
            None
        }
        Some(Value::String(s)) => Some(s.as_str()),
        Some(other) => {
            out.push(type_error(
                &path.key("kv_connector_module_path"),
                "a string or null",
                other,
            ));
            None
        }
    }
}

/// A connector name vLLM does not register, with the closest one as its fix.
fn unknown_connector(path: &FieldPath, name: &str) -> Diagnostic {
    let at = path.key("kv_connector");
    let mut d = Diagnostic::error(
        Code::UnknownConnector,
        at.clone(),
        format!(
            "\"{name}\" is not a connector vLLM {} knows",
            crate::engines::vllm_0_33::VERSION
        ),
    )
    .given(&json!(name))
    .allowed(format!(
        "one of {}, or set kv_connector_module_path",
        quoted(KNOWN_CONNECTORS)
    ));
    if let Some(best) = closest(name, KNOWN_CONNECTORS) {
        d = d
            .hint(format!("did you mean \"{best}\"? set {at} to \"{best}\""))
            .fix(vec![FixOp::Set {
                path: at,
                value: json!(best),
            }]);
    } else {
        d = d.hint("use a registered connector name, or point kv_connector_module_path at the module that defines it");
    }
    d
}

/// The connector's `kv_role`, when it is one vLLM accepts.
fn role(
    obj: &Map<String, Value>,
    path: &FieldPath,
    connector: Option<&str>,
    node: &Node<'_>,
    out: &mut Vec<Diagnostic>,
) -> Option<String> {
    match obj.get("kv_role") {
        None | Some(Value::Null) => None,
        Some(Value::String(s)) if KV_ROLES.contains(&s.as_str()) => Some(s.clone()),
        Some(other) => {
            let at = path.key("kv_role");
            let mut d = match other {
                Value::String(s) => Diagnostic::error(
                    Code::InvalidValue,
                    at.clone(),
                    format!("Unsupported kv_role \"{s}\""),
                )
                .given(other),
                _ => type_error(&at, "a string", other),
            }
            .allowed(format!("one of {}", quoted(KV_ROLES)));
            let best = other
                .as_str()
                .and_then(|s| closest(s, KV_ROLES))
                .unwrap_or_else(|| suggested_role(connector, node));
            d = d.fix(vec![FixOp::Set {
                path: at,
                value: json!(best),
            }]);
            out.push(d);
            None
        }
    }
}

/// A connector with no kv_role (the fix sets the role its place suggests).
fn missing_role(path: &FieldPath, connector: Option<&str>, node: &Node<'_>) -> Diagnostic {
    let at = path.key("kv_role");
    let role = suggested_role(connector, node);
    Diagnostic::error(
        Code::MissingKvRole,
        at.clone(),
        format!("kv_role is required when kv_connector is set ({path} has none)"),
    )
    .allowed(format!("one of {}", quoted(KV_ROLES)))
    .hint(format!(
        "set {at} to \"{role}\" ({})",
        role_reason(connector, node)
    ))
    .fix(vec![FixOp::Set {
        path: at,
        value: json!(role),
    }])
}

/// engine_id on a child connector (vLLM crashes creating the connectors),
/// and the types of the connector's other fields.
fn other_fields(
    obj: &Map<String, Value>,
    path: &FieldPath,
    node: &Node<'_>,
    out: &mut Vec<Diagnostic>,
) {
    let child_engine_id = node.depth > 0 && obj.contains_key("engine_id");
    if child_engine_id {
        let at = path.key("engine_id");
        out.push(
            Diagnostic::error(
                Code::InvalidValue,
                at.clone(),
                "a child connector cannot set engine_id: the MultiConnector gives every child its own engine_id",
            )
            .given(&obj["engine_id"])
            .allowed("no engine_id in child connectors (set it on the top-level kv_transfer_config)")
            .stage(VllmStage::Workers)
            .fix(vec![FixOp::Remove { path: at.clone() }]),
        );
        out.push(vllm_crash(
            &at,
            "TypeError (KVTransferConfig() got multiple values for keyword argument 'engine_id', in MultiConnector._get_connector_classes_and_configs) when it creates the connectors, after the model has loaded",
        ).stage(VllmStage::Workers));
    }
    for (field, check) in [
        ("engine_id", FieldKind::OptStr),
        ("kv_buffer_device", FieldKind::Str),
        ("kv_port", FieldKind::Int),
        ("enable_permute_local_kv", FieldKind::Bool),
        ("kv_load_failure_policy", FieldKind::Policy),
        ("kv_connector_extra_config", FieldKind::Dict),
    ] {
        if field == "engine_id" && child_engine_id {
            continue;
        }
        if let Some(v) = obj.get(field) {
            if let Some(d) = check.check(&path.key(field), v) {
                out.push(d);
            }
        }
    }
}

fn is_hisparse_typo(name: &str) -> bool {
    !KNOWN_CONNECTORS.contains(&name) && closest(name, KNOWN_CONNECTORS) == Some(HISPARSE)
}

/// Connectors under a misspelled key (`conectors`) beside a MultiConnector's
/// `connectors` list: vLLM reads only the latter. The fix moves them in
/// (lists concatenate); a warning, as vLLM starts without them.
fn ignored_children(extra_path: &FieldPath, key: &str, list: &Value) -> Diagnostic {
    let from = extra_path.key(key);
    let to = extra_path.key("connectors");
    let n = list.as_array().map_or(0, Vec::len);
    let names: Vec<&str> = list
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|c| c.get("kv_connector").and_then(Value::as_str))
        .collect();
    Diagnostic::warning(
        Code::UnknownKey,
        from.clone(),
        format!(
            "{from} reads as a misspelling of connectors: vLLM reads only {to}, and starts without the {n} connector{} in {key} ({})",
            if n == 1 { "" } else { "s" },
            if names.is_empty() { "unnamed".to_owned() } else { names.join(", ") }
        ),
    )
    .hint(format!("move them into {to}"))
    // Without the list, the MultiConnector fails when the connectors are built.
    .stage(VllmStage::Workers)
    .fix(vec![FixOp::Move { from, to }])
}

/// A MultiConnector's children written under a misspelled key
/// (`conectors`) of an extra config that has no `connectors`: the key and
/// the list.
fn misspelled_children(extra: &Map<String, Value>) -> Option<(&str, &Value)> {
    extra
        .iter()
        .find(|(key, value)| {
            value.as_array().is_some_and(|l| !l.is_empty())
                && key.as_str() != "connectors"
                && closest(key, &["connectors"]).is_some()
        })
        .map(|(key, value)| (key.as_str(), value))
}

/// A `kv_connector` written under a misspelled key (`kv_conector`) of a
/// connector that has none: the key and the name it holds.
fn misspelled_connector(obj: &Map<String, Value>) -> Option<(&str, &str)> {
    if obj.get("kv_connector").is_some_and(|v| !v.is_null()) {
        return None;
    }
    obj.iter().find_map(|(key, value)| {
        let misspelled = key != "connectors"
            && !KV_TRANSFER_FIELDS.contains(&key.as_str())
            && !KV_TRANSFER_REMOVED.contains(&key.as_str())
            && closest(key, KV_TRANSFER_FIELDS) == Some("kv_connector");
        Some((key.as_str(), value.as_str().filter(|_| misspelled)?))
    })
}

/// A child connector without a kv_connector. Under a misspelled key, the fix
/// renames the key, keeping the user's name (or the registered one it is a
/// misspelling of) and everything else; otherwise it removes the entry.
fn missing_connector(
    path: &FieldPath,
    node: &Node<'_>,
    misspelled: Option<(&str, &str)>,
    custom_module: bool,
) -> Diagnostic {
    let at = path.key("kv_connector");
    let mut d = Diagnostic::error(
        Code::MissingKvConnector,
        at.clone(),
        match misspelled {
            Some((key, _)) => {
                format!("the child connector at {path} has no kv_connector, but a {key}")
            }
            None => format!("the child connector at {path} has no kv_connector"),
        },
    )
    .allowed(format!("one of {}", quoted(KNOWN_CONNECTORS)));
    if let Some((_, name)) = misspelled {
        d = d.given(&json!(name));
    }
    let renamed = misspelled.and_then(|(key, name)| {
        let from = path.key(key);
        let rename = FixOp::Move {
            from: from.clone(),
            to: at.clone(),
        };
        if custom_module || KNOWN_CONNECTORS.contains(&name) {
            return Some((
                format!("{from} reads as a misspelling of kv_connector: rename it to {at}, keeping \"{name}\""),
                vec![rename],
            ));
        }
        let best = closest(name, KNOWN_CONNECTORS)?;
        Some((
            format!("{from} reads as a misspelling of kv_connector, and \"{name}\" as one of \"{best}\": rename it to {at} and set it to \"{best}\""),
            vec![
                rename,
                FixOp::Set {
                    path: at.clone(),
                    value: json!(best),
                },
            ],
        ))
    });
    match renamed {
        Some((hint, fix)) => d.hint(hint).fix(fix),
        None => d
            .hint(format!(
                "name the connector in {at} (e.g. \"NixlConnector\"), or remove the entry"
            ))
            .fix(vec![FixOp::Remove {
                path: node.removal.clone(),
            }]),
    }
}

/// Why [`suggested_role`] picks its role, in words for the fix.
fn role_reason(connector: Option<&str>, node: &Node<'_>) -> String {
    if connector == Some(HISPARSE) {
        return "HiSparseConnector both spills to and loads from the host pool".to_owned();
    }
    match node.parent_role.as_deref() {
        Some(r @ ("kv_producer" | "kv_consumer")) => format!("the MultiConnector's role, {r}"),
        _ => "no role is given here or on a MultiConnector above, so the fix takes kv_both, which sends and receives KV; on a P/D decode node set kv_consumer instead, on a P/D prefill node kv_producer".to_owned(),
    }
}

fn suggested_role(connector: Option<&str>, node: &Node<'_>) -> &'static str {
    if connector == Some(HISPARSE) {
        return "kv_both";
    }
    match node.parent_role.as_deref() {
        Some("kv_producer") => "kv_producer",
        Some("kv_consumer") => "kv_consumer",
        _ => "kv_both",
    }
}

#[derive(Clone, Copy)]
enum FieldKind {
    OptStr,
    Str,
    Int,
    Bool,
    Policy,
    Dict,
}

impl FieldKind {
    fn check(self, path: &FieldPath, v: &Value) -> Option<Diagnostic> {
        let ok = match self {
            FieldKind::OptStr => v.is_null() || v.is_string(),
            FieldKind::Str => v.is_string(),
            FieldKind::Int => lax_int(v).is_some(),
            FieldKind::Bool => lax_bool(v).is_some(),
            FieldKind::Dict => v.is_object(),
            FieldKind::Policy => {
                return match v.as_str() {
                    Some("recompute" | "fail") => None,
                    _ => Some(
                        Diagnostic::error(
                            Code::InvalidValue,
                            path.clone(),
                            format!("{path} must be \"recompute\" or \"fail\""),
                        )
                        .given(v)
                        .allowed("\"recompute\" or \"fail\"")
                        .fix(vec![FixOp::Set {
                            path: path.clone(),
                            value: json!("fail"),
                        }]),
                    ),
                };
            }
        };
        if ok {
            return None;
        }
        let expected = match self {
            FieldKind::OptStr => "a string or null",
            FieldKind::Str => "a string",
            FieldKind::Int => "an integer",
            FieldKind::Bool => "a boolean",
            FieldKind::Dict => "an object",
            FieldKind::Policy => unreachable!(),
        };
        Some(
            type_error(path, expected, v)
                .hint(format!("give {path} as {expected}, or remove it"))
                .fix(vec![FixOp::Remove { path: path.clone() }]),
        )
    }
}

fn site(
    top_list: Option<&(FieldPath, usize)>,
    node: &Node<'_>,
    extra: Option<&Map<String, Value>>,
    role: Option<&str>,
    under_producer: bool,
    out: &mut Vec<Diagnostic>,
) -> HiSparseSite {
    if under_producer {
        out.push(
            Diagnostic::warning(
                Code::KvProducerRole,
                node.path.clone(),
                "this HiSparseConnector sits in a kv_producer instance: a prefill-only instance does not decode, so the host pool and hot buffers are allocated but never used",
            )
            .hint("use HiSparse on decode (kv_consumer) or kv_both instances"),
        );
    } else if let Some(r) = role.filter(|r| *r != "kv_both") {
        out.push(
            Diagnostic::warning(
                Code::HiSparseRoleNotKvBoth,
                node.path.key("kv_role"),
                format!("HiSparseConnector is normally kv_role \"kv_both\" (it both spills to and loads from the host pool); here it is \"{r}\""),
            )
            .given(&json!(r))
            .fix(vec![FixOp::Set { path: node.path.key("kv_role"), value: json!("kv_both") }]),
        );
    }
    if node.depth >= 2 {
        let mut d = Diagnostic::error(
            Code::HiSparseConnectorTooDeep,
            node.path.clone(),
            format!(
                "this HiSparseConnector is {} MultiConnector levels deep, but vLLM {v} looks only one level deep: it neither infers hisparse_config from it nor finds its host_pool_gib (hisparse_host_pool_gib), so start-up fails, with or without an explicit hisparse_config",
                node.depth,
                v = crate::engines::vllm_0_33::VERSION
            ),
        )
        .allowed("a HiSparseConnector at the top level or directly in the top-level MultiConnector's connectors");
        if let Some((list, len)) = top_list {
            let mut ops = vec![FixOp::Move {
                from: node.path.clone(),
                to: list.index(*len),
            }];
            // An only child leaves its MultiConnector empty: remove what it
            // left (below the top level, which receives the connector).
            if node.removal != node.path {
                let left = if node.removal.0.len() > list.0.len() {
                    node.removal.clone()
                } else {
                    FieldPath(node.path.0[..=list.0.len()].to_vec())
                };
                ops.push(FixOp::Remove { path: left });
            }
            d = d
                .hint(format!(
                    "move it into the top-level MultiConnector: {}",
                    list.index(*len)
                ))
                .fix(ops);
        }
        out.push(d);
    }
    HiSparseSite {
        path: node.path.clone(),
        host_pool_gib: extra.and_then(|e| e.get("host_pool_gib")).cloned(),
        host_pool_misplaced: misplaced_host_pool(node),
        removal: vec![FixOp::Remove {
            path: node.removal.clone(),
        }],
    }
}

/// The path and length of a top-level MultiConnector's children list; None
/// when it is there but not a list (nothing can move into it).
fn top_children(obj: &Map<String, Value>, path: &FieldPath) -> Option<(FieldPath, usize)> {
    let in_extra = obj
        .get("kv_connector_extra_config")
        .and_then(|e| e.get("connectors"));
    let (list, at) = match (in_extra, obj.get("connectors")) {
        (Some(l), _) => (l, path.key("kv_connector_extra_config").key("connectors")),
        (None, Some(l)) => (l, path.key("connectors")),
        (None, None) => (
            &Value::Null,
            path.key("kv_connector_extra_config").key("connectors"),
        ),
    };
    match list {
        Value::Null => Some((at, 0)),
        Value::Array(items) => Some((at, items.len())),
        _ => None,
    }
}

/// Whether an unknown key of this connector holds an object with
/// `host_pool_gib`, or a misspelling of it (`kv_extra_config`,
/// `{"kv_conector_extra_config": {"host_pool_gb": 64}}`): the user's value
/// exists, just in the wrong place. Its `unknown_key` fix moves the object,
/// and the joint pass renames a misspelled key inside it.
fn misplaced_host_pool(node: &Node<'_>) -> bool {
    node.value.as_object().is_some_and(|obj| {
        obj.iter().any(|(k, v)| {
            !KV_TRANSFER_FIELDS.contains(&k.as_str())
                && v.as_object()
                    .is_some_and(|o| o.keys().any(|key| is_host_pool_key(key, true)))
        })
    })
}

impl HiSparseSite {
    /// Path of this connector's `host_pool_gib`.
    pub fn host_pool_path(&self) -> FieldPath {
        self.path
            .key("kv_connector_extra_config")
            .key("host_pool_gib")
    }
}

fn report_multiple(sites: &[HiSparseSite], out: &mut Vec<Diagnostic>) {
    let Some(first) = sites.first() else {
        return;
    };
    for extra in &sites[1..] {
        out.push(
            Diagnostic::error(
                Code::MultipleHiSparseConnectors,
                extra.path.clone(),
                format!(
                    "only one HiSparseConnector may be configured; the first is at {}",
                    first.path
                ),
            )
            .allowed("exactly one HiSparseConnector")
            .hint(format!("remove the HiSparseConnector at {}", extra.path))
            .fix(extra.removal.clone()),
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hint_at(tree: &Value, path: &str) -> String {
        let mut out = Vec::new();
        walk(tree, &mut out);
        let d = out
            .iter()
            .find(|d| d.code == Code::MissingKvRole && d.path.to_string() == path)
            .unwrap_or_else(|| panic!("no missing_kv_role at {path}: {out:?}"));
        d.hint.clone().unwrap()
    }

    #[test]
    fn a_missing_role_without_one_above_says_why_kv_both_and_what_pd_wants() {
        // Trial finding 10: no role on the MultiConnector nor on the Nixl child.
        let tree = json!({"kv_connector": "MultiConnector", "kv_connector_extra_config": {"connectors": [
            {"kv_connector": "NixlConnector"},
            {"kv_connector": "HiSparseConnector", "kv_role": "kv_both"}]}});
        for path in [
            "kv_transfer_config.kv_role",
            "kv_transfer_config.kv_connector_extra_config.connectors[0].kv_role",
        ] {
            let hint = hint_at(&tree, path);
            assert!(
                hint.contains("\"kv_both\"")
                    && hint.contains("decode node set kv_consumer")
                    && hint.contains("prefill node kv_producer"),
                "{path}: {hint}"
            );
        }
        // With the MultiConnector's role, the child takes it, and says so.
        let tree = json!({"kv_connector": "MultiConnector", "kv_role": "kv_consumer", "kv_connector_extra_config": {"connectors": [
            {"kv_connector": "NixlConnector"}]}});
        let hint = hint_at(
            &tree,
            "kv_transfer_config.kv_connector_extra_config.connectors[0].kv_role",
        );
        assert!(
            hint.contains("\"kv_consumer\" (the MultiConnector's role"),
            "{hint}"
        );
    }
}
