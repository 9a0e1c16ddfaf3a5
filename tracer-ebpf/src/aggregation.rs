//! In-kernel aggregation: span counts and sums per row, log-linear histograms, stack weights.

use aya_ebpf::bindings::BPF_NOEXIST;
use tracer_ebpf::*;

use crate::{
    maps::{HIST, SPANS, STACKS, STACKS_INSERTING, TRIP_HIST},
    util::{atomic_add, bump, opaque, target_ix},
};

/// The `SPANS` element of a call, or None (counted as lost) when its phase got no row.
#[inline(always)]
fn span_stats(row: u32, ix: u32) -> Option<*mut SpanStats> {
    if row == NO_ROW {
        bump(counter::AGG_MAP_FULL);
        return None;
    }
    let s = SPANS.get_ptr_mut(ix);
    if s.is_none() {
        bump(counter::AGG_MAP_FULL);
    }
    s
}

/// A call counted without a duration.
#[inline(always)]
pub(crate) fn record_untimed(row: u32, ix: u32) {
    if let Some(s) = span_stats(row, ix) {
        let s = unsafe { &mut *s };
        s.calls += 1;
        s.untimed += 1;
    }
}

/// A timed call; `outer` is the target of the innermost other traced call it ran inside
/// (`NO_TARGET` when none), `trips` the timed calls of other targets that closed directly
/// inside it.
#[inline(always)]
pub(crate) fn record_span(row: u32, ix: u32, wall: u64, oncpu: u64, outer: u32, trips: u32) {
    let Some(s) = span_stats(row, ix) else { return };
    let s = unsafe { &mut *s };
    update_stats(s, wall, oncpu);
    if (outer as usize) < MAX_TARGETS {
        s.within[target_ix(outer)] += 1;
    }
    hist_add(hist_index(ix, HIST_WALL), hist_bucket(wall));
    hist_add(hist_index(ix, HIST_ONCPU), hist_bucket(oncpu));
    // Calls with no trips are the rest of its calls: only a call around others pays this.
    if trips > 0
        && let Some(h) = TRIP_HIST.get_ptr_mut(ix)
    {
        add_bucket(h, hist_bucket(trips as u64));
    }
}

#[inline(always)]
fn update_stats(s: &mut SpanStats, wall: u64, oncpu: u64) {
    // A per-CPU element created on another CPU starts at zero here: treat calls == 0 as empty.
    let first = s.calls == s.untimed;
    s.calls += 1;
    s.wall_sum += wall;
    s.oncpu_sum += oncpu;
    if first || wall < s.wall_min {
        s.wall_min = wall;
    }
    if wall > s.wall_max {
        s.wall_max = wall;
    }
    if first || oncpu < s.oncpu_min {
        s.oncpu_min = oncpu;
    }
    if oncpu > s.oncpu_max {
        s.oncpu_max = oncpu;
    }
}

#[inline(always)]
fn hist_add(hist_ix: u32, bucket: u32) {
    let Some(h) = HIST.get_ptr_mut(hist_ix) else {
        bump(counter::AGG_MAP_FULL);
        return;
    };
    add_bucket(h, bucket);
}

/// One more count in `bucket` of the histogram `h`.
#[inline(always)]
fn add_bucket(h: *mut HistRow, bucket: u32) {
    // A 64-bit bound on a value the verifier cannot otherwise bound (hist_bucket's result).
    let b = opaque(bucket as u64);
    if b >= HIST_BUCKETS as u64 {
        return;
    }
    atomic_add(unsafe { (h as *mut u64).add(b as usize) }, 1);
}

#[inline(always)]
pub(crate) fn add_stack(key: &StackKey, ns: u64) {
    add_stack_weighted(key, 1, ns)
}

#[inline(always)]
pub(crate) fn add_stack_weighted(key: &StackKey, count: u64, ns: u64) {
    add_stack_in(key, count, ns, false)
}

/// `add_stack` from the sampler, a perf-event program that runs in NMI context and so may
/// interrupt another program of ours on the same CPU: raw tracepoint and fentry programs do
/// not take `bpf_prog_active`, through which perf-event programs exclude each other, and
/// before 5.11 a hash map insert from an NMI that interrupted an insert holding the same
/// bucket lock spins on it for ever. So the sampler adds to an existing entry (lock-free) but
/// does not insert while this CPU is inserting; that sample is counted as a lost stack.
#[inline(always)]
pub(crate) fn add_stack_nmi(key: &StackKey, ns: u64) {
    add_stack_in(key, 1, ns, true)
}

#[inline(always)]
fn add_stack_in(key: &StackKey, count: u64, ns: u64, nmi: bool) {
    if let Some(v) = STACKS.get_ptr_mut(key) {
        let v = v as *mut u64;
        atomic_add(v, count);
        atomic_add(unsafe { v.add(1) }, ns);
        return;
    }
    let Some(inserting) = STACKS_INSERTING.get_ptr_mut(0) else {
        bump(counter::STACK_ERRORS);
        return;
    };
    if nmi {
        if unsafe { *inserting } != 0 {
            bump(counter::STACK_ERRORS);
            return;
        }
    } else {
        unsafe { *inserting = 1 };
    }
    let val = StackVal { count, ns };
    let res = STACKS.insert(key, &val, BPF_NOEXIST as u64);
    if !nmi {
        unsafe { *inserting = 0 };
    }
    if res.is_err() {
        match STACKS.get_ptr_mut(key) {
            Some(v) => {
                let v = v as *mut u64;
                atomic_add(v, count);
                atomic_add(unsafe { v.add(1) }, ns);
            }
            None => {
                bump(counter::STACK_ERRORS);
                bump(counter::STACK_AGGREGATES_FULL);
            }
        }
    }
}
