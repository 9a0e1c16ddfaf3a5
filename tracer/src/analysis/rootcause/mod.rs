//! Root cause: which frame under a target carries the time the target adds as N grows.
//!
//! For each N the on-CPU stacks are cut at the target's frame ([`Anchors`]); every frame below
//! it gets its *share* of the target's time at that N (inclusive, so a callee and its own
//! callees count together). "self" (stacks that end in the frame) is a candidate too, because
//! the loop lives in the target itself when its callee was inlined.
//!
//! **Added-time attribution (the primary rule).** A frame's time per call at N is its share
//! times the target's *measured* time per call at N (the span histograms are exact, samples
//! are not): the value the verdict fits, the calls' robust centre, so that the root cause finds
//! added time exactly where the verdict sees growth. Between the smallest and the largest usable N the target adds `Δt = t₁ − t₀` per
//! call; a frame adds `Δf = s₁·t₁ − s₀·t₀`, and carries `Δf / Δt` of the target's added time.
//! Its sampling noise is the binomial standard error of each share (`√(q(1−q)/k)` with k the
//! samples at that N, q kept one sample inside 0 and 1, so an absent frame is not certain to
//! be absent) times that N's time per call, combined over the two sizes. The culprit is the
//! frame below the target (after pass-through frames, e.g. `do_wait -> __do_wait`) that
//! carries the largest part of the added time, at least [`TIME_SHARE`] of it, by more than
//! [`GROWTH_SE`] standard errors; the search then descends into the child that carries at
//! least [`DESCEND_FRACTION`] of its parent's added time, so the line names the deepest frame
//! that still explains the growth. This blames a loop that already dominates at the smallest
//! usable N (its share barely moves while its time per call grows tenfold), and it does not
//! blame a frame whose share grows while its absolute time stays small. When no frame carries
//! a clear majority the line lists the frames that split the added time. A target whose time
//! per call grows by less than [`TIME_GROWTH`] has no added time to attribute.
//!
//! **Share growth (supporting detail, and the fallback without a time per call).** A frame's
//! share growth is the least-squares slope of share against log₁₀ N, times the decades swept.
//! The culprit's line shows its share at the smallest and largest N. When the target's time per
//! call is unknown (neither measured nor derivable from the calls) the older rule names the
//! frame whose share grows by at least [`MIN_GROWTH`] and [`GROWTH_SE`] standard errors.
//!
//! Only sizes with at least [`MIN_SAMPLES`] samples take part: a sampler at ~1 kHz catches a
//! few µs-long call at small N a handful of times, and one sample makes a frame's share 0% or
//! 100%. The line says when some sizes were left out, and says "too few stack samples" when
//! no size has enough; with one usable size it says where the time goes there.
//!
//! Where the frame has no sample at some N its time there is below one sample's share, shown
//! as an upper bound (`<66ns`). The reported slope is the log-log exponent of the frame's time
//! per call over the sizes where it was seen: a per-element loop body under an O(n) walk has
//! slope ≈ 1.
//!
//! Layout: this file holds the result types and [`root_cause`], which runs the steps;
//! `profiles` the per-N trees and their growth math; `culprit` the choice of frames and which
//! known loop (from each target's entry in [`crate::plan`]) they are. The sentences are
//! written by `render::rootcause`.

mod culprit;
mod profiles;

use serde::Serialize;

use super::stacks::Anchors;
use crate::plan::known_loop;
use crate::rundata::Folded;
use profiles::{Profiles, frame_slope, frame_times};

