//! The comparison tables: `compare.{md,csv,json}`, the terminal text and the frame-shift lines.

use serde::{Serialize, Serializer};

use crate::analysis::compare::{
    Change, ClassChange, CompareRow, Comparison, GrowthChange, Quantity,
};
use crate::analysis::fit::{Complexity, classes_label};
use crate::analysis::frameshift::FrameShift;

use crate::render::fmt::{
    PercentStyle, align, csv_field, fmt_n, md_escape, ns, num, opt, percent, sig3,
};

fn quantity_value(q: Quantity, v: Option<f64>) -> String {
    match q {
        Quantity::OpRate => opt(v, sig3),
        _ => opt(v, ns),
    }
}

fn diff_cell(c: &CompareRow) -> String {
    let m = c.significance.mark();
    opt(c.diff_pct, |d| format!("{m}{d:+.2}%{m}"))
}

/// One line per target and case whose frames' shares moved between the two sides, the
/// largest change first: `dup_mmap [spawn]: mas_store 28% -> 5%, ... of the added time
/// (6.1.0 -> 6.12.0)`.
pub fn frame_shift_lines(c: &Comparison) -> Vec<String> {
    let mut groups: Vec<((&str, &str), Vec<&FrameShift>)> = Vec::new();
    for s in &c.frame_shifts {
        let key = (s.target.as_str(), s.case_name.as_str());
        match groups.iter_mut().find(|(k, _)| *k == key) {
            Some((_, v)) => v.push(s),
            None => groups.push((key, vec![s])),
        }
    }
    // The cases the workloads exist for first (dup_mmap under spawn before dup_mmap under a
    // mempolicy fork), each part in the analysis' order.
    groups.sort_by_key(|((target, case), _)| !workloads::cases::is_thread_target(case, target));
    groups
        .into_iter()
        .map(|((target, case), shifts)| {
            let parts: Vec<String> = shifts
                .iter()
                .map(|s| {
                    format!(
                        "{} {} -> {}",
                        s.frame,
                        percent(s.a, PercentStyle::Whole),
                        percent(s.b, PercentStyle::Whole)
                    )
                })
                .collect();
            format!(
                "{target} [{case}]: {} {} ({} -> {})",
                parts.join(", "),
                shifts[0].basis.text(),
                c.label_a,
                c.label_b
            )
        })
        .collect()
}

/// mmtests-like comparison table in Markdown.
pub fn compare_markdown(c: &Comparison) -> String {
    let mut out = format!("# {} vs {}\n\n", c.label_a, c.label_b);
    for (title, flagged) in [
        ("Growth changed", true),
        ("Not changed (same or inconclusive)", false),
    ] {
        let lines: Vec<String> = c
            .classes
            .iter()
            .filter(|cl| cl.growth.change.flagged() == flagged)
            .map(|cl| format!("- `{}`\n", class_line(c, cl)))
            .collect();
        if !lines.is_empty() {
            out.push_str(&format!("{title}:\n\n{}\n", lines.concat()));
        }
    }
    let shifts = frame_shift_lines(c);
    if !shifts.is_empty() {
        out.push_str("\nWhere the time moved (frames whose share changed most):\n\n");
        for l in shifts {
            out.push_str(&format!("- `{l}`\n"));
        }
    }
    out.push_str(&format!(
        "\n`*` marks a significant difference, `?` too little data to tell (rules: see compare.json / the tracer docs). Diff is ({b} − {a}) / {a}.\n\n",
        a = c.label_a,
        b = c.label_b
    ));
    out.push_str(&format!(
        "| target | case | N | quantity | mean | {} | {} | diff |\n| --- | --- | ---: | --- | --- | ---: | ---: | ---: |\n",
        md_escape(&c.label_a),
        md_escape(&c.label_b)
    ));
    for r in &c.rows {
        out.push_str(&format!(
            "| {} | {} | {} | {} | {} | {} | {} | {} |\n",
            r.target,
            r.case_name,
            r.n,
            r.quantity.label(),
            r.quantity.mean_name(),
            quantity_value(r.quantity, r.a),
            quantity_value(r.quantity, r.b),
            diff_cell(r)
        ));
    }
    out
}

pub fn compare_csv(c: &Comparison) -> String {
    let mut out = String::from("target,case_name,n,quantity,mean,a,b,diff_pct,significance\n");
    for r in &c.rows {
        out.push_str(&format!(
            "{},{},{},{},{},{},{},{},{}\n",
            csv_field(&r.target),
            csv_field(&r.case_name),
            r.n,
            r.quantity.label(),
            r.quantity.mean_name(),
            num(r.a),
            num(r.b),
            num(r.diff_pct),
            r.significance.mark()
        ));
    }
    out
}

