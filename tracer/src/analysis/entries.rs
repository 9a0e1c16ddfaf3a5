//! Kernel loops against more calls, from the traced tasks' kernel entries (`--discover`).
//!
//! The kernel counts every syscall of the traced tasks by name (and user page faults), and
//! files every kernel sample under the entry it ran under (`rundata::EntryRow`, the `entry`
//! stacks). Per entry and N that gives its calls per op, exact, and its on-CPU time per
//! call, sampled (Poisson error 1/√samples). Two different things grow with N:
//!
//! - a **kernel loop**: an entry whose *time per call* grows (each `wait4` walks N children).
//!   This is the answer: the frames inside it whose time per call grows say which loop;
//! - **more calls**: an entry whose *calls per op* grow while its time per call does not (a
//!   benchmark forking N children per run makes N more `clone`s, `execve`s, page faults).
//!   That is the workload's own scaling: stated, never the answer.
//!
//! An entry is a loop when a frame inside it grows per call of the entry: the discover
//! ranking (inclusive time, pass-throughs left to their callee, a growth class, at least
//! `MIN_ADDED_SIGMA` standard errors and 5% of the entry's time) run on the entry's own
//! samples with its calls as the ops, and the frame's time per call (or its self time, when
//! that carries the growth) at least [`MIN_LOOP_GROWTH`] times its value at the smallest N,
//! and [`MIN_GROWTH_BEYOND_COMMON`] times beyond the slowdown common to the entries
//! ([`CommonSlowdown`]: a machine that runs every syscall slower at the largest N)
//! (`grows_enough`). The frame decides, not the entry's whole time per call: at small N a
//! `wait4` can spend most of its time spinning on a lock that the children's exits hold,
//! which falls as the walk over the children grows.
//!
//! Loops rank by the time their growth per call adds per op (`added_per_op`: the top frame's
//! time per call at the largest N less at the smallest, times the calls per op at the
//! largest N), not by their whole time: an `execve` that tears down a shell twice as large
//! at 1000 jobs as at 10 is a heavy syscall made N more times, and its whole time would put
//! it above the walk in `wait4` whose per-call time quadruples (a 6.1 guest under TCG). A loop
//! whose class the data places wholly above another's (both measured at [`CLASS_SIZES`] sizes
//! of `MIN_SAMPLES` samples or more, the least class of its set above the greatest of the
//! other's) ranks above it whatever their times: a higher class overtakes a lower one as N
//! grows. Where the sets overlap the data does not order the classes, and time decides (a
//! shell's mixed wait4 calls fit anything from O(log n) to O(n^2)).
//!
//! An entry made more often per op whose whole time per call does not double is listed
//! under more calls even when a frame inside it is also a (minor) loop: a shell's `execve`s
//! grow in number with its jobs, and each tears down a slightly larger copy of the shell.
//!
//! The interrupts and preemptions counted beside the entries are neither: their number
//! follows the run's length, and `runlength` says when they, rather than more calls, carry
//! the growth of the kernel time per op.

use std::collections::BTreeSet;

use serde::Serialize;

use crate::rundata::{EntryRow, Interruption, InterruptionCounting, StackKind};

use super::fit::{Complexity, Point, Scaling, fit_scaling};
use super::growers::{
    DiscoverCause, Grower, MIN_FIT_SAMPLES, MIN_SAMPLES, Profile, growers, grown, profile,
    root_cause, self_carries_growth,
};
use super::runlength::{self, KernelGrowth, RunLength};
use super::spread::RunSpread;
use super::stacks::Folded;
use super::stacks::StackData;

/// A frame's time per call must at least double from the smallest to the largest N to be a
/// loop: the walk then carries most of the frame's time at the largest N. Below, the frame's
/// fixed work dominates, and a rise is as likely the workload's own data growing a little
/// (a bash with N jobs has a larger heap for every exec to tear down: `exit_mmap` 66 → 114 µs
/// per execve over N = 10..1000) or the machine's drift (caches, TCG).
pub const MIN_LOOP_GROWTH: f64 = 2.0;
/// A frame's time per call must also grow this many times beyond the slowdown common to the
/// entries ([`CommonSlowdown`]) to be a loop. The other entries scatter about that common
/// factor: in 34 sweeps of a shell with 10 to 500 or 1000 background jobs under TCG (5.10 and
/// 6.1, 316 entries besides wait4), their own time per call rose 0.37 to 1.46 times as much
/// as the factor, and wait4's 1.55 to 4.6 times (its walk frame more: its lock spin falls).
pub const MIN_GROWTH_BEYOND_COMMON: f64 = 1.5;
/// Entries with [`FEW_SAMPLES`] of their own samples at the smallest and the largest N it takes
/// to measure a slowdown common to them: with fewer, a loop could be its own median.
pub const COMMON_ENTRIES: usize = 5;
/// Calls per op must be at least this many times their number at the smallest N to be
/// "more calls".
pub const MIN_CALLS_GROWTH: f64 = 1.5;
/// An entry is listed under "more calls" only with at least this share of the kernel time
/// at the largest N (dozens of syscalls grow in number with a forking setup).
pub const MIN_MORE_CALLS_SHARE: f64 = 0.02;
/// Sizes a loop's class must be fitted at to rank by class.
pub const CLASS_SIZES: usize = 3;

/// One entry kind at one N.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct EntryPoint {
    pub n: u64,
    /// Calls per op (exact).
    pub calls_per_op: f64,
    /// Sampled on-CPU kernel time per call (ns), and its standard error.
    pub per_call_ns: f64,
    pub per_call_se_ns: f64,
    /// Entry to exit per call (ns): syscalls only (0 for page faults), blocked time included.
    pub wall_per_call_ns: f64,
    /// Samples filed under the entry.
    pub samples: u64,
    /// Its share of the sampled kernel time.
    pub share: f64,
}

/// One kind of kernel entry over the sizes.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct KernelEntry {
    /// A syscall's name, or `page_fault`.
    pub entry: String,
    pub points: Vec<EntryPoint>,
    /// On-CPU time per call against N (None: too few sizes with samples to fit).
    pub per_call: Option<Scaling>,
    /// Calls per op against N.
    pub calls: Option<Scaling>,
    /// Time per call at the largest N minus at the smallest, and its standard error.
    pub added_per_call_ns: f64,
    pub added_se_ns: f64,
    /// Inside a loop: the frames whose time per call grows, most added time first.
    pub frames: Vec<Grower>,
    /// Frames whose time per call rose as much as a loop's, but at too few sizes for the data
    /// to tell a growing loop from a step (see [`Entries::undecided`]), most added time first.
    pub undecided: Vec<Grower>,
    /// Inside a loop: the frame whose self time carries most of the added time per call.
    pub cause: Option<DiscoverCause>,
}

impl KernelEntry {
    pub fn first(&self) -> &EntryPoint {
        &self.points[0]
    }

