//! Percentiles and moments of the in-kernel log-linear histograms ([`Dist`]).
//!
//! A bucket only says "some value in `[low, high)`". Percentiles are estimated by spreading a
//! bucket's `c` values evenly over its range (the `j`-th at `low + (j - ½)/c · width`), then
//! clamping to the exact `min_ns`/`max_ns` the kernel also kept. The true nearest-rank value
//! lies in the same bucket, so the error is at most one bucket width: 1/16 of the value above
//! 16 ns (`HIST_SUB_BITS` = 4) and under 1 ns below.

use tracer_ebpf::{hist_bucket_high, hist_bucket_low};

use crate::rundata::Dist;

/// Number of values in a histogram.
pub fn count(d: &Dist) -> u64 {
    d.hist.iter().fold(0u64, |a, (_, c)| a.saturating_add(*c))
}

/// Mean from the exact sum, or None for an empty distribution.
pub fn mean(d: &Dist) -> Option<f64> {
    let n = count(d);
    (n > 0).then(|| d.sum_ns as f64 / n as f64)
}

/// Buckets sorted by index with duplicates summed and empty ones dropped (the on-disk list is
/// sparse and normally sorted already; this makes the math independent of that).
fn normalized(d: &Dist) -> Vec<(u32, u64)> {
    let mut v: Vec<(u32, u64)> = d.hist.iter().copied().filter(|(_, c)| *c > 0).collect();
    v.sort_unstable_by_key(|(b, _)| *b);
    let mut out: Vec<(u32, u64)> = Vec::with_capacity(v.len());
    for (b, c) in v {
        match out.last_mut() {
            Some((lb, lc)) if *lb == b => *lc = lc.saturating_add(c),
            _ => out.push((b, c)),
        }
    }
    out
}

/// A bucket's range `[low, high)` as floats, the high edge kept finite for the last bucket.
pub fn bucket_range(b: u32) -> (f64, f64) {
    let b = b.min(tracer_ebpf::HIST_BUCKETS - 1);
    let lo = hist_bucket_low(b) as f64;
    let hi = hist_bucket_high(b);
    let hi = if hi == u64::MAX { lo * 2.0 } else { hi as f64 };
    (lo, hi)
}

/// The `q`-quantile (0 ≤ q ≤ 1) by nearest rank, interpolated inside its bucket and clamped to
/// the exact min/max. None for an empty distribution.
pub fn quantile(d: &Dist, q: f64) -> Option<f64> {
    let buckets = normalized(d);
    let total: u64 = buckets.iter().fold(0u64, |a, (_, c)| a.saturating_add(*c));
    if total == 0 {
        return None;
    }
    let q = q.clamp(0.0, 1.0);
    // Nearest rank, 1-based.
    let rank = ((q * total as f64).ceil() as u64).clamp(1, total);
    // The smallest and largest values are known exactly.
    if d.max_ns >= d.min_ns && d.max_ns > 0 {
        if rank == 1 {
            return Some(d.min_ns as f64);
        }
        if rank == total {
            return Some(d.max_ns as f64);
        }
    }
    let mut before = 0u64;
    for (b, c) in &buckets {
        if before.saturating_add(*c) >= rank {
            let j = (rank - before) as f64;
            let (lo, hi) = bucket_range(*b);
            let v = lo + (j - 0.5) / *c as f64 * (hi - lo);
            return Some(clamp_to(d, v));
        }
        before = before.saturating_add(*c);
    }
    Some(d.max_ns as f64)
}

fn clamp_to(d: &Dist, v: f64) -> f64 {
    let (lo, hi) = (d.min_ns as f64, d.max_ns as f64);
    if hi >= lo && hi > 0.0 {
        v.clamp(lo, hi)
    } else {
        v
    }
}

/// Standard deviation estimated from bucket midpoints around the exact mean (population form).
/// Good to a few percent of the spread; used for significance and error bars, not reported.
pub fn std_dev(d: &Dist) -> Option<f64> {
    let buckets = normalized(d);
    let n: u64 = buckets.iter().fold(0u64, |a, (_, c)| a.saturating_add(*c));
    if n == 0 {
        return None;
    }
    let m = d.sum_ns as f64 / n as f64;
    let mut ss = 0.0;
    for (b, c) in &buckets {
        let (lo, hi) = bucket_range(*b);
        let mid = clamp_to(d, (lo + hi) / 2.0);
        ss += *c as f64 * (mid - m) * (mid - m);
    }
    Some((ss / n as f64).sqrt())
}

