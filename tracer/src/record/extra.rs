//! More runs where they can still change a verdict. After a sweep's planned rounds, a size
//! gets more runs, one at a time, only while a verdict its runs feed could still change, up to
//! a cap of runs per size and a time budget for all of them.
//!
//! A verdict (a traced target, with its case for a built-in workload's, that case's own
//! target only) is fitted from the runs so far as the report fits it: each size's centre is
//! the median of its runs' centres, its error their spread over √runs, each run its own
//! point in the class evidence ([`Advice::verdicts`]). It could still change when the same data at
//! the cap would say something else: each size's runs repeated to the cap, its error shrunk
//! as √runs (what more runs like these would show). Where the two agree, more runs of these
//! sizes cannot move it, whether it names one class, stays flat, or leaves a set the sizes do
//! not separate (two sizes fit every growing shape): nothing more runs for it, however much
//! its runs scatter. Where they differ, the size with the largest error under the cap runs
//! again, and the verdict is read again after each run: the extra runs stop as soon as it
//! is decided. A size needs two successful runs for a spread at all: with `--repeat 1`
//! nothing is measured and nothing is added. Sizes whose command failed are not run again.
//! Decisions `tracer compare` will make later are not known here; a point's error there
//! never goes under 10% anyway (its `MIN_POINT_ERROR`).
//!
//! A discover sweep has a second rule, read from its analysis: a frame whose time per call
//! rose as a loop's does, but at sizes the data cannot tell apart (`analysis::entries`'
//! undecided frames), names the size whose runs would decide it ([`MoreRuns`]). Where that
//! size has fewer samples of the frame than its time needs, it runs again until it should have
//! them (its samples per run so far say how many runs that takes), within the time budget and
//! `--max-repeat` when given; otherwise up to the cap of runs per size. The runs come in
//! batches of at most twice the size's runs so far, the analysis read again after each, at
//! most [`MAX_SAMPLE_ROUNDS`] times: a 5.10 guest's `ipcs` swept at
//! N = 10, 100, 200, 400 twice had 14 samples of `sysvipc_find_ipc` at N = 10, two runs of
//! 2 s each, and that size's noise (±27%) left the walk undecided.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use super::advice::{Advice, MoreRuns, Open};
use super::spec::Invocation as Planned;
use crate::rundata::Invocation;

/// The default cap on runs per size: twice the planned rounds.
pub const DEFAULT_MAX_RUNS_FACTOR: u32 = 2;
/// The default time budget for the extra runs, as a share of the planned runs' wall time.
pub const DEFAULT_BUDGET_SHARE: f64 = 0.5;
/// The most times a discover sweep's analysis is read for sizes to run again: each read
/// plans a batch of runs (at most [`BATCH_GROWTH`] times the runs so far), so the reads stop
/// as soon as the size is measured well enough to decide; more would spend the budget
/// chasing a rise that more runs do not settle.
pub const MAX_SAMPLE_ROUNDS: u32 = 4;
/// A batch of runs for samples is at most this many times the size's runs so far: a size
/// with next to no samples of the frame (4 in two runs) asks for dozens of runs, and a few
/// may already decide it (the fit takes a size from 5 samples on).
pub const BATCH_GROWTH: u64 = 2;

/// The limits on extra runs of an external sweep.
#[derive(Clone, Debug, PartialEq)]
pub struct ExtraRuns {
    /// Most runs of one size, the planned ones included (no extra run at or under the planned
    /// rounds).
    pub max_runs: u32,
    /// The user set `max_runs` (`--max-repeat`): it then caps a discover sweep's runs for
    /// samples too, which otherwise only the budget does.
    pub max_given: bool,
    /// Most wall time for the extra runs together; None: `DEFAULT_BUDGET_SHARE` of the time
    /// the planned runs took.
    pub budget: Option<Duration>,
    /// `tracer sweep --budget`: when this run's share of the sweep's time ends. A planned
    /// round that would end after it is not started (the first always runs), and the extra
    /// runs keep within it too.
    pub deadline: Option<Instant>,
    /// Targets whose verdict's class a loop count gives (counted beside them in the same
    /// runs, or by the sweep's loop-count pass): only whether they grow can make a size run
    /// again, not their time's class set.
    pub counted: Vec<String>,
}

impl ExtraRuns {
    /// The defaults for `repeat` planned rounds.
    pub fn for_repeat(repeat: u32) -> Self {
        ExtraRuns {
            max_runs: repeat.saturating_mul(DEFAULT_MAX_RUNS_FACTOR),
            max_given: false,
            budget: None,
            deadline: None,
            counted: Vec::new(),
        }
    }

