//! HiSparse settings written in a wrong but recognisable place: a
//! `host_pool_gib` on the MultiConnector, in `hisparse_config`, beside
//! `kv_connector`, in another connector's `kv_connector_extra_config` or under
//! a misspelled key (`host_pool_gb`); a `device_buffer_size` or
//! `eager_host_mirror` on the HiSparseConnector instead of in `hisparse_config`.
//!
//! vLLM 0.33 reads `host_pool_gib` only from the HiSparseConnector's
//! `kv_connector_extra_config` (`vllm/config/kv_transfer.py:16-47`,
//! `hisparse_host_pool_gib`) and the other two only from
//! `attention_config.hisparse_config`. Elsewhere it rejects the key (a config
//! class has no such field) or ignores it (extra configs are free dicts), so
//! the user's value is lost. Validation reports each one found here with a fix
//! that moves the user's value to where vLLM reads it, instead of "missing"
//! with a default.

use crate::engines::vllm_0_33::connectors::ConnectorTree;
use crate::engines::vllm_0_33::fixes::Lookup;
use crate::engines::vllm_0_33::schema::KV_TRANSFER_FIELDS;
use crate::path::{FieldPath, Seg};
use serde_json::Value;

pub(crate) use crate::engines::vllm_0_33::schema::{
    is_host_pool_key, DEVICE_BUFFER_SIZE, EAGER_HOST_MIRROR, HOST_POOL_GIB,
};

/// One setting found in the wrong place.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct Misplaced {
    /// The field it is meant to be: [`HOST_POOL_GIB`], [`DEVICE_BUFFER_SIZE`] or [`EAGER_HOST_MIRROR`].
    pub(crate) field: &'static str,
    /// Where the user wrote it.
    pub(crate) from: FieldPath,
    pub(crate) value: Value,
    /// vLLM rejects the key there (an unknown field of a config class);
    /// otherwise it silently ignores it.
    pub(crate) rejected: bool,
}

impl Misplaced {
    /// The key the user wrote (`host_pool_gb` for a misspelling).
    pub(crate) fn key(&self) -> &str {
        match self.from.0.last() {
            Some(Seg::Key(k)) => k,
            _ => self.field,
        }
    }

    /// How vLLM treats it where it is, for messages.
    pub(crate) fn fate(&self) -> &'static str {
        if self.rejected {
            "rejects it there (no such field)"
        } else {
            "ignores it there"
        }
    }
}