/// Share of the calls cut from each end by [`trimmed_mean`] (the robust centre fitted).
pub const TRIM: f64 = 0.10;

/// Mean of the values between the `trim` and `1 − trim` quantiles: the robust centre of a
/// row. Values are spread evenly over their bucket as in [`quantile`], and the estimate is
/// scaled by the exact mean over the bucket model's mean so that with no trimming it is the
/// exact mean (bucket midpoints carry a bias of up to 1/32). One call of 5 ms among 75 of
/// 63 µs moves the mean to 129 µs; it leaves this at 63 µs. None for an empty distribution.
pub fn trimmed_mean(d: &Dist, trim: f64) -> Option<f64> {
    let buckets = normalized(d);
    let total: u64 = buckets.iter().fold(0u64, |a, (_, c)| a.saturating_add(*c));
    if total == 0 {
        return None;
    }
    let trim = trim.clamp(0.0, 0.49);
    // Keep ranks lo_rank+1 ..= hi_rank (1-based); at least one value.
    let cut = (trim * total as f64).floor() as u64;
    let (lo_rank, hi_rank) = if 2 * cut >= total {
        ((total - 1) / 2, (total - 1) / 2 + 1)
    } else {
        (cut, total - cut)
    };
    // Sum of the j-th values j1..=j2 of a bucket of c values spread over [lo, hi).
    let part = |lo: f64, hi: f64, c: u64, j1: u64, j2: u64| -> f64 {
        if j2 < j1 {
            return 0.0;
        }
        // In floating point: a run file's counts can be anything up to u64::MAX.
        let k = (j2 - j1) as f64 + 1.0;
        let sum_j = (j1 as f64 + j2 as f64) * k / 2.0 - 0.5 * k;
        k * lo + (hi - lo) / c as f64 * sum_j
    };
    let (mut kept, mut all, mut before) = (0.0, 0.0, 0u64);
    for (b, c) in &buckets {
        let (lo, hi) = bucket_range(*b);
        let (lo, hi) = (clamp_to(d, lo), clamp_to(d, hi));
        all += part(lo, hi, *c, 1, *c);
        let first = lo_rank.saturating_sub(before) + 1;
        let last = hi_rank.saturating_sub(before).min(*c);
        if first <= last {
            kept += part(lo, hi, *c, first, last);
        }
        before = before.saturating_add(*c);
    }
    let model_mean = all / total as f64;
    let exact_mean = d.sum_ns as f64 / total as f64;
    let scale = if model_mean > 0.0 && exact_mean > 0.0 {
        exact_mean / model_mean
    } else {
        1.0
    };
    Some(kept / (hi_rank - lo_rank) as f64 * scale)
}

/// The spread of the calls as [`trimmed_mean`] sees them: their winsorized standard deviation
/// (the values beyond the `trim` and `1 − trim` quantiles pulled in to those quantiles) over
/// `1 − 2·trim`, so that it over √calls is the trimmed mean's standard error (Tukey and
/// McLaughlin). The plain [`std_dev`] would give the centre the error of the mean it does not
/// use: one 99 µs call among thirty of 3 µs made a size's error ±96% and hid a tenfold
/// growth in the noise. From bucket midpoints, like [`std_dev`]. None for an empty
/// distribution.
pub fn trimmed_sd(d: &Dist, trim: f64) -> Option<f64> {
    let trim = trim.clamp(0.0, 0.49);
    let (lo, hi) = (quantile(d, trim)?, quantile(d, 1.0 - trim)?);
    let buckets = normalized(d);
    let n = buckets.iter().fold(0.0, |a, (_, c)| a + *c as f64);
    let mid = |b: u32| {
        let (l, h) = bucket_range(b);
        clamp_to(d, (l + h) / 2.0).clamp(lo, hi)
    };
    let m = buckets
        .iter()
        .map(|(b, c)| *c as f64 * mid(*b))
        .sum::<f64>()
        / n;
    let ss: f64 = buckets
        .iter()
        .map(|(b, c)| *c as f64 * (mid(*b) - m).powi(2))
        .sum();
    Some((ss / n).sqrt() / (1.0 - 2.0 * trim))
}

/// Sum of two distributions (the histograms of the union of their values).
pub fn merge(a: &Dist, b: &Dist) -> Dist {
    let (ca, cb) = (count(a), count(b));
    let min_ns = match (ca > 0, cb > 0) {
        (true, true) => a.min_ns.min(b.min_ns),
        (true, false) => a.min_ns,
        (false, true) => b.min_ns,
        (false, false) => 0,
    };
    let mut hist = a.hist.clone();
    hist.extend_from_slice(&b.hist);
    let merged = Dist {
        sum_ns: a.sum_ns.saturating_add(b.sum_ns),
        min_ns,
        max_ns: a.max_ns.max(b.max_ns),
        hist,
    };
    Dist {
        hist: normalized(&merged),
        ..merged
    }
}

