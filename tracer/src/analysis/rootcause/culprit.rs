//! Choosing the frames a root cause names: the pass-through frames below the anchor, the
//! culprit (by added time, or by share growth), the frames beside it or splitting the added
//! time, the dominant frame at a single size, and which known loop each is.

use crate::plan::known_loop;

use super::profiles::Profiles;
use super::{
    DESCEND_FRACTION, Description, FrameGrowth, MIN_SAMPLES, OUTSIDE_FRAME, SELF_FRAME,
    SPLIT_SHARE, TIME_SHARE,
};

/// A frame with at least this share at every N is a pass-through.
const PASS_THROUGH: f64 = 0.99;

/// The frames below the anchor that hold (almost) all of its time at every N, e.g.
/// `do_wait -> __do_wait`: the search for a culprit starts below them.
pub(super) fn pass_through(p: &Profiles) -> Vec<String> {
    let mut prefix: Vec<String> = Vec::new();
    loop {
        let kids = p.ranked(&prefix);
        let through = kids.iter().find(|k| {
            !k.is_self()
                && k.path.last().is_some_and(|f| f != OUTSIDE_FRAME)
                && k.shares.iter().all(|(_, s)| *s >= PASS_THROUGH)
        });
        match through {
            Some(k) => prefix = k.path.clone(),
            None => return prefix,
        }
    }
}

/// The added-time rule: the frame below `prefix` that carries the largest part of the target's
/// added time per call, at least [`TIME_SHARE`] of it and clear of sampling noise, followed
/// down while one child carries [`DESCEND_FRACTION`] of its parent's added time.
pub(super) fn time_culprit(p: &Profiles, prefix: &[String]) -> Option<FrameGrowth> {
    let top = |at: &[String]| p.ranked(at).into_iter().next();
    let mut cur = top(prefix).filter(|g| {
        g.added
            .is_some_and(|a| a.clear() && a.fraction >= TIME_SHARE)
    })?;
    while !cur.is_self() {
        let kids = p.children(&cur.path);
        // A leaf's self time is the leaf itself: nothing to descend into.
        if kids.len() == 1 && kids.contains_key(SELF_FRAME) {
            break;
        }
        let parent = cur.added.map_or(0.0, |a| a.ns);
        match top(&cur.path) {
            Some(k)
                if k.added
                    .is_some_and(|a| a.clear() && a.ns >= DESCEND_FRACTION * parent) =>
            {
                cur = k
            }
            _ => break,
        }
    }
    Some(cur)
}

/// The share rule, when the target's time per call is unknown: the frame whose share grows
/// most (clear of sampling noise), followed down while one child carries [`DESCEND_FRACTION`]
/// of its growth.
pub(super) fn share_culprit(p: &Profiles, ranking: &[FrameGrowth]) -> Option<FrameGrowth> {
    let mut cur = ranking.iter().find(|b| b.grows()).cloned()?;
    while !cur.is_self() {
        let kids = p.ranked(&cur.path);
        // A leaf's self time is the leaf itself: nothing to descend into.
        if kids.len() == 1 && kids[0].is_self() {
            break;
        }
        match kids.into_iter().next() {
            Some(k) if k.grows() && k.growth >= DESCEND_FRACTION * cur.growth => cur = k,
            _ => break,
        }
    }
    Some(cur)
}

/// The other top-level frames worth naming: with the added-time rule, those that carry at
/// least [`SPLIT_SHARE`] of the added time (beside a culprit, or splitting it without one);
/// with the share rule, those whose share also grows beside the culprit.
pub(super) fn parts(
    ranking: &[FrameGrowth],
    culprit: Option<&FrameGrowth>,
    pass_through: &[String],
    attributes: bool,
) -> Vec<FrameGrowth> {
    let culprit_top = culprit.and_then(|c| c.path.get(pass_through.len()));
    let others = ranking.iter().filter(|g| g.path.last() != culprit_top);
    if attributes {
        others
            .filter(|g| g.added.is_some_and(|a| a.fraction >= SPLIT_SHARE))
            .take(if culprit.is_some() { 3 } else { 4 })
            .cloned()
            .collect()
    } else if culprit.is_some() {
        others.filter(|g| g.grows()).take(3).cloned().collect()
    } else {
        vec![]
    }
}

/// From `prefix`, follow the heaviest child while it holds at least half of the time (of the
/// first size) and, when the sample count is known, [`MIN_SAMPLES`] samples. None when no child
/// below `prefix` does.
pub(super) fn dominant_path(p: &Profiles, prefix: &[String]) -> Option<FrameGrowth> {
    let enough = |share: f64| {
        share >= 0.5
            && p.counts
                .first()
                .copied()
                .flatten()
                .is_none_or(|k| share * k as f64 >= MIN_SAMPLES as f64)
    };
    let mut cur: Option<FrameGrowth> = None;
    loop {
        let at: Vec<String> = cur.as_ref().map_or(prefix.to_vec(), |c| c.path.clone());
        if cur.as_ref().is_some_and(|c| c.is_self()) {
            return cur;
        }
        let kids = p.child_growths(&at);
        let only_child = kids.len() == 1;
        let heaviest = kids.into_iter().max_by(|a, b| {
            a.first()
                .1
                .total_cmp(&b.first().1)
                .then(b.path.cmp(&a.path))
        });
        match heaviest {
            Some(h) if enough(h.first().1) => {
                // A leaf's only child is its self time: the leaf itself is the answer.
                if h.is_self() && cur.is_some() && only_child {
                    return cur;
                }
                cur = Some(h);
            }
            _ => return cur,
        }
    }
}

/// Which loop the culprit is: a known loop when the culprit frame is one; when it is a callee
/// of one, the callee with the loop it was called from (a callee is not necessarily
/// per-iteration work: wait_consider_task -> release_task reaps one child, it does not walk
/// them); else the target's own loop, else what kind of frame it is.
pub(super) fn describe(target: &str, c: &FrameGrowth) -> Description {
    let frames: Vec<&String> = c
        .path
        .iter()
        .filter(|f| *f != SELF_FRAME && *f != OUTSIDE_FRAME)
        .collect();
    if let Some(last) = frames.last() {
        if let Some(k) = known_loop(last) {
            return Description::Loop(k);
        }
        if let Some((caller, what)) = frames
            .iter()
            .rev()
            .find_map(|f| known_loop(f).map(|k| (f, k)))
        {
            return Description::CalledFrom {
                callee: last.to_string(),
                caller: caller.to_string(),
                what,
            };
        }
    } else if c.path.len() == 1
        && c.is_self()
        && let Some(k) = known_loop(target)
    {
        return Description::Loop(k);
    }
    if c.is_self() {
        let frame = if c.path.len() == 1 { target } else { c.frame() };
        Description::SelfTime(frame.to_string())
    } else if c.frame() == OUTSIDE_FRAME {
        Description::Outside
    } else {
        Description::Faster(c.frame().to_string())
    }
}

/// Without a culprit: the known loops among the frames that clearly split the added time.
pub(super) fn split_loops(parts: &[FrameGrowth]) -> Option<Description> {
    let mut known: Vec<&'static str> = Vec::new();
    for g in parts.iter().filter(|g| g.added.is_some_and(|a| a.clear())) {
        if let Some(k) = g.path.iter().rev().find_map(|f| known_loop(f))
            && !known.contains(&k)
        {
            known.push(k);
        }
    }
    (!known.is_empty()).then_some(Description::Loops(known))
}
