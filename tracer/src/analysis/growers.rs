//! The growth tests of sampled kernel functions, shared by discover's per-op ranking and its
//! kernel loops (entries.rs): per N a profile of every function's inclusive and self time,
//! and the candidates whose time grows (see [`super::discover`]'s module docs for the rules).

use std::collections::{BTreeMap, BTreeSet};

use serde::Serialize;

use crate::rundata::USER_FRAME;

use super::fit::{Complexity, FlatReason, Point, Scaling};
use super::spread::RunSpread;

/// A function whose single callee carries this much of its added time is a pass-through.
pub const PASS_THROUGH: f64 = 0.75;
/// Added time must exceed this many standard errors of sampling noise.
pub const MIN_ADDED_SIGMA: f64 = 4.0;
/// ... and be at least this share of the kernel time per op at the largest N.
pub const MIN_SHARE: f64 = 0.05;
/// Samples a function needs at the largest N to be ranked at all.
pub const MIN_SAMPLES: u64 = 20;
/// Samples a size needs to take part in a function's fit.
pub const MIN_FIT_SAMPLES: u64 = 5;
/// Candidates kept in the ranking.
pub const MAX_RANKED: usize = 20;

/// One function at one N.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct FnPoint {
    pub n: u64,
    /// Inclusive and self time per op (ns).
    pub incl_ns: f64,
    pub self_ns: f64,
    /// Samples behind `incl_ns` (or blocked periods, for off-CPU).
    pub samples: u64,
    /// Share of the kernel time at this N (inclusive).
    pub share: f64,
}

impl Grower {
    /// The sizes its fit used (those with samples enough).
    pub fn fitted_points(&self) -> Vec<&FnPoint> {
        self.points
            .iter()
            .filter(|p| self.scaling.points.iter().any(|q| q.n == p.n as f64))
            .collect()
    }

    /// The time at `p` its class was fitted on: the self time when `fitted_on_self`.
    pub fn fitted_ns(&self, p: &FnPoint) -> f64 {
        if self.fitted_on_self {
            p.self_ns
        } else {
            p.incl_ns
        }
    }
}

/// Whether the self time carries at least half of what the inclusive time added from `first`
/// to `last`: a loop in the function's own body, beside callees whose work does not grow.
pub(super) fn self_carries_growth(first: &FnPoint, last: &FnPoint) -> bool {
    let added = last.incl_ns - first.incl_ns;
    added > 0.0 && last.self_ns - first.self_ns >= 0.5 * added
}

/// A function whose time grows with N.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Grower {
    pub function: String,
    pub points: Vec<FnPoint>,
    pub scaling: Scaling,
    /// Inclusive time per op at the largest N minus at the smallest (ns).
    pub added_ns: f64,
    /// Its one standard error from sampling.
    pub added_se_ns: f64,
    /// `added_ns` over the kernel's whole added time per op.
    pub added_share: f64,
    /// The caller chain (outermost first) of its heaviest stack at the largest N.
    pub callers: Vec<String>,
    /// The class was fitted on the self time (`self_carries_growth`, the inclusive fit flat):
    /// plots draw the self time against its model.
    pub fitted_on_self: bool,
    /// The function also grows in blocked time.
    pub also_blocked: bool,
}

/// The root cause: the frame whose self time carries most of the added time.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct DiscoverCause {
    pub function: String,
    /// Its self time's part of the kernel's added time per op.
    pub self_share: f64,
    pub self_added_ns: f64,
    /// Caller chain, outermost first.
    pub callers: Vec<String>,
    /// The fit of its self time: the best class, and every class the data allows (least
    /// growth first).
    pub class: Complexity,
    pub classes: Vec<Complexity>,
    pub slope: f64,
}

/// Per-N aggregates of one profile.
#[derive(Default)]
pub(super) struct Profile {
    /// function -> (inclusive weight, inclusive samples)
    pub(super) incl: BTreeMap<String, (u64, u64)>,
    /// function -> self weight
    pub(super) selfw: BTreeMap<String, u64>,
    /// function -> callee ("" for self) -> weight: a function's callees are one lookup.
    pub(super) edges: BTreeMap<String, BTreeMap<String, u64>>,
    pub(super) kernel_w: u64,
    pub(super) user_w: u64,
    pub(super) samples: u64,
    /// function -> (weight, chain) of its heaviest stack
    pub(super) heaviest: BTreeMap<String, (u64, Vec<String>)>,
}

fn is_pseudo(frame: &str) -> bool {
    frame.starts_with('[')
}

