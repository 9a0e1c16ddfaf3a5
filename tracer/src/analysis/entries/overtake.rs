//! Where a loop that grows faster than a heavier entry passes it: two power laws fitted
//! over the largest sizes, and the N at which they meet (an extrapolation, said to be one).

use serde::Serialize;

use super::{CLASS_SIZES, Entries, KernelEntry};

/// Where a loop that grows faster passes a heavier entry's time per op.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Overtake {
    /// The heavier entry, and whether it is a loop (else: more calls).
    pub other: String,
    pub other_is_loop: bool,
    /// Both time-per-op exponents (log-log slope over the largest sizes).
    pub slope: f64,
    pub other_slope: f64,
    /// The N at which the two power laws meet.
    pub n: f64,
}

/// The sizes, from the largest down, the overtake's power laws are fitted over: the growth
/// that decides where two curves meet is the one at large N, not a baseline at small N.
pub const OVERTAKE_SIZES: usize = 3;
/// The loop's exponent must exceed the other's by this much to be said to overtake it.
pub const MIN_OVERTAKE_SLOPE_GAP: f64 = 0.3;

/// Time per op (ns) at each N, of a loop (its top frame) or of a whole entry.
fn per_op(e: &KernelEntry, frame: bool) -> Vec<(f64, f64)> {
    match (frame, e.top()) {
        (true, Some(g)) => g
            .points
            .iter()
            .zip(&e.points)
            .map(|(g, p)| (p.n as f64, g.incl_ns * p.calls_per_op))
            .collect(),
        _ => e
            .points
            .iter()
            .map(|p| (p.n as f64, p.per_call_ns * p.calls_per_op))
            .collect(),
    }
}

/// `t = c·N^k` through the largest [`OVERTAKE_SIZES`] sizes: (ln c, k).
fn power_law(pts: &[(f64, f64)]) -> Option<(f64, f64)> {
    let tail = &pts[pts.len().saturating_sub(OVERTAKE_SIZES)..];
    if tail.len() < CLASS_SIZES || tail.iter().any(|&(n, t)| n <= 0.0 || t <= 0.0) {
        return None;
    }
    let x: Vec<f64> = tail.iter().map(|p| p.0.ln()).collect();
    let y: Vec<f64> = tail.iter().map(|p| p.1.ln()).collect();
    let line = crate::analysis::stats::ols(&x, &y)?;
    Some((line.intercept, line.slope))
}

/// The first loop against the heaviest entry (another loop, or more calls) whose time per op
/// at the largest N exceeds its own: where their power laws meet, when the loop's grows
/// faster by [`MIN_OVERTAKE_SLOPE_GAP`]. An extrapolation, and said to be one.
pub(super) fn overtake(en: &Entries) -> Option<Overtake> {
    let head = en.loops.first()?;
    let (c, k) = power_law(&per_op(head, true))?;
    let weight = head.weight_per_op();
    let others = en
        .loops
        .iter()
        .skip(1)
        .map(|e| (e, true))
        .chain(en.more_calls.iter().map(|e| (e, false)))
        .filter(|(e, _)| e.entry != head.entry);
    let (other, is_loop, _) = others
        .map(|(e, is_loop)| {
            let pts = per_op(e, is_loop);
            let last = pts.last().map_or(0.0, |p| p.1);
            (e, is_loop, last)
        })
        .filter(|x| x.2 > weight)
        .max_by(|a, b| a.2.total_cmp(&b.2))?;
    let (oc, ok) = power_law(&per_op(other, is_loop))?;
    if k - ok < MIN_OVERTAKE_SLOPE_GAP {
        return None;
    }
    let n = ((oc - c) / (k - ok)).exp();
    n.is_finite().then(|| Overtake {
        other: other.entry.clone(),
        other_is_loop: is_loop,
        slope: k,
        other_slope: ok,
        n,
    })
}
