//! Scheduler tracepoints: on/off-CPU accounting and process-tree following.

use aya_ebpf::{
    helpers::bpf_get_current_pid_tgid, macros::tracepoint, programs::TracePointContext,
};
use tracer_ebpf::*;

use crate::{
    aggregation::add_stack,
    filter::filter_pass,
    maps::{CONFIG, COUNTERS, CURRENT_PHASE, FOLLOW, OFF_START, PENDING_OPEN, THREADS},
    phases::{bump_phase_gen, lookup_phase, thread_phase},
    spans::top_target,
    stacks::stack_id,
    util::{bump, config, now},
};

/// `sched:sched_switch`. The current task is still `prev` here.
#[tracepoint]
pub fn sched_switch(ctx: TracePointContext) -> u32 {
    let Some(cfg) = config() else { return 0 };
    let ts = now();
    let pid_tgid = bpf_get_current_pid_tgid();
    let prev = pid_tgid as u32;
    if prev != 0 {
        if let Some(st) = THREADS.get_ptr_mut(&prev) {
            let st = unsafe { &mut *st };
            if st.active > 0 && st.off_since_ns == 0 {
                st.oncpu_ns += ts.saturating_sub(st.last_in_ns);
                st.off_since_ns = ts;
                if cfg.flags & FLAG_OFFCPU_STACKS != 0 {
                    let (case, n, _) = thread_phase(st, (pid_tgid >> 32) as u32);
                    st.off_case = case;
                    st.off_n = n;
                    st.off_target = top_target(st);
                    st.off_kstack = stack_id(&ctx, 0, counter::STACKS_LOST_OFFCPU);
                }
            }
        }
    }
    if cfg.flags & FLAG_DISCOVER != 0 && prev != 0 && filter_pass(cfg) {
        let (case, n, _) = lookup_phase((pid_tgid >> 32) as u32);
        let start = OffStart {
            since_ns: ts,
            n,
            case,
            kstack: stack_id(&ctx, 0, counter::STACKS_LOST_OFFCPU),
        };
        if OFF_START.insert(&prev, &start, 0).is_err() {
            bump(counter::STACK_ERRORS);
        }
    }
    let Ok(next) = (unsafe { ctx.read_at::<i32>(cfg.switch_next_pid_off as usize) }) else {
        return 0;
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
    if next != 0 {
        if let Some(st) = THREADS.get_ptr_mut(&next) {
            let st = unsafe { &mut *st };
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
    }
    0
}

/// `sched:sched_process_fork`: children of followed processes are followed too.
#[tracepoint]
pub fn sched_fork(ctx: TracePointContext) -> u32 {
    let Some(cfg) = config() else { return 0 };
    if cfg.filter != FILTER_FOLLOW {
        return 0;
    }
    let tgid = (bpf_get_current_pid_tgid() >> 32) as u32;
    if unsafe { FOLLOW.get(&tgid) }.is_none() {
        return 0;
    }
    if let Ok(child) = unsafe { ctx.read_at::<i32>(cfg.fork_child_pid_off as usize) } {
        let _ = FOLLOW.insert(&(child as u32), &1u8, 0);
    }
    0
}

/// `sched:sched_process_exit`: forget the thread (and the process when its leader exits) so
/// maps do not grow and a reused pid is not mistaken for a followed one.
#[tracepoint]
pub fn sched_exit(_ctx: TracePointContext) -> u32 {
    let pid_tgid = bpf_get_current_pid_tgid();
    let tid = pid_tgid as u32;
    let tgid = (pid_tgid >> 32) as u32;
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
    if tid == tgid {
        let _ = FOLLOW.remove(&tgid);
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
    0
}