/// The syscall entry and dispatch code that sits above every syscall: its growth is the sum of
/// unrelated syscalls' (a benchmark's setup forks and its timed waits), so it is never the
/// function that grows, only a caller of it. With it the syscall tracing hooks, where the
/// tracer's own programs run (runs recorded before the collector dropped 6.1's
/// `syscall_trace_enter.constprop.0` as a probe frame keep its time under that name).
fn is_dispatch(frame: &str) -> bool {
    const PREFIXES: [&str; 9] = [
        "entry_SYSCALL",
        "do_syscall_",
        "x64_sys_call",
        "do_fast_syscall",
        "__do_fast_syscall",
        "do_int80",
        "syscall_trace_enter",
        "syscall_exit_work",
        "trace_syscall_exit",
    ];
    PREFIXES.iter().any(|p| frame.starts_with(p))
}

pub(super) fn profile(stacks: &crate::rundata::Folded, period_ns: u64) -> Profile {
    let mut p = Profile::default();
    for (frames, w) in stacks.iter() {
        let samples = w.checked_div(period_ns).unwrap_or(0).max(1);
        p.samples += samples;
        if frames.len() == 1 && frames[0] == USER_FRAME {
            p.user_w += w;
            continue;
        }
        p.kernel_w += w;
        let mut seen: BTreeSet<&str> = BTreeSet::new();
        for (i, f) in frames.iter().enumerate() {
            if is_pseudo(f) {
                continue;
            }
            if seen.insert(f.as_str()) {
                let e = slot(&mut p.incl, f);
                e.0 += w;
                e.1 += samples;
                let h = slot(&mut p.heaviest, f);
                if w > h.0 {
                    *h = (w, frames[..i].to_vec());
                }
            }
            let callee = frames.get(i + 1).map_or("", String::as_str);
            *slot(slot(&mut p.edges, f), callee) += w;
        }
        if let Some(leaf) = frames.last().filter(|f| !is_pseudo(f)) {
            *slot(&mut p.selfw, leaf) += w;
        }
    }
    p
}

/// `m`'s entry for `k`, inserted empty when absent: the key is copied only then (a profile
/// sees each frame name thousands of times; cloning it for every lookup was most of the
/// analysis of a discover sweep).
fn slot<'m, V: Default>(m: &'m mut BTreeMap<String, V>, k: &str) -> &'m mut V {
    if !m.contains_key(k) {
        m.insert(k.to_string(), V::default());
    }
    m.get_mut(k).expect("inserted above")
}

/// The added kernel time per op from `p0` (ops `o0`) to `p1`: the sum of the self times that
/// grew. Frames whose time fell do not offset it: a run's fixed start-up cost spread over the
/// few ops of the smallest N falls with N, and netting it off would hide the growth (or push
/// one function's share of the net over 100%).
pub(super) fn grown(p0: &Profile, p1: &Profile, o0: f64, o1: f64) -> f64 {
    let frames: BTreeSet<&String> = p0.selfw.keys().chain(p1.selfw.keys()).collect();
    frames
        .into_iter()
        .map(|f| {
            let w = |p: &Profile| p.selfw.get(f).copied().unwrap_or(0) as f64;
            (w(p1) / o1 - w(p0) / o0).max(0.0)
        })
        .sum()
}

/// The candidates that pass the tests on added time, split by what their fit says.
#[derive(Default)]
pub(super) struct Growers {
    /// Those whose time grows (see the module docs), most added time first.
    pub growing: Vec<Grower>,
    /// Those whose time rose by the added-time tests but whose fit cannot tell growth from a
    /// step: above the smallest N's time at the largest N only ([`FlatReason::OneSize`]), or
    /// above it by less than the fit's noise margin ([`FlatReason::WithinNoise`]). Most added
    /// time first; the class fields hold the flat fit.
    pub undecided: Vec<Grower>,
}