    pub fn last(&self) -> &EntryPoint {
        &self.points[self.points.len() - 1]
    }

    /// The frame whose time per call grows most, inside a loop.
    pub fn top(&self) -> Option<&Grower> {
        self.frames.first()
    }

    /// The class set of the top frame's time per call, when it rests on [`CLASS_SIZES`] sizes
    /// or more with `MIN_SAMPLES` samples each: a set fitted through sizes of a handful of
    /// samples can come out narrow and high by chance (a minor frame's 5 samples at one size
    /// and 500 at the next), and it would put that frame above the walk.
    fn ranked_classes(&self) -> Option<&[Complexity]> {
        let g = self.top()?;
        let measured = g.points.iter().filter(|p| p.samples >= MIN_SAMPLES).count();
        (measured >= CLASS_SIZES && !g.scaling.classes.is_empty())
            .then_some(g.scaling.classes.as_slice())
    }

    /// Whether the data places this loop's class wholly above `other`'s.
    pub fn outranks(&self, other: &KernelEntry) -> bool {
        match (self.ranked_classes(), other.ranked_classes()) {
            (Some(a), Some(b)) => a.first() > b.last(),
            _ => false,
        }
    }

    /// The top frame's time per op at the largest N (ns): the loop's weight in the run.
    pub fn weight_per_op(&self) -> f64 {
        self.top()
            .and_then(|g| g.points.last())
            .map_or(0.0, |p| p.incl_ns * self.last().calls_per_op)
    }

    /// What the loop's growth per call beyond the entries' common slowdown `common` adds per
    /// op (ns): the top frame's time per call at the largest N over `common`, less at the
    /// smallest, times the calls per op at the largest N. The loops rank by it: more calls
    /// add nothing to it, a slower call does, a machine slower at the largest N does not.
    pub fn added_per_op(&self, common: f64) -> f64 {
        self.top().map_or(0.0, |g| self.rise_per_op(g, common))
    }

    /// Frame `g`'s time per call at the largest N over `common`, less at the smallest, times
    /// the calls per op at the largest N (ns).
    fn rise_per_op(&self, g: &Grower, common: f64) -> f64 {
        let (f, l) = (&g.points[0], &g.points[g.points.len() - 1]);
        (l.incl_ns / common - f.incl_ns) * self.last().calls_per_op
    }

    /// What the top undecided frame's rise per call adds per op (ns), as [`Self::added_per_op`]
    /// for a loop: the undecided entries rank by it.
    pub fn undecided_per_op(&self, common: f64) -> f64 {
        self.undecided
            .first()
            .map_or(0.0, |g| self.rise_per_op(g, common))
    }

    /// The frame that speaks for the loop: the top growing frame.
    pub fn frame(&self) -> Option<&str> {
        self.top().map(|g| g.function.as_str())
    }
}

/// What the kernel entries say of one discovery.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct Entries {
    /// Entries whose time per call grows: most time added per op by the growth per call
    /// first, except that a loop whose class set lies wholly above another's comes before it.
    pub loops: Vec<KernelEntry>,
    /// Entries whose calls per op grow while their whole time per call does not double beyond
    /// the common slowdown, most time first (one may also be a minor loop).
    pub more_calls: Vec<KernelEntry>,
    /// Entries with no loop but a frame whose time per call rose as a loop's does (by the
    /// added-time tests, [`MIN_LOOP_GROWTH`] times and still rising at the end) where the fit
    /// cannot tell growth from a step: above the smallest N's time at the largest N only, or
    /// not beyond the noise of a smallest N of few samples. Neither a loop nor shown not to
    /// be one: most added time per op first. A 5.10 guest's `ipcs` reading
    /// /proc/sysvipc, swept at N = 10, 100, 400 twice, showed sysvipc_find_ipc 3.8, 4.6 and
    /// 22.3 µs per read call, the first on 13 samples (±28%): the middle size was within that
    /// noise of it, where three other sweeps of the same script placed it clearly above.
    pub undecided: Vec<KernelEntry>,
    /// Where the first loop, growing faster, would pass what weighs more than it at the
    /// largest N (None: it weighs most already, or nothing it would pass).
    pub overtakes: Option<Overtake>,
    /// The slowdown common to the entries at the largest N, which a loop must grow beyond
    /// (None: fewer than [`COMMON_ENTRIES`] entries measured well enough to tell).
    pub common: Option<CommonSlowdown>,
    /// Why entries were not counted in the run, when they were not.
    pub unavailable: Option<String>,
    /// Whether the run counted entries at all (false for runs recorded before it did).
    pub counted: bool,
    /// Interrupts and preemption of the traced tasks, counted where the run counted them,
    /// and the kernel time spent in them: the run's length (None: fewer than two sizes).
    /// Never loops nor more calls.
    pub run_length: Option<RunLength>,
    /// What carries the growth of the kernel time per op beside the loops: more calls, the
    /// run's length, both or neither (None: it does not rise, or fewer than two sizes).
    pub growth: Option<KernelGrowth>,
}

impl Entries {
    /// The common factor a loop's growth is judged beyond: 1 when not measured, and never
    /// below 1 (a machine faster at the largest N makes no loop easier to call).
    pub fn common_factor(&self) -> f64 {
        common_factor(self.common.as_ref())
    }

    /// The first undecided entry and its top undecided frame.
    pub fn first_undecided(&self) -> Option<(&KernelEntry, &Grower)> {
        let e = self.undecided.first()?;
        Some((e, e.undecided.first()?))
    }

    /// The sizes whose runs would decide an undecided frame (its [`Remedy`]'s more runs),
    /// most added time first, one per size: what a sweep runs again by itself. Only for a
    /// frame that could change the answer: one whose rise, were it a loop, would add at
    /// least [`UNDECIDED_WORTH_RUNS`] of what the first loop adds per op (or any, with no
    /// loop). A 6.1 shell sweep spent two reads of its runs (50 s under TCG) and extra runs
    /// on `alloc_inode in readlink` beside a wait walk that added a hundred times more.
    pub fn more_runs(&self) -> Vec<MoreRuns> {
        let common = common_factor(self.common.as_ref());
        let bar = self
            .loops
            .first()
            .map_or(0.0, |l| UNDECIDED_WORTH_RUNS * l.added_per_op(common));
        let mut out: Vec<MoreRuns> = Vec::new();
        for e in self
            .undecided
            .iter()
            .filter(|e| e.undecided_per_op(common) >= bar)
        {
            let Some(g) = e.undecided.first() else {
                continue;
            };
            let Some(r) = Remedy::of(g) else { continue };
            if let Some((n, samples)) = r.more_runs
                && !out.iter().any(|m| m.n == n)
            {
                out.push(MoreRuns {
                    n,
                    samples,
                    entry: e.entry.clone(),
                    function: g.function.clone(),
                });
            }
        }
        out
    }
}

