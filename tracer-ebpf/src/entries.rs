//! Kernel entries of the traced tasks (discover mode): every syscall counted and timed from
//! `sys_enter` to `sys_exit` by number, user-mode page faults counted, and the syscall a
//! thread is inside kept so that the sampler can file each sample under the entry it ran
//! under. This is what tells a kernel loop (a syscall whose time per call grows with N) from
//! a benchmark that makes more calls (calls per op grow, time per call does not).
//!
//! A pair of its own rather than the `raw_syscalls` routes' programs: these are attached only
//! in discover mode, so the routes' per-syscall path stays as short as it was.

use aya_ebpf::{
    bindings::BPF_NOEXIST, helpers::bpf_get_current_pid_tgid, macros::raw_tracepoint,
    programs::RawTracePointContext,
};
use tracer_ebpf::*;

use crate::{
    filter::filter_pass,
    maps::{ENTRY_COUNTS, IN_SYSCALL},
    phases::lookup_phase,
    raw_syscalls::reg,
    util::{atomic_add, bump, config, now},
};

/// One call of entry `entry` by process `tgid`, `ns` from entry to exit, counted in the
/// process's phase. Not called from the sampler (no NMI): a plain insert is safe.
#[inline(always)]
fn count_entry(entry: u32, tgid: u32, ns: u64) {
    let (case, n, _) = lookup_phase(tgid);
    let key = AggKey {
        target: entry,
        case,
        n,
    };
    let add = |v: *mut StackVal| {
        let v = v as *mut u64;
        atomic_add(v, 1);
        atomic_add(unsafe { v.add(1) }, ns);
    };
    if let Some(v) = ENTRY_COUNTS.get_ptr_mut(&key) {
        add(v);
        return;
    }
    let first = StackVal { count: 1, ns };
    if ENTRY_COUNTS
        .insert(&key, &first, BPF_NOEXIST as u64)
        .is_ok()
    {
        return;
    }
    // Another CPU inserted it first, or the map is full.
    match ENTRY_COUNTS.get_ptr_mut(&key) {
        Some(v) => add(v),
        None => bump(counter::ENTRIES_LOST),
    }
}

#[inline(always)]
fn discovering() -> bool {
    match config() {
        Some(cfg) => cfg.flags & FLAG_DISCOVER != 0 && filter_pass(cfg),
        None => false,
    }
}

/// `sys_enter(struct pt_regs *regs, long id)`.
#[raw_tracepoint(tracepoint = "sys_enter")]
pub fn ent_sys_enter(ctx: RawTracePointContext) -> u32 {
    if !discovering() {
        return 0;
    }
    let regs: u64 = ctx.arg(0);
    let nr: u64 = ctx.arg(1);
    if nr >= MAX_SYSCALL_NR as u64 {
        return 0;
    }
    // A 32-bit process's numbers are the ia32 table's: not named by the x86_64 one.
    if reg(regs, PT_REGS_CS).is_none_or(|cs| cs & 0xffff == USER32_CS) {
        return 0;
    }
    let tid = bpf_get_current_pid_tgid() as u32;
    let e = EntryNow {
        since_ns: now(),
        nr: nr as u32,
        _pad: 0,
    };
    if IN_SYSCALL.insert(&tid, &e, 0).is_err() {
        bump(counter::ENTRIES_LOST);
    }
    0
}

/// `sys_exit(struct pt_regs *regs, long ret)`. Syscalls that never return (exit, a
/// successful exit_group) have no exit: their entry is removed with the thread.
#[raw_tracepoint(tracepoint = "sys_exit")]
pub fn ent_sys_exit(_ctx: RawTracePointContext) -> u32 {
    let pid_tgid = bpf_get_current_pid_tgid();
    let tid = pid_tgid as u32;
    // One lookup for every syscall on the machine; only threads that entered one here
    // have an entry.
    let Some(e) = (unsafe { IN_SYSCALL.get(&tid) }) else {
        return 0;
    };
    let e = *e;
    let _ = IN_SYSCALL.remove(&tid);
    let wall = now().saturating_sub(e.since_ns);
    count_entry(ENTRY_SYSCALL + e.nr, (pid_tgid >> 32) as u32, wall);
    0
}

/// `page_fault_user(unsigned long address, struct pt_regs *regs, unsigned long error_code)`
/// (x86). Counted only: the fault's time is in the samples filed under it.
#[raw_tracepoint(tracepoint = "page_fault_user")]
pub fn ent_fault(_ctx: RawTracePointContext) -> u32 {
    if !discovering() {
        return 0;
    }
    let tgid = (bpf_get_current_pid_tgid() >> 32) as u32;
    count_entry(ENTRY_PAGE_FAULT, tgid, 0);
    0
}

/// The entry the current thread's sample ran under: its syscall, or `ENTRY_NONE`.
#[inline(always)]
pub(crate) fn current_entry(tid: u32) -> u32 {
    match unsafe { IN_SYSCALL.get(&tid) } {
        Some(e) => ENTRY_SYSCALL + e.nr,
        None => ENTRY_NONE,
    }
}
