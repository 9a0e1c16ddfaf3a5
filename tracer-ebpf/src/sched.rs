//! Scheduler tracepoints: on/off-CPU accounting and process-tree following. Each is there
//! twice: as a perf tracepoint (`sched_*`, fields read from the event record) and as a raw
//! tracepoint (`rsched_*`, the pid read from the `task_struct` argument at the offset the
//! kernel's BTF gives), which is cheaper and detaches without a grace period per event;
//! userspace attaches one set.

use aya_ebpf::{
    EbpfContext,
    helpers::{bpf_get_current_pid_tgid, bpf_probe_read_kernel},
    macros::{raw_tracepoint, tracepoint},
    programs::{RawTracePointContext, TracePointContext},
};
use tracer_ebpf::*;

use crate::{
    aggregation::add_stack,
    entries, fastpath,
    filter::{current_ns_tgid, filter_pass, is_followed},
    interruptions,
    maps::{
        CONFIG, COUNTERS, CURRENT_PHASE, FOLLOW, FOLLOW_GEN, NS_SEEDS, OFF_START, PENDING_OPEN,
        THREADS,
    },
    phases::{bump_phase_gen, lookup_phase},
    spans::{ThreadState, top_target},
    stacks::stack_id,
    util::{atomic_add, bump, config, now},
};

/// The pid of the `struct task_struct` at `task`.
#[inline(always)]
fn task_pid(task: u64, cfg: &Config) -> Option<i32> {
    unsafe { bpf_probe_read_kernel((task + cfg.task_pid_off as u64) as *const i32) }.ok()
}

/// `sched:sched_switch`. The current task is still `prev` here.
#[tracepoint]
pub fn sched_switch(ctx: TracePointContext) -> u32 {
    let Some(cfg) = config() else { return 0 };
    let next = unsafe { ctx.read_at::<i32>(cfg.switch_next_pid_off as usize) }.ok();
    // The record's prev_state: 0 for a task still running, the preempted bit for one the
    // kernel preempted.
    let preempted = || {
        cfg.switch_prev_state_off != NO_OFFSET
            && unsafe { ctx.read_at::<i64>(cfg.switch_prev_state_off as usize) }
                .is_ok_and(|s| s == 0 || s & SWITCH_STATE_PREEMPTED != 0)
    };
    on_switch(&ctx, cfg, next, preempted);
    0
}

/// `sched_switch(bool preempt, struct task_struct *prev, struct task_struct *next, ...)`.
#[raw_tracepoint(tracepoint = "sched_switch")]
pub fn rsched_switch(ctx: RawTracePointContext) -> u32 {
    let Some(cfg) = config() else { return 0 };
    let next: u64 = ctx.arg(2);
    // Preempted in the kernel (the flag), or switched out still running: at the return to
    // user mode after a tick found another task due, which calls schedule() without the
    // flag. The state is read from the task: the prev_state argument (5.18) would make the
    // program refuse to attach on older kernels.
    let preempted = || {
        let flag: u64 = ctx.arg(0);
        let prev: u64 = ctx.arg(1);
        flag & 0xff != 0 || task_state(prev, cfg) == Some(0)
    };
    on_switch(&ctx, cfg, task_pid(next, cfg), preempted);
    0
}

/// The state of the `struct task_struct` at `task` (None: its offset unknown, or unreadable).
#[inline(always)]
fn task_state(task: u64, cfg: &Config) -> Option<u32> {
    if cfg.task_state_off == NO_OFFSET {
        return None;
    }
    unsafe { bpf_probe_read_kernel((task + cfg.task_state_off as u64) as *const u32) }.ok()
}

