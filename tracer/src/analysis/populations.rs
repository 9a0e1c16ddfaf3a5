//! Mixed call populations: an unmodified benchmark's target calls are often a mix (the timed
//! loop's calls and the setup's or teardown's), and the per-call mean of a mix can fall with
//! N while the loop the benchmark times grows. Worked case: 3000 `waitpid(-1, WNOHANG)` polls
//! per run plus N reaps at teardown make 3000 + N do_wait calls per run; at large N the reaps
//! outnumber the polls and the mean says little about either.
//!
//! Detection from counts alone: the calls per op (per run without `--ops`) follow
//! `a + b·N` at three sizes or more, both parts at least 5% of the calls at the largest N, or
//! at least 1% when the model fits the counts within a tenth of the smaller part (counts are
//! exact: 100 timed waits among N reaps are a model, not a coincidence). Then each N's
//! per-call histogram holds `a` fixed calls and `b·N` others. Which end of the histograms
//! holds the fixed ones is the end where they stand most apart from the rest (Otsu's
//! between-part share of the variance of log time, summed over the sizes), the same end at
//! every N. Each population then gets its own time per call at each N (from bucket
//! midpoints, spreading a bucket cut in two in proportion) and its own fit: the others by
//! their mean, the fixed ones by the time a quarter of the way in from the cut
//! ([`FIXED_RANK`]), since the end of a large N's histogram also holds the others' slow
//! tail. A split is only
//! claimed when the two populations' times differ (their means at the largest N by 2x or
//! more); otherwise the data cannot separate them and the finding says so. The verdict takes
//! its class from the population whose time per call grows ([`Mix`]).

use serde::Serialize;

use crate::rundata::Dist;

use super::fit::{Point, Scaling, fit_scaling};
use super::hist::bucket_range;
use super::stats::ols;
use super::table::CaseTable;

/// The fixed and the N-proportional parts must each be at least this share of the calls at the
/// largest N, when the count model fits within [`MAX_COUNT_RESIDUAL`] of the calls.
pub const MIN_PART: f64 = 0.05;
/// Largest relative residual of the count model `a + b·N`.
pub const MAX_COUNT_RESIDUAL: f64 = 0.1;
/// A smaller part still counts when the model fits the counts within
/// [`MAX_COUNT_RESIDUAL`] of that part itself: the counts are exact, so three sizes with a
/// residual of a few calls are a model, not a coincidence. Worked case: 100 timed waits and N
/// reaps per run at N = 10, 1000, 3000 (110, 1100, 3100 calls): the timed part is 3.2% of the
/// largest size's calls, and the one the benchmark is about.
pub const MIN_EXACT_PART: f64 = 0.01;
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

/// What a mixed table's headline rests on: the mean per call of two populations says little
/// about either (3000 reaps drown 100 walks), so the verdict takes its class from one of them.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(tag = "headline", rename_all = "snake_case")]
pub enum Mix {
    /// The split's population the headline is: the one whose time per call grows (the
    /// faster-growing one when both do), or with neither growing the fixed one (the loop a
    /// benchmark times runs a fixed number of times).
    Population {
        /// "fixed" or "per-n", as in [`Population::kind`].
        kind: String,
        fixed_per_op: f64,
        per_n: f64,
        scaling: Box<Scaling>,
        /// The other population's fit, for the line.
        other: Option<Box<Scaling>>,
    },
    /// The counts show two populations but their times overlap: the mean mixes them.
    Unsplit { fixed_per_op: f64, per_n: f64 },
}

impl Mix {
    /// The headline population's calls per op, in words ("100" or "≈1.00·N").
    pub fn calls(&self) -> (f64, bool) {
        match self {
            Mix::Population {
                kind,
                fixed_per_op,
                per_n,
                ..
            } if kind == "per-n" => (*per_n, true),
            Mix::Population { fixed_per_op, .. } => (*fixed_per_op, false),
            Mix::Unsplit { fixed_per_op, .. } => (*fixed_per_op, false),
        }
    }
}

