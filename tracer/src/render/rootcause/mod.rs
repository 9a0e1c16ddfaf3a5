//! Root-cause sentences: the one line a [`RootCause`] is shown as (terminal, report.txt,
//! README.md, index.html, the tables) and its JSON, which carries that line beside the data.

use serde::{Serialize, Serializer};

use crate::analysis::rootcause::{
    AddedTime, Description, FrameGrowth, FrameTime, MIN_GROWTH, MIN_SAMPLES, RootCause, SELF_FRAME,
    SPLIT_SHARE, TIME_GROWTH,
};

use super::fmt::ns;

/// `target [case]`, or the target alone.
fn key(rc: &RootCause) -> String {
    if rc.case_name.is_empty() {
        rc.target.clone()
    } else {
        format!("{} [{}]", rc.target, rc.case_name)
    }
}

/// What the stacks were cut at: `do_wait [case]`, `dup_mmap [case, via copy_process]`, or
/// `dup_mmap [case, whole stack]`.
pub fn anchor(rc: &RootCause) -> String {
    let case_part = if rc.case_name.is_empty() {
        String::new()
    } else {
        format!("{}, ", rc.case_name)
    };
    match &rc.stand_in {
        _ if rc.whole_stack => format!("{} [{case_part}whole stack]", rc.target),
        Some(name) => format!("{} [{case_part}via {name}]", rc.target),
        None => key(rc),
    }
}

/// The loop in plain words, when the analysis knows which it is.
pub fn description(rc: &RootCause) -> Option<String> {
    let target = &rc.target;
    Some(match rc.description.as_ref()? {
        Description::Loop(what) => what.to_string(),
        Description::CalledFrom {
            callee,
            caller,
            what,
        } => format!("{callee}, called from {caller} ({what})"),
        Description::SelfTime(frame) => {
            format!("a loop in {frame} itself (its callees are inlined or it walks a structure)")
        }
        Description::Outside => {
            format!("time in stacks without a {target} frame grows (check the attach plan)")
        }
        Description::Faster(frame) => {
            format!("time in {frame} grows faster than the rest of {target}")
        }
        Description::Loops(loops) => loops.join("; "),
        Description::PerTrip {
            frame,
            outer,
            inner,
            count_slope,
        } => format!(
            "a fixed cost per trip of the loop counted in {outer} ({inner} calls per call; this \
             frame's slope {} against the count's {count_slope:.2}), not a loop in {frame} itself",
            rc.slope.map_or("?".to_string(), |s| format!("{s:.1}"))
        ),
    })
}

/// The root-cause line: `target [case]: ` and the claim, or, where a frame carries the time,
/// the path to it and its share.
pub fn line(rc: &RootCause) -> String {
    let mut line = match (rc.sizes_used.as_slice(), &rc.culprit, &rc.dominant) {
        ([n], _, Some(d)) => format!(
            "{}: {} at N={n}{}{}",
            display_path(&anchor(rc), &rc.pass_through, d),
            share(d.first().1),
            description(rc).map_or(String::new(), |t| format!(": {t}")),
            growth_not_measured(rc, *n)
        ),
        ([n0, .., n1], Some(c), _) => culprit_line(rc, c, *n0, *n1),
        ([], ..) => format!("{}: {}", key(rc), claim(rc)),
        _ => format!("{}: {}", anchor(rc), claim(rc)),
    };
    line.push_str(off_cpu_note(rc));
    line
}

/// What the line says after its `target [case]: ` head where no frame carries the time (no
/// culprit, nothing dominant): too few samples, no frame holding most of it, the added time
/// split over many frames, or no added time to attribute. The summary table's cell.
pub fn claim(rc: &RootCause) -> String {
    match rc.sizes_used.as_slice() {
        [] => format!(
            "too few stack samples for a root cause ({}; needs {MIN_SAMPLES} at two sizes: more iterations or a higher --freq)",
            counts(rc, None)
        ),
        [n] => format!(
            "no frame holds most of the time at N={n}{}",
            growth_not_measured(rc, *n)
        ),
        [n0, .., n1] => match rc.target_ns {
            Some(t) if rc.attributes() => split_claim(rc, t, *n0, *n1),
            t => no_growth_claim(rc, t, *n0, *n1),
        },
    }
}

/// ` [off-CPU stacks: time blocked]` for a root cause read from where calls blocked.
pub fn off_cpu_note(rc: &RootCause) -> &'static str {
    if rc.off_cpu {
        " [off-CPU stacks: time blocked]"
    } else {
        ""
    }
}

/// `N=10: 0, N=100: 3, …` for every size but `only`.
fn counts(rc: &RootCause, only: Option<u64>) -> String {
    rc.samples
        .iter()
        .filter(|(n, _)| Some(*n) != only)
        .map(|(n, k)| match k {
            Some(k) => format!("N={n}: {k}"),
            None => format!("N={n}: ?"),
        })
        .collect::<Vec<_>>()
        .join(", ")
}