/// Every HiSparse setting in a wrong place, in document order: the connector
/// tree (each connector object and its `kv_connector_extra_config`), then
/// `attention_config` and its `hisparse_config`. `doc` is the normalized serve
/// args; `tree` its connector walk.
pub(crate) fn find(doc: &dyn Lookup, tree: &ConnectorTree) -> Vec<Misplaced> {
    let site = tree.sites.first().map(|s| &s.path);
    let mut found = Vec::new();
    let mut push = |field, from: FieldPath, value: &Value, rejected| {
        found.push(Misplaced {
            field,
            from,
            value: value.clone(),
            rejected,
        })
    };
    for node in &tree.nodes {
        let Some(Value::Object(obj)) = doc.at(node) else {
            continue;
        };
        let is_site = Some(node) == site;
        for (key, value) in obj {
            if KV_TRANSFER_FIELDS.contains(&key.as_str()) || key == "connectors" {
                continue;
            }
            if is_host_pool_key(key, is_site) {
                push(HOST_POOL_GIB, node.key(key), value, true);
            } else if is_site && (key == DEVICE_BUFFER_SIZE || key == EAGER_HOST_MIRROR) {
                let field = if key == DEVICE_BUFFER_SIZE {
                    DEVICE_BUFFER_SIZE
                } else {
                    EAGER_HOST_MIRROR
                };
                push(field, node.key(key), value, true);
            }
        }
        let extra_path = node.key("kv_connector_extra_config");
        let Some(Value::Object(extra)) = obj.get("kv_connector_extra_config") else {
            continue;
        };
        for (key, value) in extra {
            if is_site && key == HOST_POOL_GIB {
                continue; // the right place
            }
            if is_host_pool_key(key, is_site) {
                push(HOST_POOL_GIB, extra_path.key(key), value, false);
            } else if is_site && key == DEVICE_BUFFER_SIZE {
                push(DEVICE_BUFFER_SIZE, extra_path.key(key), value, false);
            } else if is_site && key == EAGER_HOST_MIRROR {
                push(EAGER_HOST_MIRROR, extra_path.key(key), value, false);
            }
        }
    }
    let attention = FieldPath::root("attention_config");
    if let Some(Value::Object(obj)) = doc.at(&attention) {
        for (key, value) in obj {
            if key == DEVICE_BUFFER_SIZE {
                push(DEVICE_BUFFER_SIZE, attention.key(key), value, true);
            } else if key == EAGER_HOST_MIRROR {
                push(EAGER_HOST_MIRROR, attention.key(key), value, true);
            } else if key != "hisparse_config" && is_host_pool_key(key, true) {
                push(HOST_POOL_GIB, attention.key(key), value, true);
            }
        }
        let hs = attention.key("hisparse_config");
        if let Some(Value::Object(obj)) = obj.get("hisparse_config") {
            for (key, value) in obj {
                if is_host_pool_key(key, true) {
                    push(HOST_POOL_GIB, hs.key(key), value, true);
                }
            }
        }
    }
    found
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engines::vllm_0_33::connectors::walk;
    use serde_json::json;

    fn found(doc: Value) -> Vec<(String, String, bool)> {
        let mut d = Vec::new();
        let tree = walk(&doc["kv_transfer_config"], &mut d);
        find(&doc, &tree)
            .into_iter()
            .map(|m| (m.field.to_owned(), m.from.to_string(), m.rejected))
            .collect()
    }

    #[test]
    fn finds_settings_in_wrong_places() {
        let doc = json!({
            "kv_transfer_config": {
                "kv_connector": "MultiConnector", "kv_role": "kv_both", "host_pool_gib": 1,
                "kv_connector_extra_config": {"host_pool_gib": 256, "connectors": [
                    {"kv_connector": "NixlConnector", "kv_role": "kv_consumer",
                     "kv_connector_extra_config": {"host_pool_gib": 2, "host_pool_gb": 3}},
                    {"kv_connector": "HiSparseConnector", "kv_role": "kv_both", "device_buffer_size": 8192,
                     "kv_connector_extra_config": {"host_pool_gb": 4, "eager_host_mirror": false}}]}},
            "attention_config": {"device_buffer_size": 6144,
                                 "hisparse_config": {"host_pool_gib": 5}}});
        let c = "kv_transfer_config.kv_connector_extra_config.connectors";
        assert_eq!(
            found(doc),
            vec![
                (
                    "host_pool_gib".into(),
                    "kv_transfer_config.host_pool_gib".into(),
                    true
                ),
                (
                    "host_pool_gib".into(),
                    "kv_transfer_config.kv_connector_extra_config.host_pool_gib".into(),
                    false
                ),
                // A misspelling is recognised only on the HiSparseConnector.
                (
                    "host_pool_gib".into(),
                    format!("{c}[0].kv_connector_extra_config.host_pool_gib"),
                    false
                ),
                (
                    "device_buffer_size".into(),
                    format!("{c}[1].device_buffer_size"),
                    true
                ),
                (
                    "host_pool_gib".into(),
                    format!("{c}[1].kv_connector_extra_config.host_pool_gb"),
                    false
                ),
                (
                    "eager_host_mirror".into(),
                    format!("{c}[1].kv_connector_extra_config.eager_host_mirror"),
                    false
                ),
                (
                    "device_buffer_size".into(),
                    "attention_config.device_buffer_size".into(),
                    true
                ),
                (
                    "host_pool_gib".into(),
                    "attention_config.hisparse_config.host_pool_gib".into(),
                    true
                ),
            ]
        );
    }

    #[test]
    fn the_right_place_is_not_misplaced() {
        let doc = json!({"kv_transfer_config": {"kv_connector": "HiSparseConnector", "kv_role": "kv_both",
            "kv_connector_extra_config": {"host_pool_gib": 64}}});
        assert!(found(doc).is_empty());
    }
}
