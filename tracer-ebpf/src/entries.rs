//! Kernel entries of the traced tasks (discover mode): every syscall counted by number at
//! `sys_enter`, user-mode page faults counted, and the syscall a thread entered last kept so
//! that the sampler can file each sample under the entry it ran under. This is what tells a
//! kernel loop (a syscall whose time per call grows with N) from a benchmark that makes more
//! calls (calls per op grow, time per call does not). Time per call comes from those samples
//! (`analysis::entries`): no clock is read here, as the programs run for every syscall of the
//! traced tasks and a clock read was their largest cost.
//!
//! Programs of their own rather than the `raw_syscalls` routes': these are attached only in
//! discover mode, so the routes' per-syscall path stays as short as it was.
//!
//! The syscall a thread entered last is kept in its CPU's slot ([`CpuEntry`]) until it
//! leaves the CPU: a `sched_switch` away from the thread moves it into `IN_SYSCALL`, keyed by
//! thread ([`switch_out`]), where the sampler finds it on whichever CPU the thread runs next.
//! So `sys_enter`, which runs for every syscall on the machine, touches a hash map only for a
//! thread switched out since its last syscall (and never for threads not traced here). There
//! is no `sys_exit` program: a second program on every syscall of the machine was over a
//! third of discover's cost on a getpid loop (183 -> 104 ns added per call without it on this
//! project's 6.18 host, an A/B of the two builds), and what it told the sampler, that the
//! thread has left its syscall, the sample's own kernel stack tells: a sample filed under the
//! syscall entered last whose stack is not in a function the syscall entry called, or is on
//! the way back to user mode, ran outside it (a user page fault, an interrupt from user mode,
//! signal delivery, the entry's own work before the next syscall's tracepoint), and
//! userspace files it by its frames (`collect::entries`). The sampler looks in the map whenever the slot is not the
//! thread's rather than trusting a switch-in to have brought the entry back: a version that
//! moved it back at the switch-in lost about one blocked syscall in a thousand on 6.18
//! (threads ran again after their switch-out with no sign of the switch-in program having
//! run). Only with the scheduler programs attached (`FLAG_FAST_PATH`); without them every
//! entry is kept in `IN_SYSCALL`.
//! `TRACER_NO_FAST_PATH=1` turns it off with the span fast path.
//!
//! A syscall's count goes to its CPU's slot in `ENTRY_CACHE` (an increment while the slot
//! holds the same syscall and phase), and into `ENTRY_COUNTS` only when another syscall or
//! phase takes the slot: a loop of a few syscalls touches no hash map. Only the syscall
//! programs use the cache: the interrupt programs, which can run in the middle of them on the
//! same CPU, count straight into the map with atomic adds.

use aya_ebpf::{
    bindings::BPF_NOEXIST, helpers::bpf_get_current_pid_tgid, macros::raw_tracepoint,
    programs::RawTracePointContext,
};
use tracer_ebpf::*;

use crate::{
    filter::{filter_pass, is_followed},
    maps::{CPU_ENTRY, ENTRY_CACHE, ENTRY_COUNTS, FOLLOW_GEN, IN_SYSCALL},
    phases::{PhaseCache, lookup_phase},
    raw_syscalls::reg,
    util::{atomic_add, bump, config},
};

/// `calls` calls of entry `entry` in phase (case, n), added to `ENTRY_COUNTS` with atomic
/// adds: other CPUs add to the same counts. Not called from the sampler (no NMI): a plain
/// insert is safe (an interrupt's program cannot land inside another's insert on its CPU:
/// the map's bucket lock is taken with interrupts off).
#[inline(always)]
pub(crate) fn count_entry(entry: u32, (case, n): (u32, u64), calls: u64) {
    let key = AggKey {
        target: entry,
        case,
        n,
    };
    if let Some(v) = ENTRY_COUNTS.get_ptr_mut(&key) {
        atomic_add(v as *mut u64, calls);
        return;
    }
    let first = StackVal {
        count: calls,
        ns: 0,
    };
    if ENTRY_COUNTS
        .insert(&key, &first, BPF_NOEXIST as u64)
        .is_ok()
    {
        return;
    }
    // Another CPU inserted it first, or the map is full.
    match ENTRY_COUNTS.get_ptr_mut(&key) {
        Some(v) => atomic_add(v as *mut u64, calls),
        None => bump(counter::ENTRIES_LOST),
    }
}

