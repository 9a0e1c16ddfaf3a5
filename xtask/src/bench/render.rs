//! BENCHMARKS.md from the results: the targets first (met or missed, and why), then each
//! section's tables and how it was measured.

mod loss;
mod missed;
mod overhead;
mod profile;
mod resources;

use std::fmt::Write;

use super::Results;
use super::stats::Summary;

fn ns(v: f64) -> String {
    if v.abs() >= 100_000.0 {
        format!("{:.1} µs", v / 1000.0)
    } else if v.abs() >= 100.0 {
        format!("{v:.0}")
    } else {
        format!("{v:.1}")
    }
}

/// `a–b` in one unit, the one `ns` picks for the larger end (no "52012–383.0 µs").
fn ns_range(a: f64, b: f64) -> String {
    if a.abs().max(b.abs()) >= 100_000.0 {
        format!("{:.1}–{:.1} µs", a / 1000.0, b / 1000.0)
    } else {
        format!("{}–{}", ns(a), ns(b))
    }
}

fn spread(s: &Option<Summary>) -> (String, String, String) {
    match s {
        Some(s) => (ns(s.median), ns_range(s.q1, s.q3), ns_range(s.min, s.max)),
        None => ("–".into(), "–".into(), "–".into()),
    }
}

fn mib(kib: u64) -> String {
    format!("{:.1} MiB", kib as f64 / 1024.0)
}

fn verdict(met: Option<bool>) -> &'static str {
    match met {
        Some(true) => "met",
        Some(false) => "**missed**",
        None => "not measurable",
    }
}

/// The whole file.
pub fn markdown(r: &Results) -> String {
    let mut md = String::new();
    md.push_str("# Benchmarks: the tracer's own cost, side by side with bpftrace\n\n");
    let _ = writeln!(
        md,
        "Written by `cargo xtask bench{}{}` (issue 6). Re-run it to refresh; `bench.json` beside \
         this file holds every figure, per round.\n",
        if r.plan.quick { " --quick" } else { "" },
        if r.vm.is_some() { " --vm" } else { "" }
    );
    meta_table(&mut md, r);
    md.push_str(
        "\nThe machine has 2 cores and other jobs (VM tests) may run at the same time: that is \
         why every comparison runs its configurations interleaved in one run (ABCDE ABCDE ...), \
         pairs each traced run with the untraced run of the same round, and reports medians \
         with their spread.\n\n",
    );

    // Targets.
    md.push_str("## Targets\n\n| target | measured | |\n| --- | --- | --- |\n");
    for t in &r.targets {
        let v = if t.info { "stated" } else { verdict(t.met) };
        let _ = writeln!(md, "| {} | {} | {} |", t.target, t.measured, v);
    }
    md.push('\n');
    missed::why_missed(&mut md, r);

    // 1.
    section_1_intro(&mut md);
    for set in &r.overhead {
        overhead::overhead_table(&mut md, set);
    }
    for set in &r.discover {
        overhead::discover_section(&mut md, set);
    }
    if let Some(l) = &r.loss {
        loss::loss_section(&mut md, l);
    }
    if let Some(s) = &r.startup {
        resources::startup_section(&mut md, s);
    }
    if let Some(mem) = &r.memory {
        resources::memory_section(&mut md, mem);
    }
    if let Some(a) = &r.analysis {
        resources::analysis_section(&mut md, a);
    }
    if let Some(p) = &r.profile {
        profile::profile_section(&mut md, p);
    }
    if let Some(v) = &r.vm {
        overhead::vm_section(&mut md, v);
    }
    if !r.skipped.is_empty() {
        md.push_str("## Not measured in this run\n\n");
        for s in &r.skipped {
            let _ = writeln!(md, "- {s}");
        }
        md.push('\n');
    }
    md
}

