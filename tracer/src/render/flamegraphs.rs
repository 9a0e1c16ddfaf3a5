//! The flamegraph files of a report (per N, and the differential from the smallest to the
//! largest N) and of a comparison (A → B at the largest N both sampled), with the index's
//! groups and links to them.

use std::collections::BTreeMap;

use crate::analysis::analyze::RunInfo;
use crate::analysis::stacks::Anchors;
use crate::analysis::{Analysis, StackData};
use crate::rundata::StackKind;

use super::index::TargetLinks;
use super::out::{self, OutDir};
use super::{ReportError, ReportOptions, flamesvg, index};

/// A failed flamegraph, named by the file it was for.
fn failed<'a>(out: &'a OutDir, rel: &'a str) -> impl FnOnce(std::io::Error) -> ReportError + 'a {
    move |source| ReportError::Flamegraph {
        path: out.root().join(rel),
        source,
    }
}

/// Every (run, target, case, stack kind) of a report: a flamegraph per N and the differential,
/// recorded in `links` for the index and the summary.
pub(super) fn write_report(
    a: &Analysis,
    out: &mut OutDir,
    opts: &ReportOptions,
    links: &mut BTreeMap<String, TargetLinks>,
) -> Result<(), ReportError> {
    for run in &a.runs {
        // (target, case id, case name, kind) -> stacks: cases in the workload's order, kinds
        // in a fixed order.
        let mut groups: BTreeMap<(&str, u32, &str, StackKind), Vec<&StackData>> = BTreeMap::new();
        for s in run.stacks.iter().filter(|s| drawn(s, opts)) {
            groups
                .entry((&s.file.target, s.file.case, &s.file.case_name, s.file.kind))
                .or_default()
                .push(s);
        }
        for ((target, _, case_name, kind), mut stacks) in groups {
            stacks.sort_by_key(|s| s.file.n);
            let group = Group {
                run,
                target,
                case_name,
                kind,
                sweep: a.is_sweep,
            };
            write_group(&group, &stacks, out, opts, links)?;
        }
    }
    Ok(())
}

/// Whether a stack file gets flamegraphs. Entry stacks are the profile's kernel samples
/// again, filed by entry: the profile's flamegraphs show them.
fn drawn(s: &StackData, opts: &ReportOptions) -> bool {
    !(s.folded.is_empty()
        || s.file.kind == StackKind::Entry
        || (s.file.case == tracer_ebpf::CASE_UNPHASED && !opts.include_unphased))
}

/// One run's stacks of one kind for one target and case.
struct Group<'a> {
    run: &'a RunInfo,
    target: &'a str,
    case_name: &'a str,
    kind: StackKind,
    /// Part of a sweep: the run's name is in the paths and the title.
    sweep: bool,
}

/// A group's flamegraphs (`stacks` by N, ascending): the differential between the smallest
/// and the largest N, then one per N, linked from the target's section with the differential
/// and the largest N embedded.
fn write_group(
    g: &Group,
    stacks: &[&StackData],
    out: &mut OutDir,
    opts: &ReportOptions,
    links: &mut BTreeMap<String, TargetLinks>,
) -> Result<(), ReportError> {
    let (run, kind) = (g.run, g.kind);
    let plan = run.plan_of(g.target);
    let info = flamesvg::FlameInfo {
        kind,
        target: g.target,
        case_name: g.case_name,
        kernel: &run.kernel,
        plan,
        width: opts.flame_width,
    };
    let prefix = if g.sweep {
        format!("{}/", out::safe(&run.label))
    } else {
        String::new()
    };
    let dir = format!(
        "flamegraphs/{prefix}{}/{}/{}",
        kind.as_str(),
        out::safe(g.target),
        out::safe(g.case_name)
    );
    let mut items = Vec::new();
    let mut embed = Vec::new();
    let (Some(first), Some(last)) = (stacks.first(), stacks.last()) else {
        return Ok(());
    };
    // The differential first: it is what shows which frames grow.
    if opts.differential && first.file.n != last.file.n {
        let (n0, n1) = (first.file.n, last.file.n);
        let rel = format!("{dir}/diff-n{n0}-n{n1}.svg");
        let svg = flamesvg::differential(&info, n0, &first.folded, n1, &last.folded)
            .map_err(failed(out, &rel))?;
        out.write(&rel, &svg)?;
        items.push((format!("differential N={n0} → N={n1}"), rel.clone()));
        links.entry(g.target.to_string()).or_default().diffs.push((
            run.label.clone(),
            g.case_name.to_string(),
            kind,
            rel.clone(),
        ));
        embed.push(rel);
    }
    for (i, s) in stacks.iter().enumerate() {
        let rel = format!("{dir}/n{}.svg", s.file.n);
        let svg = flamesvg::flamegraph(&info, s.file.n, &s.folded, s.file.count)
            .map_err(failed(out, &rel))?;
        out.write(&rel, &svg)?;
        // The largest N is embedded beside the differential; the others are links.
        if i == stacks.len() - 1 {
            embed.push(rel.clone());
        }
        items.push((format!("N={}", s.file.n), rel));
    }
    let mut title = format!("{} · {}", g.case_name, flamesvg::kind_label(kind));
    if g.sweep {
        title.push_str(&format!(" · {}", run.label));
    }
    links
        .entry(g.target.to_string())
        .or_default()
        .flames
        .push(index::FlameGroup {
            title,
            items,
            embed,
        });
    Ok(())
}

