//! Phase markers: how a workload tells the tracer "measuring case C at N now" and "done",
//! without a syscall of its own (USDT-style).
//!
//! The tracer attaches uprobes to these two symbols in the workload's binary. They must stay
//! out of line, unmangled and distinct (identical-code folding would merge two empty
//! functions into one address), so each writes its arguments to its own static.
//!
//! Any program can speak the protocol: export `tracer_phase_begin(uint32_t case, uint64_t n)`
//! and `tracer_phase_end(uint32_t case, uint64_t n, uint64_t ops)` as non-inlined functions.

use std::sync::atomic::{AtomicU64, Ordering};

static LAST_BEGIN: AtomicU64 = AtomicU64::new(0);
static LAST_END: AtomicU64 = AtomicU64::new(0);

/// Symbol names the tracer looks up.
pub const BEGIN_SYMBOL: &str = "tracer_phase_begin";
pub const END_SYMBOL: &str = "tracer_phase_end";

/// Marks the start of a measured phase of `case` at size `n`.
#[unsafe(no_mangle)]
#[inline(never)]
pub extern "C" fn tracer_phase_begin(case: u32, n: u64) {
    LAST_BEGIN.store((u64::from(case) << 48) ^ n, Ordering::Relaxed);
    std::hint::black_box((case, n));
}

/// Marks the end of the phase; `ops` is how many operations the phase did (forks, waits, reads).
#[unsafe(no_mangle)]
#[inline(never)]
pub extern "C" fn tracer_phase_end(case: u32, n: u64, ops: u64) {
    LAST_END.store(
        (u64::from(case) << 48) ^ n ^ ops.rotate_left(17),
        Ordering::Relaxed,
    );
    std::hint::black_box((case, n, ops));
}

/// Runs `f` as one measured phase; the closure returns the number of operations it did.
pub fn phase<T>(case: u32, n: u64, f: impl FnOnce() -> (u64, T)) -> T {
    tracer_phase_begin(case, n);
    let (ops, out) = f();
    tracer_phase_end(case, n, ops);
    out
}