/// ` [growth not measured: ...]`: stacks at one size only, `n`.
fn growth_not_measured(rc: &RootCause, n: u64) -> String {
    let here = rc
        .samples
        .iter()
        .find(|(m, _)| *m == n)
        .and_then(|(_, k)| *k)
        .map_or(String::new(), |k| format!("{k} samples at N={n}, "));
    if rc.samples.len() > 1 {
        format!(
            " [growth not measured: {here}too few elsewhere ({})]",
            counts(rc, Some(n))
        )
    } else {
        " [growth not measured: one size only]".to_string()
    }
}

/// ` [from 162 samples at N=100..4000 only]`: which sizes and how many samples the line rests
/// on, when some sizes were left out or the samples were counted.
fn sizes_note(rc: &RootCause) -> String {
    let all: Vec<u64> = rc.samples.iter().map(|(n, _)| *n).collect();
    let used = &rc.sizes_used;
    match (used.len() < all.len(), rc.used_samples()) {
        (true, Some(k)) => format!(" [from {k} samples at {} only]", sizes_text(used, &all)),
        (true, None) => format!(" [from samples at {} only]", sizes_text(used, &all)),
        (false, Some(k)) => format!(" [from {k} samples]"),
        (false, None) => String::new(),
    }
}

/// A frame with its part of the added time, when known.
fn part_text(rc: &RootCause, g: &FrameGrowth) -> String {
    match g.added {
        Some(a) => format!("{} {}", frame_label(&rc.target, g), fraction_text(&a)),
        None => frame_label(&rc.target, g),
    }
}

fn culprit_line(rc: &RootCause, c: &FrameGrowth, n0: u64, n1: u64) -> String {
    let (_, s0) = c.first();
    let (_, s1) = c.last();
    let mut detail: Vec<String> = Vec::new();
    if let (Some(t0), Some(t1)) = (rc.culprit_times.first(), rc.culprit_times.last())
        && rc.culprit_times.len() == rc.sizes_used.len()
    {
        let bound = |t: &FrameTime| {
            if t.upper_bound {
                format!("<{}", ns(t.ns_per_call))
            } else {
                ns(t.ns_per_call)
            }
        };
        detail.push(format!("{} -> {} per call", bound(t0), bound(t1)));
    }
    detail.push(format!("N={n0}..{n1}"));
    if let Some(s) = rc.slope {
        detail.push(format!("slope {s:.1}"));
    }
    let description = description(rc).unwrap_or_default();
    let path = display_path(&anchor(rc), &rc.pass_through, c);
    let sizes_note = sizes_note(rc);
    match c.added.filter(|_| rc.culprit_by_time) {
        Some(a) => {
            let also = if rc.also.is_empty() {
                String::new()
            } else {
                let parts: Vec<String> = rc.also.iter().map(|g| part_text(rc, g)).collect();
                format!(" (also: {})", parts.join(", "))
            };
            // Above 100% (clear of noise): the rest of the call got cheaper as N grew,
            // which "carries 133%" alone leaves the reader to work out.
            let over = if a.fraction - 2.0 * a.fraction_se > 1.0 {
                "; more than all of it, as the rest of the call got cheaper"
            } else {
                ""
            };
            format!(
                "{path}: carries {} of the added time ({}){over}; share {} -> {}: {description}{also}{sizes_note}",
                fraction_text(&a),
                detail.join(", "),
                share(s0),
                share(s1),
            )
        }
        None => {
            // Share growth only (no time per call known).
            let also: Vec<String> = rc
                .also
                .iter()
                .map(|g| {
                    format!(
                        "{} {:+.0} pts",
                        frame_label(&rc.target, g),
                        g.growth * 100.0
                    )
                })
                .collect();
            let also = if also.is_empty() {
                String::new()
            } else {
                format!(" (also growing: {})", also.join(", "))
            };
            format!(
                "{path}: {} at N={n0} -> {} at N={n1} ({}): {description}{also}{sizes_note}",
                share(s0),
                share(s1),
                detail.join(", "),
            )
        }
    }
}

/// No culprit although the target's time grows: the frames that split the added time.
fn split_claim(rc: &RootCause, (t0, t1): (f64, f64), n0: u64, n1: u64) -> String {
    let head = format!(
        "no frame clearly carries most of the added time ({} -> {} per call, N={n0}..{n1})",
        ns(t0),
        ns(t1)
    );
    let parts = &rc.split;
    let clear = parts.iter().any(|g| g.added.is_some_and(|a| a.clear()));
    let list = parts
        .iter()
        .map(|g| part_text(rc, g))
        .collect::<Vec<_>>()
        .join(", ");
    let tail = match parts.len() {
        0 => format!(
            ": it is spread over many frames, none carrying {}",
            share(SPLIT_SHARE)
        ),
        1 if clear => format!(": the largest part is {list}"),
        1 => format!(": the largest part, {list}, is within sampling noise"),
        _ if clear => format!(": split between {list}"),
        _ => format!(": {list}, all within sampling noise"),
    };
    let description = description(rc).map_or(String::new(), |d| format!(": {d}"));
    format!("{head}{tail}{description}{}", sizes_note(rc))
}

