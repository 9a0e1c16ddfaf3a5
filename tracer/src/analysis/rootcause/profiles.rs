//! The per-N trees of a target's stacks below its anchor, and the growth math on them: each
//! frame's share at every N, its fitted share growth with its sampling error, and its part of
//! the target's added time per call.

use std::collections::BTreeMap;

use super::super::stacks::Anchors;
use super::super::stats::ols;
use super::{AddedTime, FrameGrowth, FrameTime, OUTSIDE_FRAME, SELF_FRAME, StacksAtN, TIME_GROWTH};

/// Per-N trees of the restricted stacks: path below the anchor -> weight.
pub(super) struct Profiles {
    ns: Vec<u64>,
    /// Samples behind each N's shares, when known.
    pub(super) counts: Vec<Option<u64>>,
    /// One per N: (path relative to the anchor, weight).
    stacks: Vec<Vec<(Vec<String>, u64)>>,
    totals: Vec<u64>,
    /// The target's time per call at each N, when known for every N.
    times: Option<Vec<f64>>,
}

/// Where the stacks were cut.
pub(super) struct Cut {
    /// No stack contained the anchor's frame: whole stacks were kept.
    pub(super) whole_stack: bool,
    /// Weight of each matched anchor frame (the target, its clones, or the plan's stand-in).
    pub(super) anchor_weights: BTreeMap<String, u64>,
}

impl Profiles {
    /// Cut each usable size's stacks at `anchors` (whole stacks when no size has the frame).
    pub(super) fn build(samples: &[&StacksAtN], anchors: &Anchors) -> (Profiles, Cut) {
        let restricted: Vec<_> = samples.iter().map(|s| s.stacks.restrict(anchors)).collect();
        let whole_stack = restricted.iter().all(|r| r.below.is_empty());
        let mut anchor_weights: BTreeMap<String, u64> = BTreeMap::new();
        let mut profiles = Profiles {
            ns: samples.iter().map(|s| s.n).collect(),
            counts: samples.iter().map(|s| s.samples).collect(),
            stacks: Vec::new(),
            totals: Vec::new(),
            // Measured, or (without a measurement) the stacks' weight over the calls.
            times: samples
                .iter()
                .map(|s| {
                    s.ns_per_call.or_else(|| {
                        s.calls
                            .filter(|c| *c > 0)
                            .map(|c| s.stacks.total() as f64 / c as f64)
                    })
                })
                .collect(),
        };
        for (s, r) in samples.iter().zip(&restricted) {
            let mut v: Vec<(Vec<String>, u64)> = Vec::new();
            if whole_stack {
                v.extend(s.stacks.iter().map(|(f, w)| (f.to_vec(), w)));
            } else {
                for (name, w) in &r.anchor_frames {
                    *anchor_weights.entry(name.clone()).or_insert(0) += w;
                }
                v.extend(r.below.iter().map(|(f, w)| (f[1..].to_vec(), w)));
                if r.outside_ns > 0 {
                    v.push((vec![OUTSIDE_FRAME.to_string()], r.outside_ns));
                }
            }
            profiles.totals.push(v.iter().map(|(_, w)| w).sum());
            profiles.stacks.push(v);
        }
        let cut = Cut {
            whole_stack,
            anchor_weights,
        };
        (profiles, cut)
    }

    /// Children of `prefix` at every N: child frame -> weight per N ([`SELF_FRAME`] included).
    pub(super) fn children(&self, prefix: &[String]) -> BTreeMap<String, Vec<u64>> {
        let mut out: BTreeMap<String, Vec<u64>> = BTreeMap::new();
        for (i, stacks) in self.stacks.iter().enumerate() {
            for (path, w) in stacks {
                if path.len() < prefix.len() || path[..prefix.len()] != *prefix {
                    continue;
                }
                let child = path.get(prefix.len()).map_or(SELF_FRAME, |s| s.as_str());
                out.entry(child.to_string())
                    .or_insert_with(|| vec![0; self.ns.len()])[i] += w;
            }
        }
        out
    }

    /// The growth of each child of `prefix`, unsorted.
    pub(super) fn child_growths(&self, prefix: &[String]) -> Vec<FrameGrowth> {
        self.children(prefix)
            .into_iter()
            .map(|(child, w)| {
                let mut path = prefix.to_vec();
                path.push(child);
                self.growth(path, &w)
            })
            .collect()
    }

    fn growth(&self, path: Vec<String>, weights: &[u64]) -> FrameGrowth {
        let shares: Vec<(u64, f64)> = self
            .ns
            .iter()
            .zip(weights)
            .zip(&self.totals)
            .map(|((n, w), t)| (*n, if *t > 0 { *w as f64 / *t as f64 } else { 0.0 }))
            .collect();
        let x: Vec<f64> = shares.iter().map(|(n, _)| (*n as f64).log10()).collect();
        let y: Vec<f64> = shares.iter().map(|(_, s)| *s).collect();
        let per_decade = ols(&x, &y).map_or(0.0, |f| f.slope);
        let decades = x.last().copied().unwrap_or(0.0) - x.first().copied().unwrap_or(0.0);
        FrameGrowth {
            growth_se: self.growth_se(&x, &y).map(|se| se * decades),
            added: self.added(&y),
            path,
            shares,
            per_decade,
            growth: per_decade * decades,
        }
    }