    /// The budget once the planned runs took `planned`, and within the deadline.
    pub fn budget_after(&self, planned: Duration) -> Duration {
        let own = self
            .budget
            .unwrap_or_else(|| planned.mul_f64(DEFAULT_BUDGET_SHARE));
        match self.deadline {
            Some(d) => own.min(d.saturating_duration_since(Instant::now())),
            None => own,
        }
    }
}

/// The next verdict to run a size again for: the first that more runs could change, with a
/// size under the cap. None: every verdict is decided, or cannot change by more runs.
pub fn next_size(
    advice: &dyn Advice,
    invocations: &[Invocation],
    limits: &ExtraRuns,
) -> Option<Open> {
    advice
        .verdicts(invocations, limits.max_runs, &limits.counted)
        .into_iter()
        .filter(Open::wants_runs)
        .max_by(|a, b| {
            let (ea, eb) = (a.next.map_or(0.0, |x| x.2), b.next.map_or(0.0, |x| x.2));
            ea.total_cmp(&eb)
        })
}

/// The extra runs of one external sweep as they happen: asked for the next command run once
/// the planned ones are done, it picks the size ([`next_size`]) and keeps to the budget.
pub struct Scheduler<'a> {
    /// The analysis, read for the verdicts of the runs so far.
    advice: &'a dyn Advice,
    limits: ExtraRuns,
    plan: &'a [Planned],
    label: &'a str,
    /// When the planned runs began, then when the extra ones did.
    started: Instant,
    extra_started: Option<Instant>,
    budget: Duration,
    /// Extra runs per size so far.
    added: BTreeMap<u64, u32>,
    /// The budget stopped them with sizes still unsettled.
    out_of_time: bool,
    /// A discover sweep's runs for samples: planned and not yet run (size, why), those run
    /// per size, how many times the analysis was read, and what it asked for last.
    samples: Option<SampleRuns>,
}

/// The state of a discover sweep's runs for samples.
#[derive(Default)]
struct SampleRuns {
    queue: std::collections::VecDeque<(u64, String)>,
    added: BTreeMap<u64, u32>,
    rounds: u32,
    /// The frames runs were planned for ("sysvipc_find_ipc in read").
    frames: Vec<String>,
    last: Vec<MoreRuns>,
    /// The last read asked for nothing more runs can give (or nothing at all).
    done: bool,
}

impl<'a> Scheduler<'a> {
    /// For a sweep's `plan` (its planned runs, about to start); `label` names the command.
    /// With `discover`, the sweep's analysis may ask for runs too ([`Self::wants_analysis`]).
    pub fn new(
        advice: &'a dyn Advice,
        limits: ExtraRuns,
        plan: &'a [Planned],
        label: &'a str,
        discover: bool,
    ) -> Self {
        Scheduler {
            advice,
            limits,
            plan,
            label,
            started: Instant::now(),
            extra_started: None,
            budget: Duration::ZERO,
            added: BTreeMap::new(),
            out_of_time: false,
            samples: discover.then(SampleRuns::default),
        }
    }

    /// The next extra run after the runs `done`, with its progress label; None when no
    /// verdict could change by more runs, every size that could change one is at its cap,
    /// or the next run would not fit in the budget. A verdict that more runs could change
    /// comes first ([`next_size`]), then the discover analysis's sizes planned by
    /// [`Self::plan_samples`].
    pub fn next(&mut self, done: &[Invocation]) -> Option<(Planned, String)> {
        let t0 = *self.extra_started.get_or_insert_with(|| {
            self.budget = self.limits.budget_after(self.started.elapsed());
            Instant::now()
        });
        let (n, why) = match next_size(self.advice, done, &self.limits) {
            Some(
                o @ Open {
                    next: Some((n, runs, rel_se)),
                    ..
                },
            ) => (
                n,
                format!(
                    "{} {} could read {} (N={n} ±{:.0}% over {runs} runs)",
                    o.target,
                    o.now.label(),
                    o.could_read().map_or_else(String::new, |d| d.label()),
                    rel_se * 100.0,
                ),
            ),
            _ => self.samples.as_mut()?.queue.front().cloned()?,
        };
        // The next run is about as long as this size's runs so far.
        let runs: Vec<f64> = done.iter().filter(|i| i.n == n).map(|i| i.wall_s).collect();
        let expected = Duration::from_secs_f64(runs.iter().sum::<f64>() / runs.len() as f64);
        if t0.elapsed() + expected > self.budget {
            self.out_of_time = true;
            return None;
        }
        let inv = self.plan.iter().find(|i| i.n == n)?;
        let s = self.samples.as_mut();
        match s {
            Some(s) if s.queue.front().is_some_and(|q| q.0 == n && q.1 == why) => {
                s.queue.pop_front();
                *s.added.entry(n).or_default() += 1;
            }
            _ => *self.added.entry(n).or_default() += 1,
        }
        let extra = self.added.values().sum::<u32>()
            + self
                .samples
                .as_ref()
                .map_or(0, |s| s.added.values().sum::<u32>());
        let label = format!("{} N={n} [extra run {extra}: {why}]", self.label);
        Some((inv.clone(), label))
    }