/// No culprit and no added time to attribute (or no time per call to attribute it by).
fn no_growth_claim(rc: &RootCause, target_ns: Option<(f64, f64)>, n0: u64, n1: u64) -> String {
    let sizes_note = sizes_note(rc);
    // Over the sizes with stacks. When those are fewer than the sweep's, the verdict may see a
    // rise this cannot: the claim names its sizes before any detail, so that a shortened form
    // (the summary table's, which drops the parentheses) cannot read as the verdict's.
    let over = if rc.sizes_used.len() < rc.samples.len() {
        format!(" at the sizes with stacks, N={n0}..{n1}")
    } else {
        String::new()
    };
    match target_ns {
        // The verdict's fit may span more sizes and call a rise of this size a class, so
        // "does not grow" is kept for times that did not rise.
        Some((t0, t1)) if t1 > t0 => format!(
            "its time per call grows by less than {:.0}%{over} ({} -> {} per call, N={n0}..{n1}): too little added time to attribute{sizes_note}",
            TIME_GROWTH * 100.0,
            ns(t0),
            ns(t1)
        ),
        Some((t0, t1)) => format!(
            "its time per call does not grow{over} ({} -> {} per call, N={n0}..{n1}): no added time to attribute{sizes_note}",
            ns(t0),
            ns(t1)
        ),
        None => match rc.ranking.first() {
            Some(top) => format!(
                "no frame's share grows with N (largest change: {} {:+.0} pts from N={n0} to N={n1}{}){sizes_note}",
                frame_label(&rc.target, top),
                top.growth * 100.0,
                if top.growth >= MIN_GROWTH {
                    ", within sampling noise"
                } else {
                    ""
                }
            ),
            None => format!("no frame's share grows with N{sizes_note}"),
        },
    }
}

/// `N=100..4000` when `used` is a run of consecutive sizes of `all`, else `N=1, 100, 4000`.
fn sizes_text(used: &[u64], all: &[u64]) -> String {
    let contiguous = all.windows(used.len().max(1)).any(|w| w == used);
    match used {
        [a, .., b] if contiguous && used.len() > 2 => format!("N={a}..{b}"),
        _ => format!(
            "N={}",
            used.iter()
                .map(|n| n.to_string())
                .collect::<Vec<_>>()
                .join(", ")
        ),
    }
}

/// `75% ± 5` (one standard error of sampling noise; no bound when the counts are unknown).
fn fraction_text(a: &AddedTime) -> String {
    let f = format!("{:.0}%", a.fraction * 100.0);
    let se = a.fraction_se * 100.0;
    if se <= 0.0 {
        f
    } else if se < 1.0 {
        format!("{f} ± {se:.1}")
    } else {
        format!("{f} ± {se:.0}")
    }
}

/// A frame's name for text: `frame`, or `frame (self)` for self time.
fn frame_label(target: &str, g: &FrameGrowth) -> String {
    match (g.is_self(), g.path.len()) {
        (true, 1) => format!("{target} (self)"),
        (true, _) => format!("{} (self)", g.frame()),
        _ => g.frame().to_string(),
    }
}

/// A share as a whole percentage (one decimal under 1%): the line's precision, coarser than
/// the tables' [`super::fmt::pct`].
fn share(s: f64) -> String {
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

/// The JSON of a root cause (summary.json, tables/*.json): the data with the anchor, the
/// description and the line as the report prints them.
#[derive(Serialize)]
struct Json<'a> {
    target: &'a str,
    case_name: &'a str,
    anchor: String,
    whole_stack: bool,
    samples: &'a [(u64, Option<u64>)],
    sizes_used: &'a [u64],
    pass_through: &'a [String],
    culprit: &'a Option<FrameGrowth>,
    culprit_by_time: bool,
    target_ns: Option<(f64, f64)>,
    split: &'a [FrameGrowth],
    dominant: &'a Option<FrameGrowth>,
    culprit_times: &'a [FrameTime],
    slope: Option<f64>,
    description: Option<String>,
    ranking: &'a [FrameGrowth],
    line: String,
}

impl Serialize for RootCause {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        Json {
            target: &self.target,
            case_name: &self.case_name,
            anchor: anchor(self),
            whole_stack: self.whole_stack,
            samples: &self.samples,
            sizes_used: &self.sizes_used,
            pass_through: &self.pass_through,
            culprit: &self.culprit,
            culprit_by_time: self.culprit_by_time,
            target_ns: self.target_ns,
            split: &self.split,
            dominant: &self.dominant,
            culprit_times: &self.culprit_times,
            slope: self.slope,
            description: description(self),
            ranking: &self.ranking,
            line: line(self),
        }
        .serialize(s)
    }
}

#[cfg(test)]
mod tests;