/// `do_wait [waitpid-pid]: shrank: x31.0 -> x0.93 per call over N=1..6000 (5.10 O(n) ->
/// 6.1 O(1))`: the decision on the growth first, each side's class set beside it.
pub fn class_line(c: &Comparison, cl: &ClassChange) -> String {
    let show = |classes: &[Complexity], present: bool| match (classes.is_empty(), present) {
        (false, _) => classes_label(classes),
        (true, true) => "no fit".to_string(),
        (true, false) => "absent".to_string(),
    };
    let g = &cl.growth;
    let growth = match (g.n_range, g.growth_a, g.growth_b) {
        (Some((lo, hi)), Some(a), Some(b)) => {
            let mut s = format!(
                "x{} -> x{} per call over N={}..{}",
                sig3(a),
                sig3(b),
                fmt_n(lo as f64),
                fmt_n(hi as f64)
            );
            if let Some(r) = &g.reason {
                s.push_str(&format!(", {r}"));
            }
            if let Some(c) = &g.by_count {
                s.push_str(&format!(
                    ", by loop count: {} per call x{} -> x{}",
                    c.inner,
                    sig3(c.growth_a),
                    sig3(c.growth_b)
                ));
            }
            s
        }
        _ => g.reason.clone().unwrap_or_default(),
    };
    let sides = cl
        .discovered
        .as_ref()
        .map(|d| {
            let side = |f: Option<&str>, label: &str| match f {
                Some(f) => format!("{label}: a kernel loop in {f}"),
                None => format!("{label}: no kernel loop in {}", d.entry),
            };
            match cl.loop_frames() {
                (Some(fa), Some(fb)) if fa == fb => format!("; a kernel loop in {fa} on both"),
                (fa, fb) => format!("; {}, {}", side(fa, &c.label_a), side(fb, &c.label_b)),
            }
        })
        .unwrap_or_default();
    format!(
        "{} [{}]: {}: {growth} ({} {} -> {} {}{sides})",
        cl.target,
        cl.case_name,
        g.change.label(),
        c.label_a,
        show(&cl.classes_a, cl.in_a),
        c.label_b,
        show(&cl.classes_b, cl.in_b)
    )
}

/// Why nothing of two discover sweeps was compared: they ran different programs.
pub fn unmatched_line(c: &Comparison) -> Option<String> {
    let u = c.unmatched.as_ref()?;
    Some(format!(
        "no kernel loop compared: {} discovered in {}, {} in {}; a discover compare matches \
         the same program (its run's name) on both sides",
        c.label_a,
        u.a.join(", "),
        c.label_b,
        u.b.join(", ")
    ))
}

#[derive(Serialize)]
struct ComparisonJson<'a> {
    label_a: &'a str,
    label_b: &'a str,
    /// Per target and case: the decision on the growth, both sides' class sets.
    verdicts: Vec<VerdictJson<'a>>,
    rows: &'a [CompareRow],
    classes: Vec<ClassJson<'a>>,
    frame_shifts: &'a [FrameShift],
    /// Both sides discovered in different programs: why no loop was compared.
    #[serde(skip_serializing_if = "Option::is_none")]
    unmatched: Option<String>,
}

#[derive(Serialize)]
struct ClassJson<'a> {
    target: &'a str,
    case_name: &'a str,
    /// Each side's class when its data names one alone.
    a: Option<Complexity>,
    b: Option<Complexity>,
    line: String,
}

#[derive(Serialize)]
struct VerdictJson<'a> {
    target: &'a str,
    case_name: &'a str,
    change: Change,
    classes_a: &'a [Complexity],
    classes_b: &'a [Complexity],
    #[serde(flatten)]
    growth: &'a GrowthChange,
    /// A discovered kernel loop's: its frame on each side (null: no loop there).
    #[serde(skip_serializing_if = "Option::is_none")]
    discovered: Option<LoopJson<'a>>,
    line: String,
}

#[derive(Serialize)]
struct LoopJson<'a> {
    run: &'a str,
    entry: &'a str,
    frame_a: Option<&'a str>,
    frame_b: Option<&'a str>,
}

impl Serialize for Comparison<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        ComparisonJson {
            label_a: &self.label_a,
            label_b: &self.label_b,
            verdicts: self
                .classes
                .iter()
                .map(|cl| VerdictJson {
                    target: &cl.target,
                    case_name: &cl.case_name,
                    change: cl.growth.change,
                    classes_a: &cl.classes_a,
                    classes_b: &cl.classes_b,
                    growth: &cl.growth,
                    discovered: cl.discovered.as_ref().map(|d| {
                        let (frame_a, frame_b) = cl.loop_frames();
                        LoopJson {
                            run: &d.run,
                            entry: &d.entry,
                            frame_a,
                            frame_b,
                        }
                    }),
                    line: class_line(self, cl),
                })
                .collect(),
            rows: &self.rows,
            classes: self
                .classes
                .iter()
                .map(|cl| ClassJson {
                    target: &cl.target,
                    case_name: &cl.case_name,
                    a: cl.sole_classes().0,
                    b: cl.sole_classes().1,
                    line: class_line(self, cl),
                })
                .collect(),
            frame_shifts: &self.frame_shifts,
            unmatched: unmatched_line(self),
        }
        .serialize(s)
    }
}

