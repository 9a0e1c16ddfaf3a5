//! Scaling fits: how time per call grows with N.
//!
//! Three questions, answered in order:
//!
//! 1. **Where does growth become visible?** The baseline is the time per call at the smallest
//!    N. Growth is visible from the first N at which this and every larger N exceed the
//!    baseline by the margin `max(20%, 3 × combined relative standard error)` (the standard
//!    errors come from the histogram spread and call counts when known). Requiring every
//!    larger N to stay above keeps a single noisy point from counting.
//! 2. **Which complexity class?** With no visible growth the class is O(1). Otherwise each model
//!    `t = a + b·f(N)`, f ∈ {log n, n, n log n, n²}, is fitted by least squares on *relative*
//!    residuals (weights 1/t², because per-call means carry roughly constant relative noise
//!    and the times span decades) and the model with the smallest normalized RMS wins, as in
//!    Google Benchmark's complexity fitting. Unlike Google Benchmark the models have an
//!    intercept: a syscall's fixed cost dominates at small N and would otherwise make O(n)
//!    look like O(log n). Models whose growth term comes out negative are discarded.
//! 3. **What exponent?** The slope of `log(t − baseline)` against `log N` over the points
//!    where growth is visible: the exponent of the part that grows, which is what "O(n)" is
//!    about (a plain log-log slope of `t` is dragged towards 0 by the fixed cost). With fewer
//!    than two such points, or no growth, it is the plain log-log slope over all points. Both
//!    fits are kept in [`Scaling`].

use serde::Serialize;

use super::stats::{LineFit, ols};

/// Time per call at one N.
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct Point {
    pub n: f64,
    /// Nanoseconds per call.
    pub t: f64,
    /// Relative standard error of `t` (standard deviation of the mean / mean), when known.
    pub rel_se: Option<f64>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
pub enum Complexity {
    #[serde(rename = "O(1)")]
    Constant,
    #[serde(rename = "O(log n)")]
    Log,
    #[serde(rename = "O(n)")]
    Linear,
    #[serde(rename = "O(n log n)")]
    NLogN,
    #[serde(rename = "O(n^2)")]
    Quadratic,
}

impl Complexity {
    pub const GROWING: [Complexity; 4] = [
        Complexity::Log,
        Complexity::Linear,
        Complexity::NLogN,
        Complexity::Quadratic,
    ];

    pub fn label(self) -> &'static str {
        match self {
            Complexity::Constant => "O(1)",
            Complexity::Log => "O(log n)",
            Complexity::Linear => "O(n)",
            Complexity::NLogN => "O(n log n)",
            Complexity::Quadratic => "O(n^2)",
        }
    }

    /// The model's shape f(N).
    pub fn f(self, n: f64) -> f64 {
        match self {
            Complexity::Constant => 1.0,
            Complexity::Log => n.max(1.0).ln(),
            Complexity::Linear => n,
            Complexity::NLogN => n * n.max(1.0).ln(),
            Complexity::Quadratic => n * n,
        }
    }
}

/// `t = a + b·f(N)` fitted on relative residuals.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct ModelFit {
    pub class: Complexity,
    pub a: f64,
    pub b: f64,
    /// Root mean square of the relative residuals `(t − model)/t`.
    pub nrms: f64,
}

impl ModelFit {
    pub fn eval(&self, n: f64) -> f64 {
        self.a + self.b * self.class.f(n)
    }
}

/// Least margin over the baseline that counts as visible growth.
pub const MIN_MARGIN: f64 = 0.20;

#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Scaling {
    /// Input points, sorted by N (duplicates at one N averaged).
    pub points: Vec<Point>,
    pub class: Complexity,
    /// The winning model (for O(1): the mean).
    pub model: ModelFit,
    /// Every growing model that was tried, best first.
    pub candidates: Vec<ModelFit>,
    /// The reported exponent: see the module docs.
    pub slope: LineFit,
    /// True when `slope` is the fit of the growing part (t − baseline), false when it is the
    /// plain log-log fit of all points.
    pub slope_of_excess: bool,
    /// Plain least squares of log t on log N over all points.
    pub loglog: LineFit,
    /// Time per call at the smallest N.
    pub baseline: f64,
    /// First N from which the time per call stays clearly above the baseline.
    pub visible_from: Option<f64>,
    /// Time per call at the largest N over the baseline.
    pub growth_ratio: f64,
}