/// One call of syscall `nr` in phase (case, n), through this CPU's cache slot: the slot's
/// previous syscall or phase is added to `ENTRY_COUNTS` when another takes its place. Called
/// from the syscall programs only, which never run inside one another on a CPU.
#[inline(always)]
fn count_syscall(nr: u32, (case, n): (u32, u64)) {
    let entry = ENTRY_SYSCALL + nr;
    let Some(slot) = ENTRY_CACHE.get_ptr_mut(nr % ENTRY_CACHE_SLOTS) else {
        count_entry(entry, (case, n), 1);
        return;
    };
    let slot = unsafe { &mut *slot };
    if slot.count != 0 && slot.key.target == entry && slot.key.case == case && slot.key.n == n {
        slot.count += 1;
        return;
    }
    if slot.count != 0 {
        count_entry(slot.key.target, (slot.key.case, slot.key.n), slot.count);
    }
    slot.key = AggKey {
        target: entry,
        case,
        n,
    };
    slot.count = 1;
}

/// Is the current task, of process `tgid`, one discover counts? None if not; else whether
/// its process is known to make 64-bit syscalls. With a followed process tree, the last
/// followed process seen on this CPU is remembered in its slot while no process has left the
/// tree or exec'd since (`FOLLOW_GEN`): a task of it passes without the hash lookup the
/// filter makes (always, inside a PID namespace, where the traced command's own pid is not
/// known up front), and without reading its code segment again once a syscall showed it
/// 64-bit (only an exec changes that).
#[inline(always)]
fn discovering(tgid: u32, slot: Option<&mut CpuEntry>) -> Option<bool> {
    let cfg = config()?;
    if cfg.flags & FLAG_DISCOVER == 0 {
        return None;
    }
    if cfg.filter != FILTER_FOLLOW {
        return filter_pass(cfg).then_some(false);
    }
    let generation = follow_gen();
    if let Some(c) = &slot
        && c.followed == tgid
        && tgid != 0
        && c.follow_gen == generation
    {
        return Some(c.is64 != 0);
    }
    if !is_followed(cfg, tgid) {
        return None;
    }
    if let Some(c) = slot {
        c.followed = tgid;
        c.follow_gen = generation;
        c.is64 = 0;
    }
    Some(false)
}

#[inline(always)]
fn follow_gen() -> u64 {
    FOLLOW_GEN.get(0).copied().unwrap_or(0)
}

/// `sys_enter(struct pt_regs *regs, long id)`.
#[raw_tracepoint(tracepoint = "sys_enter")]
pub fn ent_sys_enter(ctx: RawTracePointContext) -> u32 {
    let pid_tgid = bpf_get_current_pid_tgid();
    let (tid, tgid) = (pid_tgid as u32, (pid_tgid >> 32) as u32);
    // This CPU's slot, taken once: every step below reads or writes it.
    let mut slot = cpu_entry();
    let Some(known64) = discovering(tgid, slot.as_deref_mut()) else {
        return 0;
    };
    let regs: u64 = ctx.arg(0);
    let nr: u64 = ctx.arg(1);
    if nr >= MAX_SYSCALL_NR as u64 {
        return 0;
    }
    // A 32-bit process's numbers are the ia32 table's: not named by the x86_64 one.
    if !known64 {
        if reg(regs, PT_REGS_CS).is_none_or(|cs| cs & 0xffff == USER32_CS) {
            return 0;
        }
        if let Some(c) = slot.as_deref_mut()
            && c.followed == tgid
        {
            c.is64 = 1;
        }
    }
    let e = EntryNow {
        nr: nr as u32,
        _pad: 0,
    };
    if let Some(c) = slot {
        // Another thread's entry here missed its switch-out: it waits in the map.
        if c.open != 0 && c.tid != tid {
            spill(c);
        }
        c.entry = e;
        c.tid = tid;
        c.open = 1;
        let (case, n, _) = c.phase.get(tgid);
        count_syscall(nr as u32, (case, n));
        return 0;
    }
    if IN_SYSCALL.insert(&tid, &e, 0).is_err() {
        bump(counter::ENTRIES_LOST);
    }
    let (case, n, _) = lookup_phase(tgid);
    count_syscall(nr as u32, (case, n));
    0
}