/// The run's facts: when, which commit, machine, kernel, toolchain, tools and rounds.
fn meta_table(md: &mut String, r: &Results) {
    let m = &r.meta;
    md.push_str("| | |\n| --- | --- |\n");
    let _ = writeln!(md, "| date | {} |", m.date_utc);
    let _ = writeln!(
        md,
        "| commit | `{}`{} |",
        m.commit,
        if m.dirty {
            " (with uncommitted changes)"
        } else {
            ""
        }
    );
    let _ = writeln!(
        md,
        "| machine | {}, {} cores, {:.1} GiB |",
        m.cpu, m.cores, m.mem_gib
    );
    let _ = writeln!(md, "| kernel | {} |", m.kernel);
    let _ = writeln!(md, "| toolchain | {} |", m.rustc);
    let _ = writeln!(
        md,
        "| bpftrace | {} |",
        m.bpftrace.as_deref().unwrap_or("not installed")
    );
    let _ = writeln!(
        md,
        "| perf | {} |",
        m.perf.as_deref().unwrap_or("not installed")
    );
    let _ = writeln!(
        md,
        "| run | {}{} rounds, {:.0} s in all |",
        if r.plan.quick { "--quick: " } else { "" },
        r.plan.rounds,
        m.duration_s
    );
}

/// Section 1's heading and what its tables measure.
fn section_1_intro(md: &mut String) {
    md.push_str("## 1. Added cost per traced call\n\n");
    md.push_str(
        "ns/op is the workload's own timing of its measured phase (`time_ns_per_op`). \
         Added ns/call = traced run − untraced run of the same round, per op; each op is one \
         traced call (the tracer's runs are rejected unless its call count for the phase \
         equals the workload's ops exactly; bpftrace's `count()` must lie between the ops and \
         the ops plus the calls outside the phase; the floor must count at least two hits per \
         call, its entry and its exit). A ratio is reported only when both added costs are \
         clearly above the noise (each one's lower quartile over the rounds is positive and \
         its interquartile range narrower than its median); \
         otherwise it reads \"not measurable\". Configurations:\n\n\
         - **untraced**: the workload alone;\n\
         - **tracer**: `tracer record --targets T --no-verify` (default options: caller stacks \
         at every call, 999 Hz on-CPU sampling, off-CPU stacks);\n\
         - **tracer-lean**: the same with `--no-callers --no-samples --no-offcpu`;\n\
         - **tracer-lean-exact-path**: tracer-lean with `TRACER_NO_FAST_PATH=1`: every call \
         paired through the thread-state hash map, without the per-CPU fast path (for \
         comparison, under no goal); **-perf-events**: one perf event per tracepoint instead \
         of raw tracepoints;\n\
         - **bpftrace**: the equivalent probe, on the same attach points: a start-time map \
         keyed by tid on entry (`/pid == cpid/`), `hist()` of the delta and `count()` on exit;\n\
         - **bpftrace-phase-uprobes**: the same plus uprobes on the workload binary's \
         `tracer_phase_begin`/`_end`, where the tracer places its phase markers: what the \
         markers cost a workload (for comparison, under no goal);\n\
         - **floor**: `tracer __floor`: only a counter-only eBPF program of the same mechanism \
         on the same points, entry and exit (no filter, no maps but a per-CPU counter);\n\
         - **timed-floor**: `tracer __floor --timed`: the floor plus a clock read at both ends \
         and the entry time kept per CPU until the exit: what timing a call costs at the \
         least, whatever the tool.\n\n",
    );
}

#[cfg(test)]
mod tests {
    use super::super::measure::{Attach, Sample, Workload};
    use super::super::overhead::discover_overhead;
    use super::super::overhead::{OverheadSet, assemble, ratio_pairs};
    use super::super::{BenchOptions, Meta, Plan, Results, TargetCheck, evaluate, loss};
    use super::*;

    #[test]
    fn a_range_is_written_in_one_unit() {
        assert_eq!(ns_range(52012.0, 383_000.0), "52.0–383.0 µs");
        assert_eq!(ns_range(-82542.0, 247_200.0), "-82.5–247.2 µs");
        assert_eq!(ns_range(120.0, 480.0), "120–480");
    }

    /// An overhead set of `configs` (the first untraced) from per-round samples, with the
    /// goals `ratio_pairs` sets between them.
    fn set_of(
        title: &str,
        w: &Workload,
        attach: &Attach,
        configs: &[&str],
        samples: &[Vec<Sample>],
    ) -> OverheadSet {
        let names: Vec<String> = configs.iter().map(|s| s.to_string()).collect();
        assemble(title, w, attach, &names, samples, &ratio_pairs(&names, w))
    }

    /// What a sampling configuration attaches: no probe.
    fn no_probe() -> Attach {
        Attach {
            mechanism: "tracepoint".into(),
            plan: "p".into(),
            points: vec![],
        }
    }