/// The candidates (see the module docs) that pass the growth tests, and those left undecided.
pub(super) fn growers(
    ns: &[u64],
    ops: &[f64],
    profiles: &[Profile],
    kernel_added: f64,
    kernel_ns: &[f64],
    spread: &RunSpread,
) -> Growers {
    let last = ns.len() - 1;
    if last == 0 || kernel_added <= 0.0 {
        return Growers::default();
    }
    let p1 = &profiles[last];
    let mut out = Growers::default();
    for (f, &(_, samples1)) in &p1.incl {
        if samples1 < MIN_SAMPLES || is_dispatch(f) {
            continue;
        }
        let Some((added, se)) = added_time(f, profiles, ops) else {
            continue;
        };
        if added < MIN_ADDED_SIGMA * se || per_op(p1, f, ops[last]) < MIN_SHARE * kernel_ns[last] {
            continue;
        }
        let points = fn_points(f, ns, ops, profiles, kernel_ns);
        let Some((scaling, fitted_on_self)) = fit_function(&points, spread) else {
            continue;
        };
        let undecided = matches!(
            scaling.flat_reason,
            Some(FlatReason::OneSize | FlatReason::WithinNoise)
        );
        if scaling.class == Complexity::Constant && !undecided {
            continue;
        }
        let list = if undecided {
            &mut out.undecided
        } else {
            &mut out.growing
        };
        list.push(Grower {
            function: f.clone(),
            points,
            scaling,
            added_ns: added,
            added_se_ns: se,
            added_share: added / kernel_added,
            callers: p1.heaviest.get(f).map(|h| h.1.clone()).unwrap_or_default(),
            fitted_on_self,
            also_blocked: false,
        });
    }
    for list in [&mut out.growing, &mut out.undecided] {
        list.sort_by(|a, b| b.added_ns.total_cmp(&a.added_ns));
        list.truncate(MAX_RANKED);
    }
    out
}

/// Function `f`'s inclusive time per op in profile `p` of `o` ops.
fn per_op(p: &Profile, f: &str, o: f64) -> f64 {
    p.incl.get(f).map_or(0.0, |v| v.0 as f64 / o)
}

/// The time per op `f` adds from the smallest size to the largest, with its Poisson error;
/// None when it adds none, or when it passes most of it through to one callee (that callee
/// is the grower, not `f`).
fn added_time(f: &str, profiles: &[Profile], ops: &[f64]) -> Option<(f64, f64)> {
    let last = profiles.len() - 1;
    let (p0, p1) = (&profiles[0], &profiles[last]);
    let edge = |p: &Profile, c: &str, o: f64| {
        p.edges
            .get(f)
            .and_then(|m| m.get(c))
            .map_or(0.0, |w| *w as f64 / o)
    };
    let added = per_op(p1, f, ops[last]) - per_op(p0, f, ops[0]);
    if added <= 0.0 {
        return None;
    }
    let callees: BTreeSet<&String> = p1
        .edges
        .get(f)
        .into_iter()
        .flat_map(|m| m.keys())
        .filter(|c| !c.is_empty())
        .collect();
    let dominated = callees
        .iter()
        .any(|c| edge(p1, c, ops[last]) - edge(p0, c, ops[0]) >= PASS_THROUGH * added);
    if dominated {
        return None;
    }
    // Poisson error of the added time, in ns per op.
    let w_per_sample = |p: &Profile| {
        p.incl
            .get(f)
            .map_or(0.0, |v| v.0 as f64 / v.1.max(1) as f64)
    };
    let samples1 = p1.incl.get(f).map_or(0, |v| v.1) as f64;
    let s0 = p0.incl.get(f).map_or(0, |v| v.1) as f64;
    let se = (samples1.sqrt() * w_per_sample(p1) / ops[last])
        .hypot(s0.max(1.0).sqrt() * w_per_sample(p0).max(w_per_sample(p1)) / ops[0]);
    Some((added, se))
}

/// `f`'s time per op at each size: inclusive, self, its samples and its share of the kernel
/// time.
fn fn_points(
    f: &str,
    ns: &[u64],
    ops: &[f64],
    profiles: &[Profile],
    kernel_ns: &[f64],
) -> Vec<FnPoint> {
    ns.iter()
        .enumerate()
        .map(|(i, &n)| {
            let p = &profiles[i];
            let incl = per_op(p, f, ops[i]);
            FnPoint {
                n,
                incl_ns: incl,
                self_ns: p.selfw.get(f).map_or(0.0, |w| *w as f64 / ops[i]),
                samples: p.incl.get(f).map_or(0, |v| v.1),
                share: if kernel_ns[i] > 0.0 {
                    incl / kernel_ns[i]
                } else {
                    0.0
                },
            }
        })
        .collect()
}