impl PopulationSplit {
    /// What the target's headline rests on ([`Mix`]).
    pub fn mix(&self) -> Mix {
        let fitted: Vec<(&Population, &Scaling)> = self
            .populations
            .iter()
            .filter_map(|p| Some((p, p.scaling.as_ref()?)))
            .collect();
        let grows = |s: &Scaling| s.flat_reason.is_none();
        // Growing ones by their least class, then by how much they grew; else the fixed one.
        let head = fitted
            .iter()
            .filter(|(_, s)| grows(s))
            .max_by(|(_, x), (_, y)| {
                let least = |s: &Scaling| s.classes.first().copied().unwrap_or(s.class);
                least(x)
                    .cmp(&least(y))
                    .then(x.growth_ratio.total_cmp(&y.growth_ratio))
            })
            .or_else(|| fitted.iter().find(|(p, _)| p.kind == "fixed"));
        match head {
            Some((p, s)) => Mix::Population {
                kind: p.kind.clone(),
                fixed_per_op: self.fixed_per_op,
                per_n: self.per_n,
                scaling: Box::new((*s).clone()),
                other: fitted
                    .iter()
                    .find(|(q, _)| q.kind != p.kind)
                    .map(|(_, s)| Box::new((*s).clone())),
            },
            None => Mix::Unsplit {
                fixed_per_op: self.fixed_per_op,
                per_n: self.per_n,
            },
        }
    }
}

/// `count` calls taken from one end of a histogram: (bucket, calls taken from it), from that
/// end inwards, the cut bucket shared in proportion.
fn taken(d: &Dist, count: f64, from_top: bool) -> Vec<(u32, f64)> {
    let mut buckets: Vec<(u32, u64)> = d.hist.iter().copied().filter(|b| b.1 > 0).collect();
    buckets.sort_unstable_by_key(|b| b.0);
    if from_top {
        buckets.reverse();
    }
    let mut out = Vec::new();
    let mut left = count;
    for (b, c) in buckets {
        if left <= 0.0 {
            break;
        }
        let used = (c as f64).min(left);
        out.push((b, used));
        left -= used;
    }
    out
}

fn midpoint(bucket: u32) -> f64 {
    let (lo, hi) = bucket_range(bucket);
    (lo + hi) / 2.0
}

/// The mean of `count` calls taken from one end of a histogram (bucket midpoints).
fn take(d: &Dist, count: f64, from_top: bool) -> Option<f64> {
    let sum: f64 = taken(d, count, from_top)
        .iter()
        .map(|&(b, c)| c * midpoint(b))
        .sum();
    (count > 0.0).then(|| sum / count)
}

/// Where in the fixed calls (taken from one end of a histogram) their time is read: this
/// share of them from the end they were taken at, the rest nearer the cut. Not their mean:
/// a small fixed part (100 timed waits) among thousands of others shares the end of the
/// histogram with the others' slow tail, so the slowest 100 of 2100 calls take every outlier
/// of 2000 reaps, and the mean of a time that stood still triples. Read here, `c` such
/// outliers move the value from the fixed calls' quartile nearest the cut to their
/// `(1 - FIXED_RANK) + c/k` quantile, and it stays a fixed call's time while the outliers
/// number fewer than this share of the fixed calls.
pub const FIXED_RANK: f64 = 0.75;

/// The time at `rank` calls from one end of a histogram (the midpoint of its bucket).
fn at_rank(d: &Dist, rank: f64, from_top: bool) -> Option<f64> {
    taken(d, rank, from_top).last().map(|&(b, _)| midpoint(b))
}

/// How far apart `count` calls taken from one end of a histogram stand from the rest: the
/// share of the variance of log time between the two parts (Otsu's η, 0..1), with bucket
/// midpoints and the cut bucket shared in proportion.
fn apartness(d: &Dist, count: f64, from_top: bool) -> Option<f64> {
    let x = |b: u32| midpoint(b).max(1.0).ln();
    let total: f64 = d.hist.iter().map(|b| b.1 as f64).sum();
    if count <= 0.0 || count >= total {
        return None;
    }
    let mean_all = d.hist.iter().map(|&(b, c)| x(b) * c as f64).sum::<f64>() / total;
    let var_all = d
        .hist
        .iter()
        .map(|&(b, c)| c as f64 * (x(b) - mean_all).powi(2))
        .sum::<f64>()
        / total;
    if var_all <= 0.0 {
        return Some(0.0);
    }
    let sum: f64 = taken(d, count, from_top)
        .iter()
        .map(|&(b, c)| c * x(b))
        .sum();
    let rest = (mean_all * total - sum) / (total - count);
    let w = count / total;
    Some(w * (1.0 - w) * (sum / count - rest).powi(2) / var_all)
}

