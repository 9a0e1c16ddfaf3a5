//! The tracer's eBPF programs.
//!
//! Every traced call becomes a *span* (entry -> exit) paired per thread and per target with a
//! small frame stack, so nested and recursive calls pair exactly. On-CPU time is accumulated
//! from `sched_switch`, so a call that sleeps (do_wait waiting for its child) reports its
//! blocked time as off-CPU instead of loop cost. Spans are aggregated in the kernel per
//! (target, workload case, N): counts and sums in a per-CPU array, log-linear histograms in
//! an array, and stack weights. Userspace reads a few maps at the end, so nothing is lost at
//! any call rate.
//!
//! The hot path (one entry and one exit per traced call) keeps a call that neither blocks,
//! migrates, nests nor recurses in its CPU's slot (`fastpath`) and touches only array
//! elements; any other call is paired through the thread's state, one hash lookup at entry
//! and one at exit. A phase (case, N) gets an
//! aggregate *row* when it begins, and threads cache their process's phase and row, checked
//! against a generation number that every phase change bumps.
//!
//! Attach points are *slots*: one program per slot and kind (`slots`), all sharing the span
//! handlers (`spans`).
//! Userspace decides at run time which slot measures which target (the `SLOTS` array), so the
//! attach-plan table lives in userspace as data.
#![no_std]
#![no_main]
#![feature(asm_experimental_arch)]

// Maps, small helpers, the task filter, and phases (with the phase-marker programs).
mod filter;
mod maps;
mod phases;
mod util;

// What every slot program runs: span pairing, the stack store, aggregation.
mod aggregation;
mod fastpath;
mod spans;
mod stacks;

// The programs: attach slots, raw syscall routes, kernel entries and interruptions, scheduler,
// fd tracking, sampler, USDT markers, overhead floor.
mod entries;
mod fds;
mod floor;
mod interruptions;
mod raw_syscalls;
mod sampler;
mod sched;
mod slots;
mod usdt;

#[cfg(not(test))]
#[panic_handler]
fn panic(_info: &core::panic::PanicInfo) -> ! {
    // The verifier rejects programs that could reach a real panic; this is never executed.
    loop {}
}
