//! The change of an exact loop count between two sides of a compare: what decides a growth
//! change the time's interval left open (`compare::compare`).

use serde::Serialize;

use super::analyze::CaseResult;
use super::compare::{Change, GrowthChange, MIN_GROWTH_CHANGE};

/// A loop count inside the target on both sides: its trips per call at the largest over the
/// smallest common N.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct CountChange {
    pub inner: String,
    pub growth_a: f64,
    pub growth_b: f64,
}

/// Most the count's growth may differ between the sides for the loop to be the same: runs of
/// one kernel counted 1.69-1.90 (mempolicy forks over N = 1..4000) and 34.7-41.1 (a spawn's
/// get_task_policy in dup_mmap) trips per call at the largest N over the smallest.
pub const SAME_COUNT_MARGIN: f64 = 0.223; // ln 1.25

/// The change an exact loop count shows where the time's interval left it open: a count
/// that gave either side its class ([`super::verdict::Verdict::by_loop`]), counted on both sides at the
/// common sizes, whose growth changed by [`MIN_GROWTH_CHANGE`] or more, with the time's
/// interval on the same side of zero (the time moved the count's way, by less than the
/// margin can show). 5.10 -> 6.1's waitpid(pid) over N = 125..1000 on a loaded host: the
/// time x5.07 -> x0.88, interval [-2.93, -0.56]; its walk 125 -> 985 children per call
/// against 1.49 -> 1.48.
///
/// `same` when the count's growth is equal within [`SAME_COUNT_MARGIN`] on both sides and
/// the time does not contradict it: its 95% interval holds no change and its estimate lies
/// within the margin. A weaker claim than the time's own `same` (the loop runs as many
/// times; what each trip costs could still have changed by less than the time can show),
/// and the line says what it rests on. Under qemu one run per size leaves the time's
/// interval a log unit or more wide: 5.10 against 6.1's waitpid(-1), whose walk is
/// 4 -> 6002 children per call on both, read `inconclusive` from its time alone in each of
/// three `cargo xtask run`s.
pub(super) fn count_change(
    ca: &CaseResult,
    cb: &CaseResult,
    g: &GrowthChange,
) -> Option<(Change, CountChange)> {
    let inner = &[&ca.verdict, &cb.verdict]
        .iter()
        .find_map(|v| v.by_loop.as_ref())?
        .inner;
    let (lo, hi) = g.n_range?;
    let growth = |c: &CaseResult| {
        let t = c.trips.iter().find(|t| &t.inner == inner)?;
        let at = |n: u64| t.points.iter().find(|p| p.n == n).map(|p| p.per_call);
        let (l, h) = (at(lo)?, at(hi)?);
        (l > 0.0).then(|| h / l)
    };
    let (growth_a, growth_b) = (growth(ca)?, growth(cb)?);
    let d = (growth_b / growth_a).ln();
    let (lo_ci, hi_ci) = g.interval?;
    let time = g.log_change?;
    let change = if d <= -MIN_GROWTH_CHANGE && hi_ci < 0.0 {
        Change::Shrank
    } else if d >= MIN_GROWTH_CHANGE && lo_ci > 0.0 {
        Change::Grew
    } else if d.abs() <= SAME_COUNT_MARGIN
        && lo_ci <= 0.0
        && hi_ci >= 0.0
        && time.abs() <= MIN_GROWTH_CHANGE
    {
        Change::Same
    } else {
        return None;
    };
    Some((
        change,
        CountChange {
            inner: inner.clone(),
            growth_a,
            growth_b,
        },
    ))
}
