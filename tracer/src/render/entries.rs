//! Sentences of a discovery's kernel entries: the kernel loops (an entry whose time per call
//! grows, and the frames inside it that carry the growth) and the more calls (the workload's
//! own scaling: entries made more often per op, each no dearer).

use super::fmt::{classes_and_slope, count, fmt_n, ns, pct};
use crate::analysis::discover::Discovery;
use crate::analysis::discover::Grower;
use crate::analysis::entries::{
    CommonSlowdown, EntryPoint, KernelEntry, MIN_GROWTH_BEYOND_COMMON, MIN_LOOP_GROWTH, Remedy,
};
use crate::analysis::exact::CountedLoop;
use crate::analysis::fit::FlatReason;
use crate::analysis::growers::FnPoint;

/// How many more-calls entries a line names.
const MORE_CALLS_NAMED: usize = 5;

fn calls_text(d: &Discovery, f: &EntryPoint, l: &EntryPoint) -> String {
    format!(
        "{} → {} calls per {}",
        count(f.calls_per_op),
        count(l.calls_per_op),
        d.per
    )
}

/// A loop's class read from counts: "O(n) by loop count: pipe_poll 100 → 3000 times per
/// do_sys_poll call", or, counted in the calls that run the loop, "... times per do_wait
/// call, in the 10% of calls with the most".
pub fn counted_loop_text(c: &CountedLoop) -> String {
    format!(
        "{} by loop count: {} {} → {} times per {} call{}",
        c.class.label(),
        c.inner,
        count(c.from.1),
        count(c.to.1),
        c.outer,
        if c.longest {
            format!(", {}", crate::render::fmt::longest_calls())
        } else {
            String::new()
        }
    )
}

/// A grower's class and the times it was fitted on, first and last size: "O(n), slope 1.02,
/// 1.09µs → 38.0µs"; for a class fitted on the self time (a walk in the frame's own body
/// beside a callee of fixed cost), those times marked self, and the inclusive ones after
/// them: "O(n), slope 0.71, 14.0µs → 233µs self (176µs → 358µs with its callees)".
pub fn growth_text(g: &Grower) -> String {
    let (f, l) = (&g.points[0], &g.points[g.points.len() - 1]);
    if f.samples == 0 {
        // Not a time of 0: below what the samples resolve (its fit starts at a later size).
        let none = format!("no sample at N={}", fmt_n(f.n as f64));
        return if g.fitted_on_self {
            format!(
                "{}, {none} → {} self ({} with its callees)",
                classes_and_slope(&g.scaling),
                ns(l.self_ns),
                ns(l.incl_ns)
            )
        } else {
            format!(
                "{}, {none} → {}",
                classes_and_slope(&g.scaling),
                ns(l.incl_ns)
            )
        };
    }
    if g.fitted_on_self {
        format!(
            "{}, {} → {} self ({} → {} with its callees)",
            classes_and_slope(&g.scaling),
            ns(f.self_ns),
            ns(l.self_ns),
            ns(f.incl_ns),
            ns(l.incl_ns)
        )
    } else {
        format!(
            "{}, {} → {}",
            classes_and_slope(&g.scaling),
            ns(f.incl_ns),
            ns(l.incl_ns)
        )
    }
}

/// What the frame inside a loop frame that carries the growth is: "the loop", or, where the
/// confirmation pass counted that frame's calls per call of the loop frame, "each trip" (the
/// loop is the frame's, the time is in what each trip calls: 5.10's sysvipc_find_ipc calling
/// __radix_tree_lookup through idr_find).
pub fn inner_role(d: &Discovery, frame: &str, inner: &str) -> &'static str {
    match d.counted.get(frame) {
        Some(c) if c.inner == inner && c.outer == frame => "each trip",
        _ => "the loop",
    }
}

