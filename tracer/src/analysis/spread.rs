//! The spread between runs of one size, for fits of sampled times (`--discover`).
//!
//! A discovery's time at one N comes from the samples of every run of that size pooled, so
//! the only error a point carries is the sampling error: over a thousand samples, ±3%. Runs
//! of one size differ by more than that (under qemu, two runs of a shell script at N = 10
//! took 5.45 and 7.99 s of CPU time), and three sizes fitted against ±3% can exclude every
//! class but one on a difference the next sweep does not repeat: one of three 5.10 sweeps
//! named a linear walk of the children O(log n) alone (inclusive time 142, 214, 291 µs per
//! call at N = 10, 100, 500), where the other two left O(n) in their sets.
//!
//! The runs' CPU times (rusage, user + system, of the command's tree) measure that spread:
//! pooled over the sizes run more than once, their relative variance is the error no sample
//! count captures. The sampled times are parts of that CPU time, and the spread of the whole
//! is taken as the spread of each part: a part may vary less than the whole, and then its
//! class set comes out wider than it had to be, an answer left undecided; taken narrower, the
//! set names a class the next sweep contradicts. The spread floors each point's error in the
//! evidence between classes (divided by √runs: a point pools its size's runs). Whether a time
//! grows at all is decided on the samples as before: the floor widens class sets, it does not
//! hide growth.

use std::collections::{BTreeMap, BTreeSet};

use crate::rundata::Invocation;

use super::fit::{Point, Scaling, fit_scaling_runs};

/// The spread between runs of one command's sizes.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct RunSpread {
    /// Relative standard deviation of one run's CPU time, pooled over the sizes run more
    /// than once; None when no size was.
    pub rel_sd: Option<f64>,
    /// Successful runs at each N.
    runs: BTreeMap<u64, usize>,
}

impl RunSpread {
    /// From the command's runs (those that failed, or at a left-out N, excluded).
    pub fn of(invocations: &[Invocation], failed: &BTreeSet<u64>) -> RunSpread {
        let mut by_n: BTreeMap<u64, Vec<f64>> = BTreeMap::new();
        for i in invocations
            .iter()
            .filter(|i| i.n > 0 && !i.failed() && !failed.contains(&i.n))
        {
            by_n.entry(i.n).or_default().push(i.user_s + i.sys_s);
        }
        let (mut ss, mut dof) = (0.0, 0usize);
        for v in by_n.values().filter(|v| v.len() >= 2) {
            let m = v.iter().sum::<f64>() / v.len() as f64;
            if m <= 0.0 {
                continue;
            }
            ss += v.iter().map(|x| ((x - m) / m).powi(2)).sum::<f64>();
            dof += v.len() - 1;
        }
        RunSpread {
            rel_sd: (dof > 0).then(|| (ss / dof as f64).sqrt()),
            runs: by_n.into_iter().map(|(n, v)| (n, v.len())).collect(),
        }
    }

    /// Successful runs of size `n`.
    pub fn runs_at(&self, n: u64) -> usize {
        self.runs.get(&n).copied().unwrap_or(0)
    }

    /// The least relative error of a point that pools the runs of size `n`.
    pub fn floor(&self, n: f64) -> f64 {
        let Some(sd) = self.rel_sd else {
            return 0.0;
        };
        let runs = self
            .runs
            .iter()
            .find(|(k, _)| **k as f64 == n)
            .map_or(1, |(_, r)| *r);
        sd / (runs.max(1) as f64).sqrt()
    }