/// Fit the scaling of `points`. None with fewer than two distinct positive N.
pub fn fit_scaling(points: &[Point]) -> Option<Scaling> {
    let pts = normalize_points(points);
    if pts.len() < 2 {
        return None;
    }
    let x: Vec<f64> = pts.iter().map(|p| p.n.ln()).collect();
    let y: Vec<f64> = pts.iter().map(|p| p.t.ln()).collect();
    let loglog = ols(&x, &y)?;
    let baseline = pts[0].t;
    let base_se = pts[0].rel_se.unwrap_or(0.0);
    let visible_idx = (1..pts.len()).find(|&i| {
        pts[i..].iter().all(|p| {
            let se = (base_se.powi(2) + p.rel_se.unwrap_or(0.0).powi(2)).sqrt();
            p.t > baseline * (1.0 + MIN_MARGIN.max(3.0 * se))
        })
    });
    let growth_ratio = pts[pts.len() - 1].t / baseline;

    let mut candidates: Vec<ModelFit> = Complexity::GROWING
        .iter()
        .filter_map(|c| fit_model(*c, &pts))
        .collect();
    candidates.sort_by(|a, b| a.nrms.total_cmp(&b.nrms).then(a.class.cmp(&b.class)));

    let (class, model) = match (visible_idx, candidates.first()) {
        (Some(_), Some(best)) => (best.class, best.clone()),
        _ => {
            let m = pts.iter().map(|p| p.t).sum::<f64>() / pts.len() as f64;
            let nrms = (pts.iter().map(|p| ((p.t - m) / p.t).powi(2)).sum::<f64>()
                / pts.len() as f64)
                .sqrt();
            (
                Complexity::Constant,
                ModelFit {
                    class: Complexity::Constant,
                    a: m,
                    b: 0.0,
                    nrms,
                },
            )
        }
    };

    let excess = match visible_idx {
        Some(i) if class != Complexity::Constant && pts.len() - i >= 2 => {
            let xs: Vec<f64> = pts[i..].iter().map(|p| p.n.ln()).collect();
            let ys: Vec<f64> = pts[i..].iter().map(|p| (p.t - baseline).ln()).collect();
            ols(&xs, &ys)
        }
        _ => None,
    };
    let slope_of_excess = excess.is_some();
    let slope = excess.unwrap_or_else(|| loglog.clone());

    Some(Scaling {
        visible_from: visible_idx.map(|i| pts[i].n),
        points: pts,
        class,
        model,
        candidates,
        slope,
        slope_of_excess,
        loglog,
        baseline,
        growth_ratio,
    })
}

/// Drop unusable points, sort by N, average duplicates.
fn normalize_points(points: &[Point]) -> Vec<Point> {
    let mut pts: Vec<Point> = points
        .iter()
        .copied()
        .filter(|p| p.n > 0.0 && p.t > 0.0 && p.n.is_finite() && p.t.is_finite())
        .collect();
    pts.sort_by(|a, b| a.n.total_cmp(&b.n));
    let mut out: Vec<(Point, usize)> = Vec::new();
    for p in pts {
        match out.last_mut() {
            Some((q, k)) if q.n == p.n => {
                q.t += p.t;
                q.rel_se = match (q.rel_se, p.rel_se) {
                    (Some(a), Some(b)) => Some(a.max(b)),
                    (a, b) => a.or(b),
                };
                *k += 1;
            }
            _ => out.push((p, 1)),
        }
    }
    out.into_iter()
        .map(|(p, k)| Point {
            t: p.t / k as f64,
            ..p
        })
        .collect()
}

