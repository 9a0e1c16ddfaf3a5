//! More runs where they are needed. After a sweep's planned rounds, a size whose runs still
//! disagree gets more runs, one at a time, the least settled size first, up to a cap of runs
//! per size and a time budget for all of them.
//!
//! A size is settled when, for every traced target (and workload case) with calls there, the
//! relative standard error of its value (the spread of its runs' centres over √runs, as the
//! tables compute it) is at most [`MIN_POINT_ERROR`]: the least error `tracer compare` gives
//! any point, so below it another run narrows no interval and changes no decision. A size needs two successful
//! runs for a spread at all: with `--repeat 1` nothing is measured and nothing is added.
//! Sizes whose command failed are not run again.
//!
//! A discover sweep has a second rule, read from its analysis: a frame whose time per call
//! rose as a loop's does, but at sizes the data cannot tell apart (`analysis::entries`'
//! undecided frames), names the size whose runs would decide it ([`MoreRuns`]). Where that
//! size has fewer than `FEW_SAMPLES` samples of the frame, it runs again until it should have
//! them (its samples per run so far say how many runs that takes), within the time budget and
//! `--max-repeat` when given; otherwise up to the cap of runs per size. The runs come in
//! batches of at most twice the size's runs so far, the analysis read again after each, at
//! most [`MAX_SAMPLE_ROUNDS`] times: a 5.10 guest's `ipcs` swept at
//! N = 10, 100, 200, 400 twice had 14 samples of `sysvipc_find_ipc` at N = 10, two runs of
//! 2 s each, and that size's noise (±27%) left the walk undecided.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use super::spec::Invocation as Planned;
use crate::analysis::compare::MIN_POINT_ERROR;
use crate::analysis::entries::{FEW_SAMPLES, MoreRuns};
use crate::analysis::table::{rel_se_of_runs, run_centre};
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
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct ExtraRuns {
    /// Most runs of one size, the planned ones included (no extra run at or under the planned
    /// rounds).
    pub max_runs: u32,
    /// The user set `max_runs` (`--max-repeat`): it then caps a discover sweep's runs for
    /// samples too, which otherwise only the budget does.
    pub max_given: bool,
    /// Most wall time for the extra runs together; None: [`DEFAULT_BUDGET_SHARE`] of the time
    /// the planned runs took.
    pub budget: Option<Duration>,
}

impl ExtraRuns {
    /// The defaults for `repeat` planned rounds.
    pub fn for_repeat(repeat: u32) -> Self {
        ExtraRuns {
            max_runs: repeat.saturating_mul(DEFAULT_MAX_RUNS_FACTOR),
            max_given: false,
            budget: None,
        }
    }

    /// The budget once the planned runs took `planned`.
    pub fn budget_after(&self, planned: Duration) -> Duration {
        self.budget
            .unwrap_or_else(|| planned.mul_f64(DEFAULT_BUDGET_SHARE))
    }
}

/// How settled one size is.
#[derive(Clone, Debug, PartialEq)]
pub struct Unsettled {
    pub n: u64,
    /// Successful runs so far.
    pub runs: usize,
    /// The largest relative standard error among the targets with calls at this size.
    pub rel_se: f64,
    /// The target it belongs to (with its case, for a built-in workload's).
    pub target: String,
}

/// Each successful run's centre per N and (target, case) (the tables' fitted centre of its
/// calls).
type Centres<'a> = BTreeMap<u64, BTreeMap<(&'a str, u32), Vec<f64>>>;

