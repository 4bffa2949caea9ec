//! Field paths such as `kv_transfer_config.kv_connector_extra_config.connectors[1].kv_role`.
//!
//! A path names a place in the JSON form of [`crate::ServeArgs`]; diagnostics
//! carry one and fixes edit the value found there.

use std::fmt;

/// One step of a [`FieldPath`]: an object key or a list index.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum Seg {
    Key(String),
    Index(usize),
}

/// A path into the serve configuration, printed in the dotted form users type.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
pub struct FieldPath(pub Vec<Seg>);

impl FieldPath {
    pub fn root(key: &str) -> Self {
        FieldPath(vec![Seg::Key(key.to_owned())])
    }

    /// This path extended by an object key.
    pub fn key(&self, key: &str) -> Self {
        let mut segs = self.0.clone();
        segs.push(Seg::Key(key.to_owned()));
        FieldPath(segs)
    }

    /// This path extended by a list index.
    pub fn index(&self, i: usize) -> Self {
        let mut segs = self.0.clone();
        segs.push(Seg::Index(i));
        FieldPath(segs)
    }

    /// The path without its last step (the empty path stays empty).
    pub fn parent(&self) -> Self {
        let mut segs = self.0.clone();
        segs.pop();
        FieldPath(segs)
    }

    /// Parse the printed form back. Keys that are not plain identifiers are
    /// written `["key"]` (JSON string syntax), so every path round-trips.
    pub fn parse(text: &str) -> Result<Self, String> {
        let mut segs = Vec::new();
        let bytes = text.as_bytes();
        let mut i = 0;
        while i < bytes.len() {
            match bytes[i] {
                b'.' if i > 0 => i += 1,
                b'[' => {
                    let close = find_bracket_end(text, i)?;
                    let inner = &text[i + 1..close];
                    if inner.starts_with('"') {
                        let key: String = serde_json::from_str(inner)
                            .map_err(|e| format!("bad quoted key in path {text:?}: {e}"))?;
                        segs.push(Seg::Key(key));
                    } else {
                        let idx = inner
                            .parse::<usize>()
                            .map_err(|_| format!("bad index {inner:?} in path {text:?}"))?;
                        segs.push(Seg::Index(idx));
                    }
                    i = close + 1;
                    continue;
                }
                _ => {}
            }
            if i >= bytes.len() {
                break;
            }
            let start = i;
            while i < bytes.len() && bytes[i] != b'.' && bytes[i] != b'[' {
                i += 1;
            }
            if start == i {
                return Err(format!("empty key in path {text:?}"));
            }
            segs.push(Seg::Key(text[start..i].to_owned()));
        }
        Ok(FieldPath(segs))
    }
}

fn find_bracket_end(text: &str, open: usize) -> Result<usize, String> {
    let bytes = text.as_bytes();
    let mut i = open + 1;
    let mut in_str = false;
    while i < bytes.len() {
        match bytes[i] {
            b'\\' if in_str => i += 1,
            b'"' => in_str = !in_str,
            b']' if !in_str => return Ok(i),
            _ => {}
        }
        i += 1;
    }
    Err(format!("unclosed '[' in path {text:?}"))
}

/// `[a-zA-Z_][a-zA-Z0-9_]*`: a shell variable name, a Prometheus label name.
pub fn is_identifier(name: &str) -> bool {
    let mut chars = name.chars();
    matches!(chars.next(), Some(c) if c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
}

fn is_plain_key(key: &str) -> bool {
    !key.is_empty()
        && key
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
}

impl fmt::Display for FieldPath {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (n, seg) in self.0.iter().enumerate() {
            match seg {
                Seg::Key(k) if is_plain_key(k) => {
                    if n > 0 {
                        f.write_str(".")?;
                    }
                    f.write_str(k)?;
                }
                Seg::Key(k) => write!(f, "[{}]", serde_json::Value::from(k.as_str()))?,
                Seg::Index(i) => write!(f, "[{i}]")?,
            }
        }
        Ok(())
    }
}

impl serde::Serialize for FieldPath {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

impl<'de> serde::Deserialize<'de> for FieldPath {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let text = String::deserialize(d)?;
        FieldPath::parse(&text).map_err(serde::de::Error::custom)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prints_and_parses() {
        let p = FieldPath::root("kv_transfer_config")
            .key("kv_connector_extra_config")
            .key("connectors")
            .index(1)
            .key("kv_role");
        let text = p.to_string();
        assert_eq!(
            text,
            "kv_transfer_config.kv_connector_extra_config.connectors[1].kv_role"
        );
        assert_eq!(FieldPath::parse(&text).unwrap(), p);
    }

    #[test]
    fn odd_keys_round_trip() {
        let p = FieldPath::root("hf_overrides")
            .key("a.b")
            .key("")
            .key("x[0]");
        let text = p.to_string();
        assert_eq!(FieldPath::parse(&text).unwrap(), p);
    }
}
