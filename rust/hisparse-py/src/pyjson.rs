//! Serve args given as Python objects -> the JSON form of `ServeArgs`,
//! bounded and without `json.dumps`' failure modes.
//!
//! `json.dumps` raises RecursionError on a 10^4-deep dict, ValueError on a
//! circular one, and writes 10**400 as digits serde_json cannot read; a
//! string holding a lone surrogate (a file name that is not UTF-8) cannot be
//! sent at all. Here each of those is a diagnostic with the field's path,
//! which `check()` reports instead of raising:
//! - nesting deeper than [`MAX_JSON_DEPTH`], or a container that contains
//!   itself: `input_too_deep`;
//! - more than [`MAX_INPUT_BYTES`] in all: `input_too_large`;
//! - text that is not UTF-8, or a top-level int too large for a float:
//!   `invalid_value`.
//!
//! Other values follow `json.dumps`: NaN and infinities become the strings
//! `"nan"` / `"inf"` / `"-inf"` (Python's spelling, read back by the
//! resolver's `float()` rules); an int beyond 64 bits is a float, or its
//! digits as a string when even a float cannot hold it; keys may be str,
//! int, float, bool or None; any other type is a TypeError.
//! The walk recurses at most [`MAX_JSON_DEPTH`] levels, so it cannot
//! overflow the stack; containers are read one item at a time and no further
//! than the budget (`Walk::container`).

use hisparse_core::engines::vllm_0_33::diagnostics::VllmDiagnostic;
use hisparse_core::limits::{MAX_INPUT_BYTES, MAX_JSON_DEPTH};
use hisparse_core::{Code, Diagnostic, FieldPath, Seg};
use pyo3::exceptions::{PyOverflowError, PyTypeError};
use pyo3::prelude::*;
use pyo3::types::{PyBool, PyDict, PyFloat, PyInt, PyList, PyMapping, PyString, PyTuple};
use serde_json::{Map, Value};

/// Bytes charged per value on top of its text.
const NODE_BYTES: usize = 16;

struct Walk {
    path: Vec<Seg>,
    /// The containers on the current path (identity), for cycle detection.
    open: Vec<usize>,
    budget: usize,
    problems: Vec<Diagnostic>,
    exhausted: bool,
}

/// The JSON form of `obj`, and the problems found (then the value is partial).
pub fn to_json(obj: &Bound<'_, PyAny>) -> PyResult<(Value, Vec<Diagnostic>)> {
    let mut w = Walk {
        path: Vec::new(),
        open: Vec::new(),
        budget: MAX_INPUT_BYTES,
        problems: Vec::new(),
        exhausted: false,
    };
    let value = w.value(obj)?;
    Ok((value, w.problems))
}

impl Walk {
    fn problem(&mut self, code: Code, message: String) {
        let path = FieldPath(self.path.clone());
        let shown = if path.0.is_empty() {
            "the serve args".to_owned()
        } else {
            path.to_string()
        };
        self.problems
            .push(Diagnostic::error(code, path, format!("{shown} {message}")));
    }

    fn charge(&mut self, bytes: usize) -> bool {
        if self.exhausted {
            return false;
        }
        match self.budget.checked_sub(NODE_BYTES + bytes) {
            Some(left) => {
                self.budget = left;
                true
            }
            None => {
                self.exhausted = true;
                self.problem(
                    Code::InputTooLarge,
                    format!("is larger than the {MAX_INPUT_BYTES} bytes hisparse_rs reads (README \"Limits\"); real serve args are a few KB"),
                );
                false
            }
        }
    }

    fn value(&mut self, obj: &Bound<'_, PyAny>) -> PyResult<Value> {
        if obj.is_none() {
            self.charge(0);
            return Ok(Value::Null);
        }
        if let Ok(b) = obj.cast::<PyBool>() {
            self.charge(0);
            return Ok(Value::Bool(b.is_true()));
        }
        if obj.is_instance_of::<PyInt>() {
            self.charge(0);
            return self.int(obj);
        }
        if let Ok(f) = obj.cast::<PyFloat>() {
            self.charge(0);
            return Ok(float(f.value()));
        }
        if let Ok(s) = obj.cast::<PyString>() {
            return Ok(match s.to_str() {
                Ok(text) if self.charge(text.len()) => Value::String(text.to_owned()),
                Ok(_) => Value::Null,
                Err(_) => {
                    self.problem(
                        Code::InvalidValue,
                        "is not valid UTF-8 text (it holds a lone surrogate, as a file name that is not UTF-8 decodes to); hisparse_rs reads UTF-8 paths and text: rename the file, or link to it under a UTF-8 name".to_owned(),
                    );
                    Value::Null
                }
            });
        }
        let container = obj.is_instance_of::<PyDict>()
            || obj.is_instance_of::<PyList>()
            || obj.is_instance_of::<PyTuple>()
            || obj.cast::<PyMapping>().is_ok();
        if !container {
            return Err(PyTypeError::new_err(format!(
                "{}: object of type {} is not JSON serializable",
                self.where_(),
                obj.get_type().name()?
            )));
        }
        let id = obj.as_ptr() as usize;
        if self.open.contains(&id) {
            self.problem(
                Code::InputTooDeep,
                "contains itself (a circular reference), which no JSON value can hold".to_owned(),
            );
            return Ok(Value::Null);
        }
        if self.open.len() >= MAX_JSON_DEPTH {
            self.problem(
                Code::InputTooDeep,
                format!("nests deeper than {MAX_JSON_DEPTH} levels (README \"Limits\"; vLLM's configs nest fewer than 10)"),
            );
            return Ok(Value::Null);
        }
        if !self.charge(0) {
            return Ok(Value::Null);
        }
        self.open.push(id);
        let out = self.container(obj);
        self.open.pop();
        out
    }