    /// Whether a discover sweep's analysis should be read for sizes to run again: nothing
    /// planned is left, the budget is not spent, and it was not read too often already.
    pub fn wants_analysis(&self) -> bool {
        self.samples
            .as_ref()
            .is_some_and(|s| s.queue.is_empty() && !s.done && s.rounds < MAX_SAMPLE_ROUNDS)
            && !self.out_of_time
            && !self.capped_at_plan()
    }

    /// `--max-repeat` holds every size to the runs its rounds already planned (M = R): no
    /// run the analysis could ask for may happen, so it is not read. Under qemu that read
    /// took 18-51 s of a discover sweep of 8 runs whose answer could change nothing.
    fn capped_at_plan(&self) -> bool {
        if !self.limits.max_given {
            return false;
        }
        let mut per_size: BTreeMap<u64, u32> = BTreeMap::new();
        for p in self.plan {
            *per_size.entry(p.n).or_default() += 1;
        }
        per_size.values().all(|&runs| runs >= self.limits.max_runs)
    }

    /// Plan the runs the discover analysis asks for (`wants`, read after the runs `done`):
    /// a size short of samples until it should have enough (from its samples per run
    /// so far), within `--max-repeat` when given; any other up to the cap of runs per size.
    pub fn plan_samples(&mut self, wants: Vec<MoreRuns>, done: &[Invocation]) {
        let limits = self.limits.clone();
        let Some(s) = self.samples.as_mut() else {
            return;
        };
        s.rounds += 1;
        for w in &wants {
            let runs = done.iter().filter(|i| i.n == w.n && !i.failed()).count() as u64;
            // A size whose command failed is not run again; one already planned (another
            // case's undecided frame at the same size) once.
            if runs == 0
                || done.iter().any(|i| i.n == w.n && i.failed())
                || s.queue.iter().any(|q| q.0 == w.n)
            {
                continue;
            }
            let target = if w.samples < w.enough {
                let needed = (runs * w.enough).div_ceil(w.samples.max(1));
                if limits.max_given {
                    needed.min(limits.max_runs as u64)
                } else {
                    needed
                }
            } else {
                limits.max_runs as u64
            }
            .min(runs + BATCH_GROWTH * runs);
            let why = format!(
                "{} in {}, {} samples at N={} over {runs} runs",
                w.function, w.entry, w.samples, w.n
            );
            for _ in runs..target {
                s.queue.push_back((w.n, why.clone()));
            }
            let frame = format!("{} in {}", w.function, w.entry);
            if target > runs && !s.frames.contains(&frame) {
                s.frames.push(frame);
            }
        }
        s.done = s.queue.is_empty();
        s.last = wants;
    }

    /// What the extra runs did, for the terminal: None when there were none and nothing
    /// was left open.
    pub fn summary(&self, done: &[Invocation]) -> Option<String> {
        let mut parts = self.spread_summary(done);
        parts.extend(self.samples_summary());
        (!parts.is_empty()).then(|| parts.join("; "))
    }

    /// The runs per size and why: the extra runs and the verdicts they were for, and what
    /// each verdict that is not one class came to (more runs could still change it, but the
    /// budget or the cap stopped them; or none could).
    fn spread_summary(&self, done: &[Invocation]) -> Vec<String> {
        let verdicts = self
            .advice
            .verdicts(done, self.limits.max_runs, &self.limits.counted);
        let wide = |o: &&Open| o.now.is_wide();
        if self.added.is_empty() && !verdicts.iter().any(|o| o.wants_runs() || wide(&o)) {
            return Vec::new();
        }
        let mut parts = vec![format!("runs per size: {}", runs_per_size(done))];
        if !self.added.is_empty() {
            parts.push(format!(
                "extra runs where a verdict could still change: {}",
                sizes_added(&self.added)
            ));
        }
        let still: Vec<String> = verdicts
            .iter()
            .filter_map(|o| {
                Some(format!(
                    "{} {} (could read {})",
                    o.target,
                    o.now.label(),
                    o.could_read()?.label()
                ))
            })
            .collect();
        if !still.is_empty() {
            // next() stops for the budget, or when every size that could change one is at
            // its cap.
            let why = if self.out_of_time && self.limits.deadline.is_some() {
                "the time for extra runs is spent (--extra-time, --budget)"
            } else if self.out_of_time {
                "the time for extra runs is spent (--extra-time)"
            } else {
                "at --max-repeat"
            };
            parts.push(format!("still open, {why}: {}", still.join(", ")));
        }
        let settled: Vec<String> = verdicts
            .iter()
            .filter(|o| o.could_read().is_none())
            .filter(wide)
            .map(|o| {
                let size = o
                    .parts_at
                    .map(|n| format!(" (a size near N={n} would)"))
                    .unwrap_or_default();
                format!("{} {}{size}", o.target, o.now.label())
            })
            .collect();
        if !settled.is_empty() {
            parts.push(format!(
                "more runs of these sizes would not narrow {}",
                settled.join(", ")
            ));
        }
        if still.is_empty() && settled.is_empty() {
            parts.push("every verdict decided".into());
        }
        parts
    }

