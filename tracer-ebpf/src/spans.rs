//! Spans: per-thread state and the entry/exit pairing that turns a traced call into a span.

use aya_ebpf::{
    EbpfContext,
    bindings::{BPF_F_USER_STACK, BPF_NOEXIST},
    helpers::bpf_get_current_pid_tgid,
};
use tracer_ebpf::*;

use crate::{
    aggregation::{add_stack_weighted, record_span, record_untimed},
    fastpath::{self, CpuCall, cpu_call},
    filter::{current_ns_tgid, filter_pass},
    maps::{CALLER_TICK, COUNTERS, EVENTS, SLOTS, THREADS, ZERO_THREAD},
    phases::{PhaseCache, lookup_phase},
    stacks::stack_id,
    util::{bump, config, nest_ix, now, target_ix},
};

/// One open call on one thread.
#[repr(C)]
#[derive(Clone, Copy)]
struct Frame {
    entry_ns: u64,
    /// The thread's on-CPU clock at entry; the span's on-CPU time is the difference at exit.
    oncpu_at_entry: u64,
    target: u32,
    /// Timed calls of other targets that closed directly inside this one: its loop's trips,
    /// this call's own (`SpanStats::within` sums them over all calls).
    inner: u32,
}

/// Per-thread state, kept from a thread's first traced call until it exits, with the open
/// calls inline: one hash lookup per entry and exit instead of a frame map insert, lookup
/// and delete per call. Preallocated, because the perf_event sampler reads it and (before
/// 6.1) perf_event programs may only use preallocated hash maps.
#[repr(C)]
pub(crate) struct ThreadState {
    /// On-CPU time accumulated since the first open frame, up to `last_in_ns`.
    pub(crate) oncpu_ns: u64,
    /// When the thread last started running (or opened its first frame).
    pub(crate) last_in_ns: u64,
    /// When the thread was switched out while inside a target (0 = running).
    pub(crate) off_since_ns: u64,
    pub(crate) off_n: u64,
    pub(crate) off_case: u32,
    pub(crate) off_target: u32,
    pub(crate) off_kstack: i32,
    /// Open calls over all targets, including untimed ones beyond MAX_NEST.
    pub(crate) active: u32,
    /// Open calls per target (to tell a missed entry from a nested exit).
    depth: [u32; MAX_TARGETS],
    /// The open calls, innermost at `active - 1`.
    frames: [Frame; MAX_NEST],
    /// The process's phase as last looked up.
    pub(crate) phase: PhaseCache,
}

#[inline(always)]
fn slot_target(slot: u32) -> Option<u32> {
    let conf = SLOTS.get(slot)?;
    if conf.role == ROLE_NONE || conf.target as usize >= MAX_TARGETS {
        return None;
    }
    Some(conf.target)
}

#[inline(always)]
pub(crate) fn thread_state(tid: u32) -> Option<*mut ThreadState> {
    if let Some(st) = THREADS.get_ptr_mut(&tid) {
        return Some(st);
    }
    let zero = ZERO_THREAD.get(0)?;
    if THREADS.insert(&tid, zero, BPF_NOEXIST as u64).is_err() {
        // Either another CPU inserted it first (fine: look it up) or the map is full.
        if let Some(st) = THREADS.get_ptr_mut(&tid) {
            return Some(st);
        }
        bump(counter::THREAD_MAP_FULL);
        return None;
    }
    THREADS.get_ptr_mut(&tid)
}

#[inline(always)]
pub(crate) fn on_enter(slot: u32) {
    let Some(target) = slot_target(slot) else {
        return;
    };
    let Some(cfg) = config() else { return };
    if !filter_pass(cfg) {
        return;
    }
    let ts = now();
    let tid = bpf_get_current_pid_tgid() as u32;
    if let Some(c) = cpu_call(cfg) {
        if fastpath::try_enter(c, tid, target, ts) {
            return;
        }
    }
    let Some(st) = thread_state(tid) else { return };
    push_frame(unsafe { &mut *st }, target, ts);
}