/// "wait4: wait_consider_task O(n), slope 1.02, 1.09µs → 38.0µs per call over N=10..1000
/// (2.4% → 60.1% of wait4's time); wait4 45.1µs → 63.3µs per call, 614 → 1839 calls per
/// run, 6.3% of the kernel time at N=1000; the loop: __do_wait (self) 12%"
pub fn loop_line(d: &Discovery, e: &KernelEntry) -> String {
    let (f, l) = (e.first(), e.last());
    let mut s = format!("{}: ", e.entry);
    if let Some(g) = e.top() {
        let (gf, gl) = (&g.points[0], &g.points[g.points.len() - 1]);
        s.push_str(&format!(
            "{} {} per call over N={}..{} ({} → {} of {}'s time); ",
            g.function,
            growth_text(g),
            fmt_n(f.n as f64),
            fmt_n(l.n as f64),
            pct(gf.share.min(1.0)),
            pct(gl.share.min(1.0)),
            e.entry,
        ));
    }
    s.push_str(&format!(
        "{} {} → {} per call, {}, {} of the kernel time at N={}",
        e.entry,
        ns(f.per_call_ns),
        ns(l.per_call_ns),
        calls_text(d, f, l),
        pct(l.share.min(1.0)),
        fmt_n(l.n as f64),
    ));
    if let Some(c) = &e.cause
        && Some(c.function.as_str()) != e.frame()
    {
        s.push_str(&format!(
            "; {}: {} (self) {}",
            inner_role(d, e.frame().unwrap_or_default(), &c.function),
            c.function,
            pct(c.self_share.clamp(0.0, 1.0))
        ));
    }
    let others: Vec<String> = e
        .frames
        .iter()
        .skip(1)
        .take(2)
        .map(|g| format!("{} {}", g.function, g.scaling.classes_label()))
        .collect();
    if !others.is_empty() {
        s.push_str(&format!("; also growing inside it: {}", others.join(", ")));
    }
    s
}

/// "clone ×250 (12 → 3010 calls per run, 40.1µs → 38.2µs per call)"
pub fn more_calls_item(d: &Discovery, e: &KernelEntry) -> String {
    let (f, l) = (e.first(), e.last());
    // From the size its time per call was judged from, named when not the first.
    let base = e.per_call_base();
    let at = if base.n == f.n {
        String::new()
    } else {
        format!(" at N={}", fmt_n(base.n as f64))
    };
    let per_call = if l.samples > 0 {
        format!(
            ", {}{at} → {} per call",
            ns(base.per_call_ns),
            ns(l.per_call_ns)
        )
    } else {
        String::new()
    };
    format!(
        "{} ({}{per_call}, {} of the kernel time)",
        e.entry,
        calls_text(d, f, l),
        pct(l.share.min(1.0))
    )
}

/// The entries' common slowdown when it raised the bar for a loop (a factor above
/// `MIN_LOOP_GROWTH / MIN_GROWTH_BEYOND_COMMON`); None when it did not or was not measured.
fn judged_beyond(d: &Discovery) -> Option<&CommonSlowdown> {
    d.entries
        .common
        .as_ref()
        .filter(|c| c.factor * MIN_GROWTH_BEYOND_COMMON > MIN_LOOP_GROWTH)
}

/// "every entry slower per call: ×1.95 at N=1000 against N=10, the median of 11 entries'
/// own time per call (the machine, not a loop of one); a loop must grow 1.5 times beyond it"
pub fn common_line(d: &Discovery) -> Option<String> {
    let c = judged_beyond(d)?;
    Some(format!(
        "every entry slower per call: ×{} at N={} against N={}, the median of {} entries' own \
         time per call (the machine, not a loop of one); a loop must grow {} times beyond it",
        super::fmt::sig3(c.factor),
        fmt_n(*d.ns.last()? as f64),
        fmt_n(*d.ns.first()? as f64),
        c.entries,
        MIN_GROWTH_BEYOND_COMMON,
    ))
}

/// The machine's drift between the two largest sizes is said from this factor either way:
/// below it, two runs of one size differ as much.
const END_DRIFT_SAID: f64 = 1.25;

