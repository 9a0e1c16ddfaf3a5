//! Step 5 of the fit (see the module docs of [`super`]): which classes the evidence leaves.
//! Every growing model is fitted to every point as measured, and weighed against the best
//! by its residuals in units of the error variance (Akaike weights).

use serde::Serialize;

use super::super::stats::t975;
use super::{
    Complexity, EVIDENCE_RATIO, FlatReason, MIN_COUNT_REL_ERROR, MIN_REL_ERROR, ModelFit, Point,
    Scaling, fit_model, weighted_noise,
};

/// The standard normal's 97.5% quantile: [`t975`] with infinitely many degrees of freedom.
const Z975: f64 = 1.959_964;

/// What a fit's values are, for the two rules that tell them apart: the least error a point
/// is taken to have, and whether O(n log n) alone may be named (see [`class_set`]).
#[derive(Clone, Copy, PartialEq)]
pub(super) enum Measure {
    Time,
    Count,
}

impl Measure {
    /// The least relative error a point is taken to have in the evidence rule: a time's
    /// repeatability ([`MIN_REL_ERROR`]), or a count's ([`MIN_COUNT_REL_ERROR`]).
    fn min_rel_error(self) -> f64 {
        match self {
            Measure::Time => MIN_REL_ERROR,
            Measure::Count => MIN_COUNT_REL_ERROR,
        }
    }
}

/// The class set the data cannot exclude, the runs' evidence for each growing class, and the
/// class named (a time's set that starts at O(n log n) also holds O(n); a count's need not):
/// a flat time's is O(1) (with every growing shape that rises through the points
/// when the rise was neither shown nor excluded); a growing time's, the model's class when
/// the runs leave it in the set, else the set's best fit to the runs.
pub(super) fn class_set(
    model: &ModelFit,
    flat_reason: Option<FlatReason>,
    candidates: &[ModelFit],
    (runs, pts): (&[Point], &[Point]),
    measure: Measure,
) -> (Vec<Complexity>, Vec<ClassEvidence>, Complexity) {
    if model.class == Complexity::Constant {
        // A rise neither shown nor excluded leaves O(1) and every growing shape that rises
        // through the points: the class is O(1), the set says what the data cannot exclude.
        let undecided = matches!(
            flat_reason,
            Some(FlatReason::WithinNoise | FlatReason::OneSize | FlatReason::NotSignificant)
        );
        let mut set = vec![Complexity::Constant];
        if undecided {
            set.extend(
                Complexity::GROWING
                    .iter()
                    .filter(|c| candidates.iter().any(|m| m.class == **c && m.b > 0.0)),
            );
        }
        (set, Vec::new(), Complexity::Constant)
    } else {
        let evidence = class_evidence(runs, pts, measure.min_rel_error());
        let mut set = plausible_set(&evidence);
        if set.is_empty() {
            // No growing model fits the runs as measured: the sizes' fit is all there is.
            set.push(model.class);
        }
        // Time never excludes O(n) for O(n log n): a walk whose cost per item rises as its
        // working set leaves the caches (or qemu's software TLB) bends the same way, and only
        // a count of its trips tells them apart ([`super::LOG_FACTOR_PARSIMONY`]).
        if measure == Measure::Time
            && set.first() == Some(&Complexity::NLogN)
            && candidates
                .iter()
                .any(|m| m.class == Complexity::Linear && m.b > 0.0)
        {
            set.insert(0, Complexity::Linear);
        }
        let class = if set.contains(&model.class) {
            model.class
        } else {
            evidence
                .iter()
                .filter(|e| set.contains(&e.class))
                .min_by(|a, b| a.delta.total_cmp(&b.delta))
                .map_or(model.class, |e| e.class)
        };
        (set, evidence, class)
    }
}

/// One growing class's evidence against the best-fitting one.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct ClassEvidence {
    pub class: Complexity,
    /// Its squared relative residuals minus the best model's, over the error variance: its
    /// AIC difference (0 for the best).
    pub delta: f64,
    /// Akaike weight among the growing classes.
    pub weight: f64,
    /// Within [`EVIDENCE_RATIO`] of the best: in the set.
    pub plausible: bool,
}

