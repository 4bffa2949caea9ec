//! Numeric arguments that name themselves when out of range.
//!
//! PyO3's own `u64` extraction raises `OverflowError("can't convert negative
//! int to unsigned")` without the argument's name. [`Int`] and [`Float`]
//! extract any Python int (or float), keep an out-of-range value as text,
//! and let the call raise its documented error naming the argument
//! (PoolError `invalid_size` in the pool, layout and resolver; ValueError in
//! the metrics). A value of the wrong type is still a TypeError.

use hisparse_core::pool::PoolError;
use pyo3::exceptions::{PyOverflowError, PyValueError};
use pyo3::prelude::*;
use std::fmt::Display;

/// Longest text of an out-of-range value kept for a message.
const SHOWN: usize = 40;

fn shown(obj: &Bound<'_, PyAny>) -> String {
    let text = obj
        .str()
        .map(|s| s.to_string())
        .unwrap_or_else(|_| "?".to_owned());
    if text.len() > SHOWN {
        format!("{}... ({} digits)", &text[..SHOWN], text.len())
    } else {
        text
    }
}

/// An integer argument of type `T`, or the text of a value `T` cannot hold.
pub struct Int<T>(Result<T, String>);

impl<T> Int<T> {
    pub const fn of(value: T) -> Self {
        Int(Ok(value))
    }
}

impl<'a, 'py, T: TryFrom<i128>> FromPyObject<'a, 'py> for Int<T> {
    type Error = PyErr;
    fn extract(obj: Borrowed<'a, 'py, PyAny>) -> PyResult<Self> {
        match obj.extract::<i128>() {
            Ok(v) => Ok(Int(T::try_from(v).map_err(|_| v.to_string()))),
            // Beyond 128 bits: out of range for every argument here.
            Err(e) if e.is_instance_of::<PyOverflowError>(obj.py()) => {
                Ok(Int(Err(shown(&obj.to_owned()))))
            }
            Err(e) => Err(e), // a TypeError, which PyO3 prefixes with the argument's name
        }
    }
}

impl<T: Copy + Display + Bounds> Int<T> {
    /// The value, or PoolError `invalid_size` naming `name`.
    pub fn pool(&self, name: &'static str) -> Result<T, PoolError> {
        self.0.clone().map_err(|given| PoolError::InvalidSize {
            what: name,
            given,
            allowed: format!("an integer in {} ..= {}", T::MIN_TEXT, T::MAX_TEXT),
        })
    }

    /// The value, or ValueError naming `name`.
    pub fn value(&self, name: &str) -> PyResult<T> {
        self.0.clone().map_err(|given| {
            PyValueError::new_err(format!(
                "{name} must be an integer in {} ..= {}, got {given}",
                T::MIN_TEXT,
                T::MAX_TEXT
            ))
        })
    }
}

impl Int<i64> {
    /// The value, saturated to i64: an id that far out is out of range anyway,
    /// and the call then raises its own documented error (e.g. `unknown_state`).
    pub fn saturated(&self) -> i64 {
        match &self.0 {
            Ok(v) => *v,
            Err(given) if given.starts_with('-') => i64::MIN,
            Err(_) => i64::MAX,
        }
    }
}

/// The range of an integer type, as text for messages.
pub trait Bounds {
    const MIN_TEXT: &'static str;
    const MAX_TEXT: &'static str;
}
impl Bounds for u32 {
    const MIN_TEXT: &'static str = "0";
    const MAX_TEXT: &'static str = "2**32 - 1";
}
impl Bounds for u64 {
    const MIN_TEXT: &'static str = "0";
    const MAX_TEXT: &'static str = "2**64 - 1";
}
impl Bounds for i64 {
    const MIN_TEXT: &'static str = "-2**63";
    const MAX_TEXT: &'static str = "2**63 - 1";
}

/// A float argument, or the text of an int too large for a float.
pub struct Float(Result<f64, String>);

impl<'a, 'py> FromPyObject<'a, 'py> for Float {
    type Error = PyErr;
    fn extract(obj: Borrowed<'a, 'py, PyAny>) -> PyResult<Self> {
        match obj.extract::<f64>() {
            Ok(v) => Ok(Float(Ok(v))),
            Err(e) if e.is_instance_of::<PyOverflowError>(obj.py()) => {
                Ok(Float(Err(shown(&obj.to_owned()))))
            }
            Err(e) => Err(e),
        }
    }
}

impl Float {
    /// The value, or PoolError `invalid_size` naming `name`.
    pub fn pool(&self, name: &'static str) -> Result<f64, PoolError> {
        self.0.clone().map_err(|given| PoolError::InvalidSize {
            what: name,
            given,
            allowed: "a finite number > 0".to_owned(),
        })
    }
}