/// Least fitted share change over the sweep (0.10 = 10 percentage points) that names a frame.
pub const MIN_GROWTH: f64 = 0.10;
/// A child must carry this part of its parent's growth for the search to descend into it.
pub const DESCEND_FRACTION: f64 = 0.6;
/// Least growth of the target's time per call (smallest to largest N) for the added-time rule.
pub const TIME_GROWTH: f64 = 0.2;
/// Part of the target's added time per call a frame must carry to be blamed by that rule.
pub const TIME_SHARE: f64 = 0.5;
/// Least part of the added time for a frame to be listed beside the culprit, or in a split.
pub const SPLIT_SHARE: f64 = 0.1;
/// Standard errors of sampling noise a frame's added time (or share growth) must exceed.
pub const GROWTH_SE: f64 = 2.0;
/// Fewest stack samples (or off-CPU episodes) at one N for that N to take part.
pub const MIN_SAMPLES: u64 = 5;
/// Name of the pseudo-frame "time spent in the frame itself".
pub const SELF_FRAME: &str = "(self)";
/// Name of the pseudo-frame for stacks in which the target's frame was not found.
pub const OUTSIDE_FRAME: &str = "(no target frame)";
/// The stacks of one target at one N. Give one per N of the sweep, empty where nothing was
/// sampled, so the line can say which sizes lacked samples.
#[derive(Clone, Debug)]
pub struct StacksAtN {
    pub n: u64,
    pub stacks: Folded,
    /// The target's calls at this N, to turn stack weight into time per call when
    /// `ns_per_call` is unknown.
    pub calls: Option<u64>,
    /// Samples (or off-CPU episodes) behind `stacks`; None when unknown (taken as enough).
    pub samples: Option<u64>,
    /// The target's measured time per call at this N, of the kind the stacks show (for on-CPU
    /// stacks the fitted robust centre when the verdict fits on-CPU time, else the on-CPU
    /// mean; the off-CPU mean for off-CPU stacks).
    pub ns_per_call: Option<f64>,
}

impl StacksAtN {
    fn usable(&self) -> bool {
        self.n > 0 && self.stacks.total() > 0 && self.samples.is_none_or(|k| k >= MIN_SAMPLES)
    }
}

/// How one frame's share changed over the sweep.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct FrameGrowth {
    /// Frames from just below the anchor down to this frame; a trailing [`SELF_FRAME`] means
    /// the self time of the frame before it.
    pub path: Vec<String>,
    /// (N, share of the target's time) for each N, smallest N first.
    pub shares: Vec<(u64, f64)>,
    /// Fitted change in share per decade of N.
    pub per_decade: f64,
    /// Fitted change in share from the smallest to the largest N.
    pub growth: f64,
    /// Standard error of `growth` from the sampling (binomial) error of each share, when the
    /// sample counts are known.
    pub growth_se: Option<f64>,
    /// Its part of the target's added time per call, when the target's time per call is known.
    pub added: Option<AddedTime>,
}

/// A frame's part of the target's added time per call, smallest to largest usable N.
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct AddedTime {
    /// The frame's time per call at the smallest and the largest N (share × target's time).
    pub from_ns: f64,
    pub to_ns: f64,
    /// `to_ns − from_ns`.
    pub ns: f64,
    /// Standard error of `ns` from the shares' sampling noise (0 when the counts are unknown).
    pub se_ns: f64,
    /// `ns` over the target's added time per call (0 when the target adds none).
    pub fraction: f64,
    /// Standard error of `fraction`.
    pub fraction_se: f64,
}

impl AddedTime {
    /// Adds time by more than [`GROWTH_SE`] standard errors of sampling noise.
    pub fn clear(&self) -> bool {
        self.ns > 0.0 && self.ns > GROWTH_SE * self.se_ns
    }
}

impl FrameGrowth {
    pub fn first(&self) -> (u64, f64) {
        self.shares[0]
    }

    pub fn last(&self) -> (u64, f64) {
        self.shares[self.shares.len() - 1]
    }

    /// The frame itself (the last real frame of the path).
    pub fn frame(&self) -> &str {
        let mut it = self.path.iter().rev();
        match it.next() {
            Some(f) if f == SELF_FRAME => it.next().map_or(SELF_FRAME, |s| s.as_str()),
            Some(f) => f,
            None => SELF_FRAME,
        }
    }

    pub fn is_self(&self) -> bool {
        self.path.last().is_some_and(|f| f == SELF_FRAME)
    }