/// `sched_process_exec(struct task_struct *p, pid_t old_pid, struct linux_binprm *bprm)`: a
/// process that exec'd may make 32-bit syscalls now; what each CPU remembers of it is
/// forgotten.
#[raw_tracepoint(tracepoint = "sched_process_exec")]
pub fn ent_exec(_ctx: RawTracePointContext) -> u32 {
    if let Some(g) = FOLLOW_GEN.get_ptr_mut(0) {
        atomic_add(g, 1);
    }
    0
}

/// `page_fault_user(unsigned long address, struct pt_regs *regs, unsigned long error_code)`
/// (x86). Counted only: the fault's time is in the samples filed under it.
#[raw_tracepoint(tracepoint = "page_fault_user")]
pub fn ent_fault(_ctx: RawTracePointContext) -> u32 {
    let tgid = (bpf_get_current_pid_tgid() >> 32) as u32;
    let mut slot = cpu_entry();
    if discovering(tgid, slot.as_deref_mut()).is_none() {
        return 0;
    }
    let (case, n, _) = match slot {
        Some(c) => c.phase.get(tgid),
        None => lookup_phase(tgid),
    };
    count_entry(ENTRY_PAGE_FAULT, (case, n), 1);
    0
}

/// The syscall the current thread entered last, or `ENTRY_NONE`: the entry its kernel sample
/// ran under when the sample's stack goes through the syscall entry (userspace checks). Reads
/// only: the sampler interrupts this CPU's programs.
#[inline(always)]
pub(crate) fn current_entry(tid: u32) -> u32 {
    if config().is_some_and(|cfg| cfg.flags & FLAG_FAST_PATH != 0) {
        if let Some(c) = CPU_ENTRY.get(0) {
            if c.open != 0 && c.tid == tid {
                return ENTRY_SYSCALL + c.entry.nr;
            }
        }
    }
    match unsafe { IN_SYSCALL.get(&tid) } {
        Some(e) => ENTRY_SYSCALL + e.nr,
        None => ENTRY_NONE,
    }
}

/// The syscall of the traced thread running on one CPU.
#[repr(C)]
pub(crate) struct CpuEntry {
    entry: EntryNow,
    tid: u32,
    /// 1 while `entry` is the syscall `tid` entered last and `tid` has not left the CPU
    /// since (it may have returned from it: see the module docs).
    open: u32,
    /// The phase of the last traced process that entered a syscall here.
    phase: PhaseCache,
    /// The last followed process seen here, and `FOLLOW_GEN` then (see [`discovering`]);
    /// `is64` is 1 once one of its syscalls showed it a 64-bit process.
    followed: u32,
    is64: u32,
    follow_gen: u64,
}

/// This CPU's slot, when the scheduler programs keep it right.
#[inline(always)]
fn cpu_entry() -> Option<&'static mut CpuEntry> {
    let cfg = config()?;
    if cfg.flags & FLAG_FAST_PATH == 0 {
        return None;
    }
    CPU_ENTRY.get_ptr_mut(0).map(|c| unsafe { &mut *c })
}

/// Move the slot's entry into `IN_SYSCALL`.
#[inline(always)]
fn spill(c: &mut CpuEntry) {
    c.open = 0;
    if IN_SYSCALL.insert(&c.tid, &c.entry, 0).is_err() {
        bump(counter::ENTRIES_LOST);
    }
}

/// `sched_switch` away from `prev`: its last syscall waits in `IN_SYSCALL`.
#[inline(always)]
pub(crate) fn switch_out(prev: u32) {
    if let Some(c) = cpu_entry() {
        if c.open != 0 && c.tid == prev {
            spill(c);
        }
    }
}

/// `sched_switch` to `next` (None: its pid was unreadable): an entry still here is another
/// thread's (one whose switch-out was missed), and waits in `IN_SYSCALL` for its samples.
#[inline(always)]
pub(crate) fn switch_in(next: Option<u32>) {
    let Some(c) = cpu_entry() else { return };
    if c.open != 0 && next != Some(c.tid) {
        spill(c);
    }
}

/// The exiting thread `tid` (current on this CPU) leaves no entry behind.
#[inline(always)]
pub(crate) fn thread_exits(tid: u32) {
    if let Some(c) = cpu_entry() {
        if c.open != 0 && c.tid == tid {
            c.open = 0;
        }
    }
    let _ = IN_SYSCALL.remove(&tid);
}