    /// Fit sampled times: growth decided on their sampling errors, the evidence between
    /// classes with each point's error at least the runs' spread.
    pub fn fit(&self, points: &[Point]) -> Option<Scaling> {
        let floored: Vec<Point> = points
            .iter()
            .map(|p| Point {
                rel_se: Some(p.rel_se.unwrap_or(0.0).max(self.floor(p.n))),
                ..*p
            })
            .collect();
        fit_scaling_runs(points, &floored)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::analysis::fit::Complexity;

    fn runs(cpu: &[(u64, f64)]) -> Vec<Invocation> {
        cpu.iter()
            .map(|&(n, s)| Invocation {
                n,
                exit: Some(0),
                sys_s: s,
                ..Invocation::default()
            })
            .collect()
    }

    #[test]
    fn the_spread_is_pooled_over_repeated_sizes() {
        let s = RunSpread::of(
            &runs(&[(10, 9.0), (10, 11.0), (100, 18.0), (100, 22.0), (500, 50.0)]),
            &BTreeSet::new(),
        );
        // Each pair is ±10% of its mean: relative variance 0.02 per pair, one dof each.
        assert!((s.rel_sd.unwrap() - 0.02f64.sqrt()).abs() < 1e-9, "{s:?}");
        assert!((s.floor(10.0) - 0.1).abs() < 1e-9);
        assert!((s.floor(500.0) - 0.02f64.sqrt()).abs() < 1e-9);
        // One run per size: nothing to pool, no floor.
        let one = RunSpread::of(&runs(&[(10, 9.0), (100, 20.0)]), &BTreeSet::new());
        assert_eq!(one.rel_sd, None);
        assert_eq!(one.floor(10.0), 0.0);
        // A failed run, or a size left out, is no evidence of the spread.
        let mut inv = runs(&[(10, 9.0), (10, 11.0), (100, 18.0), (100, 30.0)]);
        inv[3].exit = Some(1);
        assert!(
            (RunSpread::of(&inv, &BTreeSet::new()).rel_sd.unwrap() - 0.02f64.sqrt()).abs() < 1e-9
        );
        assert_eq!(RunSpread::of(&inv, &BTreeSet::from([10])).rel_sd, None);
    }

    /// The 5.10 sweep of the module docs: three sizes of a walk with a fixed part, a thousand
    /// samples or more each. Against the samples alone the fit once named O(log n) by
    /// itself; three sizes leave one degree of freedom to the best fit's residuals, and an
    /// error variance estimated from one is uncertain enough that the set keeps O(n) too. With
    /// runs that differ by 20% the data leaves O(n) in the set; with runs that agree to 1% the
    /// set stays what the samples say.
    #[test]
    fn runs_that_differ_keep_the_neighbouring_classes() {
        let pts: Vec<Point> = [
            (10.0, 142e3, 880.0),
            (100.0, 214e3, 1618.0),
            (500.0, 291e3, 3973.0),
        ]
        .iter()
        .map(|&(n, t, samples)| Point {
            n,
            t,
            rel_se: Some(1.0 / f64::sqrt(samples)),
        })
        .collect();
        let alone = crate::analysis::fit::fit_scaling(&pts).unwrap();
        assert_eq!(alone.class, Complexity::Log, "{alone:?}");
        assert!(
            alone
                .classes
                .starts_with(&[Complexity::Log, Complexity::Linear]),
            "{:?}",
            alone.classes
        );
        let pair = |n: u64, a: f64, b: f64| [(n, a), (n, b)];
        let noisy = RunSpread::of(
            &runs(
                &[
                    pair(10, 5.45, 7.99),
                    pair(100, 9.59, 8.81),
                    pair(500, 16.48, 20.91),
                ]
                .concat(),
            ),
            &BTreeSet::new(),
        );
        let wide = noisy.fit(&pts).unwrap();
        assert!(
            wide.classes.contains(&Complexity::Linear),
            "{:?}",
            wide.classes
        );
        assert_eq!(
            wide.class, alone.class,
            "the best class is the samples' fit"
        );
        assert_eq!(wide.flat_reason, alone.flat_reason);
        let steady = RunSpread::of(
            &runs(
                &[
                    pair(10, 6.0, 6.06),
                    pair(100, 9.0, 9.09),
                    pair(500, 18.0, 18.18),
                ]
                .concat(),
            ),
            &BTreeSet::new(),
        );
        assert_eq!(steady.fit(&pts).unwrap().classes, alone.classes);
    }
}