/// A context switch from the current task to the one with pid `next` (None: unreadable);
/// `preempted` says whether the current task could still run (read only when counted).
#[inline(always)]
fn on_switch<C: EbpfContext>(
    ctx: &C,
    cfg: &Config,
    next: Option<i32>,
    preempted: impl FnOnce() -> bool,
) {
    let ts = now();
    let pid_tgid = bpf_get_current_pid_tgid();
    let prev = pid_tgid as u32;
    if prev != 0 {
        // A call open on the fast path moves to the thread's state, whose accounting follows.
        fastpath::switch_out(cfg, prev);
        if cfg.flags & FLAG_DISCOVER != 0 {
            entries::switch_out(prev);
        }
        if let Some(st) = THREADS.get_ptr_mut(&prev) {
            thread_switched_out(ctx, cfg, unsafe { &mut *st }, ts, pid_tgid);
        }
    }
    if cfg.flags & FLAG_DISCOVER != 0 && prev != 0 && filter_pass(cfg) {
        let (case, n, _) = lookup_phase((pid_tgid >> 32) as u32);
        if cfg.flags & FLAG_COUNT_PREEMPTION != 0 && preempted() {
            interruptions::preempted((case, n));
        }
        let start = OffStart {
            since_ns: ts,
            n,
            case,
            kstack: stack_id(ctx, 0, counter::STACKS_LOST_OFFCPU),
        };
        if OFF_START.insert(&prev, &start, 0).is_err() {
            bump(counter::STACK_ERRORS);
        }
    }
    if cfg.flags & FLAG_DISCOVER != 0 {
        entries::switch_in(next.map(|n| n as u32));
    }
    let Some(next) = next else {
        fastpath::switch_in(cfg, None, None);
        return;
    };
    let next = next as u32;
    if cfg.flags & FLAG_DISCOVER != 0 && next != 0 {
        if let Some(start) = unsafe { OFF_START.get(&next) } {
            let start = *start;
            let _ = OFF_START.remove(&next);
            let key = StackKey {
                agg: AggKey {
                    target: 0,
                    case: start.case,
                    n: start.n,
                },
                kind: STACK_PROFILE_OFFCPU,
                kstack: start.kstack,
                ustack: -1,
                tgid: 0,
            };
            add_stack(&key, ts.saturating_sub(start.since_ns));
        }
    }
    let st = if next != 0 {
        THREADS.get_ptr_mut(&next)
    } else {
        None
    };
    // Whether `next` has open calls decides whether its calls here take the fast path.
    fastpath::switch_in(cfg, Some(next), st.map(|s| unsafe { &*s }));
    if let Some(st) = st {
        thread_switched_in(cfg, unsafe { &mut *st }, ts);
    }
}

/// A thread with open calls leaves the CPU at `ts`: its on-CPU time so far is counted, and
/// with off-CPU stacks on, where it blocked (its stack, phase and innermost open target).
#[inline(always)]
fn thread_switched_out<C: EbpfContext>(
    ctx: &C,
    cfg: &Config,
    st: &mut ThreadState,
    ts: u64,
    pid_tgid: u64,
) {
    if st.active > 0 && st.off_since_ns == 0 {
        st.oncpu_ns += ts.saturating_sub(st.last_in_ns);
        st.off_since_ns = ts;
        if cfg.flags & FLAG_OFFCPU_STACKS != 0 {
            let (case, n, _) = st.phase.get((pid_tgid >> 32) as u32);
            st.off_case = case;
            st.off_n = n;
            st.off_target = top_target(st);
            st.off_kstack = stack_id(ctx, 0, counter::STACKS_LOST_OFFCPU);
        }
    }
}

/// A thread with open calls comes back at `ts`: the time it was off the CPU goes to the
/// stack where it blocked.
#[inline(always)]
fn thread_switched_in(cfg: &Config, st: &mut ThreadState, ts: u64) {
    if st.active > 0 && st.off_since_ns != 0 {
        let blocked = ts.saturating_sub(st.off_since_ns);
        st.last_in_ns = ts;
        st.off_since_ns = 0;
        if cfg.flags & FLAG_OFFCPU_STACKS != 0 && st.off_kstack >= 0 {
            let key = StackKey {
                agg: AggKey {
                    target: st.off_target,
                    case: st.off_case,
                    n: st.off_n,
                },
                kind: STACK_OFFCPU,
                kstack: st.off_kstack,
                ustack: -1,
                tgid: 0,
            };
            add_stack(&key, blocked);
        }
    }
}

