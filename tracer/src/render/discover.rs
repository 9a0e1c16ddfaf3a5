//! Sentences and tables of a discovery (`--discover`): the one-line answer first, then the
//! ranked functions, the blocked-time growers and the coverage of the samples.

use super::fmt::{fmt_n, ns};
use crate::analysis::discover::{
    COVERAGE_TOLERANCE, Coverage, CoverageCheck, Discovery, Grower, coverage_check,
};
use crate::analysis::fit::Complexity;

use super::fmt::pct;

/// How many ranked functions the terminal shows.
pub const TERMINAL_TOP: usize = 5;

fn n_range(d: &Discovery) -> String {
    format!(
        "N={}..{}",
        fmt_n(d.ns[0] as f64),
        fmt_n(d.ns[d.ns.len() - 1] as f64)
    )
}

fn chain(callers: &[String], keep: usize) -> String {
    let start = callers.len().saturating_sub(keep);
    let mut parts: Vec<&str> = callers[start..].iter().map(String::as_str).collect();
    parts.reverse();
    let mut s = parts.join(" ← ");
    if start > 0 {
        s.push_str(" ← …");
    }
    s
}

/// What an answer rests on: the samples, and the confirmation pass's exact class of
/// `function` where it timed it.
fn basis(d: &Discovery, function: Option<&str>) -> String {
    match function.and_then(|f| d.exact.iter().find(|e| e.function == f)) {
        Some(e) => format!(
            "{} samples at {} sizes; timed exactly in the confirmation pass: {} per {}",
            d.total_samples(),
            d.ns.len(),
            super::fmt::exact_classes(e),
            // The class it leads with: of the function's time per op when it has one.
            if e.per_op.is_some() {
                d.per.as_str()
            } else {
                "call"
            }
        ),
        None => format!(
            "{} samples at {} sizes, sampled without function probes",
            d.total_samples(),
            d.ns.len()
        ),
    }
}

/// The one-line answer: the kernel loop (an entry whose time per call grows, by the frame
/// that carries it); with entries counted and no loop, what carries the growth (more calls,
/// a longer run, both or neither); without entry counts, the function whose time per op
/// grows; or that none does.
pub fn answer(d: &Discovery) -> String {
    let head = format!("{} [{}]", d.run, d.case_name);
    if let Some(l) = d.entries.loops.first() {
        return loop_answer(d, l, &head, &basis(d, l.frame()));
    }
    let basis = basis(d, d.ranked.first().map(|g| g.function.as_str()));
    if d.entries.counted && !d.ranked.is_empty() {
        let no_loop = match d.entries.first_undecided() {
            Some((e, g)) => {
                let p = super::entries::fitted_points(g);
                let (f, l) = (
                    p.first().map_or(0.0, |x| x.1),
                    p.last().map_or(0.0, |x| x.1),
                );
                format!(
                    "kernel loop undecided: {} in {} rose {} → {}{} per call over {}, {}, a loop or \
                 a step: {}",
                    g.function,
                    e.entry,
                    ns(f),
                    ns(l),
                    if g.fitted_on_self { " self" } else { "" },
                    n_range(d),
                    super::entries::undecided_why(g),
                    super::entries::undecided_remedy(g)
                )
            }
            None => format!(
                "no kernel loop: no syscall's or fault's time per call grows with N ({})",
                n_range(d)
            ),
        };
        // What carries the growth: more calls only where entries counted more often do.
        let why = match &d.entries.growth {
            Some(g) => format!(" {}", super::runlength::because(d, g)),
            None => String::new(),
        };
        return format!(
            "{head}: {no_loop}; the kernel time per {} grows ({} → {}){why} [{basis}]",
            d.per,
            ns(d.kernel_ns[0]),
            ns(d.kernel_ns[d.kernel_ns.len() - 1]),
        );
    }
    let Some(top) = d.ranked.first() else {
        return format!(
            "{head}: nothing in the kernel grows with N ({}; kernel time {} → {} per {}; {basis})",
            n_range(d),
            ns(d.kernel_ns[0]),
            ns(d.kernel_ns[d.kernel_ns.len() - 1]),
            d.per
        );
    };
    let mut line = format!(
        "{head}: {} grows {} per {} over {}, {} of the added kernel time",
        top.function,
        super::entries::growth_text(top),
        d.per,
        n_range(d),
        pct(top.added_share.min(1.0)),
    );
    if let Some(c) = &d.cause
        && c.function != top.function
    {
        line.push_str(&format!(
            "; the loop: {} (self, {} of it)",
            c.function,
            pct(c.self_share.clamp(0.0, 1.0))
        ));
    }
    if !top.callers.is_empty() {
        line.push_str(&format!("; called from {}", chain(&top.callers, 3)));
    }
    line.push_str(if top.also_blocked {
        "; on-CPU, and its blocked time grows too"
    } else {
        "; on-CPU"
    });
    line.push_str(&format!(" [{basis}]"));
    line
}

