//! One entry measured over the sizes (its calls per op, its time per call, the frames inside
//! it that grow) and judged: a loop, more calls, or neither.

use super::*;
use crate::analysis::growers::FnPoint;

/// An entry measured over the sizes, before its frames are judged.
pub(super) struct Measured {
    /// Its points and fits, no frames yet.
    pub(super) entry: KernelEntry,
    /// Calls per size.
    pub(super) calls: Vec<f64>,
    /// Its own work per size (no context switch or interrupt), and its time per call.
    pub(super) own: Vec<Profile>,
    pub(super) own_per_call: Vec<f64>,
}

/// Entry `name` over the sizes; None when some size has no call of it (nothing per call to
/// compare there).
pub(super) fn measure(name: &str, c: CaseData) -> Option<Measured> {
    let CaseData {
        ns,
        ops,
        period_ns,
        files,
        rows,
        kernel_ns,
        spread,
        ..
    } = c;
    let mut calls = Vec::with_capacity(ns.len());
    for &n in ns {
        let c: u64 = rows
            .iter()
            .filter(|r| r.n == n && r.entry == name)
            .map(|r| r.calls)
            .sum();
        if c == 0 {
            return None;
        }
        calls.push(c as f64);
    }
    // Each size's samples of the entry: all of them, and its own work (without the samples
    // taken in a context switch or an interrupt inside it), where the loops are looked for.
    let (profiles, own): (Vec<Profile>, Vec<Profile>) = ns
        .iter()
        .map(|&n| {
            files
                .iter()
                .find(|s| s.file.n == n && s.file.target == name)
                .map(|s| {
                    (
                        profile(&s.folded, period_ns),
                        profile(&own_work(&s.folded), period_ns),
                    )
                })
                .unwrap_or_default()
        })
        .unzip();
    let points = entry_points(ns, ops, period_ns, kernel_ns, &profiles, &calls);
    let per_call = spread.fit(
        &points
            .iter()
            .filter(|p| p.samples >= MIN_FIT_SAMPLES)
            .map(|p| Point {
                n: p.n as f64,
                t: p.per_call_ns,
                rel_se: Some(1.0 / (p.samples as f64).sqrt()),
            })
            .collect::<Vec<_>>(),
    );
    // Counts are exact; what varies is the runs (a shell's own start-up): a small error.
    let calls_fit = fit_scaling(
        &points
            .iter()
            .map(|p| Point {
                n: p.n as f64,
                t: p.calls_per_op,
                rel_se: Some(0.02),
            })
            .collect::<Vec<_>>(),
    );
    let (f, l) = (&points[0], &points[points.len() - 1]);
    let entry = KernelEntry {
        entry: name.to_string(),
        added_per_call_ns: l.per_call_ns - f.per_call_ns,
        added_se_ns: l.per_call_se_ns.hypot(f.per_call_se_ns),
        points,
        per_call,
        calls: calls_fit,
        frames: Vec::new(),
        undecided: Vec::new(),
        cause: None,
    };
    let own_per_call = (0..ns.len())
        .map(|i| own[i].kernel_w as f64 / calls[i])
        .collect();
    Some(Measured {
        entry,
        calls,
        own,
        own_per_call,
    })
}

/// The entry's point at each size: calls per op, time per call from its samples (with its
/// Poisson error), wall time per call from its counts, and its share of the kernel time.
fn entry_points(
    ns: &[u64],
    ops: &[f64],
    period_ns: u64,
    kernel_ns: &[f64],
    profiles: &[Profile],
    calls: &[f64],
) -> Vec<EntryPoint> {
    (0..ns.len())
        .map(|i| {
            let p = &profiles[i];
            let per_call = p.kernel_w as f64 / calls[i];
            EntryPoint {
                n: ns[i],
                calls_per_op: calls[i] / ops[i],
                per_call_ns: per_call,
                // Poisson: a count of s samples has error √s (at least one sample's worth,
                // so a size with none still has an error).
                per_call_se_ns: period_ns as f64 * (p.samples.max(1) as f64).sqrt() / calls[i],
                samples: p.samples,
                share: if kernel_ns[i] > 0.0 {
                    per_call * calls[i] / ops[i] / kernel_ns[i]
                } else {
                    0.0
                },
            }
        })
        .collect()
}

/// Measured entry `m` with the frames inside it whose time per call grows (as a loop's, or
/// undecided), judged beyond the entries' common slowdown `common`, and still rising at the
/// end beyond their `drift` from the second-largest size to the largest.
pub(super) fn judge(m: Measured, c: CaseData, common: f64, drift: f64) -> KernelEntry {
    let Measured {
        entry: mut e,
        calls,
        own,
        own_per_call,
    } = m;
    let CaseData { ns, spread, .. } = c;
    let last = ns.len() - 1;
    let added = grown(&own[0], &own[last], calls[0], calls[last]);
    let found = growers(ns, &calls, &own, added, &own_per_call, spread);
    e.frames = found.growing;
    e.undecided = found.undecided;
    // A practical minimum on top of the statistical one: a frame whose time per call rose
    // by less is as likely the machine's drift as a loop. And a loop is still growing at
    // the end: the few calls of the smallest size vary from run to run more than their
    // samples say (a benchmark's 110 forks at N = 10 took 30 to 155 µs each in six sweeps
    // here), and a rise that stops after it is that size's luck, not a walk over N.
    e.frames
        .retain(|g| grows_as_a_loop(&g.points, &g.points, common, drift));
    // An undecided frame must rise twofold over the sizes its fit used: a size left out for
    // its few samples (a 6.1 `close`'s fput, 2 samples at N = 10) is no baseline to double.
    e.undecided.retain(|g| {
        let fitted: Vec<FnPoint> = g.fitted_points().into_iter().cloned().collect();
        grows_as_a_loop(&fitted, &g.points, common, drift)
    });
    e.cause = root_cause(ns, &calls, &own, added, &e.frames, spread);
    e
}