    /// Grows by at least [`MIN_GROWTH`], and by [`GROWTH_SE`] standard errors when known.
    pub fn grows(&self) -> bool {
        self.growth >= MIN_GROWTH
            && self
                .growth_se
                .is_none_or(|se| self.growth >= GROWTH_SE * se)
    }
}

/// The culprit frame's time per call at one N.
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct FrameTime {
    pub n: u64,
    pub ns_per_call: f64,
    /// The frame had no sample at this N: `ns_per_call` is an upper bound (one sample's share).
    pub upper_bound: bool,
}

/// What a root cause found, as data; `render::rootcause` writes its sentence and its JSON
/// (which carries that sentence, so the type is serialized there).
#[derive(Clone, Debug, PartialEq)]
pub struct RootCause {
    pub target: String,
    pub case_name: String,
    /// The matched frame with the most weight when it is not the target (or a clone of it):
    /// the plan's stand-in, e.g. `copy_process` for an inlined dup_mmap.
    pub stand_in: Option<String>,
    /// True when no stack contained the target's frame and whole stacks were analysed.
    pub whole_stack: bool,
    /// (N, samples) of every size given, smallest first (None: count unknown).
    pub samples: Vec<(u64, Option<u64>)>,
    /// The sizes the analysis used (enough samples).
    pub sizes_used: Vec<u64>,
    /// Pass-through frames skipped below the anchor.
    pub pass_through: Vec<String>,
    /// The frame to blame, when one's share grows.
    pub culprit: Option<FrameGrowth>,
    /// The culprit was found by its added time per call ([`TIME_SHARE`]), not by share growth
    /// (the fallback when the target's time per call is unknown).
    pub culprit_by_time: bool,
    /// The target's time per call at the smallest and largest size used, when known.
    pub target_ns: Option<(f64, f64)>,
    /// Without a culprit although the target's time grows: the frames that split its added
    /// time (each at least [`SPLIT_SHARE`]), largest first.
    pub split: Vec<FrameGrowth>,
    /// Beside a culprit: the other top-level frames that carry at least [`SPLIT_SHARE`] of the
    /// added time (or, by the share rule, whose share also grows), largest first.
    pub also: Vec<FrameGrowth>,
    /// With one usable size only: the frame that holds most (≥ 50%) of the time there,
    /// followed down while one child does.
    pub dominant: Option<FrameGrowth>,
    /// The culprit's time per call at each size used, when the target's time is known.
    pub culprit_times: Vec<FrameTime>,
    /// Log-log slope of the culprit's time per call over the sizes where it was seen.
    pub slope: Option<f64>,
    /// Which loop the culprit (or the dominant frame, or the split) is.
    pub description: Option<Description>,
    /// Candidates below the target (after pass-through frames): by added time per call when the
    /// target's time per call is known, else by share growth.
    pub ranking: Vec<FrameGrowth>,
    /// The stacks are off-CPU ones (time blocked), not on-CPU samples; set by the caller.
    pub off_cpu: bool,
}