/// The answer when a kernel loop was found: the frame whose time per call of its entry
/// grows, the entry, the class, and the chain it is called through.
fn loop_answer(
    d: &Discovery,
    l: &crate::analysis::entries::KernelEntry,
    head: &str,
    basis: &str,
) -> String {
    let last = l.last();
    let Some(g) = l.top() else {
        return format!("{head}: {} grows per call [{basis}]", l.entry);
    };
    let gl = &g.points[g.points.len() - 1];
    let grows = match d.counted.get(&g.function) {
        Some(c) => format!(
            "{} (time alone: {})",
            super::entries::counted_loop_text(c),
            super::entries::growth_text(g)
        ),
        None => super::entries::growth_text(g),
    };
    let mut line = format!(
        "{head}: {} in {}: its time per {} call grows {grows} over {}, {} of {}'s time at N={}",
        g.function,
        l.entry,
        l.entry,
        n_range(d),
        pct(gl.share.min(1.0)),
        l.entry,
        super::fmt::fmt_n(last.n as f64),
    );
    // A class read from time alone that leaves several: the size that would settle it.
    if !d.counted.contains_key(&g.function)
        && let Some(p) = super::fmt::parting(&g.scaling)
    {
        line.push_str(&format!("; {p}"));
    }
    if let Some(c) = &l.cause
        && c.function != g.function
    {
        line.push_str(&format!(
            "; {}: {} (self, {} of the growth)",
            super::entries::inner_role(d, &g.function, &c.function),
            c.function,
            pct(c.self_share.clamp(0.0, 1.0))
        ));
    }
    if !g.callers.is_empty() {
        line.push_str(&format!("; called from {}", chain(&g.callers, 3)));
    }
    line.push_str(&format!(
        "; {} {} calls per {}; on-CPU [{basis}]",
        super::fmt::count(last.calls_per_op),
        l.entry,
        d.per,
    ));
    line
}

/// "root cause: F (self) carries S of ...; via chain": inside the top kernel loop, of its
/// added time per call; without one, of the added kernel time per op.
pub fn root_cause_line(d: &Discovery, keep: usize) -> Option<String> {
    if let Some(l) = d.entries.loops.first() {
        let c = l.cause.as_ref()?;
        return Some(format!(
            "root cause: {} (self) carries {} of {}'s added time per call, {}, slope {:.2}; via {}",
            c.function,
            pct(c.self_share.clamp(0.0, 1.0)),
            l.entry,
            cause_class(c),
            c.slope,
            chain(&c.callers, keep)
        ));
    }
    let c = d.cause.as_ref()?;
    // A frame of an interrupt or a preemption is where a longer run's time goes, no loop.
    let run_length = d
        .entries
        .growth
        .as_ref()
        .is_some_and(|g| g.cause_in_interruptions);
    Some(format!(
        "root cause: {}{} (self){} carries {} of the added kernel time, {}, slope {:.2}; via {}",
        if run_length { "the run's length: " } else { "" },
        c.function,
        if run_length {
            ", in an interrupt or a preemption,"
        } else {
            ""
        },
        pct(c.self_share.clamp(0.0, 1.0)),
        cause_class(c),
        c.slope,
        chain(&c.callers, keep)
    ))
}

