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
use super::stacks::StackData;
use crate::record::advice::MoreRuns;
use crate::rundata::Folded;

mod measure;
mod overtake;

use measure::{Measured, judge, measure};
use overtake::overtake;
pub use overtake::{MIN_OVERTAKE_SLOPE_GAP, OVERTAKE_SIZES, Overtake};

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

    /// The size a "more calls" entry's time per call is judged from: the first below the
    /// largest whose samples measure it ([`MIN_FIT_SAMPLES`] or more), else the first. One
    /// sample reads anything from nothing to twice the time: `du` over 100 files sampled
    /// newfstatat once (551 ns per call), 20 times over 1000 files (1.31 µs) and 2593 times
    /// over 50000 (1.15 µs), and from the first size its time per call "doubled".
    pub fn per_call_base(&self) -> &EntryPoint {
        let below_last = &self.points[..self.points.len().saturating_sub(1)];
        below_last
            .iter()
            .find(|p| p.samples >= MIN_FIT_SAMPLES)
            .unwrap_or_else(|| self.first())
    }

    /// Its calls per op grow ([`MIN_CALLS_GROWTH`] times, fitted as rising) and carry a share
    /// of the kernel time worth naming ([`MIN_MORE_CALLS_SHARE`]): more calls, whatever each
    /// call's time does (that is the caller's to judge).
    pub fn makes_more_calls(&self) -> bool {
        self.last().calls_per_op >= MIN_CALLS_GROWTH * self.first().calls_per_op
            && self
                .calls
                .as_ref()
                .is_some_and(|s| s.class != Complexity::Constant)
            && self.last().share >= MIN_MORE_CALLS_SHARE
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

    /// The loop's name in a compare: its frame, or the entry when no frame carries it.
    pub fn loop_frame(&self) -> &str {
        self.frame().unwrap_or(&self.entry)
    }
}

/// A sampled loop that exact timing refuted ([`Entries::refuted`]).
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Refuted {
    pub entry: String,
    pub frame: String,
    /// The smallest and the largest N both the samples and the exact timing measured.
    pub n_range: (u64, u64),
    /// The frame's time per call of the entry there: timed exactly, and as sampled (ns).
    pub exact_ns: (f64, f64),
    pub sampled_ns: (f64, f64),
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
    /// Loops of the samples that the confirmation pass refuted: their frame, timed exactly,
    /// does not take [`MIN_LOOP_GROWTH`] times as long per call of the entry at the largest N
    /// as at the smallest. A 5.10 guest starved by its host (its samples held 30% to 51% of
    /// its CPU time) read newfstatat's path lookup 11.9 µs -> 77.1 µs per call from samples
    /// over N = 10..500, vfs_statx 43.4 -> 52.0 µs timed exactly. The entry itself moves to
    /// the more calls when its calls grow, else to the flat ones.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub refuted: Vec<Refuted>,
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
    /// The entries measured that are none of the above (no loop, no more calls, nothing
    /// undecided), kept for compares: a loop on one side is judged against the other side's
    /// times of the same entry.
    #[serde(skip)]
    pub flat: Vec<KernelEntry>,
    /// Interrupts and preemption of the traced tasks, counted where the run counted them,
    /// and the kernel time spent in them: the run's length (None: fewer than two sizes).
    /// Never loops nor more calls.
    pub run_length: Option<RunLength>,
    /// What carries the growth of the kernel time per op beside the loops: more calls, the
    /// run's length, both or neither (None: it does not rise, or fewer than two sizes).
    pub growth: Option<KernelGrowth>,
}

impl Entries {
    /// Take the loops exact timing refuted out of the loops: each entry to the more calls
    /// when its calls grow, else to the flat ones; the overtaking is the new first loop's.
    pub(crate) fn refute(&mut self, refuted: Vec<Refuted>) {
        if refuted.is_empty() {
            return;
        }
        for l in std::mem::take(&mut self.loops) {
            if !refuted.iter().any(|r| r.entry == l.entry) {
                self.loops.push(l);
                continue;
            }
            // Its time per call is flat, timed exactly: only its calls can be more.
            if !l.makes_more_calls() {
                self.flat.push(l);
            } else if !self.more_calls.iter().any(|m| m.entry == l.entry) {
                self.more_calls.push(l);
            }
        }
        self.more_calls
            .sort_by(|a, b| b.last().share.total_cmp(&a.last().share));
        self.refuted = refuted;
        self.overtakes = overtake(self);
    }

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
                    enough: FEW_SAMPLES,
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
    /// the fit used when nothing else would decide it (a rise within its noise). Not a
    /// smallest size without a sample of the frame: its runs so far say nothing of how many
    /// would give it some (page faults' `do_anonymous_page`, none at N = 100 and 1000 of a
    /// script creating N files, fitted at N = 10000 and 30000).
    pub more_runs: Option<(u64, u64)>,
}

