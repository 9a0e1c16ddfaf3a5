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

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use super::spec::Invocation as Planned;
use crate::analysis::compare::MIN_POINT_ERROR;
use crate::analysis::table::{rel_se_of_runs, run_centre};
use crate::rundata::Invocation;

/// The default cap on runs per size: twice the planned rounds.
pub const DEFAULT_MAX_RUNS_FACTOR: u32 = 2;
/// The default time budget for the extra runs, as a share of the planned runs' wall time.
pub const DEFAULT_BUDGET_SHARE: f64 = 0.5;

/// The limits on extra runs of an external sweep.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct ExtraRuns {
    /// Most runs of one size, the planned ones included (no extra run at or under the planned
    /// rounds).
    pub max_runs: u32,
    /// Most wall time for the extra runs together; None: [`DEFAULT_BUDGET_SHARE`] of the time
    /// the planned runs took.
    pub budget: Option<Duration>,
}

impl ExtraRuns {
    /// The defaults for `repeat` planned rounds.
    pub fn for_repeat(repeat: u32) -> Self {
        ExtraRuns {
            max_runs: repeat.saturating_mul(DEFAULT_MAX_RUNS_FACTOR),
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
}

impl<'a> Scheduler<'a> {
    /// For a sweep's `plan` (its planned runs, about to start); `label` names the command.
    pub fn new(limits: ExtraRuns, plan: &'a [Planned], label: &'a str) -> Self {
        Scheduler {
            limits,
            plan,
            label,
            started: Instant::now(),
            extra_started: None,
            budget: Duration::ZERO,
            added: BTreeMap::new(),
            out_of_time: false,
        }
    }

    /// The next extra run after the runs `done`, with its progress label; None when every
    /// size is settled, at its cap, or the next run would not fit in the budget.
    pub fn next(&mut self, done: &[Invocation]) -> Option<(Planned, String)> {
        let t0 = *self.extra_started.get_or_insert_with(|| {
            self.budget = self.limits.budget_after(self.started.elapsed());
            Instant::now()
        });
        let u = next_size(done, &self.limits)?;
        // The next run is about as long as this size's runs so far.
        let runs: Vec<f64> = done
            .iter()
            .filter(|i| i.n == u.n)
            .map(|i| i.wall_s)
            .collect();
        let expected = Duration::from_secs_f64(runs.iter().sum::<f64>() / runs.len() as f64);
        if t0.elapsed() + expected > self.budget {
            self.out_of_time = true;
            return None;
        }
        let inv = self.plan.iter().find(|i| i.n == u.n)?;
        *self.added.entry(u.n).or_default() += 1;
        let label = format!(
            "{} N={} [extra run {}: {} ±{:.0}% over {} runs]",
            self.label,
            u.n,
            self.added.values().sum::<u32>(),
            u.target,
            u.rel_se * 100.0,
            u.runs
        );
        Some((inv.clone(), label))
    }

    /// What the extra runs did, for the terminal: None when there were none and every size
    /// was settled.
    pub fn summary(&self, done: &[Invocation]) -> Option<String> {
        let open = unsettled(done);
        if self.added.is_empty() && open.is_empty() {
            return None;
        }
        let mut parts = Vec::new();
        if !self.added.is_empty() {
            let sizes: Vec<String> = self
                .added
                .iter()
                .map(|(n, k)| format!("N={n} +{k}"))
                .collect();
            parts.push(format!(
                "extra runs where the runs disagreed: {}",
                sizes.join(", ")
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
        Some(parts.join("; "))
    }
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
        let s = Scheduler::new(ExtraRuns::for_repeat(2), &plan, "bench");
        assert_eq!(s.summary(&settled), None);
        // No time at all: the open size is not run, and the line says why.
        let mut s = Scheduler::new(
            ExtraRuns {
                budget: Some(Duration::ZERO),
                ..ExtraRuns::for_repeat(2)
            },
            &plan,
            "bench",
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
        let mut s = Scheduler::new(limits, &plan, "bench");
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