/// The root cause's class set ("O(n) or O(n log n)"), or its class when no set was kept.
fn cause_class(c: &crate::analysis::discover::DiscoverCause) -> String {
    if c.classes.is_empty() {
        c.class.label().to_string()
    } else {
        crate::analysis::fit::classes_label(&c.classes)
    }
}

/// The least stolen share of CPU time the coverage line mentions: under it, sampling error
/// hides it.
const MIN_STEAL_SAID: f64 = 0.01;

/// Coverage in a few words: "sampled on-CPU time = 96% of the command tree's CPU time", the
/// kernel's share both ways when they disagree, and what is missing outside the tolerance.
pub fn coverage_line(d: &Discovery) -> Option<String> {
    let check = coverage_check(&d.coverage)?;
    let range = |f: fn(&Coverage) -> Option<f64>| {
        let v: Vec<f64> = d.coverage.iter().filter_map(f).collect();
        let lo = v.iter().copied().fold(f64::INFINITY, f64::min);
        let hi = v.iter().copied().fold(f64::NEG_INFINITY, f64::max);
        if v.is_empty() {
            None
        } else if (hi - lo).abs() < 0.005 {
            Some(pct(lo))
        } else {
            Some(format!("{}–{}", pct(lo), pct(hi)))
        }
    };
    let mut s = format!(
        "coverage: sampled on-CPU time = {} of the command tree's CPU time (rusage user + \
         system, {})",
        range(|c| c.ratio)?,
        if d.coverage.len() > 1 {
            "per N"
        } else {
            "whole run"
        }
    );
    // Stolen time is in the samples and not in rusage: say how much, and the coverage
    // without it, which the check judges.
    if let (Some(share), Some(net)) = (
        range(|c| c.steal_share.filter(|&s| s >= MIN_STEAL_SAID)),
        range(|c| {
            c.steal_share
                .filter(|&s| s >= MIN_STEAL_SAID)
                .and(c.ratio_without_steal)
        }),
    ) {
        s.push_str(&format!(
            "; the hypervisor took {share} of the machine's busy CPU time (steal), which the \
             samples count and rusage does not: {net} without it"
        ));
    }
    // rusage's split is estimated from ticks: say so where it puts less in the kernel than the
    // samples do.
    let sampled_more = d.coverage.iter().any(|c| {
        matches!((c.kernel_share_sampled, c.kernel_share_rusage), (Some(k), Some(r)) if k > r + 0.1)
    });
    if let (Some(k), Some(r)) = (
        range(|c| c.kernel_share_sampled),
        range(|c| c.kernel_share_rusage),
    ) && sampled_more
    {
        s.push_str(&format!(
            "; in the kernel: {k} of the samples, {r} by rusage, whose split is estimated from \
             clock ticks (a process shorter than a tick is booked as user time)"
        ));
    }
    let (lo, hi) = COVERAGE_TOLERANCE;
    match check {
        CoverageCheck::Within => {}
        CoverageCheck::Low => s.push_str(&format!(
            "; under {}: the samples missed CPU time (very short syscalls, or time in \
             interrupts), so rankings rest on what was seen",
            pct(lo)
        )),
        CoverageCheck::High => s.push_str(&format!(
            "; over {}: the samples include CPU time the command's rusage does not hold \
             (processes of its tree that outlived it or that it did not reap)",
            pct(hi)
        )),
    }
    Some(s)
}

