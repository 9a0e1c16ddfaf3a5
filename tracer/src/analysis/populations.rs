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
    /// Sizes where the fixed calls were found where the smallest N had them, so they keep
    /// its time (the slower end there holds the others' tail): see `still_there`.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub unmoved: Vec<u64>,
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
        /// As [`Population::unmoved`].
        unmoved: Vec<u64>,
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
                unmoved: p.unmoved.clone(),
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

/// Share of the fixed calls' central octaves ([`CENTRAL`] of them, at the smallest N) that
/// may be missing there at a larger N for them to count as not moved (besides two Poisson
/// errors).
pub const MAX_MOVED: f64 = 0.1;
/// The share of the smallest N's fixed calls whose octaves (the fewest adjacent ones) are
/// checked at the larger sizes.
pub const CENTRAL: f64 = 0.8;

/// `count` calls taken from one end of a histogram, as counts per octave (power of two).
fn taken_octaves(d: &Dist, count: f64, from_top: bool) -> Vec<f64> {
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
        let o = octave(b);
        if out.len() <= o {
            out.resize(o + 1, 0.0);
        }
        let used = (c as f64).min(left);
        out[o] += used;
        left -= used;
    }
    out
}

fn octave(bucket: u32) -> usize {
    (bucket >> tracer_ebpf::HIST_SUB_BITS) as usize
}

/// The fewest adjacent octaves holding [`CENTRAL`] of `octaves`' calls (the heavier of
/// equally wide ones): `lo..=hi`.
fn central(octaves: &[f64]) -> Option<(usize, usize)> {
    let total: f64 = octaves.iter().sum();
    let mut best: Option<(usize, usize, f64)> = None;
    for lo in 0..octaves.len() {
        let mut mass = 0.0;
        for (hi, c) in octaves.iter().enumerate().skip(lo) {
            mass += c;
            if mass >= CENTRAL * total {
                let better = best.is_none_or(|(l, h, m)| (hi - lo, -mass) < (h - l, -m));
                if better {
                    best = Some((lo, hi, mass));
                }
                break;
            }
        }
    }
    best.map(|(lo, hi, _)| (lo, hi))
}

/// Whether `d` still holds the smallest N's fixed calls (`octaves`, scaled by `scale` to this
/// size's number of them) where most of them were: their central octaves hold at least all
/// but [`MAX_MOVED`] of them, less two Poisson errors. Why: a small fixed part (100 timed
/// waits) among thousands of others is otherwise timed by the others' tail, since the
/// slowest 100 of 2100 calls take every outlier of 2000 reaps, and a time that stood still
/// seems to triple. A part that did move (each wait walking N children) leaves those octaves
/// to the others, far fewer there than it was. One-sided: a part that moved by less than its
/// central octaves' span still counts as not moved.
fn still_there(octaves: &[f64], scale: f64, d: &Dist) -> bool {
    let Some((lo, hi)) = central(octaves) else {
        return false;
    };
    let expected: f64 = octaves[lo..=hi].iter().sum::<f64>() * scale;
    let have: f64 = d
        .hist
        .iter()
        .filter(|(b, _)| (lo..=hi).contains(&octave(*b)))
        .map(|(_, c)| *c as f64)
        .sum();
    have >= (1.0 - MAX_MOVED) * expected - 2.0 * expected.sqrt()
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
    // The fixed calls as the smallest N shows them (the fewest others there to mix in).
    let mut first: Option<(Vec<f64>, f64, f64)> = None;
    let mut unmoved = Vec::new();
    for (r, c, d) in &rows {
        let total: f64 = d.hist.iter().map(|b| b.1 as f64).sum();
        let n = r.n as f64;
        let fixed = total * (a / c.max(a)).min(1.0);
        let Some((taken_mean, _)) = take(d, fixed, fixed_slower) else {
            continue;
        };
        let fixed_mean = match &first {
            None => {
                first = Some((taken_octaves(d, fixed, fixed_slower), fixed, taken_mean));
                taken_mean
            }
            // Still there: the fixed calls did not move, and what the end of the histogram
            // holds beyond them is the others' tail.
            Some((octaves, count, mean)) if still_there(octaves, fixed / count, d) => {
                unmoved.push(r.n);
                *mean
            }
            Some(_) => taken_mean,
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
                unmoved,
            },
            Population {
                kind: "per-n".into(),
                scaling: fit_scaling(&per_n_pts),
                points: per_n_pts,
                unmoved: Vec::new(),
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
        assert!(
            s.populations[0].unmoved.is_empty(),
            "the walk moved them: {s:?}"
        );
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
        let s = split(&t).expect("a mix");
        let fixed = &s.populations[0];
        assert_eq!(fixed.unmoved, [1000, 3000], "{s:?}");
        let Mix::Population { kind, scaling, .. } = s.mix() else {
            panic!("split: {s:?}");
        };
        assert_eq!(kind, "fixed");
        assert_eq!(scaling.class, Complexity::Constant, "{scaling:?}");

        // Without the check, the slowest 100 of 3100 calls grow tenfold.
        let last = &t.rows[2];
        let (top, _) = take(last.hist.as_ref().unwrap(), 100.0, true).unwrap();
        assert!(top > 5.0 * 200_000.0, "{top}");
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