/// The other calls: everything but `taken` from that end.
fn rest_mean(d: &Dist, taken: f64, taken_mean: f64) -> Option<f64> {
    let total: f64 = d.hist.iter().map(|b| b.1 as f64).sum();
    let all_mid: f64 = d.hist.iter().map(|&(b, c)| c as f64 * midpoint(b)).sum();
    let rest = total - taken;
    (rest > 0.0).then(|| (all_mid - taken * taken_mean) / rest)
}

/// The split of one table, when its calls per op show two populations.
pub fn split(t: &CaseTable) -> Option<PopulationSplit> {
    let rows: Vec<SizeCalls> = t
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
    if a <= 0.0 || b <= 0.0 {
        return None;
    }
    let residuals: Vec<(f64, f64)> = x
        .iter()
        .zip(&y)
        .map(|(n, c)| (((a + b * n) - c).abs(), *c))
        .collect();
    let worst_rel = residuals.iter().map(|(r, c)| r / c).fold(0.0, f64::max);
    let worst = residuals.iter().map(|(r, _)| *r).fold(0.0, f64::max);
    let smaller = a.min(b * n_last);
    let model = (smaller >= MIN_PART * c_last && worst_rel <= MAX_COUNT_RESIDUAL)
        || (smaller >= MIN_EXACT_PART * c_last && worst <= MAX_COUNT_RESIDUAL * smaller);
    if !model {
        return None;
    }
    // Orientation: the end whose `fixed` calls stand most apart from the rest, as Otsu's
    // threshold measures it (the between-part share of the variance of log time), summed over
    // the sizes, each weighted by its calls. A half-and-half size votes nothing (both ends
    // cut at its median), and an uneven one votes for the end where its small part is a
    // mode of its own rather than the tail of the large one.
    let fixed_slower = fixed_is_slower(&rows, a, b);

    let (fixed_pts, per_n_pts) = population_points(&rows, a, fixed_slower);
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

/// The calls of each size as counted by the split: its row, its calls per op and the time
/// histogram of its calls.
type SizeCalls<'a> = (&'a super::table::Row, f64, &'a Dist);

/// Which end of the time histograms the `a` fixed calls per op lie at: the end whose `fixed`
/// calls stand most apart from the rest, as Otsu's threshold measures it (the between-part
/// share of the variance of log time), summed over the sizes, each weighted by its calls. A
/// half-and-half size votes nothing (both ends cut at its median), and an uneven one votes
/// for the end where its small part is a mode of its own rather than the tail of the large
/// one. `b` is the calls per op added per unit of N.
fn fixed_is_slower(rows: &[SizeCalls], a: f64, b: f64) -> bool {
    let mut vote = 0.0;
    for (r, _, d) in rows {
        let total: f64 = d.hist.iter().map(|b| b.1 as f64).sum();
        let fixed = total * (a / (a + b * r.n as f64)).min(1.0);
        if let (Some(top), Some(bottom)) = (apartness(d, fixed, true), apartness(d, fixed, false)) {
            vote += total * (top - bottom);
        }
    }
    vote >= 0.0
}

/// Each size's time per call of the `a` fixed calls per op (taken from the `fixed_slower`
/// end of its histogram) and of the rest, with their errors.
fn population_points(rows: &[SizeCalls], a: f64, fixed_slower: bool) -> (Vec<Point>, Vec<Point>) {
    let mut fixed_pts = Vec::new();
    let mut per_n_pts = Vec::new();
    for (r, c, d) in rows {
        let total: f64 = d.hist.iter().map(|b| b.1 as f64).sum();
        let n = r.n as f64;
        let fixed = total * (a / c.max(a)).min(1.0);
        let (Some(fixed_mean), Some(fixed_t), Some(middle), Some(cut)) = (
            take(d, fixed, fixed_slower),
            at_rank(d, FIXED_RANK * fixed, fixed_slower),
            at_rank(d, fixed / 2.0, fixed_slower),
            at_rank(d, 0.75 * fixed, fixed_slower),
        ) else {
            continue;
        };
        let Some(rest) = rest_mean(d, fixed, fixed_mean) else {
            continue;
        };
        let se = |count: f64| 1.0 / count.max(1.0).sqrt();
        // Where the fixed calls' middle lies is only bounded: with `c` of the others' slowest
        // calls among the `k` taken, it sits at rank `k/2 + c` from the end, between the
        // middle of the calls taken (`c = 0`) and the cut (`c = k/2`). Half that range is its
        // error, so a growth the others' tail alone could make stays within the noise: a 6.1
        // sweep's 6000 reaps put about 170 calls among the 300 slowest, beside 300 timed
        // waits spread over 32..262 µs, and read at one rank the waits seemed to double.
        let bounded = (middle - cut).abs() / 2.0 / fixed_t.max(1.0);
        fixed_pts.push(Point {
            n,
            t: fixed_t,
            rel_se: Some(se(fixed).max(bounded)),
        });
        per_n_pts.push(Point {
            n,
            t: rest,
            rel_se: Some(se(total - fixed)),
        });
    }
    (fixed_pts, per_n_pts)
}

/// Tables of mixed calls for unit tests here and in the renderers.
#[cfg(test)]
pub mod testdata {
    use crate::analysis::hist::from_values;
    use crate::analysis::table::{CaseTable, Metric, Row};

    /// One run's calls at N, one value (ns) per call.
    pub fn row(n: u64, values: &[u64]) -> Row {
        let d = from_values(values);
        let mean = values.iter().sum::<u64>() as f64 / values.len().max(1) as f64;
        Row {
            n,
            calls: values.len() as u64,
            calls_per_op: Some(values.len() as f64),
            hist: Some(d),
            time_per_call_ns: Some(mean),
            ..Row::default()
        }
    }

    pub fn table(rows: Vec<Row>) -> CaseTable {
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

    /// An unmodified benchmark: 100 timed `waitpid(child)` per run that block for the
    /// child's exit (60 µs) and walk the N idle children (100 ns each, 5.10), then N reaps of
    /// the killed children at teardown (10 µs each), at N = 10, 1000, 3000.
    pub fn timed_waits_and_reaps() -> CaseTable {
        table(
            [10u64, 1000, 3000]
                .map(|n| {
                    let mut v: Vec<u64> = (0..100).map(|i| 60_000 + 100 * n + i % 13).collect();
                    v.extend((0..n).map(|i| 10_000 + i % 97));
                    row(n, &v)
                })
                .to_vec(),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::testdata::{row, table, timed_waits_and_reaps};
    use super::*;
    use crate::analysis::fit::Complexity;
    use crate::analysis::table::Row;

    /// The split leads with the fixed population (the timed waits), fitted flat.
    fn assert_the_fixed_population_leads_flat(t: &CaseTable) {
        let s = split(t).expect("a mix");
        let Mix::Population { kind, scaling, .. } = s.mix() else {
            panic!("split: {s:?}");
        };
        assert_eq!(kind, "fixed");
        assert_eq!(scaling.class, Complexity::Constant, "{scaling:?}");
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
    fn a_small_exact_fixed_part_is_split_and_is_the_headline() {
        let t = timed_waits_and_reaps();
        // 100 of 3100 calls at the largest N: under the 5% a noisy count model needs.
        let s = split(&t).expect("exact counts 100 + N at three sizes are a mix");
        assert!((s.fixed_per_op - 100.0).abs() < 0.5, "{s:?}");
        assert!(s.separated && s.fixed_slower, "{s:?}");
        let Mix::Population { kind, scaling, .. } = s.mix() else {
            panic!("split, so the headline is a population: {s:?}");
        };
        assert_eq!(kind, "fixed", "the timed waits grow, the reaps do not");
        assert!(
            scaling.flat_reason.is_none() && scaling.classes.contains(&Complexity::Linear),
            "{scaling:?}"
        );
        // The mean of all calls falls: the reaps drown the walks.
        let mean = |i: usize| t.rows[i].time_per_call_ns.unwrap();
        assert!(mean(2) < mean(0), "{} -> {}", mean(0), mean(2));
    }

    #[test]
    fn the_others_tail_does_not_make_a_standing_fixed_part_grow() {
        // 100 timed waits of 200 µs that do not walk (6.1), N reaps of 20 µs of which 3%
        // take 0.5 to 5 ms (interrupts, a preempted exit): at N = 3000 the slowest 100 calls
        // are 90 tail reaps and 10 waits.
        let t = table(
            [100u64, 1000, 3000]
                .map(|n| {
                    let mut v: Vec<u64> = (0..100).map(|i| 180_000 + 400 * (i % 100)).collect();
                    v.extend((0..n).map(|i| {
                        if i % 33 == 0 {
                            500_000 + 4_500_000 * (i % 7) / 6
                        } else {
                            20_000 + i % 97
                        }
                    }));
                    row(n, &v)
                })
                .to_vec(),
        );
        assert_the_fixed_population_leads_flat(&t);

        // Their mean grows tenfold: the slowest 100 of 3100 calls.
        let last = &t.rows[2];
        let top = take(last.hist.as_ref().unwrap(), 100.0, true).unwrap();
        assert!(top > 5.0 * 200_000.0, "{top}");

        // Waits spread over an order of magnitude (32..262 µs, as a 6.1 guest's), and a
        // tail of the reaps over the same range and beyond: at N = 2000 the slowest 100
        // calls hold about 40 tail reaps, and a single rank read of the waits doubles.
        let log_spread =
            |i: u64, k: u64, lo: f64, hi: f64| (lo * (hi / lo).powf(i as f64 / k as f64)) as u64;
        let t = table(
            [100u64, 1000, 2000]
                .map(|n| {
                    let mut v: Vec<u64> =
                        (0..100).map(|i| log_spread(i, 100, 32e3, 262e3)).collect();
                    v.extend((0..n).map(|i| {
                        if i % 33 == 0 {
                            log_spread(i % 17, 17, 50e3, 5e6)
                        } else {
                            20_000 + i % 97
                        }
                    }));
                    row(n, &v)
                })
                .to_vec(),
        );
        assert_the_fixed_population_leads_flat(&t);
    }

    #[test]
    fn a_small_part_needs_counts_that_fit_it() {
        // The same calls, but 3% of the largest size's calls missing at N = 1000: a residual
        // of 33 calls per op is a third of the 100 fixed ones, so no model.
        let mut t = timed_waits_and_reaps();
        let r = &mut t.rows[1];
        r.calls_per_op = r.calls_per_op.map(|c| c - 33.0);
        assert!(split(&t).is_none());
    }

    #[test]
    fn with_neither_population_growing_the_headline_is_the_fixed_one() {
        let t = table(
            [10u64, 1000, 3000]
                .map(|n| {
                    let mut v: Vec<u64> = (0..100).map(|i| 60_000 + i % 13).collect();
                    v.extend((0..n).map(|i| 10_000 + i % 97));
                    row(n, &v)
                })
                .to_vec(),
        );
        let Mix::Population { kind, scaling, .. } = split(&t).unwrap().mix() else {
            panic!("split");
        };
        assert_eq!(kind, "fixed");
        assert_eq!(scaling.class, Complexity::Constant, "{scaling:?}");
    }

    #[test]
    fn the_end_the_fixed_calls_sit_at_is_found_either_way_round() {
        // 300 fast fixed calls (1-2 µs) and N slow ones that grow (a lookup per object).
        let t = table(
            [10u64, 300, 1000, 3000]
                .map(|n| {
                    let mut v: Vec<u64> = (0..300).map(|i| 1000 + 3 * i).collect();
                    v.extend((0..n).map(|i| 40_000 + 20 * n + i % 300));
                    row(n, &v)
                })
                .to_vec(),
        );
        let s = split(&t).unwrap();
        assert!(s.separated && !s.fixed_slower, "{s:?}");
        // Half and half at the smallest N, where both ends cut at the median: 100 timed
        // waits of ~90 µs and 100 reaps of 5-60 µs; from N = 1000 on the waits walk (a 5.10
        // VM sweep's shape, which an evenness-weighted vote of valleys got the wrong way
        // round).
        let t = table(
            [100u64, 1000, 2000]
                .map(|n| {
                    let walk = if n > 100 { 350 * n } else { 0 };
                    let mut v: Vec<u64> = (0..100).map(|i| 70_000 + walk + 300 * i).collect();
                    v.extend((0..n).map(|i| 5_000 + (i * 7919) % 55_000));
                    row(n, &v)
                })
                .to_vec(),
        );
        let s = split(&t).unwrap();
        assert!(s.fixed_slower, "{s:?}");
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
        assert!(matches!(s.mix(), Mix::Unsplit { .. }), "{s:?}");
    }
}