/// Build a distribution from exact values (tests and synthetic fixtures).
pub fn from_values(values: &[u64]) -> Dist {
    let mut hist: Vec<(u32, u64)> = Vec::new();
    for &v in values {
        hist.push((tracer_ebpf::hist_bucket(v), 1));
    }
    let d = Dist {
        sum_ns: values.iter().sum(),
        min_ns: values.iter().copied().min().unwrap_or(0),
        max_ns: values.iter().copied().max().unwrap_or(0),
        hist,
    };
    Dist {
        hist: normalized(&d),
        ..d
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::analysis::testutil::Rng;

    fn exact_quantile(sorted: &[u64], q: f64) -> f64 {
        let n = sorted.len() as u64;
        let rank = ((q * n as f64).ceil() as u64).clamp(1, n);
        sorted[(rank - 1) as usize] as f64
    }

    /// Hostile counts (a run file is input) are summed in floating point.
    #[test]
    fn trimmed_mean_takes_any_count_a_run_file_holds() {
        let d = Dist {
            sum_ns: u64::MAX,
            min_ns: 1,
            max_ns: u64::MAX,
            hist: vec![(40, u64::MAX), (41, 3)],
        };
        assert!(trimmed_mean(&d, TRIM).is_some_and(f64::is_finite));
    }

    /// The robust centre: an outlier does not move it, a clean distribution keeps its mean, and
    /// no trimming is the exact mean.
    #[test]
    fn trimmed_mean_resists_outliers_and_keeps_clean_means() {
        let mut v: Vec<u64> = vec![63_000; 75];
        v.push(5_110_000);
        let d = from_values(&v);
        let m = mean(&d).unwrap();
        assert!(m > 120_000.0, "{m}");
        let t = trimmed_mean(&d, TRIM).unwrap();
        assert!((t / 63_000.0 - 1.0).abs() < 0.02, "{t}");
        assert_eq!(trimmed_mean(&d, 0.0).unwrap().round(), m.round());
        let mut rng = Rng::new(7);
        for _ in 0..20 {
            let values: Vec<u64> = (0..2000).map(|_| 10_000 + rng.below(1000)).collect();
            let d = from_values(&values);
            let exact = values.iter().sum::<u64>() as f64 / values.len() as f64;
            let t = trimmed_mean(&d, TRIM).unwrap();
            assert!((t / exact - 1.0).abs() < 0.01, "{t} vs {exact}");
        }
        // A two-population mix keeps both in the centre (unlike a median, which jumps).
        let mut mix: Vec<u64> = vec![1_000; 500];
        mix.extend(vec![100_000; 500]);
        let t = trimmed_mean(&from_values(&mix), TRIM).unwrap();
        assert!((40_000.0..60_000.0).contains(&t), "{t}");
        assert_eq!(trimmed_mean(&Dist::default(), TRIM), None);
        let one = from_values(&[500]);
        assert_eq!(trimmed_mean(&one, TRIM), Some(500.0));
    }

    /// The trimmed mean's standard error is `trimmed_sd / √n`: over many samples of a
    /// heavy-tailed distribution (one call in fifty ten to a hundred times slower), the
    /// spread of their trimmed means matches it, where the plain deviation overstates it.
    #[test]
    fn trimmed_sd_is_the_spread_of_the_trimmed_mean() {
        let mut rng = Rng::new(11);
        let (samples, n) = (400, 60);
        let mut centres = Vec::new();
        let mut claimed = Vec::new();
        let mut plain = Vec::new();
        for _ in 0..samples {
            let values: Vec<u64> = (0..n)
                .map(|_| match rng.below(100) {
                    0..2 => 30_000 + rng.below(270_000),
                    _ => 2_000 + rng.below(2_000),
                })
                .collect();
            let d = from_values(&values);
            centres.push(trimmed_mean(&d, TRIM).unwrap());
            claimed.push(trimmed_sd(&d, TRIM).unwrap() / (n as f64).sqrt());
            plain.push(std_dev(&d).unwrap() / (n as f64).sqrt());
        }
        let avg = |v: &[f64]| v.iter().sum::<f64>() / v.len() as f64;
        let m = avg(&centres);
        let observed =
            (centres.iter().map(|c| (c - m).powi(2)).sum::<f64>() / (samples - 1) as f64).sqrt();
        let ratio = avg(&claimed) / observed;
        assert!((0.75..1.35).contains(&ratio), "claimed/observed {ratio}");
        assert!(
            avg(&plain) > 3.0 * observed,
            "the plain deviation overstates it"
        );
        // One call of 99 µs among thirty of about 3 µs: the error stays a few percent.
        let mut v: Vec<u64> = (0..29).map(|i| 2_500 + 40 * i).collect();
        v.push(99_000);
        let d = from_values(&v);
        let rel = trimmed_sd(&d, TRIM).unwrap() / 30f64.sqrt() / trimmed_mean(&d, TRIM).unwrap();
        assert!(rel < 0.1, "{rel}");
        assert_eq!(trimmed_sd(&Dist::default(), TRIM), None);
    }

    /// Property: for many generated data sets of different shapes, every estimated percentile
    /// is within one bucket width (1/16 relative, or 1 ns for tiny values) of the exact one.
    #[test]
    fn percentiles_are_within_bucket_resolution_of_exact() {
        let mut worst: f64 = 0.0;
        for seed in 0..60u64 {
            let mut rng = Rng::new(seed);
            let len = 1 + rng.below(3000) as usize;
            let shape = seed % 5;
            let mut values: Vec<u64> = (0..len)
                .map(|_| match shape {
                    0 => 1000 + rng.below(9000),
                    1 => (rng.exp() * 20_000.0) as u64,
                    2 => (rng.lognormal(9.0, 1.5)) as u64,
                    3 => {
                        if rng.below(10) < 7 {
                            800 + rng.below(100)
                        } else {
                            50_000 + rng.below(5_000)
                        }
                    }
                    _ => rng.below(40),
                })
                .collect();
            let d = from_values(&values);
            values.sort_unstable();
            for q in [0.0, 0.01, 0.25, 0.5, 0.9, 0.99, 0.999, 1.0] {
                let est = quantile(&d, q).unwrap();
                let exact = exact_quantile(&values, q);
                let tol = (exact / 16.0).max(1.0);
                let err = (est - exact).abs();
                assert!(
                    err <= tol + 1e-9,
                    "seed {seed} shape {shape} q={q}: est {est} exact {exact} (err {err} > {tol})"
                );
                if exact > 100.0 {
                    worst = worst.max(err / exact);
                }
            }
        }
        // Interpolation should do much better than the worst case on smooth data.
        assert!(worst < 0.0626, "worst relative error {worst}");
    }

    #[test]
    fn extremes_are_exact_and_empty_is_none() {
        let d = from_values(&[1234, 5678, 99_999]);
        assert_eq!(quantile(&d, 0.0), Some(1234.0));
        assert_eq!(quantile(&d, 1.0), Some(99_999.0));
        assert_eq!(quantile(&Dist::default(), 0.5), None);
        assert_eq!(mean(&Dist::default()), None);
        assert!((mean(&d).unwrap() - (1234.0 + 5678.0 + 99_999.0) / 3.0).abs() < 1e-9);
    }

    #[test]
    fn merge_equals_histogram_of_union() {
        let mut rng = Rng::new(7);
        let a: Vec<u64> = (0..500).map(|_| 100 + rng.below(10_000)).collect();
        let b: Vec<u64> = (0..300).map(|_| 5_000 + rng.below(100_000)).collect();
        let mut all = a.clone();
        all.extend(&b);
        let merged = merge(&from_values(&a), &from_values(&b));
        assert_eq!(merged, from_values(&all));
        assert_eq!(count(&merged), 800);
        // Merging with an empty distribution keeps min.
        let m2 = merge(&Dist::default(), &from_values(&b));
        assert_eq!(m2.min_ns, *b.iter().min().unwrap());
    }

    #[test]
    fn std_dev_tracks_spread() {
        let mut rng = Rng::new(3);
        let values: Vec<u64> = (0..20_000).map(|_| 10_000 + rng.below(20_000)).collect();
        let exact = {
            let m = values.iter().sum::<u64>() as f64 / values.len() as f64;
            (values.iter().map(|&v| (v as f64 - m).powi(2)).sum::<f64>() / values.len() as f64)
                .sqrt()
        };
        let est = std_dev(&from_values(&values)).unwrap();
        assert!(
            (est - exact).abs() / exact < 0.05,
            "est {est} exact {exact}"
        );
        assert_eq!(std_dev(&from_values(&[500, 500, 500])).unwrap(), 0.0);
    }
}