/// The fit of a function's inclusive time per op, or of its self time where the inclusive
/// one reads flat and the self time carries the growth (whether it was, beside it).
fn fit_function(points: &[FnPoint], spread: &RunSpread) -> Option<(Scaling, bool)> {
    // Sizes with a handful of samples say little about a time (±45% at 5 samples) and
    // would bend the class: the fit uses the sizes with MIN_FIT_SAMPLES or more.
    let fit_points: Vec<Point> = points
        .iter()
        .filter(|p| p.samples >= MIN_FIT_SAMPLES)
        .map(|p| Point {
            n: p.n as f64,
            t: p.incl_ns,
            rel_se: Some(1.0 / (p.samples as f64).sqrt()),
        })
        .collect();
    let scaling = spread.fit(&fit_points);
    // A loop in the function's own body beside fixed work in its callees: the fixed part
    // hides the loop's rise at the middle sizes, where the inclusive time stays within
    // the fit's margin of its baseline, and the fit calls it flat. When the self time
    // carries at least half the added time, its own growth is fitted: 6.1's
    // wait_consider_task walks the children in its body and reaps through release_task
    // (under TCG a fixed cost, most of the call at N = 10); over N = 10, 100, 1000 jobs
    // of a shell its self time per call rose 14 -> 57 -> 233 µs, its inclusive time
    // 176 -> 206 -> 358 µs (17% over the baseline at N = 100, where the margin is 20%).
    let (first, last) = (points.first()?, points.last()?);
    if scaling
        .as_ref()
        .is_none_or(|s| s.class == Complexity::Constant)
        && self_carries_growth(first, last)
    {
        let self_points: Vec<Point> = points
            .iter()
            .filter(|p| p.samples >= MIN_FIT_SAMPLES && p.self_ns > 0.0)
            .map(|p| Point {
                n: p.n as f64,
                t: p.self_ns,
                // The self time's share of the samples, at least one.
                rel_se: Some(1.0 / (p.samples as f64 * p.self_ns / p.incl_ns).max(1.0).sqrt()),
            })
            .collect();
        // Kept only when it grows: else the inclusive fit stands, and with it the reason
        // it was flat.
        let on_self = spread.fit(&self_points);
        if on_self
            .as_ref()
            .is_some_and(|s| s.class != Complexity::Constant)
        {
            return on_self.map(|s| (s, true));
        }
    }
    scaling.map(|s| (s, false))
}

/// The frame whose self time carries most of the added kernel time, when a growing function
/// contains it.
pub(super) fn root_cause(
    ns: &[u64],
    ops: &[f64],
    profiles: &[Profile],
    kernel_added: f64,
    ranked: &[Grower],
    spread: &RunSpread,
) -> Option<DiscoverCause> {
    let top = ranked.first()?;
    let last = ns.len() - 1;
    let (p0, p1) = (&profiles[0], &profiles[last]);
    // Leaves under the top candidate at the largest N (or the candidate itself).
    let mut best: Option<(String, f64)> = None;
    for (leaf, w1) in &p1.selfw {
        let under = leaf == &top.function
            || p1
                .heaviest
                .get(leaf)
                .is_some_and(|h| h.1.contains(&top.function));
        if !under {
            continue;
        }
        let w0 = p0.selfw.get(leaf).copied().unwrap_or(0);
        let added = *w1 as f64 / ops[last] - w0 as f64 / ops[0];
        if best.as_ref().is_none_or(|b| added > b.1) {
            best = Some((leaf.clone(), added));
        }
    }
    let (function, self_added) = best?;
    if self_added <= 0.0 {
        return None;
    }
    let points: Vec<Point> = ns
        .iter()
        .enumerate()
        .filter_map(|(i, &n)| {
            let w = profiles[i].selfw.get(&function).copied().unwrap_or(0);
            let samples = if period_of(&profiles[i]) > 0.0 {
                (w as f64 / period_of(&profiles[i])) as u64
            } else {
                0
            };
            (samples >= MIN_FIT_SAMPLES).then(|| Point {
                n: n as f64,
                t: w as f64 / ops[i],
                rel_se: Some(1.0 / (samples as f64).sqrt()),
            })
        })
        .collect();
    // The same function as the top candidate: one class and slope for it, not two fits of
    // nearly the same samples that may land on neighbouring classes.
    let scaling = if function == top.function {
        Some(top.scaling.clone())
    } else {
        spread.fit(&points)
    };
    Some(DiscoverCause {
        callers: p1
            .heaviest
            .get(&function)
            .map(|h| h.1.clone())
            .unwrap_or_default(),
        function,
        self_share: self_added / kernel_added,
        self_added_ns: self_added,
        class: scaling.as_ref().map_or(top.scaling.class, |s| s.class),
        classes: scaling
            .as_ref()
            .map_or(top.scaling.classes.clone(), |s| s.classes.clone()),
        slope: scaling
            .as_ref()
            .map_or(top.scaling.slope.slope, |s| s.slope.slope),
    })
}

/// Weight of one sample in a profile (its sampling period), from its own totals.
fn period_of(p: &Profile) -> f64 {
    if p.samples == 0 {
        0.0
    } else {
        (p.kernel_w + p.user_w) as f64 / p.samples as f64
    }
}