/// The ranked table as rows (header first).
pub fn table_rows(d: &Discovery, growers: &[Grower], top: usize) -> Vec<Vec<String>> {
    let mut rows = vec![
        [
            "#",
            "function",
            "class",
            "slope",
            &format!("added/{}", d.per),
            "of added",
            &format!("share N={}→{}", d.ns[0], d.ns[d.ns.len() - 1]),
            "samples (largest N)",
        ]
        .iter()
        .map(|s| s.to_string())
        .collect::<Vec<_>>(),
    ];
    for (i, g) in growers.iter().take(top).enumerate() {
        let (f, l) = (&g.points[0], &g.points[g.points.len() - 1]);
        rows.push(vec![
            (i + 1).to_string(),
            g.function.clone(),
            g.scaling.classes_label(),
            super::fmt::slope(&g.scaling),
            format!("{} ± {}", ns(g.added_ns), ns(g.added_se_ns)),
            pct(g.added_share.min(1.0)),
            format!("{} → {}", pct(f.share), pct(l.share)),
            l.samples.to_string(),
        ]);
    }
    rows
}

/// Plain-text section for the terminal and report.txt.
pub fn text(d: &Discovery, top: usize, align: impl Fn(&[Vec<String>]) -> String) -> String {
    let mut out = format!("  {}\n", answer(d));
    if let Some(c) = root_cause_line(d, 6) {
        out.push_str(&format!("    {c}\n"));
    }
    if let Some(c) = coverage_line(d) {
        out.push_str(&format!("    {c}\n"));
    }
    for l in super::entries::lines(d) {
        out.push_str(&format!("    {l}\n"));
    }
    for e in &d.exact {
        out.push_str(&format!("    exact: {}\n", super::verdict::exact_line(e)));
    }
    for t in &d.trips {
        out.push_str(&format!("    counted: {}\n", super::trips::line(t, false)));
    }
    if !d.failed_n.is_empty() {
        out.push_str(&format!(
            "    left out: the command failed at N = {}\n",
            d.failed_n
                .iter()
                .map(u64::to_string)
                .collect::<Vec<_>>()
                .join(", ")
        ));
    }
    if !d.ranked.is_empty() {
        out.push_str(&format!(
            "\n  kernel functions whose time per {} grows, loops, more calls and interruptions together (top {} of {}):\n",
            d.per,
            top.min(d.ranked.len()),
            d.ranked.len()
        ));
        out.push_str(&indent(&align(&table_rows(d, &d.ranked, top))));
    }
    let blocked: Vec<&Grower> = d
        .blocked
        .iter()
        .filter(|g| g.scaling.class != Complexity::Constant)
        .collect();
    if !blocked.is_empty() {
        out.push_str(&format!(
            "\n  blocked (off-CPU) time that grows, e.g. idle processes waiting: {}\n",
            blocked
                .iter()
                .take(3)
                .map(|g| format!("{} {}", g.function, g.scaling.classes_label()))
                .collect::<Vec<_>>()
                .join(", ")
        ));
    }
    out
}

fn indent(s: &str) -> String {
    s.lines().map(|l| format!("  {l}\n")).collect()
}

