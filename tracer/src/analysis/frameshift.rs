//! Where the added time moved between two kernels: for a target and case sampled on both
//! sides, each frame below the target gets its share of the target's *added* time per call
//! (smallest to largest N of that side), and the frames whose share changed most are named.
//! A kernel fix shows as its loop's share falling ("mas_store: 28% on 6.1, 5% on 6.12" for
//! `__mt_dup` in 6.8), where the scaling classes alone would read "O(n) -> O(n)".
//!
//! A frame's share of the added time is `(s1·t1 − s0·t0) / (t1 − t0)`: `s` its inclusive
//! share of the target's on-CPU samples and `t` the target's time per call, at the smallest
//! and largest N. When the target's time does not grow on one side there is no added time
//! to share, and both sides are compared by the share of the samples at their largest N
//! instead ([`ShareBasis`]). Frames are compared by name without compiler-clone suffixes, so
//! `copy_pte_range.isra.0` on one kernel meets `copy_pte_range` on the other.

use std::collections::{BTreeMap, BTreeSet};

use serde::Serialize;

use super::analyze::Analysis;
use super::stacks::StackData;
use super::stacks::{Anchors, clone_base};
use super::table::CaseTable;
use crate::rundata::StackKind;

/// Least change in share (both sides' shares being fractions) worth naming.
pub const MIN_SHIFT: f64 = 0.10;
/// Samples needed at each size used, on each side, for shares to mean anything.
pub const MIN_SHIFT_SAMPLES: u64 = 50;
/// Growth of the time per call (largest over smallest N) for "added time" to exist.
const MIN_GROWTH_RATIO: f64 = 1.2;
/// Frames named per target and case.
const MAX_SHIFTS: usize = 5;

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum ShareBasis {
    /// Share of the target's added time per call.
    AddedTime,
    /// Share of the target's samples at the largest N (no added time on a side).
    SamplesAtLargestN,
}

impl ShareBasis {
    pub fn text(self) -> &'static str {
        match self {
            ShareBasis::AddedTime => "of the added time",
            ShareBasis::SamplesAtLargestN => "of the samples at the largest N",
        }
    }
}

/// One frame whose share changed between side A and side B.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct FrameShift {
    pub target: String,
    pub case_name: String,
    pub frame: String,
    pub basis: ShareBasis,
    /// Shares on each side, as fractions (an added-time share can leave 0..1).
    pub a: f64,
    pub b: f64,
}

impl FrameShift {
    pub fn change(&self) -> f64 {
        self.b - self.a
    }
}

/// One side's shares for one target and case.
struct Side {
    /// Frame -> (share at the smallest N, share at the largest N).
    shares: BTreeMap<String, (f64, f64)>,
    /// Time per call at the smallest and largest N.
    times: (f64, f64),
}

impl Side {
    fn grows(&self) -> bool {
        self.times.0 > 0.0 && self.times.1 >= self.times.0 * MIN_GROWTH_RATIO
    }

    fn share(&self, frame: &str, basis: ShareBasis) -> f64 {
        let (s0, s1) = self.shares.get(frame).copied().unwrap_or((0.0, 0.0));
        match basis {
            ShareBasis::AddedTime => {
                let (t0, t1) = self.times;
                (s1 * t1 - s0 * t0) / (t1 - t0)
            }
            ShareBasis::SamplesAtLargestN => s1,
        }
    }
}