/// What the culprit is, in terms of the targets' known loops ([`crate::plan::Target::loops`]).
#[derive(Clone, Debug, PartialEq)]
pub enum Description {
    /// The frame is (part of) a known loop: what that loop is.
    Loop(&'static str),
    /// The frame is not a known loop but is called from one.
    CalledFrom {
        callee: String,
        caller: String,
        what: &'static str,
    },
    /// Self time of this frame (the target's when the culprit is the anchor's own time): a
    /// loop in the frame itself.
    SelfTime(String),
    /// Time in stacks without the target's frame grows.
    Outside,
    /// Time in this frame grows faster than the rest of the target.
    Faster(String),
    /// No culprit: the known loops among the frames that clearly split the added time.
    Loops(Vec<&'static str>),
    /// The self time of `frame` grows as the loop counted in `outer` (calls of `inner` per
    /// call, log-log slope `count_slope`) does: a fixed cost per trip of that loop, not a
    /// loop of its own ([`crate::analysis::analyze`] replaces a [`Self::SelfTime`] with it).
    PerTrip {
        frame: String,
        outer: String,
        inner: String,
        count_slope: f64,
    },
}

impl RootCause {
    fn new(target: &str, case_name: &str, all: &[&StacksAtN], usable: &[&StacksAtN]) -> Self {
        RootCause {
            target: target.to_string(),
            case_name: case_name.to_string(),
            stand_in: None,
            whole_stack: false,
            samples: all
                .iter()
                .map(|s| (s.n, s.samples.or((s.stacks.total() == 0).then_some(0))))
                .collect(),
            sizes_used: usable.iter().map(|s| s.n).collect(),
            pass_through: vec![],
            culprit: None,
            culprit_by_time: false,
            target_ns: None,
            split: vec![],
            also: vec![],
            dominant: None,
            culprit_times: vec![],
            slope: None,
            description: None,
            ranking: vec![],
            off_cpu: false,
        }
    }

    /// The target's time per call grows by [`TIME_GROWTH`]: the added-time rule applies.
    pub fn attributes(&self) -> bool {
        profiles::attributes(self.target_ns)
    }

    /// Stack samples over the sizes used, when counted at every one.
    pub fn used_samples(&self) -> Option<u64> {
        self.samples
            .iter()
            .filter(|(n, _)| self.sizes_used.contains(n))
            .map(|(_, c)| *c)
            .sum()
    }
}

/// Find the frame whose share of `target`'s time grows with N in one case of the sweep. None
/// when no size has stacks; a cause without culprit (whose line says so) when fewer than two
/// sizes have [`MIN_SAMPLES`] samples.
pub fn root_cause(
    target: &str,
    case_name: &str,
    anchors: &Anchors,
    samples: &[StacksAtN],
) -> Option<RootCause> {
    let mut all: Vec<&StacksAtN> = samples.iter().filter(|s| s.n > 0).collect();
    all.sort_by_key(|s| s.n);
    all.dedup_by_key(|s| s.n);
    if all.iter().all(|s| s.stacks.total() == 0) {
        return None;
    }
    let usable: Vec<&StacksAtN> = all.iter().copied().filter(|s| s.usable()).collect();
    let mut cause = RootCause::new(target, case_name, &all, &usable);
    if usable.is_empty() {
        return Some(cause);
    }
    let (profiles, cut) = Profiles::build(&usable, anchors);
    cause.whole_stack = cut.whole_stack;
    if !cut.whole_stack {
        // The matched frame with the most weight (the target itself, or its stand-in).
        let best = cut.anchor_weights.iter().max_by_key(|(_, w)| **w);
        cause.stand_in = best
            .map(|(name, _)| name.clone())
            .filter(|name| name.split('.').next() != Some(target));
    }
    cause.pass_through = culprit::pass_through(&profiles);
    if usable.len() == 1 {
        // One size with enough samples: growth cannot be measured, but where the time goes
        // at that size still narrows the search.
        let dominant = culprit::dominant_path(&profiles, &cause.pass_through);
        // Only the frame's own name describes it here: nothing says a loop above it grew.
        cause.description = dominant
            .as_ref()
            .and_then(|d| known_loop(d.frame()))
            .map(Description::Loop);
        cause.dominant = dominant;
        return Some(cause);
    }
    cause.ranking = profiles.ranked(&cause.pass_through);
    cause.target_ns = profiles.target_ns();
    let attributes = profiles.attributes();
    let culprit = if attributes {
        culprit::time_culprit(&profiles, &cause.pass_through)
    } else if cause.target_ns.is_none() {
        culprit::share_culprit(&profiles, &cause.ranking)
    } else {
        None
    };
    let parts = culprit::parts(
        &cause.ranking,
        culprit.as_ref(),
        &cause.pass_through,
        attributes,
    );
    match culprit {
        Some(c) => {
            cause.culprit_times = frame_times(&usable, &c);
            cause.slope = frame_slope(&cause.culprit_times);
            cause.description = Some(culprit::describe(target, &c));
            cause.culprit_by_time = attributes;
            cause.also = parts;
            cause.culprit = Some(c);
        }
        None => {
            cause.description = culprit::split_loops(&parts);
            cause.split = parts;
        }
    }
    Some(cause)
}