/// An undecided frame gets runs of its own only when its rise would add at least this share
/// of what the first loop adds per op: below it, deciding it changes no answer.
pub const UNDECIDED_WORTH_RUNS: f64 = 0.5;

/// Samples of a first size under which more runs of it would narrow its time enough to
/// matter (±10% at 100): below it, a sweep runs that size again by itself
/// (`record::extra`).
pub const FEW_SAMPLES: u64 = 100;

/// What would decide an undecided frame, as the data says.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Remedy {
    /// A rise at the largest size only: a size between these two would show it or not.
    pub between: Option<(u64, u64)>,
    /// More runs of this size, which has this many samples: the smallest size when its
    /// samples are fewer than [`FEW_SAMPLES`] (in the fit or left out of it for too few: a
    /// 5.10 `ipcs` sweep over N = 10..400 had 4 samples of the scan at N = 10, so its fit
    /// started at N = 100, 4.29 µs per call, where N = 10 read 1.16 µs), else the smallest
    /// the fit used when nothing else would decide it (a rise within its noise).
    pub more_runs: Option<(u64, u64)>,
}

impl Remedy {
    /// Of undecided frame `g`; None when its fit used fewer than two sizes.
    pub fn of(g: &Grower) -> Option<Remedy> {
        let p = g.fitted_points();
        let [f, .., prev, l] = p.as_slice() else {
            return None;
        };
        let between = (g.scaling.flat_reason == Some(super::fit::FlatReason::OneSize))
            .then_some((prev.n, l.n));
        let smallest = g.points.first().filter(|p| p.samples < FEW_SAMPLES);
        let more_runs = match smallest {
            Some(p) => Some((p.n, p.samples)),
            None => between.is_none().then_some((f.n, f.samples)),
        };
        Some(Remedy { between, more_runs })
    }
}

/// A size whose runs would decide whether `function`'s rise in `entry` is a loop.
#[derive(Clone, Debug, PartialEq)]
pub struct MoreRuns {
    pub n: u64,
    /// The frame's samples there so far: under [`FEW_SAMPLES`], its time there is not yet
    /// measured well enough to compare.
    pub samples: u64,
    pub entry: String,
    pub function: String,
}

/// A slowdown common to the traced tasks' kernel entries from the smallest N to the largest:
/// every syscall dearer per call, loops or not. A 6.1 guest under TCG running a shell with
/// 1000 background jobs spent up to 1.86 times as long per call (the median over a dozen
/// entries: brk, clone, execve, readlink, getrandom's crng_make_state, ...) as with 10, the
/// factor varying from sweep to sweep (0.87 to 1.86 in 17 sweeps; 0.88 to 1.58 in 17 of
/// 5.10). Its cause is the machine's (caches, the emulator, the kernel as a whole), not a
/// loop of one entry, and a loop must grow [`MIN_GROWTH_BEYOND_COMMON`] times beyond it:
/// without that, a sweep at 1.86 named execve's `load_elf_binary` (tearing down the shell's
/// larger copy, 2.07 times dearer per call) as the loop above the wait walk.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct CommonSlowdown {
    /// The median, over the entries measured, of their own time per call (interrupts and
    /// context switches left out, as for the frames) at the largest N over the smallest.
    pub factor: f64,
    /// How many entries it is the median of.
    pub entries: usize,
}

fn common_factor(c: Option<&CommonSlowdown>) -> f64 {
    c.map_or(1.0, |c| c.factor.max(1.0))
}

/// The common slowdown of `measured`, or None with fewer than [`COMMON_ENTRIES`] entries of
/// [`FEW_SAMPLES`] own samples at both ends.
fn common_slowdown(measured: &[Measured]) -> Option<CommonSlowdown> {
    let ratios: Vec<f64> = measured
        .iter()
        .filter_map(|m| {
            let last = m.own.len() - 1;
            let (f, l) = (m.own_per_call[0], m.own_per_call[last]);
            (m.own[0].samples >= FEW_SAMPLES && m.own[last].samples >= FEW_SAMPLES && f > 0.0)
                .then_some(l / f)
        })
        .collect();
    if ratios.len() < COMMON_ENTRIES {
        return None;
    }
    Some(CommonSlowdown {
        factor: super::stats::median(&ratios)?,
        entries: ratios.len(),
    })
}

/// What the entries of one (run, case) of a discovery are found from.
#[derive(Clone, Copy)]
pub(super) struct CaseData<'a> {
    /// The sizes, and the ops each made.
    pub ns: &'a [u64],
    pub ops: &'a [f64],
    pub period_ns: u64,
    /// The run's entry stacks of that case, and its entry counts.
    pub files: &'a [&'a StackData],
    pub rows: &'a [&'a EntryRow],
    /// The sampled kernel time per op at each N.
    pub kernel_ns: &'a [f64],
    /// The spread between the runs of a size.
    pub spread: &'a RunSpread,
    /// Which interruptions the run counted (None: none).
    pub interruptions: Option<&'a InterruptionCounting>,
}

/// The entries of one (run, case) of a discovery: loops and more calls.
pub(super) fn find(c: CaseData) -> Entries {
    let CaseData {
        ns,
        ops,
        period_ns,
        files,
        rows,
        interruptions,
        ..
    } = c;
    let mut out = Entries {
        counted: !rows.is_empty(),
        ..Entries::default()
    };
    // Interruptions are counted beside the entries but are none of the command's calls:
    // their samples are filed under the entry they interrupted, or `interrupt`.
    let names: BTreeSet<&str> = rows
        .iter()
        .map(|r| r.entry.as_str())
        .filter(|e| Interruption::of_entry(e).is_none())
        .collect();
    let last = ns.len().saturating_sub(1);
    if last == 0 || period_ns == 0 {
        return out;
    }
    out.run_length = Some(runlength::measure(
        ns,
        ops,
        period_ns,
        files,
        rows,
        interruptions,
    ));
    let measured: Vec<Measured> = names.into_iter().filter_map(|n| measure(n, c)).collect();
    out.common = common_slowdown(&measured);
    let common = out.common_factor();
    for m in measured {
        let e = judge(m, c, common);
        let (f, l) = (e.first(), e.last());
        let grows = !e.frames.is_empty() && l.samples >= MIN_SAMPLES;
        if !grows && !e.undecided.is_empty() && l.samples >= MIN_SAMPLES {
            out.undecided.push(e.clone());
        }
        let more = l.calls_per_op >= MIN_CALLS_GROWTH * f.calls_per_op
            && l.per_call_ns < MIN_LOOP_GROWTH * common * f.per_call_ns
            && e.calls
                .as_ref()
                .is_some_and(|s| s.class != Complexity::Constant)
            && l.share >= MIN_MORE_CALLS_SHARE;
        if more {
            out.more_calls.push(e.clone());
        }
        if grows {
            out.loops.push(e);
        }
    }
    out.loops = rank(std::mem::take(&mut out.loops), common);
    out.undecided.sort_by(|a, b| {
        b.undecided_per_op(common)
            .total_cmp(&a.undecided_per_op(common))
            .then_with(|| a.entry.cmp(&b.entry))
    });
    out.more_calls
        .sort_by(|a, b| b.last().share.total_cmp(&a.last().share));
    out.overtakes = overtake(&out);
    out.growth = runlength::growth(
        ns,
        ops,
        period_ns,
        files,
        &out.more_calls,
        out.run_length.as_ref(),
    );
    out
}