    /// The target's time per call at the smallest and the largest N, when known.
    pub(super) fn target_ns(&self) -> Option<(f64, f64)> {
        let t = self.times.as_ref()?;
        Some((*t.first()?, *t.last()?))
    }

    /// The target's time per call grows by [`TIME_GROWTH`]: there is added time to attribute.
    pub(super) fn attributes(&self) -> bool {
        attributes(self.target_ns())
    }

    /// A frame's part of the added time per call, from its shares `y` (one per N).
    fn added(&self, y: &[f64]) -> Option<AddedTime> {
        if y.len() < 2 {
            return None;
        }
        let (t0, t1) = self.target_ns()?;
        let (s0, s1) = (y[0], y[y.len() - 1]);
        // Binomial standard error of a share of k samples, in time per call.
        let se = |share: f64, k: Option<u64>, t: f64| match k {
            Some(k) if k > 0 => {
                let k = k as f64;
                let q = share.clamp(1.0 / k, 1.0 - 1.0 / k.max(2.0));
                (q * (1.0 - q) / k).sqrt() * t
            }
            _ => 0.0,
        };
        let k0 = self.counts.first().copied().flatten();
        let k1 = self.counts.last().copied().flatten();
        let se_ns = (se(s0, k0, t0).powi(2) + se(s1, k1, t1).powi(2)).sqrt();
        let (from_ns, to_ns) = (s0 * t0, s1 * t1);
        let target_added = t1 - t0;
        let (fraction, fraction_se) = if target_added > 0.0 {
            ((to_ns - from_ns) / target_added, se_ns / target_added)
        } else {
            (0.0, 0.0)
        };
        Some(AddedTime {
            from_ns,
            to_ns,
            ns: to_ns - from_ns,
            se_ns,
            fraction,
            fraction_se,
        })
    }

    /// Standard error of the least-squares slope of share against `x` when each share is a
    /// proportion of k samples: var = q(1 − q)/k, with q the larger of the share and the mean
    /// share (a frame absent at one N is not certain to be absent there), kept inside one
    /// sample of 0 and 1.
    fn growth_se(&self, x: &[f64], y: &[f64]) -> Option<f64> {
        let n = x.len() as f64;
        let mx = x.iter().sum::<f64>() / n;
        let mean_share = y.iter().sum::<f64>() / n;
        let sxx: f64 = x.iter().map(|v| (v - mx).powi(2)).sum();
        if sxx <= 0.0 {
            return None;
        }
        let mut var = 0.0;
        for ((xi, yi), k) in x.iter().zip(y).zip(&self.counts) {
            let k = (*k)?.max(1) as f64;
            let q = yi.max(mean_share).clamp(1.0 / k, 1.0 - 1.0 / k.max(2.0));
            var += (xi - mx).powi(2) * q * (1.0 - q) / k;
        }
        Some(var.sqrt() / sxx)
    }

    /// The children of `prefix`, by added time per call when there is added time to
    /// attribute, else by share growth.
    pub(super) fn ranked(&self, prefix: &[String]) -> Vec<FrameGrowth> {
        let mut v = self.child_growths(prefix);
        if self.attributes() {
            let key = |g: &FrameGrowth| g.added.map_or(f64::NEG_INFINITY, |a| a.ns);
            v.sort_by(|a, b| key(b).total_cmp(&key(a)).then(a.path.cmp(&b.path)));
        } else {
            v.sort_by(|a, b| b.growth.total_cmp(&a.growth).then(a.path.cmp(&b.path)));
        }
        v
    }
}

/// A time per call going from `t0` to `t1` grows by [`TIME_GROWTH`].
pub(super) fn attributes(target_ns: Option<(f64, f64)>) -> bool {
    target_ns.is_some_and(|(t0, t1)| t0 > 0.0 && t1 >= t0 * (1.0 + TIME_GROWTH))
}

/// The culprit's time per call at each size: its share of the target's measured time per call,
/// or (without it) its stack weight over the calls. Where the frame has no sample, one
/// sample's share bounds it from above. Empty when neither time nor calls are known.
pub(super) fn frame_times(samples: &[&StacksAtN], c: &FrameGrowth) -> Vec<FrameTime> {
    let mut out = Vec::new();
    for (s, (n, share)) in samples.iter().zip(&c.shares) {
        let total = s.stacks.total() as f64;
        let per_call = match (s.ns_per_call, s.calls) {
            (Some(t), _) => t,
            (None, Some(calls)) if calls > 0 => total / calls as f64,
            _ => return Vec::new(),
        };
        let (value, upper_bound) = if *share > 0.0 {
            (share * per_call, false)
        } else {
            let one = s.samples.filter(|k| *k > 0).map_or(0.0, |k| 1.0 / k as f64);
            (one * per_call, true)
        };
        out.push(FrameTime {
            n: *n,
            ns_per_call: value,
            upper_bound,
        });
    }
    out
}

/// Log-log slope of the frame's time per call over the sizes where it was seen (at least two).
pub(super) fn frame_slope(times: &[FrameTime]) -> Option<f64> {
    let seen: Vec<&FrameTime> = times
        .iter()
        .filter(|t| !t.upper_bound && t.ns_per_call > 0.0)
        .collect();
    let x: Vec<f64> = seen.iter().map(|t| (t.n as f64).ln()).collect();
    let y: Vec<f64> = seen.iter().map(|t| t.ns_per_call.ln()).collect();
    ols(&x, &y).map(|f| f.slope)
}