/// Markdown section.
pub fn markdown(d: &Discovery) -> String {
    let mut out = format!("{}\n\n", answer(d));
    if let Some(c) = coverage_line(d) {
        out.push_str(&format!("{c}\n\n"));
    }
    for l in super::entries::lines(d) {
        match l.strip_prefix("  ") {
            Some(item) => out.push_str(&format!("- {item}\n")),
            None => out.push_str(&format!("\n{l}\n\n")),
        }
    }
    if !d.ranked.is_empty() {
        let rows = table_rows(d, &d.ranked, d.ranked.len());
        out.push_str(&format!("| {} |\n", rows[0].join(" | ")));
        out.push_str(&format!("|{}\n", " --- |".repeat(rows[0].len())));
        for r in &rows[1..] {
            out.push_str(&format!("| {} |\n", r.join(" | ")));
        }
    }
    out
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// A discovery of 4 sizes where wait_consider_task grows linearly (or nothing grows).
    pub(crate) fn discovery(grow: bool) -> Discovery {
        use crate::analysis::discover::tests::{PERIOD, data, discover, runs};
        let ns = [10u64, 100, 1000, 3000];
        let stacks: Vec<_> = ns
            .iter()
            .map(|&n| {
                let w = if grow { 40 * n } else { 400 } * PERIOD;
                data(
                    n,
                    &format!(
                        "e;do_syscall_64;do_wait;__do_wait;wait_consider_task {w}\ne;do_syscall_64;read_zero {}\n",
                        100 * PERIOD
                    ),
                )
            })
            .collect();
        let mut r = runs(&ns);
        r[0].label = "bench".into();
        discover(&stacks, &r).remove(0)
    }

    #[test]
    fn coverage_says_the_stolen_share_and_judges_without_it() {
        let mut d = discovery(true);
        let cov = |steal: Option<f64>| Coverage {
            n: Some(10),
            sampled_kernel_s: 1.2,
            sampled_user_s: 0.0,
            sys_s: 1.0,
            user_s: 0.0,
            ratio: Some(1.2 / 1.0 * 1.05),
            steal_share: steal,
            ratio_without_steal: steal.map(|s| 1.26 * (1.0 - s)),
            kernel_share_sampled: Some(1.0),
            kernel_share_rusage: Some(1.0),
        };
        d.coverage = vec![cov(None)];
        let line = coverage_line(&d).unwrap();
        assert!(
            line.contains("= 126.0%") && line.contains("over 120.0%"),
            "{line}"
        );
        assert!(!line.contains("steal"), "{line}");
        d.coverage = vec![cov(Some(0.2))];
        let line = coverage_line(&d).unwrap();
        assert!(
            line.contains("the hypervisor took 20.0% of the machine's busy CPU time (steal)")
                && line.contains("100.8% without it"),
            "{line}"
        );
        assert!(!line.contains("over 120"), "{line}");
    }

    #[test]
    fn the_answer_names_the_function_its_class_and_its_callers() {
        let d = discovery(true);
        let a = answer(&d);
        assert!(
            a.starts_with("bench [command]: wait_consider_task grows O(n)"),
            "{a}"
        );
        assert!(a.contains("called from __do_wait ← do_wait"), "{a}");
        assert!(a.contains("per run over N=10..3000"), "{a}");
        let t = text(&d, TERMINAL_TOP, |rows| {
            rows.iter().map(|r| r.join(" ") + "\n").collect()
        });
        assert!(t.contains("root cause: wait_consider_task (self)"), "{t}");
        assert!(t.contains("1 wait_consider_task O(n)"), "{t}");
    }

    #[test]
    fn an_exact_confirmation_is_shown_beside_the_samples() {
        let mut d = discovery(true);
        assert!(answer(&d).contains("sampled without function probes"));
        d.exact.push(crate::analysis::exact::ExactVerdict {
            function: "wait_consider_task".into(),
            run: "bench-confirm".into(),
            case_name: "command".into(),
            per_op: None,
            per_call: crate::analysis::Verdict {
                metric: crate::analysis::table::Metric::Auto,
                scaling: Some(d.ranked[0].scaling.clone()),
                stand_in: None,
                timed: true,
                plan: None,
                by_loop: None,
                mix: None,
            },
        });
        let a = answer(&d);
        assert!(
            a.contains("timed exactly in the confirmation pass: O(n) per call"),
            "{a}"
        );
        let t = text(&d, TERMINAL_TOP, |rows| {
            rows.iter().map(|r| r.join(" ") + "\n").collect()
        });
        assert!(
            t.contains("exact: wait_consider_task [command]: O(n)"),
            "{t}"
        );
    }

    #[test]
    fn nothing_growing_is_said_plainly() {
        let d = discovery(false);
        let a = answer(&d);
        assert!(a.contains("nothing in the kernel grows with N"), "{a}");
        assert!(!markdown(&d).contains('|'), "no table without growers");
    }
}