/// Where a loop that grows faster passes a heavier entry's time per op.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Overtake {
    /// The heavier entry, and whether it is a loop (else: more calls).
    pub other: String,
    pub other_is_loop: bool,
    /// Both time-per-op exponents (log-log slope over the largest sizes).
    pub slope: f64,
    pub other_slope: f64,
    /// The N at which the two power laws meet.
    pub n: f64,
}

/// The sizes, from the largest down, the overtake's power laws are fitted over: the growth
/// that decides where two curves meet is the one at large N, not a baseline at small N.
pub const OVERTAKE_SIZES: usize = 3;
/// The loop's exponent must exceed the other's by this much to be said to overtake it.
pub const MIN_OVERTAKE_SLOPE_GAP: f64 = 0.3;

/// Time per op (ns) at each N, of a loop (its top frame) or of a whole entry.
fn per_op(e: &KernelEntry, frame: bool) -> Vec<(f64, f64)> {
    match (frame, e.top()) {
        (true, Some(g)) => g
            .points
            .iter()
            .zip(&e.points)
            .map(|(g, p)| (p.n as f64, g.incl_ns * p.calls_per_op))
            .collect(),
        _ => e
            .points
            .iter()
            .map(|p| (p.n as f64, p.per_call_ns * p.calls_per_op))
            .collect(),
    }
}

/// `t = c·N^k` through the largest [`OVERTAKE_SIZES`] sizes: (ln c, k).
fn power_law(pts: &[(f64, f64)]) -> Option<(f64, f64)> {
    let tail = &pts[pts.len().saturating_sub(OVERTAKE_SIZES)..];
    if tail.len() < CLASS_SIZES || tail.iter().any(|&(n, t)| n <= 0.0 || t <= 0.0) {
        return None;
    }
    let x: Vec<f64> = tail.iter().map(|p| p.0.ln()).collect();
    let y: Vec<f64> = tail.iter().map(|p| p.1.ln()).collect();
    let line = super::stats::ols(&x, &y)?;
    Some((line.intercept, line.slope))
}

/// The first loop against the heaviest entry (another loop, or more calls) whose time per op
/// at the largest N exceeds its own: where their power laws meet, when the loop's grows
/// faster by [`MIN_OVERTAKE_SLOPE_GAP`]. An extrapolation, and said to be one.
fn overtake(en: &Entries) -> Option<Overtake> {
    let head = en.loops.first()?;
    let (c, k) = power_law(&per_op(head, true))?;
    let weight = head.weight_per_op();
    let others = en
        .loops
        .iter()
        .skip(1)
        .map(|e| (e, true))
        .chain(en.more_calls.iter().map(|e| (e, false)))
        .filter(|(e, _)| e.entry != head.entry);
    let (other, is_loop, _) = others
        .map(|(e, is_loop)| {
            let pts = per_op(e, is_loop);
            let last = pts.last().map_or(0.0, |p| p.1);
            (e, is_loop, last)
        })
        .filter(|x| x.2 > weight)
        .max_by(|a, b| a.2.total_cmp(&b.2))?;
    let (oc, ok) = power_law(&per_op(other, is_loop))?;
    if k - ok < MIN_OVERTAKE_SLOPE_GAP {
        return None;
    }
    let n = ((oc - c) / (k - ok)).exp();
    n.is_finite().then(|| Overtake {
        other: other.entry.clone(),
        other_is_loop: is_loop,
        slope: k,
        other_slope: ok,
        n,
    })
}

/// Loops in rank order: most time added by the growth per call first, except that no loop
/// comes after one it outranks by class. `outranks` is a partial order (overlapping sets are
/// not ordered), so this is a topological order: each place goes to the heaviest loop that no
/// remaining one outranks.
fn rank(mut rest: Vec<KernelEntry>, common: f64) -> Vec<KernelEntry> {
    rest.sort_by(|a, b| b.added_per_op(common).total_cmp(&a.added_per_op(common)));
    let mut out = Vec::with_capacity(rest.len());
    while !rest.is_empty() {
        // A strict partial order has an element nothing outranks; the first is the heaviest.
        let i = (0..rest.len())
            .find(|&i| !rest.iter().any(|o| o.outranks(&rest[i])))
            .unwrap_or(0);
        out.push(rest.remove(i));
    }
    out
}

/// An entry measured over the sizes, before its frames are judged.
struct Measured {
    /// Its points and fits, no frames yet.
    entry: KernelEntry,
    /// Calls per size.
    calls: Vec<f64>,
    /// Its own work per size (no context switch or interrupt), and its time per call.
    own: Vec<Profile>,
    own_per_call: Vec<f64>,
}

/// Entry `name` over the sizes; None when some size has no call of it (nothing per call to
/// compare there).
fn measure(name: &str, c: CaseData) -> Option<Measured> {
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
    let mut wall = Vec::with_capacity(ns.len());
    for &n in ns {
        let (c, w) = rows
            .iter()
            .filter(|r| r.n == n && r.entry == name)
            .fold((0u64, 0u64), |(c, w), r| (c + r.calls, w + r.wall_ns));
        if c == 0 {
            return None;
        }
        calls.push(c as f64);
        wall.push(w as f64);
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
    let points: Vec<EntryPoint> = (0..ns.len())
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
                wall_per_call_ns: wall[i] / calls[i],
                samples: p.samples,
                share: if kernel_ns[i] > 0.0 {
                    per_call * calls[i] / ops[i] / kernel_ns[i]
                } else {
                    0.0
                },
            }
        })
        .collect();
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

