//! Releasing the GIL and taking Rust locks without deadlocks, and without
//! crashing at interpreter exit.
//!
//! - A Rust lock is never held while waiting for the GIL or touching Python:
//!   [`with_lock`] runs a closure that cannot reach Python (it is `Send`, and Python tokens are not), and
//!   waits for a contended lock detached, so a thread that holds the GIL never
//!   blocks on a lock whose holder needs the GIL.
//! - Interpreter exit: CPython (3.10-3.13) ends a daemon thread that re-attaches
//!   after `Py_Finalize` started with `pthread_exit`, which unwinds our Rust
//!   frames from inside `Python::detach`'s re-attach (a forced unwind through
//!   `extern "C"` frames with destructors: an abort, or worse). So an `atexit`
//!   hook (atexit runs before finalization) marks the exit and waits for the
//!   calls that are detached; a call that finishes after the mark parks its
//!   thread instead of re-attaching, and calls made after it stay attached.

use pyo3::prelude::*;
use std::panic::{catch_unwind, resume_unwind, AssertUnwindSafe};
use std::sync::{Condvar, Mutex, MutexGuard, PoisonError, TryLockError};
use std::time::Duration;

struct Exit {
    /// Set by the atexit hook: from now on nothing re-attaches from a detached call.
    finalizing: bool,
    /// Detached calls that will re-attach.
    in_flight: usize,
}

static EXIT: Mutex<Exit> = Mutex::new(Exit {
    finalizing: false,
    in_flight: 0,
});
static DRAINED: Condvar = Condvar::new();
/// How long exit waits for detached calls (a resolve takes at most about a second).
const DRAIN_TIMEOUT: Duration = Duration::from_secs(10);

fn exit_state() -> MutexGuard<'static, Exit> {
    EXIT.lock().unwrap_or_else(PoisonError::into_inner)
}

/// `py.detach(f)`, safe at interpreter exit (see the module docs).
pub fn detach<T: Send, F: Send + FnOnce() -> T>(py: Python<'_>, f: F) -> T {
    {
        let mut s = exit_state();
        if s.finalizing {
            drop(s);
            return f(); // stay attached: there is no re-attach to go wrong
        }
        s.in_flight += 1;
    }
    let out = py.detach(|| {
        let out = catch_unwind(AssertUnwindSafe(f));
        let mut s = exit_state();
        if s.finalizing {
            s.in_flight -= 1;
            DRAINED.notify_all();
            drop(s);
            // The interpreter is going away: this daemon thread must not touch it again.
            loop {
                std::thread::park();
            }
        }
        out
    });
    // Re-attached: only now is this call no longer in flight.
    let mut s = exit_state();
    s.in_flight -= 1;
    if s.finalizing {
        DRAINED.notify_all();
    }
    drop(s);
    out.unwrap_or_else(|panic| resume_unwind(panic))
}

/// The atexit hook: mark the exit, then wait (detached, so the in-flight
/// calls can re-attach and finish) until no detached call is left.
#[pyfunction]
pub fn drain_detached_calls(py: Python<'_>) {
    exit_state().finalizing = true;
    py.detach(|| {
        let s = exit_state();
        let _ = DRAINED.wait_timeout_while(s, DRAIN_TIMEOUT, |s| s.in_flight > 0);
    });
}

/// Lock `m`, recovering from poisoning: core calls validate before they
/// mutate, so a panic cannot have left a half-done change.
pub fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

/// Run `f` under `m`: attached when the lock is free (the fast path of a
/// getter), detached while waiting for it otherwise. `f` cannot touch Python (it is `Send`).
pub fn with_lock<M: Send, T: Send>(
    py: Python<'_>,
    m: &Mutex<M>,
    f: impl FnOnce(&mut M) -> T + Send,
) -> T {
    match m.try_lock() {
        Ok(mut guard) => f(&mut guard),
        Err(TryLockError::Poisoned(p)) => f(&mut p.into_inner()),
        Err(TryLockError::WouldBlock) => detach(py, || f(&mut lock(m))),
    }
}

/// A panic inside a core call, caught at the binding boundary (a last
/// resort: the core returns errors as values), as its message.
pub fn no_panic<T>(f: impl FnOnce() -> T) -> Result<T, String> {
    catch_unwind(AssertUnwindSafe(f)).map_err(|p| {
        p.downcast_ref::<&str>()
            .map(|s| (*s).to_owned())
            .or_else(|| p.downcast_ref::<String>().cloned())
            .unwrap_or_else(|| "a panic".to_owned())
    })
}

/// The Python exception for a caught panic: a RuntimeError (an Exception,
/// unlike PyO3's PanicException, which is a BaseException).
pub fn internal_error(msg: String) -> PyErr {
    pyo3::exceptions::PyRuntimeError::new_err(format!(
        "hisparse_rs internal error (a bug; please report it): {msg}"
    ))
}
