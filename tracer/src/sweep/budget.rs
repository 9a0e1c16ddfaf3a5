//! `tracer sweep --budget DURATION`: the sweep's wall time, and what is cut to keep to it.
//!
//! What a sweep spends its time on, and the order in which the budget cuts it:
//!
//! | cut | what | why in this order |
//! | --- | --- | --- |
//! | 1st | extra runs (`record/extra.rs`) | they refine a verdict the rounds already give |
//! | 2nd | a run's later rounds (the second and after) | each round is a repeat of the first |
//! | 3rd | the loop-count or confirmation pass | it runs about one round of everything |
//! | never | a run's first round | without it a size has no value at all |
//!
//! From the start, one round's share of the budget (`budget / (rounds + 1)`) is set aside for
//! the pass when the sweep plans one. Each run (a workload, or the command) then gets an
//! equal share of what is left when it starts, so time a run does not use goes to the runs
//! after it: a round after the first starts only while a round as long as the one before
//! fits in the run's share, and its extra runs keep within the share too. The pass runs
//! only when the time left holds the first rounds' time again. Every cut is said on its own
//! line and kept in sweep.json (`budget_cuts`).

use std::time::{Duration, Instant};

use crate::plan::Target;
use crate::rundata::Invocation;

use super::SweepOptions;
use super::jobs::Job;
use super::loops;

/// A sweep's budget as it runs.
#[derive(Clone, Copy, Debug)]
pub struct Budget {
    deadline: Instant,
    /// Set aside for the pass until the runs are done.
    reserve: Duration,
}

impl Budget {
    /// `total` from `started`, for runs of `rounds` rounds; with `pass`, one round's share is
    /// set aside for a pass after them.
    pub fn new(started: Instant, total: Duration, rounds: u32, pass: bool) -> Budget {
        Budget {
            deadline: started + total,
            reserve: if pass {
                total / (rounds.max(1) + 1)
            } else {
                Duration::ZERO
            },
        }
    }

    /// When the next run's share ends, with `runs_left` runs (this one included) to share
    /// what is left after the reserve.
    pub fn share(&self, runs_left: usize) -> Instant {
        let now = Instant::now();
        let left = self
            .deadline
            .saturating_duration_since(now)
            .saturating_sub(self.reserve);
        now + left / runs_left.max(1) as u32
    }

    /// The line that cuts a pass (`what`) when the time left cannot hold `estimate` (the
    /// first rounds' time: a pass runs each size once), or None when it fits.
    pub fn pass_cut(&self, what: &str, estimate: Duration) -> Option<String> {
        let left = self.deadline.saturating_duration_since(Instant::now());
        (estimate > left).then(|| {
            format!(
                "--budget: {what} cut: it takes about {:.0} s (one round), {:.0} s left",
                estimate.as_secs_f64(),
                left.as_secs_f64()
            )
        })
    }
}

/// The wall time of a run's first round: its first `sizes` command runs (a workload's, or
/// the command's).
pub fn first_round(invocations: &[Invocation], sizes: usize) -> Duration {
    Duration::from_secs_f64(invocations.iter().take(sizes).map(|i| i.wall_s).sum())
}

/// Whether the sweep plans a pass after its runs: the loop-count pass (built-in workloads
/// whose loops have a per-trip function, a command whose root causes may name one), or a
/// discover sweep's confirmation pass.
pub(super) fn passes_planned(
    opts: &SweepOptions,
    jobs: &[Job],
    targets: &[(u32, &'static Target)],
) -> bool {
    if opts.engine.discover {
        opts.mode.command().is_some_and(|c| c.confirm > 0) && jobs.iter().any(Job::is_command)
    } else {
        opts.loop_count && loops::planned(opts, jobs, targets)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_run_shares_what_is_left_after_the_reserve() {
        let t0 = Instant::now();
        let b = Budget::new(t0, Duration::from_secs(400), 3, true);
        assert_eq!(b.reserve, Duration::from_secs(100));
        // Four runs to go: a quarter of the 300 s left each (the clock has barely moved).
        let share = b.share(4).saturating_duration_since(t0);
        assert!(
            (Duration::from_secs(74)..=Duration::from_secs(76)).contains(&share),
            "{share:?}"
        );
        // No pass: nothing set aside.
        let b = Budget::new(t0, Duration::from_secs(400), 3, false);
        let share = b.share(1).saturating_duration_since(t0);
        assert!(share > Duration::from_secs(399), "{share:?}");
        // Past the deadline: a share of nothing.
        let late = Budget::new(t0, Duration::ZERO, 3, true);
        assert!(late.share(2) <= Instant::now());
    }

    #[test]
    fn a_pass_runs_only_when_a_round_fits() {
        let b = Budget::new(Instant::now(), Duration::from_secs(60), 3, true);
        assert_eq!(
            b.pass_cut("the loop-count pass", Duration::from_secs(30)),
            None
        );
        let cut = b
            .pass_cut("the loop-count pass", Duration::from_secs(90))
            .unwrap();
        assert!(
            cut.starts_with("--budget: the loop-count pass cut: it takes about 90 s (one round), "),
            "{cut}"
        );
    }

    #[test]
    fn the_first_round_is_the_first_runs() {
        let inv = |wall_s: f64| Invocation {
            n: 1,
            command: vec![],
            exit: Some(0),
            wall_s,
            user_s: 0.0,
            sys_s: 0.0,
            cpu_steal_s: 0.0,
            cpu_busy_s: 0.0,
            outlived: 0,
            spans: vec![],
        };
        let runs = [inv(1.0), inv(2.0), inv(4.0), inv(8.0)];
        assert_eq!(first_round(&runs, 2), Duration::from_secs(3));
        assert_eq!(first_round(&runs, 9), Duration::from_secs(15));
    }
}