/// Measured entry `m` with the frames inside it whose time per call grows (as a loop's, or
/// undecided), judged beyond the entries' common slowdown `common`.
fn judge(m: Measured, c: CaseData, common: f64) -> KernelEntry {
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
        .retain(|g| grows_enough(&g.points, common) && still_rising(&g.points));
    // An undecided frame must rise twofold over the sizes its fit used: a size left out for
    // its few samples (a 6.1 `close`'s fput, 2 samples at N = 10) is no baseline to double.
    e.undecided.retain(|g| {
        let fitted: Vec<super::growers::FnPoint> = g.fitted_points().into_iter().cloned().collect();
        grows_enough(&fitted, common) && still_rising(&g.points)
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
fn grows_enough(points: &[super::growers::FnPoint], common: f64) -> bool {
    let (Some(f), Some(l)) = (points.first(), points.last()) else {
        return false;
    };
    let rises =
        |f: f64, l: f64| l >= MIN_LOOP_GROWTH * f && l >= MIN_GROWTH_BEYOND_COMMON * common * f;
    rises(f.incl_ns, l.incl_ns) || (rises(f.self_ns, l.self_ns) && self_carries_growth(f, l))
}

/// Standard errors of sampling the rise from the second-largest size to the largest must
/// clear for a loop to be still growing at the end (three sizes or more).
pub const END_RISE_SIGMA: f64 = 2.0;

/// Whether a frame's time per call still rises from the second-largest N to the largest by
/// more than [`END_RISE_SIGMA`] Poisson errors (true with fewer than three sizes).
fn still_rising(points: &[super::growers::FnPoint]) -> bool {
    let [.., prev, last] = points else {
        return true;
    };
    if points.len() < 3 {
        return true;
    }
    let se = |p: &super::growers::FnPoint| p.incl_ns / (p.samples.max(1) as f64).sqrt();
    last.incl_ns - prev.incl_ns > END_RISE_SIGMA * se(last).hypot(se(prev))
}

/// The entry stacks and counts of run `run`, case `case`, by name.
pub(super) fn of_case<'a>(
    stacks: &'a [StackData],
    rows: &'a [EntryRow],
    run: usize,
    case: u32,
) -> (Vec<&'a StackData>, Vec<&'a EntryRow>) {
    let files = stacks
        .iter()
        .filter(|s| s.run == run && s.file.kind == StackKind::Entry && s.file.case == case)
        .collect();
    let rows = rows.iter().filter(|r| r.case == case).collect();
    (files, rows)
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::analysis::discover::discover;
    use crate::analysis::discover::tests::{PERIOD, data, runs};
    use crate::rundata::stack_file_path;

    const NS: [u64; 4] = [10, 100, 1000, 3000];

    /// Entry `entry`'s stacks at size `n` (`folded` weights in sample periods).
    pub(crate) fn entry_data(entry: &str, n: u64, folded: &str) -> StackData {
        let mut d = data(n, folded);
        d.file.kind = StackKind::Entry;
        d.file.target = entry.into();
        d.file.path = stack_file_path(StackKind::Entry, entry, "command", n);
        d
    }

    pub(crate) fn row(entry: &str, n: u64, calls: u64) -> EntryRow {
        EntryRow {
            case: 100,
            case_name: "command".into(),
            n,
            entry: entry.into(),
            calls,
            wall_ns: calls * 1000,
        }
    }

    /// A shell with N background jobs running 300 short commands per run: each of its 300
    /// wait4 calls walks the N children (plus a lock spin at small N that falls as the walk
    /// grows), and it forks N more children and takes ~N·60 more page faults per run, each
    /// no dearer.
    pub(crate) fn shell(n: u64) -> (Vec<StackData>, Vec<EntryRow>) {
        let wait4 = "e;do_syscall_64;kernel_wait4;do_wait;__do_wait";
        // Samples in the walk: each call visits the N children, 1/200 of a period each.
        let walk = (300 + n) * n / 200;
        let spin = 600u64.saturating_sub(n / 10).max(100);
        let wait_text = format!(
            "{wait4};wait_consider_task {}\n{wait4};queued_read_lock_slowpath {}\n",
            walk.max(1) * PERIOD,
            spin * PERIOD
        );
        let forks = 300 + n;
        let clone_text = format!(
            "e;do_syscall_64;__do_sys_clone;copy_process;dup_mmap {}\n",
            forks * 2 * PERIOD
        );
        let faults = 20_000 + 60 * n;
        let fault_text = format!(
            "asm_exc_page_fault;exc_page_fault;handle_mm_fault {}\n",
            faults / 10 * PERIOD
        );
        let profile = format!(
            "{wait_text}{clone_text}{fault_text}[user] {}\n",
            1000 * PERIOD
        );
        let stacks = vec![
            data(n, &profile),
            entry_data("wait4", n, &wait_text),
            entry_data("clone", n, &clone_text),
            entry_data("page_fault", n, &fault_text),
        ];
        let rows = vec![
            row("wait4", n, 300 + n),
            row("clone", n, forks),
            row("page_fault", n, faults),
        ];
        (stacks, rows)
    }

    pub(crate) fn discovered(
        make: impl Fn(u64) -> (Vec<StackData>, Vec<EntryRow>),
    ) -> crate::analysis::discover::Discovery {
        discovered_at(&NS, make)
    }

    /// As [`discovered`], at sizes `ns`.
    pub(crate) fn discovered_at(
        ns: &[u64],
        make: impl Fn(u64) -> (Vec<StackData>, Vec<EntryRow>),
    ) -> crate::analysis::discover::Discovery {
        discovered_counting(ns, None, make)
    }

    /// As [`discovered_at`], from a run that counted `interruptions`.
    pub(crate) fn discovered_counting(
        ns: &[u64],
        interruptions: Option<InterruptionCounting>,
        make: impl Fn(u64) -> (Vec<StackData>, Vec<EntryRow>),
    ) -> crate::analysis::discover::Discovery {
        let mut stacks = Vec::new();
        let mut r = runs(ns);
        r[0].interruptions = interruptions;
        for &n in ns {
            let (s, rows) = make(n);
            stacks.extend(s);
            r[0].entries.extend(rows);
        }
        let mut d = discover(&stacks, &r);
        assert_eq!(d.len(), 1);
        d.remove(0)
    }

    /// The shell, with a walk a tenth as dear per child: at N = 3000 the page faults still
    /// weigh more than the walk, but the walk grows faster.
    pub(crate) fn light_walk(n: u64) -> (Vec<StackData>, Vec<EntryRow>) {
        let (mut s, rows) = shell(n);
        let wait4 = "e;do_syscall_64;kernel_wait4;do_wait;__do_wait";
        let text = format!(
            "{wait4};wait_consider_task {}\n{wait4};queued_read_lock_slowpath {}\n",
            ((300 + n) * n / 2000).max(1) * PERIOD,
            300 * PERIOD
        );
        s.retain(|x| x.file.target != "wait4");
        s.push(entry_data("wait4", n, &text));
        (s, rows)
    }

    #[test]
    fn a_loop_that_grows_faster_says_where_it_overtakes_the_heavier_setup() {
        let d = discovered(light_walk);
        let e = &d.entries;
        assert_eq!(e.loops[0].entry, "wait4", "{e:#?}");
        let o = e
            .overtakes
            .as_ref()
            .expect("the walk grows faster than the forks");
        assert_eq!(
            (o.other.as_str(), o.other_is_loop),
            ("page_fault", false),
            "{o:?}"
        );
        // Walk samples per run 1, 20, 650, 4950 against 2000 + 6N for the faults: the two
        // power laws through N = 100, 1000, 3000 meet past the sweep, below 10x its end.
        assert!(o.slope > 1.5 && o.other_slope < 1.0, "{o:?}");
        assert!(o.n > 3000.0 && o.n < 30_000.0, "{o:?}");
        // The heavier loop needs no overtaking.
        assert!(discovered(shell).entries.overtakes.is_none());
    }

    #[test]
    fn the_walk_in_wait4_is_the_loop_and_the_setup_is_more_calls() {
        let d = discovered(shell);
        let e = &d.entries;
        assert!(e.counted);
        let names: Vec<&str> = e.loops.iter().map(|l| l.entry.as_str()).collect();
        assert_eq!(names, ["wait4"], "{e:#?}");
        let l = &e.loops[0];
        assert_eq!(l.frame(), Some("wait_consider_task"));
        assert_ne!(l.top().unwrap().scaling.class, Complexity::Constant);
        // wait4's whole time per call rises less than the walk does: the spin falls.
        let (f, last) = (l.first(), l.last());
        assert!(last.per_call_ns < 40.0 * f.per_call_ns, "{f:?} {last:?}");
        let more: Vec<&str> = e.more_calls.iter().map(|m| m.entry.as_str()).collect();
        assert!(
            more.contains(&"clone") && more.contains(&"page_fault"),
            "{more:?}"
        );
        for m in &e.more_calls {
            assert!(
                m.last().calls_per_op > 1.5 * m.first().calls_per_op,
                "{m:?}"
            );
        }
    }

    /// The shell's wait4 as 5.10 runs it: the walk in wait_consider_task's own body, and a
    /// reap through release_task that costs `reap` periods per call at every N.
    pub(crate) fn reaping_walk(
        per_child: u64,
        reap: u64,
    ) -> impl Fn(u64) -> (Vec<StackData>, Vec<EntryRow>) {
        move |n| {
            let (mut s, rows) = shell(n);
            let wait4 = "e;do_syscall_64;kernel_wait4;do_wait;wait_consider_task";
            let text = format!(
                "{wait4} {}\n{wait4};release_task;proc_invalidate_siblings_dcache {}\n",
                ((300 + n) * n / per_child).max(1) * PERIOD,
                (300 + n) * reap * PERIOD
            );
            s.retain(|x| x.file.target != "wait4");
            s.push(entry_data("wait4", n, &text));
            (s, rows)
        }
    }

    #[test]
    fn a_walk_in_the_frames_own_body_is_a_loop_beside_a_fixed_callee() {
        // Per call: 2 periods of reap, and a walk of N/2000 periods: the frame's inclusive
        // time rises 1.75 times over N = 10..3000, its self time 300 times.
        let d = discovered(reaping_walk(2000, 2));
        let l = d.entries.loops.first().expect("the walk is a loop");
        assert_eq!(
            (l.entry.as_str(), l.frame()),
            ("wait4", Some("wait_consider_task"))
        );
        let g = l.top().unwrap();
        let (f, last) = (&g.points[0], &g.points[g.points.len() - 1]);
        assert!(last.incl_ns < MIN_LOOP_GROWTH * f.incl_ns, "{g:?}");
        assert!(
            !g.fitted_on_self,
            "the inclusive time is fitted where it grows visibly"
        );
        // A reap twice as dear keeps the inclusive time within the fit's margin of its
        // baseline at every size but the largest (4.0 -> 4.5 periods per call at N = 1000):
        // the class comes from the self time, which carries the growth.
        let d = discovered(reaping_walk(2000, 4));
        let l = d.entries.loops.first().expect("the walk is a loop");
        assert_eq!(
            (l.entry.as_str(), l.frame()),
            ("wait4", Some("wait_consider_task"))
        );
        assert_ne!(l.top().unwrap().scaling.class, Complexity::Constant);
        assert!(l.top().unwrap().fitted_on_self);
        // A self time that rises by a fraction of the callee's fixed cost is no loop: per
        // call 0.5 periods of own work at N = 10 and 0.8 at N = 3000.
        let d = discovered(|n| {
            let (mut s, rows) = shell(n);
            let wait4 = "e;do_syscall_64;kernel_wait4;do_wait;wait_consider_task";
            let text = format!(
                "{wait4} {}\n{wait4};release_task {}\n",
                (300 + n) * (50 + n / 100) / 100 * PERIOD,
                (300 + n) * 4 * PERIOD
            );
            s.retain(|x| x.file.target != "wait4");
            s.push(entry_data("wait4", n, &text));
            (s, rows)
        });
        assert!(
            d.entries.loops.iter().all(|l| l.entry != "wait4"),
            "{:#?}",
            d.entries.loops
        );
    }

    #[test]
    fn a_setup_that_only_makes_more_calls_has_no_loop() {
        let d = discovered(|n| {
            let (mut s, mut rows) = shell(n);
            // The waits do not walk: a fixed 40 periods per call.
            let wait4 = "e;do_syscall_64;kernel_wait4;do_wait;__do_wait;pid_task";
            let text = format!("{wait4} {}\n", (300 + n) * 40 * PERIOD / 100);
            s.retain(|x| x.file.target != "wait4");
            s.push(entry_data("wait4", n, &text));
            rows.retain(|r| r.entry != "wait4");
            rows.push(row("wait4", n, 300 + n));
            (s, rows)
        });
        assert!(d.entries.loops.is_empty(), "{:#?}", d.entries.loops);
        assert!(!d.entries.more_calls.is_empty());
    }

    /// `ipcs` reading /proc/sysvipc as a 5.10 guest showed it (N = 10, 100, 400): 13, 137
    /// and 2629 samples of sysvipc_find_ipc over 345, 2985 and 11785 read calls per run (two
    /// runs there, one here), the first size's 13 samples too few to place the second above
    /// it. With a size at 200 (its time there between the others') the rise shows at two
    /// sizes.
    pub(crate) fn ipcs(n: u64) -> (Vec<StackData>, Vec<EntryRow>) {
        let (calls, scan) = match n {
            10 => (345, 13),
            100 => (2985, 137),
            200 => (5800, 640),
            _ => (11785, 2629),
        };
        ipcs_with(n, calls, scan)
    }

    /// [`ipcs`] at size `n` with `calls` reads and `scan` samples of the scan among them.
    pub(crate) fn ipcs_with(n: u64, calls: u64, scan: u64) -> (Vec<StackData>, Vec<EntryRow>) {
        let (mut s, mut rows) = shell(n);
        let read = "e;do_syscall_64;ksys_read;vfs_read;seq_read";
        let text = format!(
            "{read};sysvipc_find_ipc {}\n{read};copy_user_generic {}\n",
            scan * PERIOD,
            calls * 3 / 10 * PERIOD
        );
        s.retain(|x| x.file.target != "wait4");
        s.push(entry_data("read", n, &text));
        rows.retain(|r| r.entry != "wait4");
        rows.push(row("read", n, calls));
        (s, rows)
    }

    #[test]
    fn a_rise_at_the_largest_size_only_is_undecided_not_a_loop_nor_none() {
        let d = discovered_at(&[10, 100, 400], ipcs);
        assert!(d.entries.loops.is_empty(), "{:#?}", d.entries.loops);
        let e = &d.entries.undecided;
        assert_eq!(e.len(), 1, "{e:#?}");
        assert_eq!(e[0].entry, "read");
        let g = &e[0].undecided[0];
        assert_eq!(g.function, "sysvipc_find_ipc");
        assert_eq!(
            g.scaling.flat_reason,
            Some(crate::analysis::fit::FlatReason::OneSize)
        );
        // What would decide it: a size between the two largest, or more runs of the first,
        // whose 13 samples are too few; that size is what a sweep runs again.
        assert_eq!(
            Remedy::of(g),
            Some(Remedy {
                between: Some((100, 400)),
                more_runs: Some((10, 13)),
            })
        );
        assert_eq!(
            d.entries.more_runs(),
            [MoreRuns {
                n: 10,
                samples: 13,
                entry: "read".into(),
                function: "sysvipc_find_ipc".into(),
            }]
        );
        // Twenty times the runs of N = 10 decide it: its 13 samples were a high draw (its
        // time per call 0.038 periods; twenty times the calls have 172 samples, 0.025 per
        // call), and the second size's rise is then beyond the first's noise.
        let more = |n: u64| match n {
            10 => ipcs_with(10, 6900, 172),
            _ => ipcs(n),
        };
        // With 4 samples at N = 10 the fit starts at N = 100, and N = 200 (5% above it) is
        // within its noise: more runs of N = 10 would still decide it, and the remedy says
        // so beside the size between (a 5.10 sweep: 4.29, 5.39, 10.3 µs per call at N = 100,
        // 200, 400, 1.16 µs at N = 10 on 4 samples).
        let few = |n: u64| match n {
            10 => ipcs_with(10, 345, 4),
            200 => ipcs_with(200, 5800, 280),
            _ => ipcs(n),
        };
        let d = discovered_at(&[10, 100, 200, 400], few);
        let (_, g) = d
            .entries
            .first_undecided()
            .unwrap_or_else(|| panic!("{:#?}", d.entries));
        assert_eq!(g.fitted_points()[0].n, 100, "{g:#?}");
        assert_eq!(Remedy::of(g).and_then(|r| r.more_runs), Some((10, 4)));
        assert_eq!(d.entries.more_runs()[0].n, 10);
        let d = discovered_at(&[10, 100, 400], more);
        assert!(d.entries.undecided.is_empty(), "{:#?}", d.entries.undecided);
        assert_eq!(d.entries.loops[0].frame(), Some("sysvipc_find_ipc"));
        assert!(d.entries.more_runs().is_empty());
        // A size between the two largest decides it: the same scan is then a loop.
        let d = discovered_at(&[10, 100, 200, 400], ipcs);
        assert!(d.entries.undecided.is_empty(), "{:#?}", d.entries.undecided);
        assert!(d.entries.more_runs().is_empty());
        assert_eq!(d.entries.loops[0].entry, "read");
        assert_eq!(d.entries.loops[0].frame(), Some("sysvipc_find_ipc"));
    }

    /// The undecided scan of `ipcs` beside a wait walk that adds far more per op: deciding the
    /// scan would not change the answer, so no size runs again for it; alone, it would.
    #[test]
    fn an_undecided_frame_far_below_the_first_loop_asks_for_no_runs() {
        let with_walk = |n: u64| {
            let (mut s, mut rows) = ipcs(n);
            let wait4 = "e;do_syscall_64;kernel_wait4;do_wait;__do_wait";
            // 300 waits per op, each visiting the N children at a period per 2 children.
            let text = format!(
                "{wait4};wait_consider_task {}\n{wait4};queued_read_lock_slowpath {}\n",
                300 * n / 2 * PERIOD,
                300 * PERIOD
            );
            s.push(entry_data("wait4", n, &text));
            rows.push(row("wait4", n, 300));
            (s, rows)
        };
        let d = discovered_at(&[10, 100, 400], with_walk);
        assert_eq!(d.entries.loops[0].entry, "wait4", "{:#?}", d.entries);
        assert_eq!(d.entries.undecided[0].entry, "read", "{:#?}", d.entries);
        assert!(
            d.entries.more_runs().is_empty(),
            "{:?}",
            d.entries.more_runs()
        );
        let alone = discovered_at(&[10, 100, 400], ipcs);
        assert_eq!(alone.entries.more_runs().len(), 1);
    }

    #[test]
    fn a_higher_class_ranks_above_more_time_of_a_lower_one() {
        let d = discovered(|n| {
            let (mut s, mut rows) = shell(n);
            // read: 100 calls per run, each walking ids O(n^2)-ish in total time but tiny.
            let read = "e;do_syscall_64;ksys_read;seq_read;sysvipc_find_ipc";
            let samples = (n * n / 200).max(1);
            let text = format!("{read} {}\n", samples * PERIOD);
            s.push(entry_data("read", n, &text));
            rows.push(row("read", n, 100));
            (s, rows)
        });
        let names: Vec<&str> = d.entries.loops.iter().map(|l| l.entry.as_str()).collect();
        assert_eq!(names.first(), Some(&"read"), "{names:?}");
        assert!(names.contains(&"wait4"), "{names:?}");
        // It carries less time than the walk in wait4, and ranks first by class alone.
        let (read, wait4) = (&d.entries.loops[0], &d.entries.loops[1]);
        assert!(read.added_per_op(1.0) < wait4.added_per_op(1.0));
        assert!(read.outranks(wait4), "{read:#?}");
        assert!(!wait4.outranks(read));
    }

    /// The shell's wait walk, on a machine where every call gets `slowdown(n)` times dearer
    /// at size `n` (the slowdown of a 6.1 guest under TCG with 1000 jobs), beside `others`
    /// entries that do not loop (calls growing with N, one period per call at N = 10, each a
    /// little apart) and an execve whose teardown of the shell's larger copy costs 10% more
    /// at N = 3000: on that machine 2.1 times dearer per call.
    pub(crate) fn slow_machine(
        n: u64,
        slowdown: impl Fn(u64) -> f64,
        others: usize,
    ) -> (Vec<StackData>, Vec<EntryRow>) {
        let k = slowdown(n);
        let ln = ((n as f64) / 10.0).ln() / 300f64.ln();
        let w = |calls: u64, periods: f64| ((calls as f64 * periods * k).round() as u64) * PERIOD;
        let wait4 = "e;do_syscall_64;kernel_wait4;do_wait;__do_wait";
        let mut texts = vec![(
            "wait4",
            300,
            format!(
                "{wait4};wait_consider_task {}\n{wait4};queued_read_lock_slowpath {}\n",
                w(300, 0.5 + n as f64 / 1000.0),
                w(300, 0.5)
            ),
        )];
        texts.push((
            "execve",
            300 + n,
            format!(
                "e;do_syscall_64;__x64_sys_execve;load_elf_binary;exit_mmap {}\n",
                w(300 + n, 2.0 * (1.0 + 0.1 * ln))
            ),
        ));
        let names = [
            "brk",
            "clone",
            "readlink",
            "mprotect",
            "getrandom",
            "openat",
        ];
        for (i, name) in names.iter().take(others).enumerate() {
            texts.push((
                name,
                300 + n,
                format!(
                    "e;do_syscall_64;{name}_body;{name}_work {}\n",
                    w(300 + n, 1.0 + 0.05 * i as f64)
                ),
            ));
        }
        let mut profile: String = texts.iter().map(|t| t.2.as_str()).collect();
        profile.push_str(&format!("[user] {}\n", 1000 * PERIOD));
        let mut stacks = vec![data(n, &profile)];
        let mut rows = Vec::new();
        for (name, calls, text) in &texts {
            stacks.push(entry_data(name, n, text));
            rows.push(row(name, n, *calls));
        }
        (stacks, rows)
    }

    /// 1 at N = 10, `top` at N = 3000, log-linear between.
    pub(crate) fn slowdown_to(top: f64) -> impl Fn(u64) -> f64 {
        move |n| 1.0 + (top - 1.0) * ((n as f64) / 10.0).ln() / 300f64.ln()
    }

    #[test]
    fn a_slowdown_common_to_every_entry_makes_no_loop_of_a_setup_call() {
        let names =
            |e: &Entries| -> Vec<String> { e.loops.iter().map(|l| l.entry.clone()).collect() };
        // Every call 1.9 times dearer at N = 3000: the walk still loops beyond that, execve's
        // teardown (2.1 times dearer) and the 6 others (1.9 to 2.4 times) do not.
        let d = discovered(|n| slow_machine(n, slowdown_to(1.9), 6));
        let e = &d.entries;
        let c = e.common.as_ref().expect("8 entries measured");
        assert_eq!(c.entries, 8, "{c:?}");
        assert!(c.factor > 1.85 && c.factor < 2.1, "{c:?}");
        assert_eq!(names(e), ["wait4"], "{e:#?}");
        let more: Vec<&str> = e.more_calls.iter().map(|m| m.entry.as_str()).collect();
        assert!(
            more.contains(&"execve") && more.contains(&"clone"),
            "{more:?}"
        );
        // With too few entries to measure the slowdown, the same data names execve (and the
        // dearest other) as loops: the common factor is what tells them from the walk.
        let few = discovered(|n| slow_machine(n, slowdown_to(1.9), 2));
        assert!(few.entries.common.is_none());
        assert!(
            names(&few.entries).contains(&"execve".to_string()),
            "{:#?}",
            few.entries
        );
        // A machine that does not slow down: the factor measured near 1, the walk alone.
        let steady = discovered(|n| slow_machine(n, |_| 1.0, 6));
        let c = steady.entries.common.as_ref().unwrap();
        assert!(c.factor < 1.3, "{c:?}");
        assert_eq!(names(&steady.entries), ["wait4"], "{:#?}", steady.entries);
    }

    #[test]
    fn the_context_switch_and_interrupts_are_no_loop_of_the_syscall() {
        let d = discovered(|n| {
            let (mut s, rows) = shell(n);
            // Page faults that sleep, and more so with more tasks: the switch back grows.
            let fault = "asm_exc_page_fault;exc_page_fault;handle_mm_fault";
            let text = format!(
                "{fault} {}\n{fault};schedule;__schedule;finish_task_switch.isra.0 {}\n\
                 {fault};asm_sysvec_apic_timer_interrupt;sysvec_apic_timer_interrupt;\
                 handle_softirqs {}\n",
                (20_000 + 60 * n) / 10 * PERIOD,
                (20_000 + 60 * n) / 10 * n / 100 * PERIOD,
                (20_000 + 60 * n) / 10 * n / 100 * PERIOD,
            );
            s.retain(|x| x.file.target != "page_fault");
            s.push(entry_data("page_fault", n, &text));
            (s, rows)
        });
        let names: Vec<&str> = d.entries.loops.iter().map(|l| l.entry.as_str()).collect();
        assert_eq!(names, ["wait4"], "{:#?}", d.entries.loops);
    }

    #[test]
    fn a_rise_that_stops_after_the_smallest_size_is_no_loop() {
        let d = discovered(|n| {
            let (mut s, rows) = shell(n);
            // clone's copy_process cheaper at the small sizes (few forks, lucky runs), then
            // flat: 2.6x over the sweep, none of it after N = 1000.
            let tenths = match n {
                10 => 10,
                100 => 18,
                _ => 26,
            };
            let text = format!(
                "e;do_syscall_64;__do_sys_clone;copy_process {}\n",
                (300 + n) * tenths * PERIOD / 10
            );
            s.retain(|x| x.file.target != "clone");
            s.push(entry_data("clone", n, &text));
            (s, rows)
        });
        let names: Vec<&str> = d.entries.loops.iter().map(|l| l.entry.as_str()).collect();
        assert_eq!(names, ["wait4"], "{:#?}", d.entries.loops);
    }

    #[test]
    fn loops_whose_class_sets_overlap_rank_by_time() {
        let loop_of = |entry: &str, classes: &[Complexity], weight: f64| {
            let mut d = discovered(shell);
            let mut l = d.entries.loops.remove(0);
            l.entry = entry.into();
            let g = &mut l.frames[0];
            g.scaling.classes = classes.to_vec();
            let calls = l.points.last().unwrap().calls_per_op;
            g.points.last_mut().unwrap().incl_ns = weight / calls;
            l
        };
        use Complexity::*;
        let wide = loop_of("wait4", &[Log, Linear, NLogN, Quadratic], 100.0);
        let narrow_linear = loop_of("clone", &[Linear], 10.0);
        let log = loop_of("mmap", &[Log], 50.0);
        let ranked = rank(vec![log.clone(), narrow_linear.clone(), wide.clone()], 1.0);
        let names: Vec<&str> = ranked.iter().map(|l| l.entry.as_str()).collect();
        // The wide set overlaps both: time puts it first; O(n) is wholly above O(log n).
        assert_eq!(names, ["wait4", "clone", "mmap"]);
        assert!(narrow_linear.outranks(&log) && !wide.outranks(&log));
    }

    #[test]
    fn a_run_without_entry_counts_says_so_and_finds_no_loop() {
        let d = discovered(|n| {
            let (s, _) = shell(n);
            (s, Vec::new())
        });
        assert!(!d.entries.counted);
        assert!(d.entries.loops.is_empty() && d.entries.more_calls.is_empty());
    }
}