/// "every entry ×1.52 dearer per call at N=100 than at N=500 ..." when the machine ran the
/// second-largest size markedly slower or faster than the largest; None otherwise.
pub fn end_drift_line(d: &Discovery) -> Option<String> {
    let c = d.entries.common.as_ref()?;
    let step = c.end_step.filter(|s| *s > 0.0)?;
    let [.., prev, last] = d.ns.as_slice() else {
        return None;
    };
    let (factor, word) = if step < 1.0 {
        (1.0 / step, "dearer")
    } else {
        (step, "cheaper")
    };
    (factor >= END_DRIFT_SAID).then(|| {
        format!(
            "every entry ×{} {word} per call at N={} than at N={}, the median of {} entries' \
             own time per call (the machine at that size, not a loop): a loop's rise to N={} \
             is judged at the speed of N={}",
            super::fmt::sig3(factor),
            fmt_n(*prev as f64),
            fmt_n(*last as f64),
            c.entries,
            fmt_n(*last as f64),
            fmt_n(*last as f64),
        )
    })
}

/// The more-calls line, or None when no entry is made more often.
pub fn more_calls_line(d: &Discovery) -> Option<String> {
    let m = &d.entries.more_calls;
    if m.is_empty() {
        return None;
    }
    let slower = match judged_beyond(d) {
        Some(c) => format!(
            "none of them twice as slow beyond the common ×{}",
            super::fmt::sig3(c.factor)
        ),
        None => "none of them twice as slow".to_string(),
    };
    let mut s = format!(
        "more calls per {} (the command's own scaling; {slower}): {}",
        d.per,
        m.iter()
            .take(MORE_CALLS_NAMED)
            .map(|e| more_calls_item(d, e))
            .collect::<Vec<_>>()
            .join("; ")
    );
    if m.len() > MORE_CALLS_NAMED {
        s.push_str(&format!("; and {} more", m.len() - MORE_CALLS_NAMED));
    }
    Some(s)
}

/// The sizes an undecided frame's fit used, with its time there (the self time, when the
/// class was fitted on it).
pub(super) fn fitted_points(g: &Grower) -> Vec<(&FnPoint, f64)> {
    g.fitted_points()
        .into_iter()
        .map(|p| (p, g.fitted_ns(p)))
        .collect()
}

/// Why an undecided frame is neither a loop nor shown not to be one: "above its N=10 time at
/// N=400 only" or "within the noise of its N=10 time".
pub fn undecided_why(g: &Grower) -> String {
    let p = fitted_points(g);
    let (Some(f), Some(l)) = (p.first(), p.last()) else {
        return String::new();
    };
    match g.scaling.flat_reason {
        Some(FlatReason::OneSize) => format!(
            "above its N={} time at N={} only",
            fmt_n(f.0.n as f64),
            fmt_n(l.0.n as f64)
        ),
        _ => format!("within the noise of its N={} time", fmt_n(f.0.n as f64)),
    }
}

/// What would decide an undecided frame (`Remedy`): "a size between 100 and 400, or more
/// runs of N=10 (13 samples there), would decide it".
pub fn undecided_remedy(g: &Grower) -> String {
    let Some(r) = Remedy::of(g) else {
        return String::new();
    };
    let mut parts = Vec::new();
    if let Some((a, b)) = r.between {
        parts.push(format!(
            "a size between {} and {}",
            fmt_n(a as f64),
            fmt_n(b as f64)
        ));
    }
    if let Some((n, samples)) = r.more_runs {
        parts.push(format!(
            "more runs of N={} ({samples} samples there)",
            fmt_n(n as f64)
        ));
    }
    match parts.as_slice() {
        [one] => format!("{one} would decide it"),
        _ => format!("{}, would decide it", parts.join(", or ")),
    }
}

