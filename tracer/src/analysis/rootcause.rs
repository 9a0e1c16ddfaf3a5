//! Root cause: which frame under a target takes a growing share of its time as N grows.
//!
//! For each N the on-CPU stacks are cut at the target's frame ([`Anchors`]); every frame below
//! it gets its *share* of the target's time at that N (inclusive, so a callee and its own
//! callees count together). A frame's growth is the least-squares slope of share against
//! log₁₀ N, times the decades swept: the fitted change in share from the smallest to the
//! largest N. "self" (stacks that end in the frame) is a candidate too, because the loop lives
//! in the target itself when its callee was inlined.
//!
//! The search starts below the target, skips frames that hold all the time at every N (pure
//! pass-through, e.g. `do_wait -> __do_wait`), ranks the children by growth, and then follows
//! the winner down while one of its children carries most (≥ 60%) of its growth, so the line
//! names the deepest frame that still explains the trend. Growth under [`MIN_GROWTH`] means
//! no frame's share grows: the time is spread as at small N.
//!
//! The reported slope is the log-log exponent of the frame's own time per call (its stack
//! weight divided by the target's calls at that N) against N: a per-element loop body under
//! an O(n) walk has slope ≈ 1.

use std::collections::BTreeMap;

use serde::Serialize;

use super::stacks::{Anchors, Folded};
use super::stats::ols;

/// Least fitted share change over the sweep (0.10 = 10 percentage points) that names a frame.
pub const MIN_GROWTH: f64 = 0.10;
/// A child must carry this part of its parent's growth for the search to descend into it.
pub const DESCEND_FRACTION: f64 = 0.6;
/// A frame with at least this share at every N is a pass-through.
const PASS_THROUGH: f64 = 0.99;
/// Name of the pseudo-frame "time spent in the frame itself".
pub const SELF_FRAME: &str = "(self)";
/// Name of the pseudo-frame for stacks in which the target's frame was not found.
pub const OUTSIDE_FRAME: &str = "(no target frame)";

/// The on-CPU stacks of one target at one N.
#[derive(Clone, Debug)]
pub struct StacksAtN {
    pub n: u64,
    pub stacks: Folded,
    /// The target's calls at this N, to turn stack weight into time per call.
    pub calls: Option<u64>,
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
}

#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct RootCause {
    pub target: String,
    /// What the stacks were cut at: the matched frame (the target, or the plan's stand-in).
    pub anchor: String,
    /// True when no stack contained the target's frame and whole stacks were analysed.
    pub whole_stack: bool,
    /// Pass-through frames skipped below the anchor.
    pub pass_through: Vec<String>,
    /// The frame to blame, when one's share grows.
    pub culprit: Option<FrameGrowth>,
    /// Its log-log slope of time per call against N.
    pub slope: Option<f64>,
    /// Plain-language description of the loop.
    pub description: Option<String>,
    /// Other candidates at the level where the culprit was chosen, by growth.
    pub ranking: Vec<FrameGrowth>,
    pub line: String,
}

/// Per-N trees of the restricted stacks: path below the anchor -> weight.
struct Profiles {
    ns: Vec<u64>,
    /// One per N: (path relative to the anchor, weight).
    stacks: Vec<Vec<(Vec<String>, u64)>>,
    totals: Vec<u64>,
}

impl Profiles {
    /// Children of `prefix` at every N: child frame -> weight per N ([`SELF_FRAME`] included).
    fn children(&self, prefix: &[String]) -> BTreeMap<String, Vec<u64>> {
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
            path,
            shares,
            per_decade,
            growth: per_decade * decades,
        }
    }

    fn ranked(&self, prefix: &[String]) -> Vec<FrameGrowth> {
        let mut v: Vec<FrameGrowth> = self
            .children(prefix)
            .into_iter()
            .map(|(child, w)| {
                let mut path = prefix.to_vec();
                path.push(child);
                self.growth(path, &w)
            })
            .collect();
        v.sort_by(|a, b| b.growth.total_cmp(&a.growth).then(a.path.cmp(&b.path)));
        v
    }
}