pub fn compare_json(c: &Comparison) -> String {
    let mut s = serde_json::to_string_pretty(c).expect("comparison serializes");
    s.push('\n');
    s
}

/// mmtests-like terminal rendering: `Tmean  do_wait waitpid-pid N=100  1.23µs  1.10µs * -10.60%*`.
pub fn compare_terminal(c: &Comparison) -> String {
    let mut out = String::new();
    if let Some(l) = unmatched_line(c) {
        out.push_str(&format!("  {l}\n"));
    }
    // Only a change the data shows is flagged; the rest follow, unmarked.
    for flagged in [true, false] {
        for cl in c
            .classes
            .iter()
            .filter(|cl| cl.growth.change.flagged() == flagged)
        {
            let mark = if flagged { "* " } else { "  " };
            out.push_str(&format!("{mark}{}\n", class_line(c, cl)));
        }
    }
    let shifts = frame_shift_lines(c);
    if !shifts.is_empty() {
        out.push_str("\nWhere the time moved:\n");
        for l in shifts {
            out.push_str(&format!("  {l}\n"));
        }
    }
    out.push('\n');
    let mut rows: Vec<Vec<String>> = vec![vec![
        String::new(),
        String::new(),
        String::new(),
        c.label_a.clone(),
        c.label_b.clone(),
        "diff".into(),
    ]];
    for r in &c.rows {
        rows.push(vec![
            r.quantity.mean_name().to_string(),
            format!("{} {} N={}", r.target, r.case_name, r.n),
            r.quantity.label().to_string(),
            quantity_value(r.quantity, r.a),
            quantity_value(r.quantity, r.b),
            diff_cell(r),
        ]);
    }
    out.push_str(&align(&rows));
    out
}

#[cfg(test)]
mod frame_shift_tests {
    use super::*;
    use crate::analysis::frameshift::ShareBasis;

    #[test]
    fn the_cases_the_workloads_exist_for_lead_the_frame_shifts() {
        let shift = |target: &str, case: &str, frame: &str| FrameShift {
            target: target.into(),
            case_name: case.into(),
            frame: frame.into(),
            basis: ShareBasis::AddedTime,
            a: 0.3,
            b: 0.05,
        };
        let c = Comparison {
            label_a: "6.1".into(),
            label_b: "6.12".into(),
            rows: Vec::new(),
            classes: Vec::new(),
            frame_shifts: vec![
                shift("dup_mmap", "mempolicy-fork", "copy_page_range"),
                shift("dup_mmap", "spawn", "mas_store"),
                shift("dup_mmap", "spawn", "mas_wr_bnode"),
            ],
            unmatched: None,
        };
        let lines = frame_shift_lines(&c);
        assert_eq!(lines.len(), 2, "{lines:?}");
        let growth = |change, range: Option<(u64, u64)>, ga, gb, reason: Option<&str>| {
            crate::analysis::compare::GrowthChange {
                change,
                n_range: range,
                growth_a: ga,
                growth_b: gb,
                added_a: None,
                added_b: None,
                log_change: None,
                interval: None,
                same_interval: None,
                reason: reason.map(String::from),
                by_count: None,
            }
        };
        let cl = |a: &[Complexity], in_b, g| ClassChange {
            side_a: None,
            side_b: None,
            target: "do_wait".into(),
            case_name: "waitpid-pid".into(),
            classes_a: a.to_vec(),
            classes_b: Vec::new(),
            in_a: true,
            in_b,
            growth: g,
            discovered: None,
        };
        assert_eq!(
            class_line(
                &c,
                &cl(
                    &[Complexity::Linear],
                    true,
                    growth(
                        Change::Shrank,
                        Some((1, 6000)),
                        Some(31.0),
                        Some(0.93),
                        None
                    )
                )
            ),
            "do_wait [waitpid-pid]: shrank: x31.0 -> x0.93 per call over N=1..6000 (6.1 O(n) \
             -> 6.12 no fit)"
        );
        assert_eq!(
            class_line(
                &c,
                &cl(
                    &[Complexity::Linear, Complexity::NLogN],
                    false,
                    growth(
                        Change::Inconclusive,
                        None,
                        None,
                        None,
                        Some("absent from B")
                    )
                )
            ),
            "do_wait [waitpid-pid]: inconclusive: absent from B (6.1 O(n) or O(n log n) -> 6.12 \
             absent)"
        );
        assert!(
            lines[0].starts_with("dup_mmap [spawn]: mas_store 30% -> 5%, mas_wr_bnode"),
            "{lines:?}"
        );
        assert!(
            lines[1].starts_with("dup_mmap [mempolicy-fork]: "),
            "{lines:?}"
        );
    }
}
