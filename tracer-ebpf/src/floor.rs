//! Floor programs for benchmarks: the cheapest possible probe of each mechanism (a per-CPU
//! counter increment), to measure how much the span machinery adds on top. Function
//! mechanisms get an exit counter too: timing a call needs both ends, and a kretprobe costs
//! more than its kprobe.

use aya_ebpf::{
    macros::{fentry, fexit, kprobe, kretprobe, tracepoint},
    programs::{FEntryContext, FExitContext, ProbeContext, RetProbeContext, TracePointContext},
};
use tracer_ebpf::*;

use crate::{
    maps::{COUNTERS, FLOOR_CLOCK},
    util::{bump, now},
};

#[kprobe]
pub fn floor_kprobe(_ctx: ProbeContext) -> u32 {
    bump(counter::FLOOR_HITS);
    0
}

#[kretprobe]
pub fn floor_kretprobe(_ctx: RetProbeContext) -> u32 {
    bump(counter::FLOOR_HITS);
    0
}

#[fentry]
pub fn floor_fentry(_ctx: FEntryContext) -> i32 {
    bump(counter::FLOOR_HITS);
    0
}

#[fexit]
pub fn floor_fexit(_ctx: FExitContext) -> i32 {
    bump(counter::FLOOR_HITS);
    0
}

#[tracepoint]
pub fn floor_tp(_ctx: TracePointContext) -> u32 {
    bump(counter::FLOOR_HITS);
    0
}

/// The timed floor: the counter plus what any timing probe must do, a clock read at both
/// ends and the entry time kept from one to the other (here per CPU and alternating, which
/// is only right for calls that neither nest nor migrate: the benchmarks' getpid).
#[inline(always)]
fn floor_timed() {
    let ts = now();
    if let Some(p) = FLOOR_CLOCK.get_ptr_mut(0) {
        let start = unsafe { *p };
        if start == 0 {
            unsafe { *p = ts };
        } else {
            unsafe { *p = 0 };
            if let Some(c) = COUNTERS.get_ptr_mut(counter::FLOOR_NS) {
                unsafe { *c += ts.saturating_sub(start) };
            }
        }
    }
    bump(counter::FLOOR_HITS);
}

#[kprobe]
pub fn floor_kprobe_timed(_ctx: ProbeContext) -> u32 {
    floor_timed();
    0
}

#[kretprobe]
pub fn floor_kretprobe_timed(_ctx: RetProbeContext) -> u32 {
    floor_timed();
    0
}

#[fentry]
pub fn floor_fentry_timed(_ctx: FEntryContext) -> i32 {
    floor_timed();
    0
}

#[fexit]
pub fn floor_fexit_timed(_ctx: FExitContext) -> i32 {
    floor_timed();
    0
}

#[tracepoint]
pub fn floor_tp_timed(_ctx: TracePointContext) -> u32 {
    floor_timed();
    0
}