    /// One configuration's runs: these ns per op, each of `ops` ops and `counted` calls.
    fn runs(ns_per_op: &[f64], ops: u64, counted: u64) -> Vec<Sample> {
        ns_per_op
            .iter()
            .map(|&ns_per_op| Sample {
                ns_per_op,
                ops,
                counted: Some(counted),
            })
            .collect()
    }

    fn results() -> Results {
        let names = [
            "untraced",
            "tracer",
            "tracer-lean",
            "bpftrace",
            "timed-floor",
        ];
        let mk = |v: &[f64]| runs(v, 1000, 1000);
        let samples = vec![
            mk(&[150.0, 140.0, 160.0]),
            mk(&[2010.0, 1900.0, 2100.0]),
            mk(&[750.0, 740.0, 760.0]),
            mk(&[550.0, 540.0, 560.0]),
            mk(&[230.0, 220.0, 240.0]),
        ];
        let set = set_of(
            "getpid, tracepoint (host)",
            &Workload::getpid(200_000, 5),
            &Attach {
                mechanism: "tracepoint".into(),
                plan: "syscall-bracket".into(),
                points: vec!["syscalls:sys_enter_getpid".into()],
            },
            &names,
            &samples,
        );
        Results {
            format: super::super::FORMAT.into(),
            meta: Meta {
                date_utc: "2026-01-01 00:00:00 UTC".into(),
                commit: "abc123".into(),
                dirty: true,
                cpu: "Test CPU".into(),
                cores: 2,
                mem_gib: 23.5,
                kernel: "6.18.44".into(),
                rustc: "rustc 1.95".into(),
                bpftrace: Some("bpftrace v0.17.0".into()),
                perf: None,
                duration_s: 300.0,
            },
            plan: Plan::new(&BenchOptions {
                quick: true,
                vm: false,
                rounds: None,
                render_only: false,
            }),
            overhead: vec![set],
            discover: Vec::new(),
            loss: Some(loss::Loss {
                workload: Workload::getpid(200_000, 25),
                aggregate: vec![loss::AggregateRun {
                    options: "lean".into(),
                    workload_ops: 5_000_000,
                    counted: 5_000_000,
                    rate_per_s: 1.5e6,
                    aggregate_map_full: 0,
                    thread_map_full: 0,
                    exact: true,
                }],
                raw_workload: Workload::getpid(200_000, 12),
                raw: vec![
                    loss::RawRun {
                        ring: "256K".into(),
                        ring_bytes: 262_144,
                        calls: 100,
                        events_written: 90,
                        ringbuf_drops: 10,
                        csv_rows: 90,
                        offered_per_s: 1e6,
                        delivered_per_s: 0.9e6,
                        loss_fraction: 0.1,
                        consistent: true,
                    },
                    loss::RawRun {
                        ring: "16M".into(),
                        ring_bytes: 16 << 20,
                        calls: 100,
                        events_written: 100,
                        ringbuf_drops: 0,
                        csv_rows: 100,
                        offered_per_s: 1e6,
                        delivered_per_s: 1e6,
                        loss_fraction: 0.0,
                        consistent: true,
                    },
                ],
            }),
            startup: None,
            memory: Some(super::super::memory::Memory {
                seconds: 15,
                command: "tracer record ...".into(),
                calls: 1,
                rate_per_s: 1e6,
                peak_rss_kib: 70_000,
                sampled_peak_rss_kib: 69_000,
                maxrss_tree_kib: 71_000,
                map_memlock_bytes: 38 << 20,
                exact: true,
            }),
            analysis: None,
            profile: None,
            vm: None,
            skipped: vec!["VM section (fentry, kprobe) not run: pass --vm".into()],
            targets: Vec::new(),
        }
    }

    #[test]
    fn evaluation_marks_missed_and_met_targets() {
        let mut r = results();
        r.targets = evaluate(&r);
        let find = |s: &str| -> &TargetCheck {
            r.targets
                .iter()
                .find(|t| t.target.contains(s))
                .unwrap_or_else(|| panic!("no target {s}: {:?}", r.targets))
        };
        // tracer added 1860 vs bpftrace 400: 4.65 > 0.5.
        let t = find("tracer / bpftrace");
        assert_eq!(t.met, Some(false));
        assert_eq!(t.measured, "4.65");
        // lean 600 vs the timed floor 80: 7.5 > 1.3.
        let lean = find("tracer-lean / timed-floor");
        assert_eq!((lean.met, lean.measured.as_str()), (Some(false), "7.50"));
        assert!(lean.target.ends_with("<= 1.3"), "{}", lean.target);
        assert_eq!(find("zero loss").met, Some(true));
        assert_eq!(find("peak RSS").met, Some(true));
        assert!(find("peak RSS").measured.starts_with("68.4 MiB"));
    }