/// Open a call of `target` entered at `ts` on the thread whose state is `st`.
#[inline(always)]
pub(crate) fn push_frame(st: &mut ThreadState, target: u32, ts: u64) {
    if st.active == 0 {
        st.oncpu_ns = 0;
        st.last_in_ns = ts;
        st.off_since_ns = 0;
    }
    if target as usize >= MAX_TARGETS {
        return;
    }
    let t = target_ix(target);
    let a = st.active;
    if (a as usize) < MAX_NEST {
        let oncpu_at_entry = st.oncpu_ns + ts.saturating_sub(st.last_in_ns);
        st.frames[nest_ix(a)] = Frame {
            entry_ns: ts,
            oncpu_at_entry,
            target,
            inner: 0,
        };
    } else {
        bump(counter::DEPTH_OVERFLOW);
    }
    st.depth[t] += 1;
    st.active = a + 1;
}

#[inline(always)]
pub(crate) fn on_exit<C: EbpfContext>(ctx: &C, slot: u32, count_unpaired: bool) {
    let Some(target) = slot_target(slot) else {
        return;
    };
    let ts = now();
    let pid_tgid = bpf_get_current_pid_tgid();
    let tid = pid_tgid as u32;
    let tgid = (pid_tgid >> 32) as u32;
    let Some(cfg) = config() else { return };
    // One call of `complete` for both paths: it is the larger part of the program.
    let fast = cpu_call(cfg).and_then(|c| fast_exit(c, target, tid, tgid, ts));
    let span = match fast {
        Some(span) => span,
        None => match exact_exit(cfg, target, tid, tgid, ts, count_unpaired) {
            Some(span) => span,
            None => return,
        },
    };
    complete(ctx, cfg, &span, tid, tgid);
}

/// The exit closes the call open on this CPU's fast path.
#[inline(always)]
fn fast_exit(c: &mut CpuCall, target: u32, tid: u32, tgid: u32, ts: u64) -> Option<Span> {
    let wall = fastpath::try_exit(c, tid, target, ts)?;
    let (case, n, row) = c.phase.get(tgid);
    Some(Span {
        key: AggKey { target, case, n },
        row,
        wall,
        // It never left the CPU: a switch would have moved it to the exact path.
        oncpu: wall,
        outer: NO_TARGET,
        trips: 0,
        end_ns: ts,
    })
}

/// The exit paired through the thread's state: the span, or None when there is none to time
/// (no state, a missed entry, or a call counted untimed here).
#[inline(always)]
fn exact_exit(
    cfg: &Config,
    target: u32,
    tid: u32,
    tgid: u32,
    ts: u64,
    count_unpaired: bool,
) -> Option<Span> {
    // Exits fire for every task (the filter is applied at entry): a task without state was
    // never traced. A traced task with no open call of this target missed an entry (the
    // probe was attached mid-call); for exit tracepoints that also happens for every
    // unfiltered call (reads of untracked fds), so only function probes count it.
    let st = THREADS.get_ptr_mut(&tid)?;
    let st = unsafe { &mut *st };
    if target as usize >= MAX_TARGETS {
        return None;
    }
    let t = target_ix(target);
    if st.depth[t] == 0 {
        if count_unpaired {
            bump(counter::UNPAIRED_EXIT);
        }
        return None;
    }
    st.depth[t] -= 1;
    let (case, n, row) = st.phase.get(tgid);
    let key = AggKey { target, case, n };
    let ix = span_index(row, cfg.target_stride, target);
    let a = st.active;
    if a == 0 {
        record_untimed(row, ix);
        return None;
    }
    let mut top = a - 1;
    st.active = top;
    if top == 0 {
        // The thread's last open call: its next calls may take the fast path again.
        fastpath::exact_done(tid);
    }
    if top as usize >= MAX_NEST {
        record_untimed(row, ix);
        return None;
    }
    // Calls exit innermost first. If the innermost open call is another target's, its exit
    // was lost (a kretprobe miss): drop the frames above this target's.
    let mut found = st.frames[nest_ix(top)].target == target;
    let mut i = 0;
    while !found && i < MAX_NEST as u32 && top > 0 {
        top -= 1;
        found = st.frames[nest_ix(top)].target == target;
        i += 1;
    }
    if !found {
        record_untimed(row, ix);
        return None;
    }
    if top != a - 1 {
        if let Some(c) = COUNTERS.get_ptr_mut(counter::ABANDONED_FRAMES) {
            unsafe { *c += (a - 1 - top) as u64 };
        }
        st.active = top;
        if top == 0 {
            fastpath::exact_done(tid);
        }
    }
    let f = st.frames[nest_ix(top)];
    // The enclosing traced call, when it is another target's (a recursive call of the same
    // target is no loop of another's, and is counted against nothing).
    let outer = if top > 0 {
        let parent = &mut st.frames[nest_ix(top - 1)];
        if parent.target == target {
            NO_TARGET
        } else {
            parent.inner = parent.inner.saturating_add(1);
            parent.target
        }
    } else {
        NO_TARGET
    };
    let wall = ts.saturating_sub(f.entry_ns);
    let oncpu_now = st.oncpu_ns + ts.saturating_sub(st.last_in_ns);
    let oncpu = oncpu_now.saturating_sub(f.oncpu_at_entry).min(wall);
    Some(Span {
        key,
        row,
        wall,
        oncpu,
        outer,
        trips: f.inner,
        end_ns: ts,
    })
}

