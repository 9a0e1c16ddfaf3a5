//! The per-CPU fast path of span pairing: most traced calls neither block, migrate, nest nor
//! recurse, so the call open on each CPU is kept in a per-CPU slot ([`CpuCall`]) and its exit,
//! finding it there, records the span without touching the thread-state hash: its on-CPU
//! time is its wall time, since the thread never left the CPU.
//!
//! Anything else moves the open call into the thread's state ([`spill`]) and the exact path
//! of `spans` takes over, as if the call had entered there: a context switch away from the
//! thread (`sched_switch`, so blocking and migration are accounted as before), a nested or
//! recursive entry, an exit of another target while the call is open, and the thread's exit.
//! A thread with open calls in its state takes the exact path for its next calls too, on the
//! CPU it runs on ([`CpuCall::slow`], set when it is switched in or spills), so nesting (and
//! the loop trip counts it gives) stays exact.
//!
//! Only with the scheduler programs attached (`FLAG_FAST_PATH`): without `sched_switch`
//! nothing would move a blocked call off its CPU.

use tracer_ebpf::*;

use crate::{
    maps::CPU_CALL,
    phases::PhaseCache,
    spans::{ThreadState, push_frame, thread_state},
    util::{bump, config},
};

/// The call open on one CPU, and that CPU's cached phase of the last process that closed one.
#[repr(C)]
pub(crate) struct CpuCall {
    pub(crate) entry_ns: u64,
    pub(crate) tid: u32,
    pub(crate) target: u32,
    /// 1 while a call is open here.
    pub(crate) open: u32,
    /// The running thread has open calls in its thread state: [`SLOW_TID`] (for `slow_tid`),
    /// [`SLOW_ALL`] (unknown: the switched-in task's pid was unreadable), 0 = no.
    pub(crate) slow: u32,
    pub(crate) slow_tid: u32,
    /// The phase of the last process that closed a call here.
    pub(crate) phase: PhaseCache,
}

pub(crate) const SLOW_TID: u32 = 1;
pub(crate) const SLOW_ALL: u32 = 2;

/// This CPU's slot, when the fast path is on.
#[inline(always)]
pub(crate) fn cpu_call(cfg: &Config) -> Option<&'static mut CpuCall> {
    if cfg.flags & FLAG_FAST_PATH == 0 {
        return None;
    }
    CPU_CALL.get_ptr_mut(0).map(|c| unsafe { &mut *c })
}

/// An entry of `target` by thread `tid` at `ts`: true when the slot took it. Otherwise the
/// exact path must, and any call open here has been moved to its thread's state first.
#[inline(always)]
pub(crate) fn try_enter(c: &mut CpuCall, tid: u32, target: u32, ts: u64) -> bool {
    if c.open != 0 {
        // Nested in (or recursing into) the open call: both go the exact way.
        spill(c);
        mark_slow(c, tid);
        return false;
    }
    if c.slow == SLOW_ALL || (c.slow == SLOW_TID && c.slow_tid == tid) {
        return false;
    }
    c.entry_ns = ts;
    c.tid = tid;
    c.target = target;
    c.open = 1;
    true
}

#[inline(always)]
fn mark_slow(c: &mut CpuCall, tid: u32) {
    c.slow = SLOW_TID;
    c.slow_tid = tid;
}

/// Move the open call into its thread's state, as the exact path would have kept it from its
/// entry (the thread has not left the CPU since: a switch would have moved it).
#[inline(always)]
pub(crate) fn spill(c: &mut CpuCall) {
    if c.open == 0 {
        return;
    }
    c.open = 0;
    bump(counter::FAST_PATH_SPILLS);
    // A full thread map loses the call as the exact path's entry would (counted there).
    if let Some(st) = thread_state(c.tid) {
        push_frame(unsafe { &mut *st }, c.target, c.entry_ns);
    }
}

/// Thread `tid`'s exit of `target`: Some(wall time) when it closes the call open here. An exit
/// of another target while a call is open moves that call to the exact path, which then sees
/// both.
#[inline(always)]
pub(crate) fn try_exit(c: &mut CpuCall, tid: u32, target: u32, ts: u64) -> Option<u64> {
    if c.open == 0 || c.tid != tid {
        return None;
    }
    if c.target != target {
        spill(c);
        mark_slow(c, tid);
        return None;
    }
    c.open = 0;
    Some(ts.saturating_sub(c.entry_ns))
}

/// The exact path closed the thread's last open call: its next calls may take this slot.
#[inline(always)]
pub(crate) fn exact_done(tid: u32) {
    let Some(cfg) = config() else { return };
    if let Some(c) = cpu_call(cfg) {
        if c.slow == SLOW_TID && c.slow_tid == tid {
            c.slow = 0;
        }
    }
}

/// `sched_switch` away from `prev`: its open call, if any, goes to its thread state, where
/// the switch's on/off-CPU accounting finds it.
#[inline(always)]
pub(crate) fn switch_out(cfg: &Config, prev: u32) {
    if let Some(c) = cpu_call(cfg) {
        if c.open != 0 && c.tid == prev {
            spill(c);
        }
    }
}

/// `sched_switch` to `next` (None: its pid was unreadable), whose thread state is `st`:
/// whether it runs its calls the exact way here.
#[inline(always)]
pub(crate) fn switch_in(cfg: &Config, next: Option<u32>, st: Option<&ThreadState>) {
    let Some(c) = cpu_call(cfg) else { return };
    match next {
        None => c.slow = SLOW_ALL,
        Some(tid) => {
            if st.is_some_and(|s| s.active > 0) {
                mark_slow(c, tid);
            } else {
                c.slow = 0;
            }
        }
    }
}

/// The exiting thread `tid` leaves no call open here. True when it had one.
#[inline(always)]
pub(crate) fn thread_exits(tid: u32) -> bool {
    let Some(cfg) = config() else { return false };
    let Some(c) = cpu_call(cfg) else { return false };
    if c.slow == SLOW_TID && c.slow_tid == tid {
        c.slow = 0;
    }
    if c.open != 0 && c.tid == tid {
        c.open = 0;
        return true;
    }
    false
}

/// For the sampler, which interrupts this CPU's programs: the target of `tid`'s call open
/// here and its (case, n), without writing the slot.
#[inline(always)]
pub(crate) fn peek(cfg: &Config, tid: u32, tgid: u32) -> Option<(u32, u32, u64)> {
    if cfg.flags & FLAG_FAST_PATH == 0 {
        return None;
    }
    let c = CPU_CALL.get(0)?;
    if c.open == 0 || c.tid != tid {
        return None;
    }
    let (case, n) = c.phase.peek(tgid);
    Some((c.target, case, n))
}
