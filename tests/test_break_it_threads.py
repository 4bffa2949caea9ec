"""Break-it suite, part 2: threads, failed calls under contention, interpreter exit.

The scenarios that hang or kill a process run in a child interpreter under a
timeout, so a deadlock or an abort fails one test instead of the run:
- several threads call the pool, the resolver and the metrics, with failing
  calls mixed in (a failing call used to build its exception while holding
  the pool's lock: a thread holding the GIL and waiting for the lock then
  deadlocked the process); at the end the pool and resolver invariants hold;
- daemon threads inside pool and resolver calls when the interpreter exits
  (they used to abort it: "FATAL: exception not rethrown"), and daemon
  threads making the process's first pool calls then (the calls imported
  numpy and the exception classes lazily, and aborted it the same way);
- a thread writing the top-k array while ``resolve`` reads it (it used to
  read the array twice and panic on a mismatch).
Each child runs about a second; the timeout (conftest.HANG_S) is a deadlock
detector, far above the expected run time, not a speed target.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap
import threading

import numpy as np

from conftest import HANG_S
from hisparse_rs import PoolError, ResidencyResolver


def run_child(code: str) -> subprocess.CompletedProcess[str]:
    proc = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)],
        capture_output=True,
        text=True,
        timeout=HANG_S,
    )
    assert proc.returncode == 0, (
        f"exit {proc.returncode}\nstdout: {proc.stdout}\nstderr: {proc.stderr[-2000:]}"
    )
    assert "Traceback" not in proc.stderr and "panicked" not in proc.stderr, proc.stderr[-2000:]
    return proc


MIXED_CALLS = """
import random, threading, time
import numpy as np
import hisparse_rs
from hisparse_rs import HostKVPool, PoolError, ResidencyResolver

metrics = hisparse_rs.HiSparseMetrics()
pool = HostKVPool(64, 4, 656, 2, metrics=metrics)
resolver = ResidencyResolver(16, 8, 256, 656, metrics=metrics)
stop = time.monotonic() + {seconds}
errors = []

def pool_worker(seed):
    rng = random.Random(seed)
    mine = []
    while time.monotonic() < stop:
        op = rng.randrange(8)
        try:
            if op == 0:
                rid = f"{{seed}}-{{rng.randrange(1 << 30)}}"
                pool.admit(rid, rng.randrange(0, 40)); mine.append(rid)
            elif op == 1 and mine:
                pool.append(rng.choice(mine), rng.randrange(0, 30))
            elif op == 2 and mine:
                pool.free(mine.pop(rng.randrange(len(mine))))
            elif op == 3:
                pool.free("unknown")            # always fails
            elif op == 4:
                pool.admit("x", -1)             # always fails (named int)
            elif op == 5:
                pool.free_blocks; pool.stats(); pool.request_ids(); repr(pool)
            elif op == 6 and mine:
                pool.host_rows(rng.choice(mine), [0, 10**6])   # fails past the end
            else:
                metrics.record(hits=rng.choice([1, -1]))        # fails half the time
        except (PoolError, ValueError):
            pass
        except BaseException as e:
            errors.append(repr(e))

def resolver_worker(seed):
    rng = np.random.default_rng(seed)
    states = []
    while time.monotonic() < stop:
        op = int(rng.integers(6))
        try:
            if op == 0:
                states.append(resolver.new_state())
            elif op == 1 and states:
                resolver.free_state(states.pop())
            elif op == 2 and states:
                rows = rng.integers(-2, 300, size=(len(states), 8), dtype=np.int32)
                resolver.resolve(rows, np.array(states, np.int32))
            elif op == 3:
                resolver.reset_state(10**9)     # always fails
            elif op == 4:
                resolver.resolve(np.zeros((1, 9), np.int32), np.zeros(1, np.int32))  # too wide
            else:
                resolver.num_states; resolver.metrics.to_dict(); repr(resolver)
        except PoolError:
            pass
        except BaseException as e:
            errors.append(repr(e))

threads = [threading.Thread(target=pool_worker, args=(i,)) for i in range(3)]
threads += [threading.Thread(target=resolver_worker, args=(i,)) for i in range(3)]
for t in threads: t.start()
for t in threads: t.join()
assert not errors, errors[:5]
# Blocks are conserved: every block is free or in exactly one table.
used = [b for r in pool.request_ids() for b in pool.block_table(r).tolist()]
assert len(used) == len(set(used)) and pool.free_blocks + len(used) == 64
print("ok", metrics.hits, metrics.misses)
"""


def test_mixed_and_failing_calls_from_threads_finish() -> None:
    proc = run_child(MIXED_CALLS.format(seconds=1.5))
    assert proc.stdout.startswith("ok")


def test_the_lock_and_gil_deadlock_of_issue_10_is_gone() -> None:
    # One thread fails in a loop (its exception used to be built under the
    # pool's lock), another reads a property while holding the GIL.
    run_child(
        """
        import threading, time, hisparse_rs
        p = hisparse_rs.HostKVPool(16, 4, 656, 1)
        stop = time.monotonic() + 1.0
        def fail():
            while time.monotonic() < stop:
                try: p.free("unknown")
                except hisparse_rs.PoolError: pass
        def read():
            while time.monotonic() < stop:
                p.free_blocks
        ts = [threading.Thread(target=f) for f in (fail, fail, read, read)]
        for t in ts: t.start()
        for t in ts: t.join()
        """
    )


EXIT_WHILE_BUSY = """
import threading, time, os, sys
import numpy as np
import hisparse_rs
p = hisparse_rs.HostKVPool(16, 4, 656, 1)
r = hisparse_rs.ResidencyResolver(64, 32, 1 << 20, 656)
s = r.new_state()
rows, st = np.zeros((1, 32), np.int32), np.array([s], np.int32)
M = {model!r}
HS = {{"kv_connector": "HiSparseConnector", "kv_role": "kv_both",
      "kv_connector_extra_config": {{"host_pool_gib": 64}}}}