/// A closed call, as the exact or the fast path paired it.
struct Span {
    key: AggKey,
    row: u32,
    wall: u64,
    oncpu: u64,
    /// The enclosing traced call's target (`NO_TARGET` when none).
    outer: u32,
    /// Timed calls of other targets that closed directly inside it.
    trips: u32,
    end_ns: u64,
}

/// Aggregate a closed call of thread `tid` of process `tgid`, with its caller stacks and raw
/// event when those are on.
#[inline(always)]
fn complete<C: EbpfContext>(ctx: &C, cfg: &Config, span: &Span, tid: u32, tgid: u32) {
    let key = span.key;
    let (row, wall, oncpu) = (span.row, span.wall, span.oncpu);
    let ix = span_index(row, cfg.target_stride, key.target);
    record_span(row, ix, wall, oncpu, span.outer, span.trips);

    if cfg.flags & FLAG_CALLER_STACKS != 0 {
        // Walking two stacks costs about a microsecond: always worth it for a call that
        // took longer than CALLER_ALWAYS_NS, sampled 1 in CALLER_SAMPLE (and weighted by
        // as much) for shorter ones, so the weights stay unbiased.
        let weight = if wall >= CALLER_ALWAYS_NS {
            1
        } else {
            match CALLER_TICK.get_ptr_mut(0) {
                Some(c) => {
                    let v = unsafe { *c };
                    unsafe { *c = v + 1 };
                    if v % CALLER_SAMPLE == 0 {
                        CALLER_SAMPLE
                    } else {
                        0
                    }
                }
                None => 0,
            }
        };
        if weight > 0 {
            let skey = StackKey {
                agg: key,
                kind: STACK_CALLER,
                kstack: stack_id(ctx, 0, counter::STACKS_LOST_CALLER),
                ustack: stack_id(ctx, BPF_F_USER_STACK as u64, counter::STACKS_LOST_CALLER),
                // The process whose maps name the user frames, by the pid userspace reads
                // /proc with (its namespace's, when the tracer runs in one).
                tgid: if cfg.pidns_ino != 0 {
                    current_ns_tgid(cfg)
                } else {
                    tgid
                },
            };
            add_stack_weighted(&skey, weight, wall * weight);
        }
    }
    if cfg.flags & FLAG_RAW_EVENTS != 0 {
        let ev = SpanEvent {
            end_ns: span.end_ns,
            wall_ns: wall,
            oncpu_ns: oncpu,
            n: key.n,
            case: key.case,
            target: key.target,
            tid,
            tgid,
        };
        if EVENTS.output::<SpanEvent>(&ev, 0).is_err() {
            bump(counter::RINGBUF_DROPS);
        }
    }
}

/// Calls at least this long always get their caller stacks recorded.
const CALLER_ALWAYS_NS: u64 = 20_000;
/// Shorter calls get them 1 in this many times (a power of two), weighted by as much.
const CALLER_SAMPLE: u64 = 64;

#[inline(always)]
pub(crate) fn on_point(slot: u32) {
    let Some(target) = slot_target(slot) else {
        return;
    };
    let Some(cfg) = config() else { return };
    if !filter_pass(cfg) {
        return;
    }
    // Point events are rare (plans that can only count): no thread state, a direct lookup.
    let tgid = (bpf_get_current_pid_tgid() >> 32) as u32;
    let (_, _, row) = lookup_phase(tgid);
    record_untimed(row, span_index(row, cfg.target_stride, target));
}

#[inline(always)]
pub(crate) fn top_target(st: &ThreadState) -> u32 {
    let a = st.active;
    if a == 0 {
        return 0;
    }
    let i = if a as usize > MAX_NEST {
        MAX_NEST as u32
    } else {
        a
    };
    st.frames[nest_ix(i - 1)].target
}