/// Stacks of one target by (case, kind) and N, each beside its run; the first of each when
/// runs repeat them.
type StacksByN<'a> = BTreeMap<(String, StackKind), BTreeMap<u64, (&'a RunInfo, &'a StackData)>>;

fn stacks_by_n<'a>(an: &'a Analysis, target: &str, opts: &ReportOptions) -> StacksByN<'a> {
    let mut m: StacksByN<'a> = BTreeMap::new();
    for run in &an.runs {
        for s in run.stacks.iter().filter(|s| drawn(s, opts)) {
            if s.file.target == target {
                m.entry((s.file.case_name.clone(), s.file.kind))
                    .or_default()
                    .entry(s.file.n)
                    .or_insert((run, s));
            }
        }
    }
    m
}

/// Differential flamegraphs of one target between the two sides, per (case, stack kind) at the
/// largest N both sides sampled: what a kernel change did to the stacks at the same size.
pub(super) fn cross_kernel(
    aa: &Analysis,
    ab: &Analysis,
    (label_a, label_b): (&str, &str),
    target: &str,
    out: &mut OutDir,
    opts: &ReportOptions,
) -> Result<Vec<index::FlameGroup>, ReportError> {
    let (sa, sb) = (stacks_by_n(aa, target, opts), stacks_by_n(ab, target, opts));
    let mut groups = Vec::new();
    for ((case_name, kind), by_n_a) in &sa {
        let Some(by_n_b) = sb.get(&(case_name.clone(), *kind)) else {
            continue;
        };
        let Some((&n, before)) = by_n_a.iter().rev().find(|(n, _)| by_n_b.contains_key(n)) else {
            continue;
        };
        let (run_a, before) = *before;
        let (run_b, after) = by_n_b[&n];
        // Each side cut at the target by its own plan's frames, so the two kernels' stacks
        // line up below it.
        let anchors = |run: &RunInfo| Anchors::new(target, run.plan_of(target));
        let before_aligned = before.folded.aligned(&anchors(run_a));
        let after_aligned = after.folded.aligned(&anchors(run_b));
        let info = flamesvg::FlameInfo {
            kind: *kind,
            target,
            case_name,
            kernel: &run_b.kernel,
            plan: None,
            width: opts.flame_width,
        };
        let rel = format!(
            "flamegraphs/{}/{}/{}/diff-a-b-n{n}.svg",
            kind.as_str(),
            out::safe(target),
            out::safe(case_name)
        );
        let svg =
            flamesvg::cross_kernel(&info, n, label_a, &before_aligned, label_b, &after_aligned)
                .map_err(failed(out, &rel))?;
        out.write(&rel, &svg)?;
        groups.push(index::FlameGroup {
            title: format!(
                "{case_name} · {} · {label_a} → {label_b} at N={n}",
                flamesvg::kind_label(*kind)
            ),
            items: vec![(
                format!("differential {label_a} → {label_b}, N={n}"),
                rel.clone(),
            )],
            embed: vec![rel],
        });
    }
    Ok(groups)
}