def loop(f):
    def run():
        while True:
            try: f()
            except hisparse_rs.PoolError: pass
    return run
calls = [lambda: p.free("unknown"), lambda: p.free_blocks, lambda: r.free_state(99),
         lambda: r.new_state(), lambda: r.resolve(rows, st),
         lambda: hisparse_rs.check(M, kv_transfer_config=HS)]
for f in calls:
    threading.Thread(target=loop(f), daemon=True).start()
class SlowExit:
    # Finalization that releases the GIL for a while: the window in which a
    # daemon thread leaving a call used to be ended inside our frames.
    def __del__(self, sleep=time.sleep):
        sleep(0.05)
sys.slow_exit = SlowExit()
time.sleep(0.05)
"""


def test_daemon_threads_inside_calls_at_interpreter_exit() -> None:
    from conftest import MODELS

    code = EXIT_WHILE_BUSY.format(model=str(MODELS / "deepseek-v3.2"))
    for _ in range(6):
        run_child(code)


FIRST_CALL_AT_EXIT = """
import sys, threading
import hisparse_rs
sys.setswitchinterval(1e-6)  # hand the GIL over as often as CPython allows
r = hisparse_rs.ResidencyResolver(64, 8, 1000, 656)
s = r.new_state()
p = hisparse_rs.HostKVPool(16, 4, 656, 1)
started = threading.Barrier(4)
def first(call):
    def run():
        started.wait()
        try: call()
        except hisparse_rs.PoolError: pass
    return run
# Lists, not arrays: this process's Python code never imports numpy before the calls do.
calls = [lambda: r.resolve([[0] * 8], [s]), lambda: r.export_state(s), lambda: p.free("unknown")]
for c in calls:
    threading.Thread(target=first(c), daemon=True).start()
started.wait()
"""


def test_exit_while_daemon_threads_make_their_first_call() -> None:
    # Issue 17 item 7: the first pool call imported numpy (rust-numpy's C API,
    # numpy.asarray) and hisparse_rs.exceptions lazily, inside the Rust frame;
    # exit then ended the thread with pthread_exit there: SIGABRT in about one
    # run in ten. Everything is imported at `import hisparse_rs` now. 50 fresh
    # processes: the old code fails this with a probability above 99 %.
    for _ in range(50):
        run_child(FIRST_CALL_AT_EXIT)


def test_resolve_reads_a_concurrently_written_array_once() -> None:
    # MTP batches: three rows per state, so a state's union of 3 x 32 rows may
    # or may not fit its 64 slots. The writer flips the array between a
    # pattern whose unions fit (few distinct rows) and one whose unions do
    # not: a resolve that validated one and applied the other used to panic
    # (PanicException, a BaseException) and leave states half updated.
    dbs, width, n_states, mtp = 64, 32, 8, 3
    r = ResidencyResolver(dbs, width, 1 << 16, 656)
    states = np.repeat(np.array([r.new_state() for _ in range(n_states)], np.int32), mtp)
    rows = np.zeros((n_states * mtp, width), np.int32)
    fits = np.arange(rows.size, dtype=np.int32).reshape(rows.shape) % 40
    overflows = np.arange(rows.size, dtype=np.int32).reshape(rows.shape)
    stop = threading.Event()

    def writer() -> None:
        while not stop.is_set():
            rows[...] = fits
            rows[...] = overflows

    t = threading.Thread(target=writer)
    t.start()
    outcomes = set()
    try:
        for _ in range(400):
            try:
                out = r.resolve(rows, states)
            except PoolError as e:
                outcomes.add(e.code)  # a documented error is fine; nothing else is
                continue
            outcomes.add("ok")
            # The result is consistent with one snapshot: every planned copy
            # is resident where the plan says, and the counts add up.
            for row in range(len(states)):
                lo, hi = out.miss_offsets[row], out.miss_offsets[row + 1]
                slots = r.slot_rows(int(states[row]))
                assert (slots[out.miss_slots[lo:hi]] == out.miss_host_rows[lo:hi]).all()
            assert out.misses == len(out.miss_host_rows)
        for s in set(states.tolist()):
            held = r.slot_rows(s)
            live = held[held >= 0]
            assert len(set(live.tolist())) == len(live)
            assert sorted(r.lru_order(s).tolist()) == list(range(dbs))
    finally:
        stop.set()
        t.join()
    assert outcomes <= {"ok", "union_exceeds_device_buffer"}, outcomes


def test_metrics_stay_exact_under_threads() -> None:
    proc = run_child(
        """
        import threading, hisparse_rs
        m = hisparse_rs.HiSparseMetrics()
        def work():
            for _ in range(20000):
                m.record(hits=1, misses=2, host_to_device_bytes=3)
                try: m.record(hits=-1)
                except ValueError: pass
        ts = [threading.Thread(target=work) for _ in range(4)]
        for t in ts: t.start()
        for t in ts: t.join()
        assert (m.hits, m.misses, m.host_to_device_bytes) == (80000, 160000, 240000), m
        print("ok")
        """
    )
    assert proc.stdout.startswith("ok")