    /// A discover sweep's runs for samples.
    fn samples_summary(&self) -> Vec<String> {
        let Some(s) = &self.samples else {
            return Vec::new();
        };
        let mut parts = Vec::new();
        if !s.added.is_empty() {
            parts.push(format!(
                "extra runs for samples of an undecided loop ({}): {}",
                s.frames.join(", "),
                sizes_added(&s.added)
            ));
        }
        if !s.queue.is_empty() {
            parts.push(format!(
                "the time for extra runs is spent (--extra-time) with {} more planned",
                s.queue.len()
            ));
        } else if s.done && !s.last.is_empty() {
            let open: Vec<String> = s
                .last
                .iter()
                .map(|w| {
                    format!(
                        "{} in {} at N={} ({} samples)",
                        w.function, w.entry, w.n, w.samples
                    )
                })
                .collect();
            parts.push(format!(
                "still undecided at --max-repeat: {}",
                open.join(", ")
            ));
        } else if !s.added.is_empty() && !s.done {
            parts.push(format!(
                "the analysis was read {MAX_SAMPLE_ROUNDS} times; the report says what is \
                 still undecided"
            ));
        }
        parts
    }
}

/// "N=10 3, N=100 5": successful runs of each size.
fn runs_per_size(done: &[Invocation]) -> String {
    let mut by_n: BTreeMap<u64, u32> = BTreeMap::new();
    for i in done.iter().filter(|i| i.n > 0 && !i.failed()) {
        *by_n.entry(i.n).or_default() += 1;
    }
    by_n.iter()
        .map(|(n, k)| format!("N={n} {k}"))
        .collect::<Vec<_>>()
        .join(", ")
}

