//! Section 1 (added cost per traced call, and `--discover`'s cost) and section 6 (the
//! same tables for the function probes measured in a VM).

use std::fmt::Write;

use super::{ns, spread, verdict};
use crate::bench::measure::DISCOVER_FREQ;
use crate::bench::overhead::{OverheadSet, discover_overhead};
use crate::bench::vmbench::VmSection;

/// The smallest and the largest count over the runs that counted.
fn counted_range(counted: &[Option<u64>]) -> Option<(u64, u64)> {
    let counted = counted.iter().flatten().copied();
    Some((counted.clone().min()?, counted.max()?))
}

pub(super) fn discover_section(md: &mut String, set: &OverheadSet) {
    let _ = writeln!(md, "### {}\n", set.title);
    let _ = writeln!(
        md,
        "`tracer record --discover -F {f} -- workloads {args}`: sampling only (cpu-clock kernel \
         stacks of the command's tree, the kernel entry each sample ran under and where the \
         tree blocks; no function probe); **perf-record**: `perf record -F {f} -g -- workloads \
         {args}` (cpu-clock samples of the command's tree with kernel and user call chains), \
         what one would run instead; both against the same command untraced, {} interleaved \
         rounds; the command's own time per op.\n",
        set.rounds,
        f = DISCOVER_FREQ,
        args = set.workload.args.join(" "),
    );
    // Discover's count is its sampler's every firing (`samples_total`): every CPU's, idle
    // ones too, before the filter to the command's tree; perf's is the tree's own.
    md.push_str(
        "| configuration | ns/op (median) | IQR | min–max | added ns/op (median) | samples per run (discover: every CPU's) |\n\
         | --- | ---: | ---: | ---: | ---: | --- |\n",
    );
    for c in &set.configs {
        let (m, iqr, mm) = spread(&c.summary);
        let added = c.added_ns.map_or("–".into(), |a| ns(a.median));
        let counted =
            counted_range(&c.counted).map_or("–".into(), |(lo, hi)| format!("{lo}–{hi}"));
        let _ = writeln!(
            md,
            "| {} | {m} | {iqr} | {mm} | {added} | {counted} |",
            c.name
        );
    }
    match discover_overhead(set) {
        Some(p) => {
            let _ = writeln!(
                md,
                "\n`--discover` adds **{:+.1}%** to the command's time per op (median of the \
                 per-round ratios; {:+.1}% to {:+.1}% over the rounds).\n",
                p.median, p.min, p.max
            );
        }
        None => md.push_str("\nNo round measured both configurations.\n\n"),
    }
    ratio_table(md, set);
}

pub(super) fn overhead_table(md: &mut String, set: &OverheadSet) {
    let _ = writeln!(md, "### {}\n", set.title);
    let _ = writeln!(
        md,
        "Workload: `workloads {}` ({} ops per run; one op = one traced `{}` call, checked), \
         attach points: {} ({} plan `{}`), {} interleaved rounds.\n",
        set.workload.args.join(" "),
        set.configs.first().map_or(0, |c| c.ops_per_run),
        set.workload.target,
        set.attach
            .points
            .iter()
            .map(|p| format!("`{p}`"))
            .collect::<Vec<_>>()
            .join(", "),
        set.attach.mechanism,
        set.attach.plan,
        set.rounds
    );
    md.push_str(
        "| configuration | ns/op (median) | IQR | min–max | added ns/call (median) | added IQR | counted per run |\n\
         | --- | ---: | ---: | ---: | ---: | ---: | --- |\n",
    );
    for c in &set.configs {
        let (m, iqr, mm) = spread(&c.summary);
        let (am, aiqr, _) = match &c.added_ns {
            Some(_) => spread(&c.added_ns),
            None => ("–".into(), "–".into(), String::new()),
        };
        let counted = match counted_range(&c.counted) {
            Some((lo, hi)) if lo == hi => format!("{lo}"),
            Some((lo, hi)) => format!("{lo}–{hi}"),
            None => "–".into(),
        };
        let _ = writeln!(
            md,
            "| {} | {m} | {iqr} | {mm} | {am} | {aiqr} | {counted} |",
            c.name
        );
    }
    md.push('\n');
    ratio_table(md, set);
    for n in &set.notes {
        let _ = writeln!(md, "- {n}");
    }
    if !set.notes.is_empty() {
        md.push('\n');
    }
}

/// The figures of merit of one set: each ratio of median added costs against its target.
fn ratio_table(md: &mut String, set: &OverheadSet) {
    if set.ratios.is_empty() {
        return;
    }
    md.push_str(
        "| figure of merit | ratio of median added costs | per-round ratios: median (min–max) | target | |\n\
         | --- | ---: | ---: | ---: | --- |\n",
    );
    for r in &set.ratios {
        let per = r.per_round.map_or("–".into(), |s| {
            format!("{:.2} ({:.2}–{:.2})", s.median, s.min, s.max)
        });
        let _ = writeln!(
            md,
            "| {} / {} | {} | {per} | ≤ {} | {} |",
            r.numerator,
            r.denominator,
            r.of_medians
                .map_or("n/a (an added cost within noise)".into(), |v| format!(
                    "{v:.2}"
                )),
            r.limit,
            verdict(r.met)
        );
    }
    md.push('\n');
}

/// Section 6: the fentry/kprobe sets measured in a VM.
pub(super) fn vm_section(md: &mut String, v: &VmSection) {
    md.push_str("## 6. Function probes in a VM (fentry, kprobe)\n\n");
    let _ = writeln!(
        md,
        "Debian {} under qemu ({}, {} vCPUs), {} interleaved rounds, {:.0} s in all. TCG \
         emulates the CPU: absolute times are several times bare metal and noisier; the \
         ratios still compare like with like. bpftrace is not in the guest (busybox only), \
         so the VM figures compare the tracer with the counter-only floor.\n",
        v.kernel, v.accel, v.cpus, v.rounds, v.elapsed_s
    );
    for u in &v.unavailable {
        let _ = writeln!(md, "- Not measured: {u}");
    }
    for b in &v.failed_boots {
        let _ = writeln!(md, "- An earlier boot failed and was not used: {b}");
    }
    if !v.unavailable.is_empty() || !v.failed_boots.is_empty() {
        md.push('\n');
    }
    for set in &v.sets {
        overhead_table(md, set);
    }
}
