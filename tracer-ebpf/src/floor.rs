//! Floor programs for benchmarks: the cheapest possible probe of each mechanism (a per-CPU
//! counter increment), to measure how much the span machinery adds on top. Function
//! mechanisms get an exit counter too: timing a call needs both ends, and a kretprobe costs
//! more than its kprobe.

use aya_ebpf::{
    helpers::bpf_probe_read_kernel,
    macros::{fentry, fexit, kprobe, kretprobe, raw_tracepoint, tracepoint},
    programs::{
        FEntryContext, FExitContext, ProbeContext, RawTracePointContext, RetProbeContext,
        TracePointContext,
    },
};
use tracer_ebpf::*;

use crate::{
    maps::{COUNTERS, FLOOR_CLOCK},
    util::{bump, config, now},
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

// The raw-syscall floor: `raw_syscalls:sys_enter`/`sys_exit` fire for every syscall, so the
// least such a probe does is compare the number with the one it is for (at exit, read from
// `pt_regs`), as the tracer's routes do.

#[inline(always)]
fn is_floor_nr(nr: u64) -> bool {
    config().is_some_and(|c| nr == c.floor_nrs[0] as u64 || nr == c.floor_nrs[1] as u64)
}

#[inline(always)]
fn exit_nr(ctx: &RawTracePointContext) -> u64 {
    let regs: u64 = ctx.arg(0);
    unsafe { bpf_probe_read_kernel((regs + PT_REGS_ORIG_AX as u64) as *const u64) }.unwrap_or(!0)
}

#[raw_tracepoint(tracepoint = "sys_enter")]
pub fn floor_raw_enter(ctx: RawTracePointContext) -> u32 {
    if is_floor_nr(ctx.arg(1)) {
        bump(counter::FLOOR_HITS);
    }
    0
}

#[raw_tracepoint(tracepoint = "sys_exit")]
pub fn floor_raw_exit(ctx: RawTracePointContext) -> u32 {
    if is_floor_nr(exit_nr(&ctx)) {
        bump(counter::FLOOR_HITS);
    }
    0
}

#[raw_tracepoint(tracepoint = "sys_enter")]
pub fn floor_rt_enter(ctx: RawTracePointContext) -> u32 {
    if is_floor_nr(ctx.arg(1)) {
        floor_timed();
    }
    0
}

#[raw_tracepoint(tracepoint = "sys_exit")]
pub fn floor_rt_exit(ctx: RawTracePointContext) -> u32 {
    if is_floor_nr(exit_nr(&ctx)) {
        floor_timed();
    }
    0
}