/// "N=10 +2, N=100 +1".
fn sizes_added(added: &BTreeMap<u64, u32>) -> String {
    added
        .iter()
        .map(|(n, k)| format!("N={n} +{k}"))
        .collect::<Vec<_>>()
        .join(", ")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::analysis::advice::{Analyst, verdicts};
    use crate::analysis::fit::{Complexity, classes_label};
    use crate::record::advice::Decision;

    /// Growth within the class set `c`.
    fn grows(c: &[Complexity]) -> Decision {
        Decision::Grows {
            classes: c.len(),
            label: classes_label(c),
        }
    }
    use crate::analysis::hist::from_values;
    use crate::rundata::InvocationSpan;

    fn inv(n: u64, exit: i32, t: u64) -> Invocation {
        Invocation {
            n,
            command: vec![],
            exit: Some(exit),
            wall_s: 0.1,
            user_s: 0.0,
            sys_s: 0.0,
            cpu_steal_s: 0.0,
            cpu_busy_s: 0.0,
            outlived: 0,
            spans: vec![InvocationSpan {
                target: "do_wait".into(),
                case: workloads::cases::CASE_COMMAND,
                calls: 20,
                untimed: 0,
                wall: from_values(&[t; 20]),
                oncpu: from_values(&[t; 20]),
            }],
        }
    }

    /// Runs of `(n, [t...])`, in order.
    fn runs_of(data: &[(u64, &[u64])]) -> Vec<Invocation> {
        data.iter()
            .flat_map(|(n, ts)| ts.iter().map(move |&t| inv(*n, 0, t)))
            .collect()
    }

    /// A linear rise whose runs scatter by ±25% leaves O(n) or O(n log n); the same means at
    /// the cap's six runs per size name O(n) alone: the noisiest size runs again, until the
    /// cap. The same rise with runs within ±4% names O(n) already: nothing runs again,
    /// although its runs differ by more than a few percent (the old rule ran every size to
    /// ±5%).
    #[test]
    fn a_size_runs_again_only_while_more_runs_could_change_the_verdict() {
        let limits = ExtraRuns::for_repeat(3);
        assert_eq!(limits.max_runs, 6);
        let noisy = runs_of(&[
            (10, &[1000, 1300, 900]),
            (100, &[2000, 2600, 1700]),
            (1000, &[11000, 14000, 8500]),
            (4000, &[41000, 52000, 33000]),
        ]);
        let open = next_size(&Analyst, &noisy, &limits).unwrap();
        assert_eq!(open.target, "do_wait");
        assert_eq!(open.now, grows(&[Complexity::Linear, Complexity::NLogN]));
        assert_eq!(open.at_cap, grows(&[Complexity::Linear]));
        let (n, runs, rel_se) = open.next.unwrap();
        assert_eq!((n, runs), (1000, 3), "the largest error: {open:?}");
        assert!((0.1..0.2).contains(&rel_se), "{rel_se}");
        // At the cap that size runs no more: the next noisiest does.
        let mut capped = noisy.clone();
        capped.extend(runs_of(&[(1000, &[11000, 14000, 8500])]));
        assert_ne!(
            next_size(&Analyst, &capped, &limits)
                .unwrap()
                .next
                .unwrap()
                .0,
            1000
        );
        // No extra run when the cap is the planned rounds.
        assert_eq!(
            next_size(&Analyst, &noisy, &ExtraRuns::for_repeat(3).with_max(3)),
            None
        );
        // Its class a loop count gives (wait_consider_task counted inside do_wait): that it
        // grows is all the time must say, and it says so already.
        let counted = ExtraRuns {
            counted: vec!["do_wait".into()],
            ..ExtraRuns::for_repeat(3)
        };
        assert_eq!(next_size(&Analyst, &noisy, &counted), None);
        let v = verdicts(&noisy, 6, &counted.counted);
        assert_eq!(v[0].now, v[0].at_cap);
        assert_eq!(v[0].now.label(), "grows");

        let steady = runs_of(&[
            (10, &[1000, 1080, 1040]),
            (100, &[2000, 2150, 1900]),
            (1000, &[11000, 12000, 10500]),
            (4000, &[41000, 44000, 40000]),
        ]);
        assert_eq!(next_size(&Analyst, &steady, &limits), None);
        let v = verdicts(&steady, limits.max_runs, &[]);
        assert_eq!(v[0].now, grows(&[Complexity::Linear]));
    }

    /// A reading that rests on one size's slow runs runs that size again: a 5.10 guest's
    /// waitpid(pid) per call with two of three runs at N = 1000 slow together read "no
    /// rising trend" (116 µs, 170 µs, 2.59 ms, 1.63 ms over N = 1..3000, ±17%, ±18%, ±34%,
    /// ±8%), and the same data at the cap reads the same, since the cap keeps each size's
    /// centre. Moved within its error, N = 1000 reads growth: it runs again, and once its
    /// runs agree with the sizes around it, nothing more runs. (Runs like those, each
    /// run's calls alike.)
    #[test]
    fn a_size_whose_error_could_turn_flat_into_growth_runs_again() {
        let counted = ExtraRuns {
            counted: vec!["do_wait".into()],
            ..ExtraRuns::for_repeat(3)
        };
        let us = |v: [u64; 3]| v.map(|t| t * 1000);
        let (n1, n100, n1000, n3000) = (
            us([116, 160, 85]),
            us([170, 240, 115]),
            us([2594, 2900, 700]),
            us([1630, 1400, 1850]),
        );
        let slow = runs_of(&[(1, &n1), (100, &n100), (1000, &n1000), (3000, &n3000)]);
        let open = next_size(&Analyst, &slow, &counted).expect("a size to run again");
        assert_eq!(
            (&open.now, &open.at_cap),
            (&Decision::Flat, &Decision::Flat)
        );
        assert_eq!(
            open.could_read().map(Decision::label).as_deref(),
            Some("grows")
        );
        assert_eq!(open.next.map(|x| (x.0, x.1)), Some((1000, 3)), "{open:?}");
        let mut settled = slow.clone();
        settled.extend(runs_of(&[(1000, &us([790, 880, 930]))]));
        let v = verdicts(&settled, 6, &counted.counted);
        assert_eq!(v[0].now.label(), "grows", "{v:?}");
        assert_eq!(next_size(&Analyst, &settled, &counted), None, "{v:?}");
    }

    /// Verdicts more runs of these sizes cannot change run nothing more, however their runs
    /// scatter: flat within ±30%, and two sizes (every growing class fits two points).
    #[test]
    fn a_verdict_that_cannot_change_runs_nothing_more() {
        let limits = ExtraRuns::for_repeat(3);
        let flat = runs_of(&[
            (10, &[1000, 1300, 900]),
            (100, &[1100, 800, 1000]),
            (1000, &[1000, 1200, 900]),
        ]);
        let v = verdicts(&flat, limits.max_runs, &[]);
        assert_eq!(
            (&v[0].now, &v[0].at_cap),
            (&Decision::Flat, &Decision::Flat)
        );
        assert_eq!(next_size(&Analyst, &flat, &limits), None);
        let two = runs_of(&[(10, &[1000, 1500, 800]), (1000, &[10000, 15000, 8000])]);
        let v = verdicts(&two, limits.max_runs, &[]);
        assert_eq!(v[0].now, grows(&Complexity::GROWING));
        assert_eq!(v[0].now, v[0].at_cap);
        assert_eq!(next_size(&Analyst, &two, &limits), None);
    }

    /// A built-in workload's runs: each case of the target it exists for is judged on its own;
    /// a target it traced by the way does not make a size run again.
    #[test]
    fn a_workload_case_is_judged_on_its_own_target_only() {
        use workloads::cases::{WAITPID_ANY, WAITPID_PID, case_id};
        let id = |name: &str| case_id(name).unwrap();
        let limits = ExtraRuns::for_repeat(3);
        let run = |n: u64, pid_t: u64, any_t: u64, incidental_t: u64| {
            let mut i = inv(n, 0, pid_t);
            i.spans[0].case = id(WAITPID_PID);
            let mut any = i.spans[0].clone();
            any.case = id(WAITPID_ANY);
            any.wall = from_values(&[any_t; 20]);
            any.oncpu = any.wall.clone();
            let mut dup = any.clone();
            dup.target = "dup_mmap".into();
            dup.wall = from_values(&[incidental_t; 20]);
            dup.oncpu = dup.wall.clone();
            i.spans.extend([any, dup]);
            i
        };
        // waitpid(pid) steady and flat, waitpid(-1) steady and linear; dup_mmap's calls in
        // the waitpid cases scatter wildly: nothing runs again.
        let sizes = [10u64, 100, 1000, 4000];
        let linear = |n: u64| 1000 + 10 * n;
        let mut runs = Vec::new();
        for (k, &n) in sizes.iter().chain(&sizes).chain(&sizes).enumerate() {
            let wild = [100, 900, 300][k / sizes.len()] * (1 + n / 100);
            runs.push(run(n, 1000, linear(n), wild));
        }
        assert_eq!(next_size(&Analyst, &runs, &limits), None);
        // waitpid(-1)'s own calls scattering by ±25% do, and the line names the case.
        let mut runs = Vec::new();
        // The runs of `a_size_runs_again_only_while_more_runs_could_change_the_verdict`.
        let any_t = [
            [1000, 2000, 11000, 41000],
            [1300, 2600, 14000, 52000],
            [900, 1700, 8500, 33000],
        ];
        for (k, &n) in sizes.iter().chain(&sizes).chain(&sizes).enumerate() {
            runs.push(run(n, 1000, any_t[k / sizes.len()][k % sizes.len()], 100));
        }
        let u = next_size(&Analyst, &runs, &limits)
            .unwrap_or_else(|| panic!("{:?}", verdicts(&runs, limits.max_runs, &[])));
        assert_eq!(u.target, "do_wait [waitpid-any]");
    }

    #[test]
    fn one_run_a_failure_or_no_calls_adds_nothing() {
        let limits = ExtraRuns::for_repeat(1).with_max(5);
        // One run per size: no spread to judge.
        let one: Vec<Invocation> = [(10, 1000), (100, 90_000)]
            .iter()
            .map(|&(n, t)| inv(n, 0, t))
            .collect();
        assert_eq!(next_size(&Analyst, &one, &limits), None);
        // A size whose command failed once is not run again, however its runs differ.
        let failed = vec![inv(10, 0, 1000), inv(10, 0, 5000), inv(10, 1, 3000)];
        assert_eq!(next_size(&Analyst, &failed, &limits), None);
        // A run without calls of any target (a plain `tracer record` has N = 0, too).
        let mut empty = vec![inv(10, 0, 1000), inv(10, 0, 5000)];
        for i in &mut empty {
            i.spans.clear();
        }
        empty.push(inv(0, 0, 1));
        assert_eq!(next_size(&Analyst, &empty, &limits), None);
    }

    /// A discover sweep reads its runs so far for the sizes short of samples, unless
    /// `--max-repeat` left no size room for another run.
    #[test]
    fn a_discover_sweep_capped_at_its_rounds_does_not_read_its_runs() {
        let plan: Vec<Planned> = [10, 100, 10, 100]
            .map(|n| Planned {
                command: vec!["bench".into()],
                env: vec![],
                n,
                case: None,
            })
            .to_vec();
        let limits = |max_runs, max_given| ExtraRuns {
            max_runs,
            max_given,
            ..ExtraRuns::for_repeat(2)
        };
        let wants =
            |l: ExtraRuns| Scheduler::new(&Analyst, l, &plan, "bench", true).wants_analysis();
        assert!(wants(limits(4, false)), "the default cap leaves room");
        assert!(
            wants(limits(3, true)),
            "--max-repeat 3 leaves one run per size"
        );
        assert!(!wants(limits(2, true)), "--max-repeat 2 = --repeat 2");
        // Not a discover sweep: nothing to read either way.
        assert!(
            !Scheduler::new(&Analyst, limits(4, false), &plan, "bench", false).wants_analysis()
        );
    }

    #[test]
    fn the_summary_says_what_was_added_and_what_is_still_open() {
        let plan = [10, 100, 1000, 4000].map(|n| Planned {
            command: vec!["bench".into()],
            env: vec![],
            n,
            case: Some(100),
        });
        let steady = runs_of(&[
            (10, &[1000, 1080, 1040]),
            (100, &[2000, 2150, 1900]),
            (1000, &[11000, 12000, 10500]),
            (4000, &[41000, 44000, 40000]),
        ]);
        let open = runs_of(&[
            (10, &[1000, 1300, 900]),
            (100, &[2000, 2600, 1700]),
            (1000, &[11000, 14000, 8500]),
            (4000, &[41000, 52000, 33000]),
        ]);
        let s = Scheduler::new(&Analyst, ExtraRuns::for_repeat(3), &plan, "bench", false);
        assert_eq!(s.summary(&steady), None);
        // No time at all: the open verdict gets no run, and the line says why.
        let mut s = Scheduler::new(
            &Analyst,
            ExtraRuns {
                budget: Some(Duration::ZERO),
                ..ExtraRuns::for_repeat(3)
            },
            &plan,
            "bench",
            false,
        );
        assert!(s.next(&open).is_none());
        assert_eq!(
            s.summary(&open).unwrap(),
            "runs per size: N=10 3, N=100 3, N=1000 3, N=4000 3; still open, the time for \
             extra runs is spent (--extra-time): do_wait O(n) or O(n log n) (could read O(n))"
        );
        // Time enough: one more run of its noisiest size, labelled, then the cap.
        let limits = ExtraRuns {
            budget: Some(Duration::from_secs(60)),
            ..ExtraRuns::for_repeat(3)
        };
        let mut s = Scheduler::new(&Analyst, limits, &plan, "bench", false);
        let (next, label) = s.next(&open).unwrap();
        assert_eq!(next.phase(), Some((100, 1000)));
        assert!(
            label.starts_with(
                "bench N=1000 [extra run 1: do_wait O(n) or O(n log n) could read O(n) (N=1000 ±"
            ),
            "{label}"
        );
        // Runs on the line decide it: the extra runs stop as soon as it reads O(n) alone.
        let mut done = open.clone();
        done.push(inv(1000, 0, 11000));
        let mut extra = 1;
        while let Some((p, _)) = s.next(&done) {
            done.push(inv(p.n, 0, 10 * p.n + 1000));
            extra += 1;
        }
        assert!(
            extra < 4 * 3,
            "{extra} extra runs: stopped by the cap, not the decision"
        );
        assert_eq!(verdicts(&done, 6, &[])[0].now, grows(&[Complexity::Linear]));
        let line = s.summary(&done).unwrap();
        assert!(
            line.starts_with("runs per size: N=10 ")
                && line.contains("; extra runs where a verdict could still change: ")
                && line.ends_with("; every verdict decided"),
            "{line}"
        );
    }

    fn want(n: u64, samples: u64) -> MoreRuns {
        MoreRuns {
            n,
            samples,
            enough: 100,
            entry: "read".into(),
            function: "sysvipc_find_ipc".into(),
        }
    }

    /// A discover sweep: the size the analysis names runs again, until it should have the
    /// samples it lacks, or to the cap when it has them; never a failed size.
    #[test]
    fn a_size_short_of_samples_runs_until_it_should_have_them() {
        let plan = [10, 100].map(|n| Planned {
            command: vec!["ipc.sh".into()],
            env: vec![],
            n,
            case: Some(100),
        });
        let done: Vec<Invocation> = [10, 100, 10, 100]
            .iter()
            .map(|&n| inv(n, 0, 1000))
            .collect();
        let limits = ExtraRuns {
            budget: Some(Duration::from_secs(600)),
            ..ExtraRuns::for_repeat(2)
        };
        // Not a discover sweep: the analysis is never asked.
        assert!(!Scheduler::new(&Analyst, limits.clone(), &plan, "ipc.sh", false).wants_analysis());
        let mut s = Scheduler::new(&Analyst, limits.clone(), &plan, "ipc.sh", true);
        assert!(s.next(&done).is_none());
        assert!(s.wants_analysis());
        // 14 samples over 2 runs: 15 runs should give 100; the first batch is twice the runs.
        s.plan_samples(vec![want(10, 14)], &done);
        let mut ran = done.clone();
        let mut labels = Vec::new();
        while let Some((p, label)) = s.next(&ran) {
            assert_eq!(p.n, 10);
            labels.push(label);
            ran.push(inv(10, 0, 1000));
        }
        assert_eq!(labels.len(), 4, "{labels:?}");
        assert_eq!(
            labels[0],
            "ipc.sh N=10 [extra run 1: sysvipc_find_ipc in read, 14 samples at N=10 over 2 runs]"
        );
        assert!(s.wants_analysis());
        // Read again with 42 samples over 6 runs: 15 should give 100, 9 more.
        s.plan_samples(vec![want(10, 42)], &ran);
        while s.next(&ran).is_some() {
            ran.push(inv(10, 0, 1000));
        }
        assert_eq!(ran.iter().filter(|i| i.n == 10).count(), 15);
        // Read again, nothing left to decide by runs: done, and the line says what was added.
        s.plan_samples(vec![], &ran);
        assert!(!s.wants_analysis());
        assert_eq!(
            s.summary(&ran).unwrap(),
            "extra runs for samples of an undecided loop (sysvipc_find_ipc in read): N=10 +13"
        );

        // --max-repeat caps them; a size with samples enough runs to the cap, 2R.
        let mut s = Scheduler::new(
            &Analyst,
            ExtraRuns {
                max_given: true,
                ..limits.clone()
            },
            &plan,
            "ipc.sh",
            true,
        );
        s.plan_samples(vec![want(10, 14)], &done);
        assert_eq!(s.samples.as_ref().unwrap().queue.len(), 2);
        let mut s = Scheduler::new(&Analyst, limits.clone(), &plan, "ipc.sh", true);
        s.plan_samples(vec![want(100, 400), want(10, 500)], &done);
        assert_eq!(s.samples.as_ref().unwrap().queue.len(), 4);
        // At the cap already: nothing planned, and the line says the frame is still open.
        let mut s = Scheduler::new(&Analyst, limits.clone(), &plan, "ipc.sh", true);
        let capped: Vec<Invocation> = done.iter().chain(&done).cloned().collect();
        s.plan_samples(vec![want(10, 500)], &capped);
        assert!(s.next(&capped).is_none());
        assert!(!s.wants_analysis());
        assert_eq!(
            s.summary(&capped).unwrap(),
            "still undecided at --max-repeat: sysvipc_find_ipc in read at N=10 (500 samples)"
        );
        // A failed size is not run again.
        let mut failed = done.clone();
        failed.push(inv(10, 1, 1000));
        let mut s = Scheduler::new(&Analyst, limits.clone(), &plan, "ipc.sh", true);
        s.plan_samples(vec![want(10, 14)], &failed);
        assert!(s.next(&failed).is_none());
        // No time: the planned runs are left, and said.
        let mut s = Scheduler::new(
            &Analyst,
            ExtraRuns {
                budget: Some(Duration::ZERO),
                ..limits.clone()
            },
            &plan,
            "ipc.sh",
            true,
        );
        s.plan_samples(vec![want(10, 14)], &done);
        assert!(s.next(&done).is_none());
        assert!(!s.wants_analysis());
        assert_eq!(
            s.summary(&done).unwrap(),
            "the time for extra runs is spent (--extra-time) with 4 more planned"
        );
        // The analysis is read at most MAX_SAMPLE_ROUNDS times.
        let mut s = Scheduler::new(&Analyst, limits.clone(), &plan, "ipc.sh", true);
        let mut ran = done.clone();
        for _ in 0..MAX_SAMPLE_ROUNDS {
            assert!(s.wants_analysis());
            s.plan_samples(vec![want(10, 99)], &ran);
            while s.next(&ran).is_some() {
                ran.push(inv(10, 0, 1000));
            }
        }
        assert!(!s.wants_analysis());
    }

    #[test]
    fn the_budget_defaults_to_half_the_planned_time() {
        let l = ExtraRuns::for_repeat(3);
        assert_eq!(
            l.budget_after(Duration::from_secs(10)),
            Duration::from_secs(5)
        );
        let l = ExtraRuns {
            budget: Some(Duration::from_secs(2)),
            ..l
        };
        assert_eq!(
            l.budget_after(Duration::from_secs(10)),
            Duration::from_secs(2)
        );
    }

    impl ExtraRuns {
        fn with_max(self, max_runs: u32) -> Self {
            ExtraRuns { max_runs, ..self }
        }
    }
}