/// "read: sysvipc_find_ipc 7.54µs, 9.18µs, 44.6µs per read call at N=10, 100, 400: above its
/// N=10 time at N=400 only, a loop or a step: a size between 100 and 400, or more runs of
/// N=10 (13 samples there), would decide it". The sizes are those the fit used; the times are
/// marked self when the class was fitted on the self time.
pub fn undecided_line(e: &KernelEntry) -> Option<String> {
    let g = e.undecided.first()?;
    let p = fitted_points(g);
    let times: Vec<String> = p.iter().map(|(_, t)| ns(*t)).collect();
    let sizes: Vec<String> = p.iter().map(|(q, _)| fmt_n(q.n as f64)).collect();
    Some(format!(
        "{}: {} {}{} per {} call at N={}: {}, a loop or a step: {}",
        e.entry,
        g.function,
        times.join(", "),
        if g.fitted_on_self { " self" } else { "" },
        e.entry,
        sizes.join(", "),
        undecided_why(g),
        undecided_remedy(g)
    ))
}

/// The lines of the entries section (terminal, report.txt), without indentation.
pub fn lines(d: &Discovery) -> Vec<String> {
    let en = &d.entries;
    if !en.counted {
        return en
            .unavailable
            .iter()
            .map(|why| format!("kernel entries not counted: {why}"))
            .collect();
    }
    let mut out = Vec::new();
    if d.ns.len() < 2 {
        out.push(
            "kernel entries counted (run.json entries); kernel loops and more calls need two \
             sizes or more"
                .to_string(),
        );
        return out;
    }
    out.extend(common_line(d));
    out.extend(end_drift_line(d));
    if en.loops.is_empty() && !en.undecided.is_empty() {
        out.push(format!(
            "kernel loops: none decided over {} sizes",
            d.ns.len()
        ));
    } else if en.loops.is_empty() {
        out.push(format!(
            "kernel loops: none (no syscall's or fault's time per call grows with N over {} \
             sizes)",
            d.ns.len()
        ));
    } else {
        out.push("kernel loops (time per call grows with N):".to_string());
        out.extend(en.loops.iter().map(|e| format!("  {}", loop_line(d, e))));
        out.extend(overtake_line(d).map(|l| format!("  {l}")));
    }
    out.extend(refuted_line(d));
    if !en.undecided.is_empty() {
        out.push(
            "undecided (a frame's time per call rose as a loop's, at too few sizes to tell \
             a loop from a step):"
                .to_string(),
        );
        out.extend(
            en.undecided
                .iter()
                .filter_map(undecided_line)
                .map(|l| format!("  {l}")),
        );
    }
    out.extend(more_calls_line(d));
    out.extend(super::runlength::line(d));
    out
}

/// "no loop, timed exactly: vfs_statx in newfstatat 43.4µs → 52.0µs per newfstatat call over
/// N=10..500 (its samples read 11.9µs → 77.1µs)"
pub fn refuted_line(d: &Discovery) -> Option<String> {
    let r = &d.entries.refuted;
    if r.is_empty() {
        return None;
    }
    let items: Vec<String> = r
        .iter()
        .map(|r| {
            format!(
                "{} in {e} {} → {} per {e} call over N={}..{} (its samples read {} → {})",
                r.frame,
                ns(r.exact_ns.0),
                ns(r.exact_ns.1),
                fmt_n(r.n_range.0 as f64),
                fmt_n(r.n_range.1 as f64),
                ns(r.sampled_ns.0),
                ns(r.sampled_ns.1),
                e = r.entry,
            )
        })
        .collect();
    Some(format!("no loop, timed exactly: {}", items.join("; ")))
}

/// "at these rates wait_consider_task in wait4 (time per run ∝ N^1.9) overtakes clone (more
/// calls, ∝ N^1.0) near N ≈ 4,500: an extrapolation of the largest three sizes"
pub fn overtake_line(d: &Discovery) -> Option<String> {
    let o = d.entries.overtakes.as_ref()?;
    let head = d.entries.loops.first()?;
    let who = match head.frame() {
        Some(f) => format!("{f} in {}", head.entry),
        None => head.entry.clone(),
    };
    Some(format!(
        "at these rates {who} (time per {per} ∝ N^{:.1}) overtakes {} ({}, ∝ N^{:.1}) near N ≈ {}: \
         an extrapolation of the largest {} sizes",
        o.slope,
        o.other,
        if o.other_is_loop {
            "a loop"
        } else {
            "more calls"
        },
        o.other_slope,
        fmt_n(round2(o.n)),
        crate::analysis::entries::OVERTAKE_SIZES,
        per = d.per,
    ))
}

