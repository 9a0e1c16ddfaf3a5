//! Small statistics: means, medians, least squares with confidence intervals, Welch's t-test.

use serde::Serialize;

pub fn mean(v: &[f64]) -> Option<f64> {
    (!v.is_empty()).then(|| v.iter().sum::<f64>() / v.len() as f64)
}

/// Harmonic mean of positive values (the right mean for rates such as ops/s).
pub fn harmonic_mean(v: &[f64]) -> Option<f64> {
    if v.is_empty() || v.iter().any(|x| *x <= 0.0) {
        return None;
    }
    Some(v.len() as f64 / v.iter().map(|x| 1.0 / x).sum::<f64>())
}

pub use workloads::numbers::median;

/// Sample variance (n - 1 in the denominator).
pub fn variance(v: &[f64]) -> Option<f64> {
    if v.len() < 2 {
        return None;
    }
    let m = mean(v)?;
    Some(v.iter().map(|x| (x - m) * (x - m)).sum::<f64>() / (v.len() - 1) as f64)
}

/// Two-sided 97.5% quantile of Student's t with `df` degrees of freedom (for 95% intervals).
pub fn t975(df: f64) -> f64 {
    const TABLE: [f64; 30] = [
        12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228, 2.201, 2.179, 2.160,
        2.145, 2.131, 2.120, 2.110, 2.101, 2.093, 2.086, 2.080, 2.074, 2.069, 2.064, 2.060, 2.056,
        2.052, 2.048, 2.045, 2.042,
    ];
    if df.is_nan() || df < 1.0 {
        return f64::INFINITY;
    }
    if df <= 30.0 {
        // Welch's df is fractional: interpolate between table entries.
        let lo = df.floor() as usize;
        let hi = (lo + 1).min(30);
        let f = df - lo as f64;
        return TABLE[lo - 1] * (1.0 - f) + TABLE[hi - 1] * f;
    }
    // Cornish-Fisher expansion around the normal quantile; exact to 3 decimals beyond df 30.
    let z: f64 = 1.959_964;
    z + (z.powi(3) + z) / (4.0 * df)
        + (5.0 * z.powi(5) + 16.0 * z.powi(3) + 3.0 * z) / (96.0 * df * df)
}

/// Ordinary least squares `y = intercept + slope·x`.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct LineFit {
    pub slope: f64,
    pub intercept: f64,
    /// 95% confidence interval of the slope; None with fewer than 3 points.
    pub slope_ci95: Option<(f64, f64)>,
    /// Coefficient of determination; None when y does not vary.
    pub r2: Option<f64>,
    pub points: usize,
}

/// None when fewer than 2 points or x does not vary.
pub fn ols(x: &[f64], y: &[f64]) -> Option<LineFit> {
    let n = x.len().min(y.len());
    if n < 2 {
        return None;
    }
    let mx = mean(&x[..n])?;
    let my = mean(&y[..n])?;
    let sxx: f64 = x[..n].iter().map(|xi| (xi - mx).powi(2)).sum();
    if sxx <= f64::EPSILON * mx.abs().max(1.0) {
        return None;
    }
    let sxy: f64 = x[..n]
        .iter()
        .zip(&y[..n])
        .map(|(xi, yi)| (xi - mx) * (yi - my))
        .sum();
    let syy: f64 = y[..n].iter().map(|yi| (yi - my).powi(2)).sum();
    let slope = sxy / sxx;
    let intercept = my - slope * mx;
    let ssr: f64 = x[..n]
        .iter()
        .zip(&y[..n])
        .map(|(xi, yi)| (yi - intercept - slope * xi).powi(2))
        .sum();
    let r2 = (syy > 1e-24).then(|| (1.0 - ssr / syy).clamp(0.0, 1.0));
    let slope_ci95 = (n >= 3).then(|| {
        let se = (ssr / (n - 2) as f64 / sxx).sqrt();
        let h = t975((n - 2) as f64) * se;
        (slope - h, slope + h)
    });
    Some(LineFit {
        slope,
        intercept,
        slope_ci95,
        r2,
        points: n,
    })
}

/// Welch's unequal-variance t-test from summary statistics (mean, variance, count) of two
/// samples. Returns (t, df); None when either side has fewer than 2 values or both have no
/// spread.
pub fn welch(m1: f64, v1: f64, n1: f64, m2: f64, v2: f64, n2: f64) -> Option<(f64, f64)> {
    if n1 < 2.0 || n2 < 2.0 {
        return None;
    }
    let (a, b) = (v1 / n1, v2 / n2);
    let se2 = a + b;
    if se2 <= 0.0 {
        return None;
    }
    let t = (m2 - m1) / se2.sqrt();
    let df = se2 * se2 / (a * a / (n1 - 1.0) + b * b / (n2 - 1.0));
    Some((t, df))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ols_recovers_a_line_and_ci_covers_it() {
        let x: Vec<f64> = (1..=10).map(f64::from).collect();
        let y: Vec<f64> = x.iter().map(|x| 3.0 + 2.0 * x).collect();
        let f = ols(&x, &y).unwrap();
        assert!((f.slope - 2.0).abs() < 1e-12 && (f.intercept - 3.0).abs() < 1e-9);
        assert!((f.r2.unwrap() - 1.0).abs() < 1e-12);
        // With symmetric noise the interval widens and still covers the truth.
        let noisy: Vec<f64> = y
            .iter()
            .enumerate()
            .map(|(i, v)| v + if i % 2 == 0 { 0.5 } else { -0.5 })
            .collect();
        let f = ols(&x, &noisy).unwrap();
        let (lo, hi) = f.slope_ci95.unwrap();
        assert!(lo < 2.0 && 2.0 < hi && hi - lo > 0.01, "{lo} {hi}");
        assert!(ols(&[1.0], &[2.0]).is_none());
        assert!(ols(&[1.0, 1.0], &[2.0, 3.0]).is_none());
        assert!(ols(&[1.0, 2.0], &[2.0, 3.0]).unwrap().slope_ci95.is_none());
    }

    #[test]
    fn t_quantiles_match_tables() {
        assert!((t975(1.0) - 12.706).abs() < 1e-9);
        assert!((t975(10.0) - 2.228).abs() < 1e-9);
        assert!((t975(60.0) - 2.000).abs() < 2e-3, "{}", t975(60.0));
        assert!((t975(120.0) - 1.980).abs() < 2e-3);
        assert!(t975(2.5) < t975(2.0) && t975(2.5) > t975(3.0));
        assert!(t975(0.5).is_infinite());
    }

    #[test]
    fn means_and_welch() {
        assert_eq!(median(&[3.0, 1.0, 2.0]), Some(2.0));
        assert_eq!(median(&[4.0, 1.0, 2.0, 3.0]), Some(2.5));
        assert_eq!(median(&[]), None);
        assert!((harmonic_mean(&[1.0, 4.0, 4.0]).unwrap() - 2.0).abs() < 1e-12);
        assert_eq!(harmonic_mean(&[1.0, 0.0]), None);
        let (t, df) = welch(10.0, 1.0, 10.0, 12.0, 1.0, 10.0).unwrap();
        assert!(t > 4.0 && (df - 18.0).abs() < 1e-9);
        assert!(welch(1.0, 0.0, 5.0, 1.0, 0.0, 5.0).is_none());
    }
}