/// `sched:sched_process_fork`: children of followed processes are followed too.
#[tracepoint]
pub fn sched_fork(ctx: TracePointContext) -> u32 {
    if let Some(cfg) = followed_parent() {
        if let Ok(child) = unsafe { ctx.read_at::<i32>(cfg.fork_child_pid_off as usize) } {
            let _ = FOLLOW.insert(&(child as u32), &1u8, 0);
        }
    }
    0
}

/// `sched_process_fork(struct task_struct *parent, struct task_struct *child)`.
#[raw_tracepoint(tracepoint = "sched_process_fork")]
pub fn rsched_fork(ctx: RawTracePointContext) -> u32 {
    if let Some(cfg) = followed_parent() {
        let child: u64 = ctx.arg(1);
        if let Some(child) = task_pid(child, cfg) {
            let _ = FOLLOW.insert(&(child as u32), &1u8, 0);
        }
    }
    0
}

/// The configuration, when the current task is a followed process whose children are to
/// be followed too.
#[inline(always)]
fn followed_parent() -> Option<&'static Config> {
    let cfg = config()?;
    if cfg.filter != FILTER_FOLLOW {
        return None;
    }
    let tgid = (bpf_get_current_pid_tgid() >> 32) as u32;
    // Through the filter's test, so a namespace seed that forks before any other traced
    // event is found here.
    is_followed(cfg, tgid).then_some(cfg)
}

/// `sched:sched_process_exit`.
#[tracepoint]
pub fn sched_exit(_ctx: TracePointContext) -> u32 {
    on_exit_task();
    0
}

/// `sched_process_exit(struct task_struct *p, ...)`: p is the current task.
#[raw_tracepoint(tracepoint = "sched_process_exit")]
pub fn rsched_exit(_ctx: RawTracePointContext) -> u32 {
    on_exit_task();
    0
}

/// The current task exits: forget the thread (and the process when its leader exits) so
/// maps do not grow and a reused pid is not mistaken for a followed one.
#[inline(always)]
fn on_exit_task() {
    let pid_tgid = bpf_get_current_pid_tgid();
    let tid = pid_tgid as u32;
    let tgid = (pid_tgid >> 32) as u32;
    if fastpath::thread_exits(tid) {
        bump(counter::ABANDONED_FRAMES);
    }
    if let Some(st) = unsafe { THREADS.get(&tid) } {
        if st.active > 0 {
            if let Some(c) = COUNTERS.get_ptr_mut(counter::ABANDONED_FRAMES) {
                unsafe { *c += st.active as u64 };
            }
        }
        let _ = THREADS.remove(&tid);
    }
    let _ = PENDING_OPEN.remove(&tid);
    let _ = OFF_START.remove(&tid);
    entries::thread_exits(tid);
    if tid == tgid {
        if FOLLOW.remove(&tgid).is_ok()
            && let Some(g) = FOLLOW_GEN.get_ptr_mut(0)
        {
            atomic_add(g, 1);
        }
        // A namespace seed that exits (found or not) is forgotten, so a process that later
        // gets the same pid in the namespace is not taken for it.
        if let Some(cfg) = config() {
            let ns = current_ns_tgid(cfg);
            if ns != 0 {
                let _ = NS_SEEDS.remove(&ns);
            }
        }
        if CURRENT_PHASE.remove(&tgid).is_ok() {
            bump_phase_gen();
        }
        // A reused pid must not inherit the fast path.
        if let Some(cfg) = CONFIG.get_ptr_mut(0) {
            if unsafe { (*cfg).root_tgid } == tgid {
                unsafe { (*cfg).root_tgid = 0 };
            }
        }
    }
}