/// Two significant digits: an extrapolated N is not known better.
fn round2(v: f64) -> f64 {
    if v <= 0.0 || !v.is_finite() {
        return v;
    }
    let scale = 10f64.powi(v.log10().floor() as i32 - 1);
    (v / scale).round() * scale
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_keep_three_significant_digits() {
        assert_eq!(count(3100.4), "3100");
        assert_eq!(count(1.15), "1.15");
        assert_eq!(count(0.00147), "0.00147");
        assert_eq!(count(0.15), "0.150");
        assert_eq!(count(0.0), "0");
    }
    use crate::analysis::discover::tests::PERIOD;
    use crate::analysis::entries::tests::{
        discovered, discovered_at, entry_data, ipcs, ipcs_with, light_walk, reaping_walk, row,
        shell, slow_machine, slowdown_to,
    };

    fn text(d: &Discovery) -> String {
        super::super::discover::text(d, 5, |rows| {
            rows.iter().map(|r| r.join(" ") + "\n").collect()
        })
    }

    #[test]
    fn the_answer_leads_with_the_kernel_loop_and_states_the_more_calls() {
        let d = discovered(shell);
        let a = super::super::discover::answer(&d);
        assert!(
            a.starts_with(
                "run [command]: wait_consider_task in wait4: its time per wait4 call grows O(n)"
            ),
            "{a}"
        );
        assert!(
            a.contains("called from __do_wait ← do_wait ← kernel_wait4"),
            "{a}"
        );
        let t = text(&d);
        assert!(
            t.contains("kernel loops (time per call grows with N):\n      wait4: "),
            "{t}"
        );
        assert!(
            t.contains(
                "more calls per run (the command's own scaling; none of them twice as slow)"
            ),
            "{t}"
        );
        assert!(t.contains("clone (310 → 3300 calls per run"), "{t}");
        assert!(
            t.contains("root cause: wait_consider_task (self) carries"),
            "{t}"
        );
        assert!(t.contains("of wait4's added time per call"), "{t}");
    }

    /// A loop whose time leaves several classes says where they part; one class does not.
    #[test]
    fn a_loop_whose_time_leaves_several_classes_says_where_they_part() {
        let part = |d: &Discovery| {
            let a = super::super::discover::answer(d);
            a.split("; ")
                .find(|c| c.starts_with("a size near"))
                .map(str::to_string)
        };
        assert_eq!(part(&discovered(shell)), None);
        assert_eq!(
            part(&discovered(light_walk)).as_deref(),
            Some("a size near N=99000 would tell O(n) from O(n log n)")
        );
        // Four sizes of a scan whose first has 13 samples: O(n) to O(n^2) left.
        assert_eq!(
            part(&discovered_at(&[10, 100, 200, 400], ipcs)).as_deref(),
            Some("a size near N=610 would tell O(n) from O(n^2)")
        );
    }

    /// Where the confirmation pass counted the frame carrying the growth per call of the
    /// loop frame, that frame is each trip's work, not "the loop".
    #[test]
    fn a_counted_callee_is_each_trips_work() {
        // The shell's walk, its time split between the frame's own body and a callee of each
        // trip's, the callee's part larger.
        let split_walk = |n: u64| {
            let (mut s, rows) = shell(n);
            let walk = "e;do_syscall_64;kernel_wait4;do_wait;wait_consider_task";
            let per_run = (300 + n) * n / 200;
            let text = format!(
                "{walk} {}\n{walk};task_pid_type {}\n",
                (per_run * 2 / 5).max(1) * PERIOD,
                (per_run * 3 / 5).max(1) * PERIOD,
            );
            s.retain(|x| x.file.target != "wait4");
            s.push(entry_data("wait4", n, &text));
            (s, rows)
        };
        let mut d = discovered(split_walk);
        let l = d.entries.loops[0].clone();
        assert_eq!(l.frame(), Some("wait_consider_task"), "{l:#?}");
        assert_eq!(l.cause.as_ref().unwrap().function, "task_pid_type");
        let (frame, inner) = (
            l.frame().unwrap().to_string(),
            l.cause.clone().unwrap().function,
        );
        let said = |d: &Discovery| (super::super::discover::answer(d), loop_line(d, &l));
        let (a, line) = said(&d);
        assert!(a.contains(&format!("; the loop: {inner} (self, ")), "{a}");
        assert!(
            line.contains(&format!("; the loop: {inner} (self) ")),
            "{line}"
        );
        d.counted.insert(
            frame.clone(),
            crate::analysis::exact::CountedLoop {
                class: crate::analysis::fit::Complexity::Linear,
                inner: inner.clone(),
                outer: frame,
                from: (10, 6.0),
                to: (400, 202.0),
                longest: false,
            },
        );
        let (a, line) = said(&d);
        assert!(a.contains(&format!("; each trip: {inner} (self, ")), "{a}");
        assert!(
            line.contains(&format!("; each trip: {inner} (self) ")),
            "{line}"
        );
    }

    #[test]
    fn a_common_slowdown_is_said_where_it_raised_the_bar_for_a_loop() {
        let t = text(&discovered(|n| slow_machine(n, slowdown_to(1.9), 6)));
        assert!(
            t.contains("every entry slower per call: ×1.9")
                && t.contains(
                    "at N=3000 against N=10, the median of 8 entries' own time per call (the \
                     machine, not a loop of one); a loop must grow 1.5 times beyond it"
                ),
            "{t}"
        );
        assert!(
            t.contains("none of them twice as slow beyond the common ×1.9"),
            "{t}"
        );
        let t = text(&discovered(|n| slow_machine(n, |_| 1.0, 6)));
        assert!(
            !t.contains("every entry slower") && !t.contains("beyond the common"),
            "{t}"
        );
    }

    #[test]
    fn a_machine_slowed_at_one_size_is_said() {
        let spike = |n| if n == 1000 { 1.6 } else { 1.0 };
        let t = text(&discovered(|n| slow_machine(n, spike, 6)));
        assert!(
            t.contains(
                "every entry ×1.60 dearer per call at N=1000 than at N=3000, the median of 8"
            ) && t.contains("a loop's rise to N=3000 is judged at the speed of N=3000"),
            "{t}"
        );
        let t = text(&discovered(|n| slow_machine(n, |_| 1.0, 6)));
        assert!(!t.contains("per call at N=1000 than at"), "{t}");
    }

    #[test]
    fn a_loop_with_no_sample_at_the_smallest_size_says_so_not_zero() {
        let d = discovered_at(&[10, 100, 200, 400], |n| match n {
            10 => ipcs_with(10, 345, 0),
            _ => ipcs(n),
        });
        let l = d
            .entries
            .loops
            .first()
            .expect("the scan is a loop from N = 100");
        assert_eq!(l.top().unwrap().points[0].samples, 0, "{l:#?}");
        let t = text(&d);
        assert!(t.contains("no sample at N=10 → "), "{t}");
        assert!(!t.contains(" 0ns → "), "{t}");
    }

    #[test]
    fn more_calls_alone_is_no_kernel_loop_in_the_answer() {
        let d = discovered(|n| {
            let (mut s, mut rows) = shell(n);
            let text = format!(
                "e;do_syscall_64;kernel_wait4;pid_task {}\n",
                (300 + n) * PERIOD
            );
            s.retain(|x| x.file.target != "wait4");
            s.push(entry_data("wait4", n, &text));
            rows.retain(|r| r.entry != "wait4");
            rows.push(row("wait4", n, 300 + n));
            (s, rows)
        });
        let a = super::super::discover::answer(&d);
        assert!(
            a.contains(": no kernel loop: no syscall's or fault's time per call grows"),
            "{a}"
        );
        assert!(
            a.contains(
                "because the command makes more calls (page_fault, clone and wait4: 100.0% of the \
                 added kernel time)"
            ),
            "{a}"
        );
        let t = text(&d);
        assert!(t.contains("kernel loops: none"), "{t}");
    }

    /// A frame that rose at the largest size only is neither the loop nor "no loop": the
    /// answer, the entries section and the summary row say it is undecided and what would
    /// decide it.
    #[test]
    fn an_undecided_rise_is_said_with_what_would_decide_it() {
        let d = discovered_at(&[10, 100, 400], ipcs);
        let a = super::super::discover::answer(&d);
        assert!(
            a.starts_with(
                "run [command]: kernel loop undecided: sysvipc_find_ipc in read rose 7.54µs → \
                 44.6µs per call over N=10..400, above its N=10 time at N=400 only, a loop or a \
                 step: a size between 100 and 400, or more runs of N=10 (13 samples there), \
                 would decide it; the kernel time per run grows"
            ),
            "{a}"
        );
        let t = text(&d);
        assert!(t.contains("kernel loops: none decided over 3 sizes"), "{t}");
        assert!(
            t.contains(
                "read: sysvipc_find_ipc 7.54µs, 9.18µs, 44.6µs per read call at N=10, 100, 400"
            ),
            "{t}"
        );
        let row = super::super::summary::discovery_row(&d);
        assert!(
            row.class.starts_with("kernel loop undecided; per run: "),
            "{}",
            row.class
        );
        assert_eq!(
            row.root_cause,
            [
                "more calls per run; undecided: sysvipc_find_ipc in read (above its N=10 time at \
              N=400 only)"
            ]
        );
    }

    #[test]
    fn a_loop_that_weighs_less_says_where_it_overtakes() {
        let t = text(&discovered(light_walk));
        assert!(
            t.contains(
                "at these rates wait_consider_task in wait4 (time per run ∝ N^1.6) overtakes \
                 page_fault (more calls, ∝ N^0.6) near N ≈ 12000: an extrapolation of the \
                 largest 3 sizes"
            ),
            "{t}"
        );
        assert!(!text(&discovered(shell)).contains("overtakes"));
    }

    /// A class fitted on the self time is quoted with the self times it was fitted on, the
    /// inclusive ones beside them; a class fitted on the inclusive time quotes those alone.
    #[test]
    fn a_class_fitted_on_the_self_time_quotes_the_self_times() {
        let d = discovered(reaping_walk(2000, 4));
        let g = d.entries.loops[0].top().unwrap();
        assert!(g.fitted_on_self);
        let (f, l) = (&g.points[0], &g.points[g.points.len() - 1]);
        let quoted = format!(
            "{} → {} self ({} → {} with its callees)",
            ns(f.self_ns),
            ns(l.self_ns),
            ns(f.incl_ns),
            ns(l.incl_ns)
        );
        let a = super::super::discover::answer(&d);
        assert!(
            a.contains(&format!(
                "grows {}, {quoted} over",
                classes_and_slope(&g.scaling)
            )),
            "{a}"
        );
        assert!(text(&d).contains(&quoted), "{}", text(&d));

        let d = discovered(reaping_walk(2000, 2));
        let g = d.entries.loops[0].top().unwrap();
        assert!(!g.fitted_on_self);
        let (f, l) = (&g.points[0], &g.points[g.points.len() - 1]);
        let a = super::super::discover::answer(&d);
        assert!(
            a.contains(&format!(
                "grows {}, {} → {} over",
                classes_and_slope(&g.scaling),
                ns(f.incl_ns),
                ns(l.incl_ns)
            )),
            "{a}"
        );
        assert!(!a.contains(" self ("), "{a}");
    }
}