/// Step 5 of the module docs: each growing model's evidence against the best, from every
/// point as measured (`raw`, replicates kept) where there are more than two sizes.
pub(super) fn class_evidence(raw: &[Point], sizes: &[Point], floor: f64) -> Vec<ClassEvidence> {
    let mut raw: Vec<Point> = raw
        .iter()
        .copied()
        .filter(|p| p.n > 0.0 && p.t > 0.0 && p.n.is_finite() && p.t.is_finite())
        .collect();
    raw.sort_by(|a, b| a.n.total_cmp(&b.n));
    let fits: Vec<ModelFit> = Complexity::GROWING
        .iter()
        .filter_map(|c| fit_model(*c, &raw))
        .collect();
    if fits.is_empty() {
        return Vec::new();
    }
    // With two sizes any two-parameter shape passes through both: no shape is excluded.
    if sizes.len() <= 2 {
        let w = 1.0 / fits.len() as f64;
        return fits
            .iter()
            .map(|m| ClassEvidence {
                class: m.class,
                delta: 0.0,
                weight: w,
                plausible: true,
            })
            .collect();
    }
    let k = raw.len() as f64;
    let rss = |m: &ModelFit| m.nrms * m.nrms * k;
    let best = fits.iter().map(rss).fold(f64::INFINITY, f64::min);
    // The error variance: the largest of the best fit's residual variance, the runs' pure
    // error, the points' own errors and the floor. The first two are estimates from few
    // degrees of freedom, themselves uncertain: each is taken at (t(dof) / z)² times its value
    // (95%), so that a difference in fit must be as much larger to exclude a class as an F
    // test rather than a chi-squared one asks: x4.8 from the two residual degrees of freedom
    // of four sizes run once (where one knee made O(n^2) the sole class of a linear walk),
    // x1.7 from five, x1.1 from thirty.
    let inflate = |v: f64, dof: f64| v * (t975(dof) / Z975).powi(2);
    let (pure, pure_dof) = pure_error(&raw);
    let sigma2 = inflate(best / (k - 2.0).max(1.0), (k - 2.0).max(1.0))
        .max(if pure_dof > 0.0 {
            inflate(pure, pure_dof)
        } else {
            0.0
        })
        .max(weighted_noise(&raw).powi(2))
        .max(floor * floor);
    let deltas: Vec<f64> = fits.iter().map(|m| (rss(m) - best) / sigma2).collect();
    let total: f64 = deltas.iter().map(|d| (-d / 2.0).exp()).sum();
    fits.iter()
        .zip(deltas)
        .map(|(m, delta)| ClassEvidence {
            class: m.class,
            delta,
            weight: (-delta / 2.0).exp() / total,
            plausible: delta <= 2.0 * EVIDENCE_RATIO.ln(),
        })
        .collect()
}

/// The plausible classes, least growth first, with any class between two plausible ones
/// added (a shape between two that fit cannot be excluded by fitting worse than both).
pub(super) fn plausible_set(evidence: &[ClassEvidence]) -> Vec<Complexity> {
    let ok: Vec<Complexity> = evidence
        .iter()
        .filter(|e| e.plausible)
        .map(|e| e.class)
        .collect();
    let (Some(lo), Some(hi)) = (ok.iter().min(), ok.iter().max()) else {
        return Vec::new();
    };
    evidence
        .iter()
        .map(|e| e.class)
        .filter(|c| c >= lo && c <= hi)
        .collect()
}

impl Scaling {
    /// Where a set of several classes would part: the least N above the largest measured
    /// (from 1.25 times it, up to [`PARTING_SEARCH`] times) at which the fits of the set's
    /// least and most growing class differ by [`parting_gap`]: one size measured there as
    /// well as the others would exclude one of them by the evidence rule (a point that far
    /// from a model adds `2 ln EVIDENCE_RATIO` to its AIC difference). None for a set of one,
    /// fewer than three sizes, or no parting within the search. Rounded to two significant
    /// digits: it is a size to run, not a measurement.
    pub fn parts_at(&self) -> Option<u64> {
        if self.classes.len() < 2 || self.points.len() < 3 {
            return None;
        }
        let model = |c: &Complexity| self.candidates.iter().find(|m| m.class == *c);
        let (lo, hi) = (model(self.classes.first()?)?, model(self.classes.last()?)?);
        let gap = parting_gap(self).ln_1p();
        let top = self.points.last()?.n;
        let mut n = top * 1.25;
        while n <= top * PARTING_SEARCH {
            let (a, b) = (lo.eval(n), hi.eval(n));
            if a > 0.0 && b > 0.0 && (b / a).ln().abs() >= gap {
                let unit = 10f64.powf(n.log10().floor() - 1.0);
                return Some(((n / unit).ceil() * unit) as u64);
            }
            n *= 1.05;
        }
        None
    }
}

/// How far beyond the largest measured N [`Scaling::parts_at`] looks.
pub const PARTING_SEARCH: f64 = 1e4;

/// The relative difference between two fits that one more size excludes one of them by:
/// `√(2 ln EVIDENCE_RATIO)` times the error of a point, taken as the largest of the fit's
/// scatter, the points' own errors and [`MIN_REL_ERROR`].
pub fn parting_gap(s: &Scaling) -> f64 {
    let sigma = s
        .points
        .iter()
        .filter_map(|p| p.rel_se)
        .fold(s.model.nrms.max(MIN_REL_ERROR), f64::max);
    (2.0 * EVIDENCE_RATIO.ln()).sqrt() * sigma
}

/// The relative variance between runs of one size (pooled over the sizes measured more than
/// once): the error no model can explain, and its degrees of freedom. 0 without repeated
/// sizes.
fn pure_error(raw: &[Point]) -> (f64, f64) {
    let (mut ss, mut dof) = (0.0, 0usize);
    let mut i = 0;
    while i < raw.len() {
        let j = raw[i..].iter().take_while(|p| p.n == raw[i].n).count() + i;
        if j - i >= 2 {
            let m = raw[i..j].iter().map(|p| p.t).sum::<f64>() / (j - i) as f64;
            ss += raw[i..j]
                .iter()
                .map(|p| ((p.t - m) / m).powi(2))
                .sum::<f64>();
            dof += j - i - 1;
        }
        i = j;
    }
    if dof == 0 {
        (0.0, 0.0)
    } else {
        (ss / dof as f64, dof as f64)
    }
}