    /// A container's items, read one at a time and no further than the
    /// budget: a dict through `items()` (a snapshot: a key's `__str__` may
    /// change the dict), another mapping through its `items()` iterator (it
    /// may never end), a list or tuple by index as `json.dumps` reads it (a
    /// subclass's `__iter__` is not asked).
    fn container(&mut self, obj: &Bound<'_, PyAny>) -> PyResult<Value> {
        if let Ok(d) = obj.cast::<PyDict>() {
            return self.pairs(d.items().iter().map(Ok));
        }
        if let Ok(list) = obj.cast::<PyList>() {
            return self.items(list.iter());
        }
        if let Ok(tuple) = obj.cast::<PyTuple>() {
            return self.items(tuple.iter());
        }
        let items = obj.call_method0("items")?.try_iter()?;
        self.pairs(items)
    }

    fn pairs<'py>(
        &mut self,
        pairs: impl Iterator<Item = PyResult<Bound<'py, PyAny>>>,
    ) -> PyResult<Value> {
        let mut map = Map::new();
        for pair in pairs {
            if self.exhausted {
                break;
            }
            let (k, v): (Bound<'_, PyAny>, Bound<'_, PyAny>) = pair?.extract()?;
            let Some(key) = self.key(&k)? else { continue };
            self.path.push(Seg::Key(key.clone()));
            let value = self.value(&v);
            self.path.pop();
            map.insert(key, value?);
        }
        Ok(Value::Object(map))
    }

    fn items<'py>(&mut self, items: impl Iterator<Item = Bound<'py, PyAny>>) -> PyResult<Value> {
        let mut out = Vec::new();
        for (i, item) in items.enumerate() {
            if self.exhausted {
                break;
            }
            self.path.push(Seg::Index(i));
            let value = self.value(&item);
            self.path.pop();
            out.push(value?);
        }
        Ok(Value::Array(out))
    }

    /// A dict key as `json.dumps` writes it; None when it is not UTF-8 (reported).
    fn key(&mut self, k: &Bound<'_, PyAny>) -> PyResult<Option<String>> {
        let text = if let Ok(s) = k.cast::<PyString>() {
            match s.to_str() {
                Ok(t) => t.to_owned(),
                Err(_) => {
                    self.problem(
                        Code::InvalidValue,
                        "has a key that is not valid UTF-8 text".to_owned(),
                    );
                    return Ok(None);
                }
            }
        } else if let Ok(b) = k.cast::<PyBool>() {
            if b.is_true() { "true" } else { "false" }.to_owned()
        } else if k.is_none() {
            "null".to_owned()
        } else if k.is_instance_of::<PyInt>() || k.is_instance_of::<PyFloat>() {
            k.str()?.to_string()
        } else {
            return Err(PyTypeError::new_err(format!(
                "{}: keys must be str, int, float, bool or None, not {}",
                self.where_(),
                k.get_type().name()?
            )));
        };
        Ok(self.charge(text.len()).then_some(text))
    }

    fn int(&mut self, obj: &Bound<'_, PyAny>) -> PyResult<Value> {
        if let Ok(v) = obj.extract::<i64>() {
            return Ok(Value::from(v));
        }
        if let Ok(v) = obj.extract::<u64>() {
            return Ok(Value::from(v));
        }
        match obj.extract::<f64>() {
            Ok(f) => Ok(float(f)),
            Err(e) if e.is_instance_of::<PyOverflowError>(obj.py()) => {
                let digits = obj.str()?.to_string();
                if self.path.len() == 1 {
                    // A top-level serve arg is a plain int or float in vLLM: nothing holds this.
                    self.problem(
                        Code::InvalidValue,
                        format!("is an integer of {} digits, too large for any field (vLLM: float() overflows)", digits.len()),
                    );
                    return Ok(Value::Null);
                }
                // Inside a JSON flag the field decides (host_pool_gib: float() overflows).
                Ok(if self.charge(digits.len()) {
                    Value::String(digits)
                } else {
                    Value::Null
                })
            }
            Err(e) => Err(e),
        }
    }

    fn where_(&self) -> String {
        if self.path.is_empty() {
            "serve args".to_owned()
        } else {
            FieldPath(self.path.clone()).to_string()
        }
    }
}

/// A float as JSON; NaN and infinities as Python spells them.
fn float(f: f64) -> Value {
    hisparse_core::pytext::py_float_json(f)
}

/// A diagnostic's fix as Python gives it (`Diagnostic.fix`: a sequence of
/// `{"op": "set"|"remove"|"move", ...}` mappings, or its JSON text) -> the
/// core's operations. Raises ValueError for anything else.
pub fn fix_ops(fix: &Bound<'_, PyAny>) -> PyResult<Vec<hisparse_core::diagnostic::FixOp>> {
    use pyo3::exceptions::PyValueError;
    let value: Value = if let Ok(text) = fix.cast::<PyString>() {
        serde_json::from_str(text.to_str()?)
            .map_err(|e| PyValueError::new_err(format!("not a list of fix operations: {e}")))?
    } else {
        let (value, problems) = to_json(fix)?;
        if let Some(p) = problems.first() {
            return Err(PyValueError::new_err(format!(
                "not a list of fix operations: {}",
                p.message
            )));
        }
        value
    };
    serde_json::from_value(value)
        .map_err(|e| PyValueError::new_err(format!("not a list of fix operations: {e}")))
}