/// Find the frame whose share of `target`'s time grows with N. None with fewer than two N that
/// have stacks.
pub fn root_cause(target: &str, anchors: &Anchors, samples: &[StacksAtN]) -> Option<RootCause> {
    let mut samples: Vec<&StacksAtN> = samples
        .iter()
        .filter(|s| s.n > 0 && s.stacks.total() > 0)
        .collect();
    samples.sort_by_key(|s| s.n);
    samples.dedup_by_key(|s| s.n);
    if samples.len() < 2 {
        return None;
    }
    let restricted: Vec<_> = samples.iter().map(|s| s.stacks.restrict(anchors)).collect();
    let whole_stack = restricted.iter().all(|r| r.below.is_empty());
    let mut anchor_weights: BTreeMap<String, u64> = BTreeMap::new();
    let mut profiles = Profiles {
        ns: samples.iter().map(|s| s.n).collect(),
        stacks: Vec::new(),
        totals: Vec::new(),
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
    let anchor = if whole_stack {
        format!("{target} [whole stack]")
    } else {
        // The matched frame with the most weight (the target itself, or its stand-in).
        let best = anchor_weights
            .iter()
            .max_by_key(|(_, w)| **w)
            .map(|(n, _)| n.clone());
        match best {
            Some(name) if name.split('.').next() == Some(target) => target.to_string(),
            Some(name) => format!("{target} [via {name}]"),
            None => target.to_string(),
        }
    };

    // Skip pass-through frames.
    let mut prefix: Vec<String> = Vec::new();
    loop {
        let kids = profiles.ranked(&prefix);
        let through = kids.iter().find(|k| {
            !k.is_self()
                && k.path.last().is_some_and(|f| f != OUTSIDE_FRAME)
                && k.shares.iter().all(|(_, s)| *s >= PASS_THROUGH)
        });
        match through {
            Some(k) => prefix = k.path.clone(),
            None => break,
        }
    }
    let pass_through = prefix.clone();
    let ranking = profiles.ranked(&prefix);
    let best = ranking.first().filter(|b| b.growth >= MIN_GROWTH).cloned();

    let culprit = best.map(|mut cur| {
        while !cur.is_self() {
            let kids = profiles.ranked(&cur.path);
            // A leaf's self time is the leaf itself: nothing to descend into.
            if kids.len() == 1 && kids[0].is_self() {
                break;
            }
            match kids.into_iter().next() {
                Some(k) if k.growth >= MIN_GROWTH && k.growth >= DESCEND_FRACTION * cur.growth => {
                    cur = k
                }
                _ => break,
            }
        }
        cur
    });

    let slope = culprit
        .as_ref()
        .and_then(|c| frame_slope(&profiles, samples.as_slice(), c));
    let description = culprit.as_ref().map(|c| describe(target, c));
    let line = match &culprit {
        Some(c) => {
            let (n0, s0) = c.first();
            let (n1, s1) = c.last();
            let slope_txt = slope.map_or(String::new(), |s| format!(", slope {s:.1}"));
            // Other frames at the culprit's level that grow too (per-element work is often
            // spread over several callees, as in dup_mmap).
            let culprit_top = c.path.get(pass_through.len());
            let also: Vec<String> = ranking
                .iter()
                .filter(|g| g.growth >= MIN_GROWTH && g.path.last() != culprit_top)
                .take(3)
                .map(|g| format!("{} {:+.0} pts", frame_label(&anchor, g), g.growth * 100.0))
                .collect();
            let also = if also.is_empty() {
                String::new()
            } else {
                format!(" (also growing: {})", also.join(", "))
            };
            format!(
                "{}: {} at N={n0} -> {} at N={n1}{slope_txt}: {}{also}",
                display_path(&anchor, &pass_through, c),
                pct(s0),
                pct(s1),
                description.as_deref().unwrap_or("")
            )
        }
        None => {
            let n0 = profiles.ns[0];
            let n1 = profiles.ns[profiles.ns.len() - 1];
            match ranking.first() {
                Some(top) => format!(
                    "{anchor}: no frame's share grows with N (largest change: {} {:+.0} pts from N={n0} to N={n1})",
                    frame_label(&anchor, top),
                    top.growth * 100.0
                ),
                None => format!("{anchor}: no frame's share grows with N"),
            }
        }
    };
    Some(RootCause {
        target: target.to_string(),
        anchor,
        whole_stack,
        pass_through,
        culprit,
        slope,
        description,
        ranking,
        line,
    })
}

/// A frame's name for text: `frame`, or `frame (self)` for self time.
fn frame_label(anchor: &str, g: &FrameGrowth) -> String {
    match (g.is_self(), g.path.len()) {
        (true, 1) => format!("{anchor} (self)"),
        (true, _) => format!("{} (self)", g.frame()),
        _ => g.frame().to_string(),
    }
}

fn pct(s: f64) -> String {
    let p = s * 100.0;
    if p > 0.0 && p < 1.0 {
        format!("{p:.1}%")
    } else {
        format!("{p:.0}%")
    }
}

/// `anchor -> [… ->] pass -> through -> culprit -> chain`, eliding long pass-through runs.
fn display_path(anchor: &str, pass_through: &[String], c: &FrameGrowth) -> String {
    let mut parts: Vec<String> = vec![anchor.to_string()];
    if pass_through.len() > 2 {
        parts.push("…".to_string());
        parts.extend(pass_through[pass_through.len() - 2..].iter().cloned());
    } else {
        parts.extend(pass_through.iter().cloned());
    }
    let own = &c.path[pass_through.len().min(c.path.len())..];
    for f in own {
        if f == SELF_FRAME {
            let last = parts.pop().unwrap_or_default();
            parts.push(format!("{last} (self)"));
        } else {
            parts.push(f.clone());
        }
    }
    parts.join(" -> ")
}

/// Log-log slope of the culprit's time per call (or, without call counts, of its weight).
fn frame_slope(p: &Profiles, samples: &[&StacksAtN], c: &FrameGrowth) -> Option<f64> {
    let mut x = Vec::new();
    let mut y = Vec::new();
    for (i, s) in samples.iter().enumerate() {
        let share = c.shares[i].1;
        let w = share * p.totals[i] as f64;
        let per_call = match s.calls {
            Some(calls) if calls > 0 => w / calls as f64,
            _ => w,
        };
        if per_call > 0.0 {
            x.push((s.n as f64).ln());
            y.push(per_call.ln());
        }
    }
    ols(&x, &y).map(|f| f.slope)
}

/// Known loops: frame name (or `prefix*`) -> what the loop is.
pub const KNOWN_LOOPS: &[(&str, &str)] = &[
    ("wait_consider_task", "the walk over the children list"),
    ("do_wait_thread", "the walk over the children list"),
    ("ptrace_do_wait", "the walk over the ptraced children list"),
    ("__do_wait", "the walk over the children list"),
    ("do_wait", "the walk over the children list"),
    (
        "__mt_dup",
        "the maple-tree copy of the VMA tree in dup_mmap",
    ),
    ("mas_*", "maple-tree work per VMA in dup_mmap"),
    ("mt_*", "maple-tree work per VMA in dup_mmap"),
    ("mtree_*", "maple-tree work per VMA in dup_mmap"),
    ("vma_iter_*", "maple-tree work per VMA in dup_mmap"),
    (
        "vm_area_dup",
        "copying each vm_area_struct, per VMA in dup_mmap",
    ),
    (
        "anon_vma_fork",
        "cloning each VMA's anon_vma chain, per VMA in dup_mmap",
    ),
    (
        "copy_page_range",
        "copying each VMA's page tables, per VMA in dup_mmap",
    ),
    ("dup_mmap", "the per-VMA loop in dup_mmap"),
    ("dup_mm", "the per-VMA loop in dup_mmap"),
    (
        "idr_get_next",
        "the id scan in /proc/sysvipc (sysvipc_find_ipc)",
    ),
    (
        "idr_get_next_ul",
        "the id scan in /proc/sysvipc (sysvipc_find_ipc)",
    ),
    (
        "radix_tree_next_chunk",
        "the id scan in /proc/sysvipc (sysvipc_find_ipc)",
    ),
    (
        "idr_find",
        "the id scan in /proc/sysvipc (sysvipc_find_ipc)",
    ),
    ("sysvipc_find_ipc", "the id scan in /proc/sysvipc"),
    ("sysvipc_proc_start", "the id scan in /proc/sysvipc"),
    ("sysvipc_proc_next", "the id scan in /proc/sysvipc"),
];

/// Description of a known loop frame (compiler clone suffixes ignored).
pub fn known_loop(frame: &str) -> Option<&'static str> {
    let base = frame.split('.').next().unwrap_or(frame);
    KNOWN_LOOPS.iter().find_map(|(pat, desc)| {
        let hit = match pat.strip_suffix('*') {
            Some(prefix) => base.starts_with(prefix),
            None => base == *pat,
        };
        hit.then_some(*desc)
    })
}