/// Weighted least squares of `t = a + b·f(N)` with weights 1/t². None when the growth term is
/// not positive or the shape does not vary over the points.
fn fit_model(class: Complexity, pts: &[Point]) -> Option<ModelFit> {
    let (mut sw, mut swf, mut swff, mut swt, mut swft) = (0.0, 0.0, 0.0, 0.0, 0.0);
    for p in pts {
        let w = 1.0 / (p.t * p.t);
        let f = class.f(p.n);
        sw += w;
        swf += w * f;
        swff += w * f * f;
        swt += w * p.t;
        swft += w * f * p.t;
    }
    let det = sw * swff - swf * swf;
    if det.abs() <= 1e-12 * sw * swff {
        return None;
    }
    let b = (sw * swft - swf * swt) / det;
    let a = (swt - b * swf) / sw;
    if b.is_nan() || b <= 0.0 || !a.is_finite() {
        return None;
    }
    let m = ModelFit {
        class,
        a,
        b,
        nrms: 0.0,
    };
    let nrms = (pts
        .iter()
        .map(|p| ((p.t - m.eval(p.n)) / p.t).powi(2))
        .sum::<f64>()
        / pts.len() as f64)
        .sqrt();
    Some(ModelFit { nrms, ..m })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::analysis::testutil::Rng;

    const SWEEP: [f64; 11] = [
        1.0, 10.0, 30.0, 100.0, 300.0, 1000.0, 2000.0, 3000.0, 5000.0, 6500.0, 8000.0,
    ];

    fn synth(f: impl Fn(f64) -> f64, noise: f64, seed: u64) -> Vec<Point> {
        let mut rng = Rng::new(seed);
        SWEEP
            .iter()
            .map(|&n| Point {
                n,
                t: f(n) * (1.0 + noise * rng.normal()),
                rel_se: None,
            })
            .collect()
    }

    /// Known shapes, with a fixed cost that dominates at small N and 3% multiplicative noise:
    /// every seed must recover the class.
    type Shape = fn(f64) -> f64;

    #[test]
    fn recovers_known_classes_under_noise() {
        let cases: [(Complexity, Shape); 5] = [
            (Complexity::Constant, |_| 2000.0),
            (Complexity::Log, |n| 800.0 + 400.0 * n.ln()),
            (Complexity::Linear, |n| 1000.0 + 5.0 * n),
            (Complexity::NLogN, |n| 1000.0 + 2.0 * n * n.ln()),
            (Complexity::Quadratic, |n| 1000.0 + 0.002 * n * n),
        ];
        for (want, f) in cases {
            for seed in 0..25 {
                let s = fit_scaling(&synth(f, 0.03, seed)).unwrap();
                assert_eq!(s.class, want, "seed {seed}: {:?}", s.candidates);
            }
        }
    }

    #[test]
    fn exponent_of_the_growing_part() {
        for (exp, f) in [
            (1.0, (|n| 1000.0 + 5.0 * n) as Shape),
            (2.0, |n| 500.0 + 0.01 * n * n),
        ] {
            let s = fit_scaling(&synth(f, 0.01, 1)).unwrap();
            assert!(s.slope_of_excess);
            assert!(
                (s.slope.slope - exp).abs() < 0.1,
                "exp {exp}: {:?}",
                s.slope
            );
            let (lo, hi) = s.slope.slope_ci95.unwrap();
            assert!(lo <= s.slope.slope && s.slope.slope <= hi);
            assert!(s.slope.r2.unwrap() > 0.95);
            // The plain log-log slope is dragged down by the fixed cost.
            assert!(s.loglog.slope < s.slope.slope);
        }
        // Pure power laws: the plain log-log slope is the exponent.
        let s = fit_scaling(&synth(|n| 3.0 * n.powf(1.5), 0.0, 0)).unwrap();
        assert!((s.loglog.slope - 1.5).abs() < 1e-9);
        assert!((s.loglog.r2.unwrap() - 1.0).abs() < 1e-9);
    }

    #[test]
    fn visible_from_marks_the_knee() {
        // 1000 + 5N: +20% (the margin) is crossed between N=30 (+15%) and N=100 (+50%).
        let s = fit_scaling(&synth(|n| 1000.0 + 5.0 * n, 0.0, 0)).unwrap();
        assert_eq!(s.visible_from, Some(100.0));
        // A wide spread pushes the knee out: with 20% relative error the margin is 3*28% = 85%.
        let wide: Vec<Point> = synth(|n| 1000.0 + 5.0 * n, 0.0, 0)
            .into_iter()
            .map(|p| Point {
                rel_se: Some(0.2),
                ..p
            })
            .collect();
        assert_eq!(fit_scaling(&wide).unwrap().visible_from, Some(300.0));
        // A single outlier that falls back does not count as growth.
        let mut blip = synth(|_| 1000.0, 0.0, 0);
        blip[4].t = 5000.0;
        let s = fit_scaling(&blip).unwrap();
        assert_eq!(s.visible_from, None);
        assert_eq!(s.class, Complexity::Constant);
        assert!(!s.slope_of_excess);
    }

    #[test]
    fn degenerate_inputs() {
        assert!(fit_scaling(&[]).is_none());
        let one = [Point {
            n: 10.0,
            t: 5.0,
            rel_se: None,
        }];
        assert!(fit_scaling(&one).is_none());
        // Duplicated N are averaged; zero and negative N are dropped.
        let pts = [
            Point {
                n: 0.0,
                t: 5.0,
                rel_se: None,
            },
            Point {
                n: 10.0,
                t: 4.0,
                rel_se: None,
            },
            Point {
                n: 10.0,
                t: 6.0,
                rel_se: None,
            },
            Point {
                n: 100.0,
                t: 5.0,
                rel_se: None,
            },
        ];
        let s = fit_scaling(&pts).unwrap();
        assert_eq!(s.points.len(), 2);
        assert_eq!(s.points[0].t, 5.0);
        assert_eq!(s.class, Complexity::Constant);
    }
}
