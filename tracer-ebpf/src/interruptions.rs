//! Interruptions of the traced tasks (discover mode): interrupts taken while one of them ran
//! and the switches that preempted it, counted per phase as kernel entries of their own
//! (`ENTRY_TIMER` ... `ENTRY_PREEMPTION`). Their number follows how long the run is on a CPU
//! (a tick every few milliseconds, the sampler's timer, a busy machine's preemptions), not the
//! calls the command makes: a CPU-bound loop four times as long takes four times the
//! interrupts, and the kernel time it spends in them grows without any more syscalls. Userspace
//! tells that growth apart from more calls by these counts.
//!
//! An interrupt runs in the context of the task it interrupted, so the current task is the one
//! to count it under; an interrupt of the idle task or of an untraced one is not counted. Each
//! costs one lookup of the task's phase and one increment of its count, only while discover
//! mode counts entries (the programs are attached only then).

use aya_ebpf::{
    helpers::bpf_get_current_pid_tgid, macros::raw_tracepoint, programs::RawTracePointContext,
};
use tracer_ebpf::*;

use crate::{entries::count_entry, filter::filter_pass, phases::lookup_phase, util::config};

/// One interruption of kind `entry` of the current task, when it is traced.
#[inline(always)]
fn interrupted(entry: u32) {
    let Some(cfg) = config() else { return };
    if cfg.flags & FLAG_DISCOVER == 0 || !filter_pass(cfg) {
        return;
    }
    let tgid = (bpf_get_current_pid_tgid() >> 32) as u32;
    let (case, n, _) = lookup_phase(tgid);
    count_entry(entry, (case, n), 1);
}

/// `local_timer_entry(int vector)`.
#[raw_tracepoint(tracepoint = "local_timer_entry")]
pub fn ent_timer(_ctx: RawTracePointContext) -> u32 {
    interrupted(ENTRY_TIMER);
    0
}

/// `reschedule_entry(int vector)`.
#[raw_tracepoint(tracepoint = "reschedule_entry")]
pub fn ent_resched(_ctx: RawTracePointContext) -> u32 {
    interrupted(ENTRY_RESCHEDULE_IPI);
    0
}

/// `call_function_entry(int vector)`.
#[raw_tracepoint(tracepoint = "call_function_entry")]
pub fn ent_callfn(_ctx: RawTracePointContext) -> u32 {
    interrupted(ENTRY_FUNCTION_IPI);
    0
}

/// `call_function_single_entry(int vector)`: one program per tracepoint, as a raw
/// tracepoint program is loaded for the one it attaches to.
#[raw_tracepoint(tracepoint = "call_function_single_entry")]
pub fn ent_callfn1(_ctx: RawTracePointContext) -> u32 {
    interrupted(ENTRY_FUNCTION_IPI);
    0
}

/// `irq_handler_entry(int irq, struct irqaction *action)`.
#[raw_tracepoint(tracepoint = "irq_handler_entry")]
pub fn ent_irq(_ctx: RawTracePointContext) -> u32 {
    interrupted(ENTRY_DEVICE_IRQ);
    0
}

/// `softirq_entry(unsigned int vec_nr)`.
#[raw_tracepoint(tracepoint = "softirq_entry")]
pub fn ent_softirq(_ctx: RawTracePointContext) -> u32 {
    interrupted(ENTRY_SOFTIRQ);
    0
}

/// A traced task switched out while it could still run, in phase `phase`: called by the
/// scheduler programs, which have looked the phase up already, with `FLAG_COUNT_PREEMPTION`.
#[inline(always)]
pub(crate) fn preempted(phase: (u32, u64)) {
    count_entry(ENTRY_PREEMPTION, phase, 1);
}
