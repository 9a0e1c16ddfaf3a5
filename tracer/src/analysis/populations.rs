//! Mixed call populations: an unmodified benchmark's target calls are often a mix (the timed
//! loop's calls and the setup's or teardown's), and the per-call mean of a mix can fall with
//! N while the loop the benchmark times grows. Worked case: 3000 `waitpid(-1, WNOHANG)` polls
//! per run plus N reaps at teardown make 3000 + N do_wait calls per run; at large N the reaps
//! outnumber the polls and the mean says little about either.
//!
//! Detection from counts alone: the calls per op (per run without `--ops`) follow
//! `a + b·N` with both parts substantial. Then each N's per-call histogram holds `a` fixed
//! calls and `b·N` others. Which end of the histogram the fixed ones sit at is read from the
//! sizes, mostly the largest N, where both populations are largest and most even: the cut
//! with fewer calls around it (a valley between two modes) wins, and the same side is used
//! at every N. Each population
//! then gets its own time per call at each N (from bucket midpoints, spreading a bucket cut
//! in two in proportion) and its own fit. A split is only claimed when the two populations'
//! times differ (their means at the largest N by 2x or more); otherwise the data cannot
//! separate them and the finding says so.

use serde::Serialize;

use crate::rundata::Dist;

use super::fit::{Point, Scaling, fit_scaling};
use super::hist::bucket_range;
use super::stats::ols;
use super::table::CaseTable;

/// The fixed and the N-proportional parts must each be at least this share of the calls at the
/// largest N.
pub const MIN_PART: f64 = 0.05;
/// Largest relative residual of the count model `a + b·N`.
pub const MAX_COUNT_RESIDUAL: f64 = 0.1;
/// The populations' means at the largest N must differ by this factor to be told apart.
pub const MIN_SEPARATION: f64 = 2.0;

#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Population {
    /// "fixed" (≈ `fixed_per_op` calls per op at every N) or "per-n" (≈ `per_n` · N).
    pub kind: String,
    pub points: Vec<Point>,
    pub scaling: Option<Scaling>,
}

#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct PopulationSplit {
    pub run: String,
    pub target: String,
    pub case_name: String,
    /// Calls per op = `fixed_per_op` + `per_n` · N.
    pub fixed_per_op: f64,
    pub per_n: f64,
    /// Calls per op at the smallest and largest N.
    pub calls_per_op: (f64, f64),
    /// The per-call histogram separates the two (else only the mix is stated).
    pub separated: bool,
    /// The fixed calls are the slower ones.
    pub fixed_slower: bool,
    pub populations: Vec<Population>,
}

/// `count` calls taken from one end of a histogram: (their mean, the bucket density at the
/// cut relative to the histogram's peak).
fn take(d: &Dist, count: f64, from_top: bool) -> Option<(f64, f64)> {
    let mut buckets: Vec<(u32, u64)> = d.hist.iter().copied().filter(|b| b.1 > 0).collect();
    buckets.sort_unstable_by_key(|b| b.0);
    if from_top {
        buckets.reverse();
    }
    let peak = buckets.iter().map(|b| b.1).max()? as f64;
    let (mut left, mut sum, mut cut_density) = (count, 0.0, 0.0);
    for &(b, c) in &buckets {
        if left <= 0.0 {
            break;
        }
        let (lo, hi) = bucket_range(b);
        let width = (hi - lo).max(1.0);
        let used = (c as f64).min(left);
        sum += used * (lo + hi) / 2.0;
        left -= used;
        // Calls per unit of log-width around the cut: a valley is low here.
        cut_density = c as f64 / peak * (lo.max(1.0) / width).min(1.0);
    }
    (count > 0.0).then(|| (sum / count, cut_density))
}

/// The other calls: everything but `taken` from that end.
fn rest_mean(d: &Dist, taken: f64, taken_mean: f64) -> Option<f64> {
    let total: f64 = d.hist.iter().map(|b| b.1 as f64).sum();
    let all_mid: f64 = d
        .hist
        .iter()
        .map(|&(b, c)| {
            let (lo, hi) = bucket_range(b);
            c as f64 * (lo + hi) / 2.0
        })
        .sum();
    let rest = total - taken;
    (rest > 0.0).then(|| (all_mid - taken * taken_mean) / rest)
}

