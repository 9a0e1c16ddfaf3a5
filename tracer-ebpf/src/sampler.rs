//! Stack sampling: cpu-clock perf events on every CPU, kept only while inside a target (and,
//! in discover mode, a whole-process profile of the traced tasks).

use aya_ebpf::{helpers::bpf_get_current_pid_tgid, macros::perf_event, programs::PerfEventContext};
use tracer_ebpf::*;

use crate::{
    aggregation::add_stack_nmi,
    entries::current_entry,
    fastpath,
    filter::filter_pass,
    maps::{SAMPLED_STACKS, THREADS},
    phases::lookup_phase,
    spans::top_target,
    stacks::store_stack,
    util::{bump, config},
};

#[perf_event]
pub fn sampler(ctx: PerfEventContext) -> u32 {
    bump(counter::SAMPLES_TOTAL);
    let pid_tgid = bpf_get_current_pid_tgid();
    let tid = pid_tgid as u32;
    if tid == 0 {
        return 0;
    }
    if let Some(cfg) = config() {
        if cfg.flags & FLAG_DISCOVER != 0 && filter_pass(cfg) {
            profile_sample(&ctx, cfg, pid_tgid);
        }
    }
    let Some(cfg) = config() else { return 0 };
    if cfg.flags & FLAG_ONCPU_SAMPLES == 0 {
        return 0;
    }
    let tgid = (pid_tgid >> 32) as u32;
    // The call open on this CPU's fast path is the innermost one, else the thread state's.
    let (target, case, n) = match fastpath::peek(cfg, tid, tgid) {
        Some(open) => open,
        None => {
            let Some(st) = (unsafe { THREADS.get(&tid) }) else {
                return 0;
            };
            if st.active == 0 {
                return 0;
            }
            let (case, n) = st.phase.peek(tgid);
            (top_target(st), case, n)
        }
    };
    bump(counter::SAMPLES_IN_TARGET);
    let kstack = store_stack(&ctx, &SAMPLED_STACKS, 0, counter::STACKS_LOST_SAMPLED);
    let key = StackKey {
        agg: AggKey { target, case, n },
        kind: STACK_ONCPU,
        kstack,
        ustack: -1,
        tgid: 0,
    };
    // Weight: one sample stands for one sample period of CPU time.
    add_stack_nmi(&key, cfg.sample_period_ns);
    0
}

/// Discover mode: one sample of a traced task, wherever it is. A sample that interrupted
/// user mode has no kernel frames (an empty kernel stack): it is kept with kstack -1,
/// so the report can tell kernel time from user time and compare it with the rusage. A
/// kernel sample's target is the kernel entry it ran under (`ENTRY_*`).
#[inline(always)]
fn profile_sample(ctx: &PerfEventContext, cfg: &Config, pid_tgid: u64) {
    let kstack = store_stack(ctx, &SAMPLED_STACKS, 0, counter::STACKS_LOST_SAMPLED);
    let (case, n, _) = lookup_phase((pid_tgid >> 32) as u32);
    // A sample in user mode runs under no entry, whatever a stale record says.
    let entry = if kstack == -1 {
        ENTRY_NONE
    } else {
        current_entry(pid_tgid as u32)
    };
    let key = StackKey {
        agg: AggKey {
            target: entry,
            case,
            n,
        },
        kind: STACK_PROFILE,
        kstack,
        ustack: -1,
        tgid: 0,
    };
    add_stack_nmi(&key, cfg.sample_period_ns);
}