    #[test]
    fn markdown_has_every_section_and_says_what_was_missed() {
        let mut r = results();
        r.targets = evaluate(&r);
        let md = markdown(&r);
        for needle in [
            "# Benchmarks",
            "| commit | `abc123` (with uncommitted changes) |",
            "| machine | Test CPU, 2 cores, 23.5 GiB |",
            "## Targets",
            "**missed**",
            "### Why targets are missed",
            "## 1. Added cost per traced call",
            "| tracer | 2010 | 1955–2055 | 1900–2100 | 1860 |",
            "| tracer / bpftrace | 4.65 |",
            "## 2. Loss",
            "Loss begins below a 16M ring at this rate (lossy: 256K)",
            "## 4. Memory",
            "--quick: shortened from the one minute",
            "## Not measured in this run",
        ] {
            assert!(md.contains(needle), "missing {needle:?} in:\n{md}");
        }
        assert!(!md.contains("## 6."), "no VM section without VM results");
    }

    #[test]
    fn discover_overhead_is_paired_per_round_and_stated() {
        let names = ["untraced", "discover"];
        let mk = |v: &[(f64, Option<u64>)]| -> Vec<Sample> {
            v.iter()
                .map(|&(ns_per_op, counted)| Sample {
                    ns_per_op,
                    ops: 5000,
                    counted,
                })
                .collect()
        };
        // Round 2 is slow for both (a noisy neighbour): +2%, +4%, +3% once paired.
        let samples = vec![
            mk(&[(100_000.0, None), (200_000.0, None), (100_000.0, None)]),
            mk(&[
                (102_000.0, Some(900)),
                (208_000.0, Some(1800)),
                (103_000.0, Some(950)),
            ]),
        ];
        let set = set_of(
            "fork+waitpid, --discover sampling (host)",
            &Workload::waitpid(5000),
            &no_probe(),
            &names,
            &samples,
        );
        assert!(set.ratios.is_empty(), "no figure of merit: a stated cost");
        let p = discover_overhead(&set).unwrap();
        assert!((p.median - 3.0).abs() < 1e-9, "{p:?}");
        assert!(
            (p.min - 2.0).abs() < 1e-9 && (p.max - 4.0).abs() < 1e-9,
            "{p:?}"
        );
        let mut r = results();
        r.discover = vec![set];
        let md = markdown(&r);
        assert!(
            md.contains("### fork+waitpid, --discover sampling (host)"),
            "{md}"
        );
        assert!(
            md.contains("adds **+3.0%** to the command's time per op"),
            "{md}"
        );
        assert!(md.contains("| discover | "), "{md}");
        assert!(md.contains("| 900–1800 |"), "{md}");
    }

    #[test]
    fn discover_is_held_to_perf_record_per_round() {
        let names = ["untraced", "discover", "perf-record"];
        let mk = |v: &[f64]| runs(v, 1000, 500);
        // Added per op: discover 150, 160, 140; perf 10, 12, 8: 15x perf.
        let samples = vec![
            mk(&[70.0, 72.0, 68.0]),
            mk(&[220.0, 232.0, 208.0]),
            mk(&[80.0, 84.0, 76.0]),
        ];
        let set = set_of(
            "getpid, --discover sampling (host)",
            &Workload::getpid(1000, 1),
            &no_probe(),
            &names,
            &samples,
        );
        let ratio = set
            .ratios
            .iter()
            .find(|r| r.numerator == "discover" && r.denominator == "perf-record")
            .expect("discover against perf record");
        // getpid does nothing in the kernel: twice perf's cost is its limit.
        assert_eq!(ratio.limit, 2.0);
        assert!((ratio.of_medians.unwrap() - 15.0).abs() < 1e-9, "{ratio:?}");
        assert_eq!(ratio.met, Some(false));
        let mut r = results();
        r.overhead.clear();
        r.discover = vec![set];
        r.targets = evaluate(&r);
        let t = r
            .targets
            .iter()
            .find(|t| t.target.contains("discover / perf-record"))
            .expect("a target");
        assert_eq!(
            (t.measured.as_str(), t.met),
            ("15.00", Some(false)),
            "{t:?}"
        );
        let md = markdown(&r);
        assert!(md.contains("| discover / perf-record | 15.00 |"), "{md}");
        assert!(
            md.contains("discover adds 150 ns per op, perf record 10.0 ns;"),
            "{md}"
        );
        assert!(!md.contains("sampled little"), "{md}");
    }