/// Frames whose time is not the entry's own work: the context switch (the switch itself and
/// the work right after the task runs again: the address-space switch, perf's own per-task
/// switching) and interrupts taken while inside it (timers, softirqs such as RCU freeing).
/// Both grow with how many tasks the machine runs, in any syscall: a 6.1 guest with 1000
/// background jobs showed `finish_task_switch` growing per call under page faults, execve,
/// clone and readlink alike, and `handle_softirqs` under execve and readlink. No loop of the
/// syscall's lives there.
fn is_not_the_entrys(frame: &str) -> bool {
    const PREFIXES: [&str; 11] = [
        "finish_task_switch",
        "__schedule",
        "context_switch",
        "__switch_to",
        "asm_sysvec_",
        "sysvec_",
        "asm_common_interrupt",
        "common_interrupt",
        "handle_softirqs",
        "__do_softirq",
        "__irq_exit_rcu",
    ];
    frame == "schedule" || frame == "irq_exit_rcu" || PREFIXES.iter().any(|p| frame.starts_with(p))
}

/// `stacks` without the samples of a context switch or an interrupt ([`is_not_the_entrys`]).
fn own_work(stacks: &Folded) -> Folded {
    let mut out = Folded::new();
    for (frames, w) in stacks.iter() {
        if !frames.iter().any(|f| is_not_the_entrys(f)) {
            out.add(frames.to_vec(), w);
        }
    }
    out
}

/// Whether a frame's time per call grows enough to be a loop: its inclusive time per call at
/// the largest N is [`MIN_LOOP_GROWTH`] times its value at the smallest, or its self time is
/// and carries at least half of what the inclusive time added. The second is a loop in the
/// frame's own body beside fixed work in its callees, which dilutes the inclusive rise: 5.10's
/// `wait_consider_task` walks the children in its body and reaps one through `release_task`,
/// whose /proc dcache invalidation carried half of wait4's time at N = 10 under TCG. Over
/// N = 10..500 jobs of a shell its self time per wait4 call rose 12 to 16 times in three
/// sweeps, its inclusive time 2.4 to 2.9 times, and in another sweep less than twice.
///
/// Whichever time passes must also still rise at the end ([`still_rising`] over `all`, every
/// size): the self time where it carries the growth. A 5.10 guest on a busy host spent 97 µs
/// per wait4 call reaping (release_task) at N = 100 against 44 µs at 500, so the walk's
/// inclusive time fell at the end (162 -> 134 µs) while its self time, the walk, rose
/// (16, 58, 86 µs at N = 10, 100, 500).
fn grows_as_a_loop(growth: &[FnPoint], all: &[FnPoint], common: f64, drift: f64) -> bool {
    let (Some(f), Some(l)) = (growth.first(), growth.last()) else {
        return false;
    };
    let rises =
        |f: f64, l: f64| l >= MIN_LOOP_GROWTH * f && l >= MIN_GROWTH_BEYOND_COMMON * common * f;
    let incl = |p: &FnPoint| (p.incl_ns, p.samples as f64);
    let own = |p: &FnPoint| {
        let share = if p.incl_ns > 0.0 {
            p.self_ns / p.incl_ns
        } else {
            0.0
        };
        (p.self_ns, p.samples as f64 * share)
    };
    (rises(f.incl_ns, l.incl_ns) && still_rising(all, drift, incl))
        || (rises(f.self_ns, l.self_ns)
            && self_carries_growth(f, l)
            && still_rising(all, drift, own))
}

/// Standard errors of sampling the rise from the second-largest size to the largest must
/// clear for a loop to be still growing at the end (three sizes or more).
pub const END_RISE_SIGMA: f64 = 2.0;

/// Whether a frame's time per call (`time`: a point's time and the samples behind it) still
/// rises from the second-largest N to the largest by more than [`END_RISE_SIGMA`] Poisson
/// errors (true with fewer than three sizes), the second-largest's time taken at the
/// machine's speed at the largest (times `drift`, the entries' common change per call
/// between the two).
fn still_rising(points: &[FnPoint], drift: f64, time: impl Fn(&FnPoint) -> (f64, f64)) -> bool {
    let [.., prev, last] = points else {
        return true;
    };
    if points.len() < 3 {
        return true;
    }
    let ((t0, s0), (t1, s1)) = (time(prev), time(last));
    let se = |t: f64, s: f64| t / s.max(1.0).sqrt();
    t1 - drift * t0 > END_RISE_SIGMA * se(t1, s1).hypot(drift * se(t0, s0))
}