impl Remedy {
    /// Of undecided frame `g`; None when its fit used fewer than two sizes.
    pub fn of(g: &Grower) -> Option<Remedy> {
        let p = g.fitted_points();
        let [f, .., l] = p.as_slice() else {
            return None;
        };
        let prev = p[p.len() - 2];
        let between = (g.scaling.flat_reason == Some(super::fit::FlatReason::OneSize))
            .then_some((prev.n, l.n));
        let smallest = g
            .points
            .first()
            .filter(|p| p.samples > 0 && p.samples < FEW_SAMPLES);
        let more_runs = match smallest {
            Some(p) => Some((p.n, p.samples)),
            None => between.is_none().then_some((f.n, f.samples)),
        };
        Some(Remedy { between, more_runs })
    }
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
    /// The same median from the second-largest N to the largest, where as many entries have
    /// [`FEW_SAMPLES`] there (None: fewer, or two sizes). A loop must still rise at the end
    /// beyond it (`still_rising`): a 5.10 guest whose host was busy while it ran one of the
    /// two runs at N = 100 of a shell with N jobs took 5.9 s for it against 3.0 s for the
    /// other, and every entry read dearer per call at N = 100 than at 500 (page faults 34
    /// against 16 µs, execve 2.25 against 1.54 ms, the median x0.61 from 100 to 500), so the
    /// wait walk (60, 173, 158 µs per call at N = 10, 100, 500) seemed to stop rising.
    pub end_step: Option<f64>,
}

fn common_factor(c: Option<&CommonSlowdown>) -> f64 {
    c.map_or(1.0, |c| c.factor.max(1.0))
}

/// The machine's drift from the second-largest N to the largest that a loop's end rise is
/// judged beyond: 1 when not measured. Unlike [`common_factor`] it may be below 1: a machine
/// slower at the second-largest size than at the largest inflates that size's point, which
/// says nothing about whether the frame still grows.
fn end_drift(c: Option<&CommonSlowdown>) -> f64 {
    c.and_then(|c| c.end_step).unwrap_or(1.0)
}

/// The common slowdown of `measured`, or None with fewer than [`COMMON_ENTRIES`] entries of
/// [`FEW_SAMPLES`] own samples at both ends.
fn common_slowdown(measured: &[Measured]) -> Option<CommonSlowdown> {
    let last = measured.first()?.own.len() - 1;
    let ratios = step_ratios(measured, 0, last);
    if ratios.len() < COMMON_ENTRIES {
        return None;
    }
    let end = step_ratios(measured, last.saturating_sub(1), last);
    Some(CommonSlowdown {
        factor: super::stats::median(&ratios)?,
        entries: ratios.len(),
        end_step: (last >= 2 && end.len() >= COMMON_ENTRIES)
            .then(|| super::stats::median(&end))
            .flatten(),
    })
}

/// Each measured entry's own time per call at size index `to` over that at `from`, for the
/// entries with [`FEW_SAMPLES`] own samples at both.
fn step_ratios(measured: &[Measured], from: usize, to: usize) -> Vec<f64> {
    measured
        .iter()
        .filter_map(|m| {
            let (f, l) = (m.own_per_call[from], m.own_per_call[to]);
            (m.own[from].samples >= FEW_SAMPLES && m.own[to].samples >= FEW_SAMPLES && f > 0.0)
                .then_some(l / f)
        })
        .collect()
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
    let mut out = Entries {
        counted: !c.rows.is_empty(),
        ..Entries::default()
    };
    // Interruptions are counted beside the entries but are none of the command's calls:
    // their samples are filed under the entry they interrupted, or `interrupt`.
    let names: BTreeSet<&str> = c
        .rows
        .iter()
        .map(|r| r.entry.as_str())
        .filter(|e| Interruption::of_entry(e).is_none())
        .collect();
    let last = c.ns.len().saturating_sub(1);
    if last == 0 || c.period_ns == 0 {
        return out;
    }
    out.run_length = Some(runlength::measure(
        c.ns,
        c.ops,
        c.period_ns,
        c.files,
        c.rows,
        c.interruptions,
    ));
    let measured: Vec<Measured> = names.into_iter().filter_map(|n| measure(n, c)).collect();
    out.common = common_slowdown(&measured);
    let common = out.common_factor();
    let drift = end_drift(out.common.as_ref());
    for m in measured {
        let e = judge(m, c, common, drift);
        let l = e.last();
        let grows = !e.frames.is_empty() && l.samples >= MIN_SAMPLES;
        let undecided = !grows && !e.undecided.is_empty() && l.samples >= MIN_SAMPLES;
        if undecided {
            out.undecided.push(e.clone());
        }
        let more = e.makes_more_calls()
            && l.per_call_ns < MIN_LOOP_GROWTH * common * e.per_call_base().per_call_ns;
        if more {
            out.more_calls.push(e.clone());
        }
        if grows {
            out.loops.push(e);
        } else if !more && !undecided {
            out.flat.push(e);
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
        c.ns,
        c.ops,
        c.period_ns,
        c.files,
        &out.more_calls,
        out.run_length.as_ref(),
    );
    out
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

/// The entry stacks and counts of case `case` among one run's `stacks` and `rows`.
pub(super) fn of_case<'a>(
    stacks: &'a [StackData],
    rows: &'a [EntryRow],
    case: u32,
) -> (Vec<&'a StackData>, Vec<&'a EntryRow>) {
    let files = stacks
        .iter()
        .filter(|s| s.file.kind == StackKind::Entry && s.file.case == case)
        .collect();
    let rows = rows.iter().filter(|r| r.case == case).collect();
    (files, rows)
}

#[cfg(test)]
pub(crate) mod tests;
