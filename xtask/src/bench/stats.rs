//! Order statistics for benchmark samples: median, quartiles (IQR), min and max.
//!
//! Quantiles use linear interpolation between order statistics (Hyndman-Fan type 7, the
//! default of R and numpy), so the median of an even-sized sample is the mean of the two
//! middle values and the quartiles of 1..=5 are 2 and 4.

use serde::{Deserialize, Serialize};

/// A summary of one set of samples (e.g. ns per call over the rounds).
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct Summary {
    pub n: usize,
    pub median: f64,
    pub q1: f64,
    pub q3: f64,
    pub min: f64,
    pub max: f64,
}

impl Summary {
    /// None for an empty sample or one holding a NaN (a failed measurement must not turn
    /// into a plausible-looking number).
    pub fn of(values: &[f64]) -> Option<Summary> {
        if values.is_empty() || values.iter().any(|v| v.is_nan()) {
            return None;
        }
        let mut v = values.to_vec();
        v.sort_by(|a, b| a.partial_cmp(b).expect("no NaN"));
        Some(Summary {
            n: v.len(),
            median: quantile_sorted(&v, 0.5),
            q1: quantile_sorted(&v, 0.25),
            q3: quantile_sorted(&v, 0.75),
            min: v[0],
            max: v[v.len() - 1],
        })
    }
}

/// The q-quantile (0..=1) of sorted, non-empty values, type 7.
pub fn quantile_sorted(sorted: &[f64], q: f64) -> f64 {
    assert!(!sorted.is_empty(), "quantile of nothing");
    let q = q.clamp(0.0, 1.0);
    let h = (sorted.len() - 1) as f64 * q;
    let lo = h.floor() as usize;
    let hi = h.ceil() as usize;
    sorted[lo] + (h - lo as f64) * (sorted[hi] - sorted[lo])
}

/// Element-wise differences `a[i] - b[i]` of paired samples (same round).
pub fn paired_diff(a: &[f64], b: &[f64]) -> Vec<f64> {
    assert_eq!(a.len(), b.len(), "paired samples of different lengths");
    a.iter().zip(b).map(|(x, y)| x - y).collect()
}

/// `num / den`, or None when the denominator is not clearly positive: a ratio to an added
/// cost that is zero or negative (lost in the noise) means nothing.
pub fn ratio(num: f64, den: f64) -> Option<f64> {
    if den > 0.0 && num.is_finite() && den.is_finite() {
        Some(num / den)
    } else {
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn median(v: &[f64]) -> Option<f64> {
        Summary::of(v).map(|s| s.median)
    }

    #[test]
    fn odd_and_even_medians() {
        assert_eq!(median(&[3.0, 1.0, 2.0]), Some(2.0));
        assert_eq!(median(&[4.0, 1.0, 3.0, 2.0]), Some(2.5));
        assert_eq!(median(&[7.0]), Some(7.0));
        assert_eq!(median(&[]), None);
    }

    #[test]
    fn quartiles_type7() {
        let s = Summary::of(&[5.0, 1.0, 4.0, 2.0, 3.0]).unwrap();
        assert_eq!((s.q1, s.median, s.q3), (2.0, 3.0, 4.0));
        assert_eq!((s.min, s.max, s.n), (1.0, 5.0, 5));
        // numpy.percentile([1, 2, 3, 4], [25, 75]) == [1.75, 3.25]
        let s = Summary::of(&[4.0, 3.0, 2.0, 1.0]).unwrap();
        assert_eq!((s.q1, s.q3), (1.75, 3.25));
        // An outlier moves the max, not the median or the quartiles much.
        let s = Summary::of(&[10.0, 11.0, 12.0, 13.0, 1000.0]).unwrap();
        assert_eq!((s.median, s.q3, s.max), (12.0, 13.0, 1000.0));
    }

    #[test]
    fn nan_is_not_summarised() {
        assert!(Summary::of(&[1.0, f64::NAN]).is_none());
    }

    #[test]
    fn diffs_and_ratios() {
        assert_eq!(paired_diff(&[5.0, 7.0], &[1.0, 2.0]), vec![4.0, 5.0]);
        assert_eq!(ratio(3.0, 2.0), Some(1.5));
        assert_eq!(ratio(3.0, 0.0), None);
        assert_eq!(ratio(3.0, -1.0), None);
    }
}