/// What to call the culprit: the deepest known frame on its path, else the target's entry,
/// else a generic sentence.
fn describe(target: &str, c: &FrameGrowth) -> String {
    let known = c
        .path
        .iter()
        .rev()
        .filter(|f| *f != SELF_FRAME && *f != OUTSIDE_FRAME)
        .find_map(|f| known_loop(f))
        .or_else(|| {
            if c.path.len() == 1 && c.is_self() {
                known_loop(target)
            } else {
                None
            }
        });
    if let Some(k) = known {
        return k.to_string();
    }
    if c.is_self() {
        let frame = if c.path.len() == 1 { target } else { c.frame() };
        format!("a loop in {frame} itself (its callees are inlined or it walks a structure)")
    } else if c.frame() == OUTSIDE_FRAME {
        format!("time in stacks without a {target} frame grows (check the attach plan)")
    } else {
        format!(
            "time in {} grows faster than the rest of {target}",
            c.frame()
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const NS: [u64; 6] = [10, 100, 500, 1000, 4000, 8000];

    /// do_wait with a fixed cost of 1000 ns per call (wait_task_zombie + release) and a walk
    /// costing 5 ns per child in wait_consider_task: the walk's share goes 5% -> 98%.
    fn do_wait_profile(with_walk: bool) -> Vec<StacksAtN> {
        NS.iter()
            .map(|&n| {
                let calls = 100u64;
                let walk = if with_walk { 5 * n * calls } else { 50 * calls };
                let text = format!(
                    "entry_SYSCALL_64;do_syscall_64;__do_sys_wait4;kernel_wait4;do_wait;do_wait_thread;wait_consider_task {walk}\n\
                     entry_SYSCALL_64;do_syscall_64;__do_sys_wait4;kernel_wait4;do_wait;do_wait_thread;wait_consider_task;wait_task_zombie;release_task {}\n\
                     entry_SYSCALL_64;do_syscall_64;__do_sys_wait4;kernel_wait4;do_wait;do_wait_thread {}\n",
                    700 * calls,
                    300 * calls,
                );
                StacksAtN { n, stacks: Folded::parse(&text).unwrap(), calls: Some(calls) }
            })
            .collect()
    }

    #[test]
    fn names_the_growing_callee() {
        let rc = root_cause(
            "do_wait",
            &Anchors::new("do_wait", None),
            &do_wait_profile(true),
        )
        .unwrap();
        let c = rc.culprit.as_ref().expect("a culprit");
        assert_eq!(rc.anchor, "do_wait");
        assert_eq!(rc.pass_through, vec!["do_wait_thread"]);
        // wait_consider_task inclusive grows, but the walk itself is its self time.
        assert_eq!(c.frame(), "wait_consider_task", "{c:?}");
        assert!(c.first().1 < 0.2 && c.last().1 > 0.9, "{:?}", c.shares);
        assert!(rc.line.contains("wait_consider_task"), "{}", rc.line);
        assert!(
            rc.line.contains("the walk over the children list"),
            "{}",
            rc.line
        );
        assert!(
            rc.line
                .starts_with("do_wait -> do_wait_thread -> wait_consider_task"),
            "{}",
            rc.line
        );
        // Its time per call grows linearly (the fixed part below it drags it slightly).
        let slope = rc.slope.unwrap();
        assert!((0.6..=1.1).contains(&slope), "slope {slope}");
    }

    #[test]
    fn says_so_when_nothing_grows() {
        let rc = root_cause(
            "do_wait",
            &Anchors::new("do_wait", None),
            &do_wait_profile(false),
        )
        .unwrap();
        assert!(rc.culprit.is_none(), "{:?}", rc.culprit);
        assert!(rc.line.contains("no frame's share grows"), "{}", rc.line);
    }

    #[test]
    fn self_time_of_the_target_can_be_the_loop() {
        // dup_mmap with its callees inlined: the per-VMA loop shows as dup_mmap's self time.
        let samples: Vec<StacksAtN> = NS
            .iter()
            .map(|&n| {
                let text = format!(
                    "copy_process;dup_mm;dup_mmap {}\ncopy_process;dup_mm;dup_mmap;kmem_cache_alloc 2000\ncopy_process;copy_files 3000\n",
                    20 * n
                );
                StacksAtN { n, stacks: Folded::parse(&text).unwrap(), calls: Some(1) }
            })
            .collect();
        let rc = root_cause("dup_mmap", &Anchors::new("dup_mmap", None), &samples).unwrap();
        let c = rc.culprit.unwrap();
        assert!(c.is_self(), "{c:?}");
        assert!(rc.line.starts_with("dup_mmap (self):"), "{}", rc.line);
        assert!(rc.line.contains("per-VMA loop"), "{}", rc.line);
        // A stack without the dup_mmap frame still counts in the target's time (the sampler
        // only fires inside the target), under its own pseudo-frame.
        assert!(
            (c.last().1 - 160_000.0 / 165_000.0).abs() < 1e-9,
            "{:?}",
            c.shares
        );
        assert!(rc.ranking.iter().any(|g| g.frame() == OUTSIDE_FRAME));
    }

    #[test]
    fn stand_in_anchor_and_whole_stack_fallback() {
        // dup_mmap inlined into copy_process: the plan measured copy_process.
        let plan = crate::rundata::PlanUsed {
            plan: "callers-kprobe".into(),
            mechanism: "kprobe/kretprobe".into(),
            attach_points: vec!["copy_process".into()],
            timed: true,
            note: String::new(),
        };
        let samples: Vec<StacksAtN> = NS
            .iter()
            .map(|&n| {
                let text = format!(
                    "x;kernel_clone;copy_process;anon_vma_fork {}\nx;kernel_clone;copy_process;vm_area_dup {}\nx;kernel_clone;copy_process;copy_creds 5000\n",
                    10 * n,
                    3 * n
                );
                StacksAtN { n, stacks: Folded::parse(&text).unwrap(), calls: None }
            })
            .collect();
        let rc = root_cause("dup_mmap", &Anchors::new("dup_mmap", Some(&plan)), &samples).unwrap();
        assert_eq!(rc.anchor, "dup_mmap [via copy_process]");
        assert_eq!(rc.culprit.as_ref().unwrap().frame(), "anon_vma_fork");
        assert!(rc.line.contains("anon_vma chain"), "{}", rc.line);
        assert_eq!(rc.ranking[1].frame(), "vm_area_dup");
        let also = rc
            .line
            .split("(also growing: vm_area_dup +")
            .nth(1)
            .expect("vm_area_dup also grows");
        let pts: f64 = also.trim_end_matches(" pts)").parse().unwrap();
        assert!((15.0..=30.0).contains(&pts), "{}", rc.line);
        // Without the plan nothing matches: whole stacks, pass-through frames skipped.
        let rc = root_cause("dup_mmap", &Anchors::new("dup_mmap", None), &samples).unwrap();
        assert!(rc.whole_stack);
        assert_eq!(rc.pass_through, vec!["x", "kernel_clone", "copy_process"]);
        assert_eq!(rc.culprit.unwrap().frame(), "anon_vma_fork");
        assert!(
            rc.line
                .contains("… -> kernel_clone -> copy_process -> anon_vma_fork"),
            "{}",
            rc.line
        );
    }

    #[test]
    fn needs_two_sizes() {
        let one = &do_wait_profile(true)[..1];
        assert!(root_cause("do_wait", &Anchors::new("do_wait", None), one).is_none());
    }

    #[test]
    fn known_loop_table() {
        assert_eq!(
            known_loop("mas_store_gfp"),
            Some("maple-tree work per VMA in dup_mmap")
        );
        assert_eq!(
            known_loop("wait_consider_task.isra.0"),
            Some("the walk over the children list")
        );
        assert_eq!(known_loop("schedule"), None);
    }
}