    /// A perf record that took under a tenth of discover's samples is said to have sampled
    /// little of the command; a read loop is held to perf's cost once.
    #[test]
    fn a_perf_record_that_sampled_little_is_said_so() {
        let names = ["untraced", "discover", "perf-record"];
        let samples = vec![
            runs(&[100.0, 100.0, 100.0], 1000, 0),
            runs(&[130.0, 130.0, 130.0], 1000, 9000),
            runs(&[110.0, 110.0, 110.0], 1000, 30),
        ];
        let set = set_of(
            "pipe read, --discover sampling (host)",
            &Workload::pipe_read(1000, 1),
            &no_probe(),
            &names,
            &samples,
        );
        assert_eq!(set.ratios[0].limit, 1.0);
        assert_eq!(set.ratios[0].met, Some(false));
        let mut r = results();
        r.overhead.clear();
        r.discover = vec![set];
        r.targets = evaluate(&r);
        let md = markdown(&r);
        assert!(
            md.contains(
                "discover adds 30.0 ns per op, perf record 10.0 ns (perf record took 30–30 \
                 samples of the command per run, discover's sampler fired 9000–9000 times on \
                 every CPU: perf sampled little of this command"
            ),
            "{md}"
        );
    }

    #[test]
    fn phase_marker_uprobes_are_named_when_they_are_most_of_the_cost() {
        let names = [
            "untraced",
            "tracer-lean",
            "bpftrace",
            "bpftrace-phase-uprobes",
            "timed-floor",
        ];
        let mk = |v: &[f64]| runs(v, 5000, 5000);
        // Added per op: lean 15 us, bpftrace 2 us, with the uprobes 14 us, floor ~1 us.
        let samples = vec![
            mk(&[60_000.0, 61_000.0, 59_000.0]),
            mk(&[75_000.0, 76_000.0, 74_000.0]),
            mk(&[62_000.0, 63_000.0, 61_000.0]),
            mk(&[74_000.0, 75_000.0, 73_000.0]),
            mk(&[61_000.0, 62_000.0, 60_000.0]),
        ];
        let attach = Attach {
            mechanism: "tracepoint".into(),
            plan: "syscall-bracket".into(),
            points: vec!["syscalls:sys_enter_wait4".into()],
        };
        let set = set_of(
            "fork+waitpid, tracepoint (host)",
            &Workload::waitpid(5000),
            &attach,
            &names,
            &samples,
        );
        assert!(
            set.ratios
                .iter()
                .all(|r| r.denominator != "bpftrace-phase-uprobes"),
            "no goal against the markers' configuration"
        );
        let mut r = results();
        r.overhead = vec![set];
        r.targets = evaluate(&r);
        let md = markdown(&r);
        assert!(
            md.contains(
                "fork+waitpid, tracepoint (host): the phase markers are most of it. bpftrace adds \
                 2000 ns per call; with uprobes"
            ),
            "{md}"
        );
        assert!(md.contains(", 14000 ns (tracer-lean: 15000 ns)"), "{md}");
        // Where the uprobes add little, nothing is said of them.
        let mut quiet = samples.clone();
        quiet[3] = mk(&[62_500.0, 63_500.0, 61_500.0]);
        let set = set_of(
            "fork+waitpid, tracepoint (host)",
            &Workload::waitpid(5000),
            &attach,
            &names,
            &quiet,
        );
        r.overhead = vec![set];
        r.targets = evaluate(&r);
        assert!(!markdown(&r).contains("phase markers are most of it"));
    }

    #[test]
    fn all_met_says_so() {
        let mut r = results();
        r.overhead.clear();
        r.targets = evaluate(&r);
        let md = markdown(&r);
        assert!(md.contains("Every target measured was met."));
        assert!(!md.contains("Why targets are missed"));
    }
}