/// The split of one table, when its calls per op show two populations.
pub fn split(t: &CaseTable) -> Option<PopulationSplit> {
    let rows: Vec<(&super::table::Row, f64, &Dist)> = t
        .rows
        .iter()
        .filter_map(|r| Some((r, r.calls_per_op?, r.hist.as_ref()?)))
        .filter(|(r, _, _)| r.n > 0)
        .collect();
    if rows.len() < 3 {
        return None;
    }
    let x: Vec<f64> = rows.iter().map(|r| r.0.n as f64).collect();
    let y: Vec<f64> = rows.iter().map(|r| r.1).collect();
    let line = ols(&x, &y)?;
    let (a, b) = (line.intercept, line.slope);
    let (n_last, c_last) = (x[x.len() - 1], y[y.len() - 1]);
    if a <= 0.0 || b <= 0.0 || a < MIN_PART * c_last || b * n_last < MIN_PART * c_last {
        return None;
    }
    let worst = x
        .iter()
        .zip(&y)
        .map(|(n, c)| ((a + b * n) - c).abs() / c)
        .fold(0.0, f64::max);
    if worst > MAX_COUNT_RESIDUAL {
        return None;
    }
    // Orientation: the side whose cut falls in a valley (the log of the two cuts' densities),
    // voted over every N, each vote weighted by the calls it rests on and by the evenness of
    // the two parts there, cubed: a cut near either tail falls in low density whichever way
    // round, so the uneven small sizes must not outvote the largest. On 21 VM sweeps of 4000
    // WNOHANG polls + N reaps (5.10, 6.1, 6.12) the largest N alone got it the wrong way round
    // once, an unweighted vote four times, this vote never.
    let mut vote = 0.0;
    for (r, _, d) in &rows {
        let total: f64 = d.hist.iter().map(|b| b.1 as f64).sum();
        let fixed = total * (a / (a + b * r.n as f64)).min(1.0);
        let (Some(top), Some(bottom)) = (take(d, fixed, true), take(d, fixed, false)) else {
            continue;
        };
        // A size where the two parts' times do not differ either way round has no valley
        // to find.
        let apart = |(mean, _): (f64, f64)| {
            rest_mean(d, fixed, mean)
                .is_some_and(|rest| mean.max(rest) >= MIN_SEPARATION * mean.min(rest).max(1.0))
        };
        if !apart(top) && !apart(bottom) {
            continue;
        }
        let even = fixed.min(total - fixed) / total.max(1.0);
        vote += even.powi(3) * total * (bottom.1.max(1e-9) / top.1.max(1e-9)).ln();
    }
    let fixed_slower = vote >= 0.0;

    let mut fixed_pts = Vec::new();
    let mut per_n_pts = Vec::new();
    for (r, c, d) in &rows {
        let total: f64 = d.hist.iter().map(|b| b.1 as f64).sum();
        let n = r.n as f64;
        let fixed = total * (a / c.max(a)).min(1.0);
        let Some((fixed_mean, _)) = take(d, fixed, fixed_slower) else {
            continue;
        };
        let Some(rest) = rest_mean(d, fixed, fixed_mean) else {
            continue;
        };
        let se = |count: f64| Some(1.0 / count.max(1.0).sqrt());
        fixed_pts.push(Point {
            n,
            t: fixed_mean,
            rel_se: se(fixed),
        });
        per_n_pts.push(Point {
            n,
            t: rest,
            rel_se: se(total - fixed),
        });
    }
    let (f_last, p_last) = (fixed_pts.last()?.t, per_n_pts.last()?.t);
    let separated = f_last.max(p_last) >= MIN_SEPARATION * f_last.min(p_last).max(1.0);
    let populations = if separated {
        vec![
            Population {
                kind: "fixed".into(),
                scaling: fit_scaling(&fixed_pts),
                points: fixed_pts,
            },
            Population {
                kind: "per-n".into(),
                scaling: fit_scaling(&per_n_pts),
                points: per_n_pts,
            },
        ]
    } else {
        Vec::new()
    };
    Some(PopulationSplit {
        run: t.run.clone(),
        target: t.target.clone(),
        case_name: t.case_name.clone(),
        fixed_per_op: a,
        per_n: b,
        calls_per_op: (y[0], c_last),
        separated,
        fixed_slower,
        populations,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::analysis::fit::Complexity;
    use crate::analysis::hist::from_values;
    use crate::analysis::table::{Metric, Row};

    fn row(n: u64, values: &[u64]) -> Row {
        let d = from_values(values);
        Row {
            n,
            calls: values.len() as u64,
            calls_per_op: Some(values.len() as f64),
            hist: Some(d),
            ..Row::default()
        }
    }

    fn table(rows: Vec<Row>) -> CaseTable {
        CaseTable {
            run: "bench".into(),
            kernel: "5.10".into(),
            target: "do_wait".into(),
            case: 100,
            case_name: "command".into(),
            plan: None,
            timed: true,
            metric: Metric::OncpuMean,
            rows,
            probe_cost: None,
        }
    }

    /// 300 polls per run that walk N children (10 ns per child), plus N teardown reaps of
    /// about 2 µs each.
    fn mixed(n: u64) -> Row {
        let mut v: Vec<u64> = (0..300).map(|i| 200 + 10 * n + i % 7).collect();
        v.extend((0..n).map(|i| 2000 + i % 50));
        row(n, &v)
    }

    #[test]
    fn polls_and_teardown_reaps_come_apart() {
        let t = table([10, 300, 1000, 3000].map(mixed).to_vec());
        let s = split(&t).expect("a mix");
        assert!((s.fixed_per_op - 300.0).abs() < 1.0, "{s:?}");
        assert!((s.per_n - 1.0).abs() < 0.01, "{s:?}");
        assert!(s.separated && s.fixed_slower, "{s:?}");
        let fixed = s.populations[0].scaling.as_ref().unwrap();
        let per_n = s.populations[1].scaling.as_ref().unwrap();
        assert_eq!(
            fixed.class,
            Complexity::Linear,
            "the polls walk the children"
        );
        assert_eq!(
            per_n.class,
            Complexity::Constant,
            "each reap costs the same"
        );
        // The mix itself looks like it barely grows: the reason for the split.
        let mix_last = t.rows[3].hist.as_ref().map(crate::analysis::hist::mean);
        assert!(mix_last.flatten().unwrap() < s.populations[0].points[3].t / 2.0);
    }

    #[test]
    fn a_constant_call_count_is_not_a_mix() {
        let t = table(
            [10u64, 300, 1000, 3000]
                .map(|n| row(n, &vec![100 + n; 500]))
                .to_vec(),
        );
        assert!(split(&t).is_none());
    }

    #[test]
    fn populations_with_the_same_times_are_not_claimed_apart() {
        let t = table(
            [10u64, 300, 1000, 3000]
                .map(|n| row(n, &vec![1000; 300 + n as usize]))
                .to_vec(),
        );
        let s = split(&t).expect("the counts still show a mix");
        assert!(!s.separated && s.populations.is_empty(), "{s:?}");
    }
}