/// Every successful run's centre, and the sizes where a run failed.
fn centres(invocations: &[Invocation]) -> (Centres<'_>, Vec<u64>) {
    // On-CPU where the target's probes measured it in any run, as the tables choose.
    let oncpu: std::collections::BTreeSet<&str> = invocations
        .iter()
        .flat_map(|i| &i.spans)
        .filter(|s| s.oncpu.sum_ns > 0)
        .map(|s| s.target.as_str())
        .collect();
    // A built-in workload's case decides on the target it exists for; what else it traced is
    // incidental and runs no size again.
    let decides = |s: &&crate::rundata::InvocationSpan| {
        workloads::cases::is_thread_target(&workloads::cases::case_name(s.case), &s.target)
    };
    let mut by_n = Centres::new();
    let mut failed = Vec::new();
    for inv in invocations.iter().filter(|i| i.n > 0) {
        if inv.failed() {
            failed.push(inv.n);
            continue;
        }
        for s in inv.spans.iter().filter(decides) {
            if let Some(c) = run_centre(s, oncpu.contains(s.target.as_str())) {
                by_n.entry(inv.n)
                    .or_default()
                    .entry((s.target.as_str(), s.case))
                    .or_default()
                    .push(c);
            }
        }
    }
    (by_n, failed)
}

/// Every size that is not settled yet, least settled first.
pub fn unsettled(invocations: &[Invocation]) -> Vec<Unsettled> {
    let (by_n, failed) = centres(invocations);
    let mut out: Vec<Unsettled> = by_n
        .into_iter()
        .filter(|(n, _)| !failed.contains(n))
        .filter_map(|(n, targets)| {
            targets
                .into_iter()
                .filter_map(|(t, runs)| Some((t, runs.len(), rel_se_of_runs(&runs)?)))
                .max_by(|a, b| a.2.total_cmp(&b.2))
                .filter(|(_, _, se)| *se > MIN_POINT_ERROR)
                .map(|((t, case), runs, rel_se)| Unsettled {
                    n,
                    runs,
                    rel_se,
                    target: if case == workloads::cases::CASE_COMMAND {
                        t.to_string()
                    } else {
                        format!("{t} [{}]", workloads::cases::case_name(case))
                    },
                })
        })
        .collect();
    out.sort_by(|a, b| b.rel_se.total_cmp(&a.rel_se).then(a.n.cmp(&b.n)));
    out
}

/// The next size to run again under `limits`: the least settled one with runs to spare.
pub fn next_size(invocations: &[Invocation], limits: &ExtraRuns) -> Option<Unsettled> {
    let ran = |n: u64| invocations.iter().filter(|i| i.n == n).count();
    unsettled(invocations)
        .into_iter()
        .find(|u| ran(u.n) < limits.max_runs as usize)
}