/// The frames whose share changed most from `a` to `b`, per target and case sampled on both.
pub fn frame_shifts(a: &Analysis, b: &Analysis) -> Vec<FrameShift> {
    let mut out = Vec::new();
    for ta in a.cases().map(|c| &c.table) {
        let Some(tb) = b
            .cases()
            .map(|c| &c.table)
            .find(|t| t.target == ta.target && t.case_name == ta.case_name)
        else {
            continue;
        };
        let (Some(sa), Some(sb)) = (side(a, ta), side(b, tb)) else {
            continue;
        };
        let basis = if sa.grows() && sb.grows() {
            ShareBasis::AddedTime
        } else {
            ShareBasis::SamplesAtLargestN
        };
        let frames: BTreeSet<&String> = sa.shares.keys().chain(sb.shares.keys()).collect();
        let mut shifts: Vec<FrameShift> = frames
            .into_iter()
            .map(|f| FrameShift {
                target: ta.target.clone(),
                case_name: ta.case_name.clone(),
                frame: f.clone(),
                basis,
                a: sa.share(f, basis),
                b: sb.share(f, basis),
            })
            .filter(|s| s.change().abs() >= MIN_SHIFT)
            .collect();
        shifts.sort_by(|x, y| {
            y.change()
                .abs()
                .total_cmp(&x.change().abs())
                .then(x.frame.cmp(&y.frame))
        });
        shifts.truncate(MAX_SHIFTS);
        out.extend(shifts);
    }
    out
}

/// Shares and times of one side's table, or None without enough on-CPU samples at any size.
fn side(an: &Analysis, t: &CaseTable) -> Option<Side> {
    let run = an.runs.iter().find(|r| r.label == t.run)?;
    let anchors = Anchors::new(&t.target, run.plan_of(&t.target));
    let stacks_at = |n: u64| {
        run.stacks.iter().find(|s| {
            s.file.kind == StackKind::Oncpu
                && s.file.target == t.target
                && s.file.case_name == t.case_name
                && s.file.n == n
                && s.file.count >= MIN_SHIFT_SAMPLES
        })
    };
    // The smallest and largest N with a time per call and enough samples.
    let usable: Vec<(f64, &StackData)> = t
        .rows
        .iter()
        .filter_map(|r| Some((r.time_per_call_ns?, stacks_at(r.n)?)))
        .collect();
    // With enough samples at one size only (the sampler's rate under emulation varies
    // several-fold between runs), that size's shares stand for both ends: no added time, so
    // the comparison falls back to the shares of the samples at the largest N.
    let (first, last) = (usable.first()?, usable.last()?);
    let (s0, s1) = (
        inclusive_shares(first.1, &anchors),
        inclusive_shares(last.1, &anchors),
    );
    let mut shares = BTreeMap::new();
    for f in s0.keys().chain(s1.keys()) {
        let v = (
            s0.get(f).copied().unwrap_or(0.0),
            s1.get(f).copied().unwrap_or(0.0),
        );
        shares.insert(f.clone(), v);
    }
    Some(Side {
        shares,
        times: (first.0, last.0),
    })
}

/// Each frame below the target's frame: the share of the target's samples whose stack
/// contains it (once per stack, however often it recurs).
fn inclusive_shares(s: &StackData, anchors: &Anchors) -> BTreeMap<String, f64> {
    let below = s.folded.restrict(anchors).below;
    let total = below.total();
    let mut weights: BTreeMap<String, u64> = BTreeMap::new();
    if total == 0 {
        return BTreeMap::new();
    }
    for (frames, w) in below.iter() {
        let distinct: BTreeSet<String> = frames.iter().skip(1).map(|f| clone_base(f)).collect();
        for f in distinct {
            *weights.entry(f).or_insert(0) += w;
        }
    }
    weights
        .into_iter()
        .map(|(f, w)| (f, w as f64 / total as f64))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn side(shares: &[(&str, f64, f64)], times: (f64, f64)) -> Side {
        Side {
            shares: shares
                .iter()
                .map(|&(f, a, b)| (f.to_string(), (a, b)))
                .collect(),
            times,
        }
    }

    #[test]
    fn added_time_share_weights_each_end_by_the_time_per_call() {
        // 10% of 1 µs, then 30% of 11 µs: (3.3 − 0.1) / 10 = 32% of the added time.
        let s = side(&[("mas_store", 0.10, 0.30)], (1000.0, 11000.0));
        assert!(s.grows());
        assert!((s.share("mas_store", ShareBasis::AddedTime) - 0.32).abs() < 1e-9);
        assert_eq!(s.share("mas_store", ShareBasis::SamplesAtLargestN), 0.30);
        assert_eq!(s.share("absent", ShareBasis::AddedTime), 0.0);
        assert!(!side(&[], (1000.0, 1100.0)).grows());
    }
}