/// The extra runs of one external sweep as they happen: asked for the next command run once
/// the planned ones are done, it picks the size ([`next_size`]) and keeps to the budget.
pub struct Scheduler<'a> {
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
    pub fn new(limits: ExtraRuns, plan: &'a [Planned], label: &'a str, discover: bool) -> Self {
        Scheduler {
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

    /// The next extra run after the runs `done`, with its progress label; None when every
    /// size is settled, at its cap, or the next run would not fit in the budget. A size whose
    /// runs disagree comes first, then the discover analysis's sizes planned by
    /// [`Self::plan_samples`].
    pub fn next(&mut self, done: &[Invocation]) -> Option<(Planned, String)> {
        let t0 = *self.extra_started.get_or_insert_with(|| {
            self.budget = self.limits.budget_after(self.started.elapsed());
            Instant::now()
        });
        let (n, why) = match next_size(done, &self.limits) {
            Some(u) => (
                u.n,
                format!(
                    "{} ±{:.0}% over {} runs",
                    u.target,
                    u.rel_se * 100.0,
                    u.runs
                ),
            ),
            None => self.samples.as_mut()?.queue.front().cloned()?,
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
    }

    /// Plan the runs the discover analysis asks for (`wants`, read after the runs `done`):
    /// a size short of samples until it should have [`FEW_SAMPLES`] (from its samples per run
    /// so far), within `--max-repeat` when given; any other up to the cap of runs per size.
    pub fn plan_samples(&mut self, wants: Vec<MoreRuns>, done: &[Invocation]) {
        let limits = self.limits;
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
            let target = if w.samples < FEW_SAMPLES {
                let needed = (runs * FEW_SAMPLES).div_ceil(w.samples.max(1));
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

    /// The runs for sizes whose runs disagreed.
    fn spread_summary(&self, done: &[Invocation]) -> Vec<String> {
        let open = unsettled(done);
        let mut parts = Vec::new();
        if self.added.is_empty() && open.is_empty() {
            return parts;
        }
        if !self.added.is_empty() {
            parts.push(format!(
                "extra runs where the runs disagreed: {}",
                sizes_added(&self.added)
            ));
        }
        if open.is_empty() {
            parts.push(format!(
                "every size settled (±{:.0}% or better)",
                MIN_POINT_ERROR * 100.0
            ));
        } else {
            let sizes: Vec<String> = open
                .iter()
                .map(|u| format!("N={} ±{:.0}% ({} runs)", u.n, u.rel_se * 100.0, u.runs))
                .collect();
            // next() stops for the budget, or when every unsettled size is at its cap.
            let why = if self.out_of_time {
                "the time for extra runs is spent (--extra-time)"
            } else {
                "at --max-repeat"
            };
            parts.push(format!("still unsettled, {why}: {}", sizes.join(", ")));
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

    #[test]
    fn the_least_settled_size_runs_again_until_the_cap() {
        let limits = ExtraRuns::for_repeat(3);
        assert_eq!(limits.max_runs, 6);
        // N=10 agrees within 1%, N=100 differs by ±20%, N=1000 by ±50%.
        let mut runs: Vec<Invocation> = [
            (10, 1000),
            (100, 8000),
            (1000, 50_000),
            (10, 1010),
            (100, 10_000),
            (1000, 100_000),
            (10, 1005),
            (100, 12_000),
            (1000, 150_000),
        ]
        .iter()
        .map(|&(n, t)| inv(n, 0, t))
        .collect();
        let u = unsettled(&runs);
        assert_eq!(
            u.iter().map(|u| u.n).collect::<Vec<_>>(),
            vec![1000, 100],
            "{u:?}"
        );
        assert_eq!(u[0].target, "do_wait");
        assert_eq!(u[0].runs, 3);
        assert_eq!(next_size(&runs, &limits).unwrap().n, 1000);
        // At the cap, the next one.
        for t in [100_000, 100_000, 100_000] {
            runs.push(inv(1000, 0, t));
        }
        assert_eq!(next_size(&runs, &limits).unwrap().n, 100);
        // Runs that agree settle a size: N=100 with three more at its median.
        for _ in 0..3 {
            runs.push(inv(100, 0, 10_000));
        }
        assert!(
            unsettled(&runs).iter().all(|u| u.n != 100),
            "{:?}",
            unsettled(&runs)
        );
        assert_eq!(next_size(&runs, &limits), None);
        // No extra run when the cap is the planned rounds.
        assert_eq!(
            next_size(&runs[..9], &ExtraRuns::for_repeat(3).with_max(3)),
            None
        );
    }

    /// A built-in workload's runs: each case of the target it exists for is judged on its own;
    /// a target it traced by the way does not make a size run again.
    #[test]
    fn a_workload_case_is_judged_on_its_own_target_only() {
        use workloads::cases::{WAITPID_ANY, WAITPID_PID, case_id};
        let id = |name: &str| case_id(name).unwrap();
        let limits = ExtraRuns::for_repeat(2);
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
        // dup_mmap's calls in the waitpid cases disagree five-fold: nothing runs again.
        let runs = vec![run(100, 1000, 5000, 100), run(100, 1000, 5000, 500)];
        assert_eq!(next_size(&runs, &limits), None);
        // waitpid(-1)'s own calls disagreeing do, and the line names the case.
        let runs = vec![run(100, 1000, 5000, 100), run(100, 1000, 9000, 100)];
        let u = next_size(&runs, &limits).unwrap();
        assert_eq!((u.n, u.target.as_str()), (100, "do_wait [waitpid-any]"));
    }

    #[test]
    fn one_run_a_failure_or_no_calls_adds_nothing() {
        let limits = ExtraRuns::for_repeat(1).with_max(5);
        // One run per size: no spread to judge.
        let one: Vec<Invocation> = [(10, 1000), (100, 90_000)]
            .iter()
            .map(|&(n, t)| inv(n, 0, t))
            .collect();
        assert_eq!(next_size(&one, &limits), None);
        // A size whose command failed once is not run again, however its runs differ.
        let failed = vec![inv(10, 0, 1000), inv(10, 0, 5000), inv(10, 1, 3000)];
        assert_eq!(next_size(&failed, &limits), None);
        // A run without calls of any target (a plain `tracer record` has N = 0, too).
        let mut empty = vec![inv(10, 0, 1000), inv(10, 0, 5000)];
        for i in &mut empty {
            i.spans.clear();
        }
        empty.push(inv(0, 0, 1));
        assert_eq!(next_size(&empty, &limits), None);
    }

    #[test]
    fn the_summary_says_what_was_added_and_what_is_still_open() {
        let plan = [Planned {
            command: vec!["bench".into()],
            env: vec![],
            n: 1000,
            case: Some(100),
        }];
        let settled = vec![inv(1000, 0, 1000), inv(1000, 0, 1000)];
        let open = vec![inv(1000, 0, 1000), inv(1000, 0, 3000)];
        let s = Scheduler::new(ExtraRuns::for_repeat(2), &plan, "bench", false);
        assert_eq!(s.summary(&settled), None);
        // No time at all: the open size is not run, and the line says why.
        let mut s = Scheduler::new(
            ExtraRuns {
                budget: Some(Duration::ZERO),
                ..ExtraRuns::for_repeat(2)
            },
            &plan,
            "bench",
            false,
        );
        assert!(s.next(&open).is_none());
        let line = s.summary(&open).unwrap();
        assert!(
            line.starts_with(
                "still unsettled, the time for extra runs is spent (--extra-time): N=1000 ±"
            ),
            "{line}"
        );
        // Time enough: one more run of it, labelled, then the cap.
        let limits = ExtraRuns {
            budget: Some(Duration::from_secs(60)),
            ..ExtraRuns::for_repeat(2).with_max(3)
        };
        let mut s = Scheduler::new(limits, &plan, "bench", false);
        let (next, label) = s.next(&open).unwrap();
        assert_eq!(next.phase(), Some((100, 1000)));
        assert!(
            label.starts_with("bench N=1000 [extra run 1: do_wait ±"),
            "{label}"
        );
        let mut done = open.clone();
        done.push(inv(1000, 0, 5000));
        assert!(s.next(&done).is_none());
        let line = s.summary(&done).unwrap();
        assert!(
            line.starts_with("extra runs where the runs disagreed: N=1000 +1; still unsettled, at --max-repeat: N=1000 ±"),
            "{line}"
        );
    }

    fn want(n: u64, samples: u64) -> MoreRuns {
        MoreRuns {
            n,
            samples,
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
        assert!(!Scheduler::new(limits, &plan, "ipc.sh", false).wants_analysis());
        let mut s = Scheduler::new(limits, &plan, "ipc.sh", true);
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
            ExtraRuns {
                max_given: true,
                ..limits
            },
            &plan,
            "ipc.sh",
            true,
        );
        s.plan_samples(vec![want(10, 14)], &done);
        assert_eq!(s.samples.as_ref().unwrap().queue.len(), 2);
        let mut s = Scheduler::new(limits, &plan, "ipc.sh", true);
        s.plan_samples(vec![want(100, 400), want(10, 500)], &done);
        assert_eq!(s.samples.as_ref().unwrap().queue.len(), 4);
        // At the cap already: nothing planned, and the line says the frame is still open.
        let mut s = Scheduler::new(limits, &plan, "ipc.sh", true);
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
        let mut s = Scheduler::new(limits, &plan, "ipc.sh", true);
        s.plan_samples(vec![want(10, 14)], &failed);
        assert!(s.next(&failed).is_none());
        // No time: the planned runs are left, and said.
        let mut s = Scheduler::new(
            ExtraRuns {
                budget: Some(Duration::ZERO),
                ..limits
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
        let mut s = Scheduler::new(limits, &plan, "ipc.sh", true);
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
