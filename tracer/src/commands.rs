//! What each `tracer` command does once its command line is parsed: run the library and print
//! the outcome. `main.rs` only parses and dispatches, so this can be tested without a terminal.
use std::path::{Path, PathBuf};

use crate::engine::EngineOptions;
use crate::error::{TracerError, exit};
use crate::gate::{self, Expect, ExpectGate, FailOn, FailOnGate};
use crate::render::export::{Format, export as write_export};
use crate::resolve::ResolveOptions;
use crate::{kernel, plan, record, render, sweep};

/// Print to stdout, ignoring a closed pipe (`tracer ... | head`): the run is written by then,
/// and the exit status must say how the run went, not that the reader went away.
macro_rules! out {
    ($($t:tt)*) => {{
        use std::io::Write as _;
        let _ = writeln!(std::io::stdout(), $($t)*);
    }};
}
macro_rules! outp {
    ($($t:tt)*) => {{
        use std::io::Write as _;
        let _ = write!(std::io::stdout(), $($t)*);
    }};
}

/// `tracer record`: trace, write the run, print its summary.
pub fn record(opts: record::RecordOptions) -> Result<i32, TracerError> {
    let outcome = record::record(opts)?;
    print_record_summary(&outcome);
    Ok(outcome.exit_code)
}

/// `tracer sweep`: run the sweep, then render its report with `report` unless that is None,
/// and judge `expect` (when given) on its verdicts. The sweep's own non-zero status (a
/// partial sweep, a failed command) takes precedence over the gate's.
pub fn sweep(
    opts: sweep::SweepOptions,
    report: Option<render::ReportOptions>,
    expect: &[Expect],
) -> Result<i32, TracerError> {
    let outcome = sweep::sweep(opts)?;
    if let Some(p) = &outcome.sweep.partial_reason {
        eprintln!("tracer: partial sweep ({p})");
    }
    out!("sweep written to {}", outcome.dir.display());
    let ran = !outcome.sweep.runs.is_empty();
    let mut analysis = None;
    if let Some(ropts) = report.filter(|_| ran) {
        render::out::catch_interrupts();
        let (summary, a) =
            crate::pipeline::report_analysed(&outcome.dir, &outcome.dir.join("report"), &ropts)?;
        print_summary(&summary);
        analysis = Some(a);
    }
    if expect.is_empty() {
        return Ok(outcome.exit_code);
    }
    let analysis = match analysis {
        Some(a) => Some(a),
        None if ran => Some(crate::pipeline::analyse(
            &outcome.dir,
            &render::ReportOptions::default(),
        )?),
        None => None,
    };
    let verdicts = analysis.iter().flat_map(|a| a.cases());
    let status = print_expect(&ExpectGate::judge(expect, verdicts));
    Ok(if outcome.exit_code != exit::OK {
        outcome.exit_code
    } else {
        status
    })
}

/// Print what `--expect` found; its exit status.
fn print_expect(g: &ExpectGate) -> i32 {
    for l in gate::text::expect(g) {
        out!("{l}");
    }
    g.status().exit_code()
}

/// `tracer report DIR [-o OUT]`: OUT defaults to DIR/report; then `expect` (when given)
/// judged on its verdicts.
pub fn report(
    dir: &Path,
    out: Option<PathBuf>,
    opts: &render::ReportOptions,
    expect: &[Expect],
) -> Result<i32, TracerError> {
    if !dir.is_dir() {
        return Err(TracerError::Input(format!(
            "{}: no such run or sweep directory",
            dir.display()
        )));
    }
    let out = out.unwrap_or_else(|| dir.join("report"));
    render::out::catch_interrupts();
    let (summary, analysis) = crate::pipeline::report_analysed(dir, &out, opts)?;
    print_summary(&summary);
    if expect.is_empty() {
        return Ok(exit::OK);
    }
    Ok(print_expect(&ExpectGate::judge(expect, analysis.cases())))
}

/// `tracer compare A B [-o OUT]`: OUT defaults to `compare-<A>-vs-<B>`; then `fail_on` (when
/// given) judged on its verdicts, once everything is written.
pub fn compare(
    a: &Path,
    b: &Path,
    out: Option<PathBuf>,
    opts: &render::ReportOptions,
    fail_on: &[FailOn],
) -> Result<i32, TracerError> {
    for d in [a, b] {
        if !d.is_dir() {
            return Err(TracerError::Input(format!(
                "{}: no such run or sweep directory",
                d.display()
            )));
        }
    }
    let name = |p: &Path| {
        p.canonicalize()
            .ok()
            .and_then(|c| c.file_name().map(|f| f.to_string_lossy().into_owned()))
            .unwrap_or_else(|| "run".into())
    };
    let out = out.unwrap_or_else(|| PathBuf::from(format!("compare-{}-vs-{}", name(a), name(b))));
    render::out::catch_interrupts();
    let (summary, gate) = crate::pipeline::compare_analysed(a, b, &out, opts, |c| {
        (!fail_on.is_empty()).then(|| {
            let g = FailOnGate::judge(fail_on, c);
            (gate::text::fail_on(&g), g.status())
        })
    })?;
    print_summary(&summary);
    let Some((lines, status)) = gate else {
        return Ok(exit::OK);
    };
    for l in lines {
        out!("{l}");
    }
    Ok(status.exit_code())
}

/// `tracer export FORMAT RUN [-o OUT]`: prints each file written.
pub fn export(format: Format, run: &Path, out: Option<PathBuf>) -> Result<i32, TracerError> {
    if !run.is_dir() {
        return Err(TracerError::Input(format!(
            "{}: no such run directory",
            run.display()
        )));
    }
    let out = out.unwrap_or_else(|| format.default_output(run));
    render::out::catch_interrupts();
    let written = write_export(format, run, &out)?;
    for e in &written {
        match format {
            Format::Perfetto => out!("{}: {}", e.path, e.what),
            Format::Pprof => out!("{}: {}", out.join(&e.path).display(), e.what),
        }
    }
    Ok(exit::OK)
}

/// `tracer __floor [--timed] MECH POINT[,POINT...] -- COMMAND...`: run COMMAND with only the
/// cheapest probe of a mechanism attached (a counter; with --timed also two clock reads and
/// the entry time kept per CPU), and print {"hits": N, "ns": T}. The benchmarks use it as
/// the floor that the real probes' cost is compared with; not part of the CLI.
pub fn floor(timed: bool, mech: &str, points: &str, command: &[String]) -> i32 {
    let Some((cmd, args)) = command.split_first() else {
        return exit::USAGE;
    };
    let opts = EngineOptions {
        sample_freq_hz: 0,
        caller_stacks: false,
        offcpu_stacks: false,
        raw_events_bytes: 0,
        bpf_log: false,
        scheduler: false,
        ..EngineOptions::default()
    };
    let result = (|| -> Result<(u64, u64), TracerError> {
        record::check_privileges()?;
        let mut engine = crate::engine::Engine::load(opts)?;
        for p in points.split(',') {
            engine.attach_floor(mech, p, timed)?;
        }
        let st = std::process::Command::new(cmd)
            .args(args)
            .status()
            .map_err(|e| TracerError::Usage(format!("{cmd}: {e}")))?;
        if !st.success() {
            return Err(TracerError::Other(format!("{cmd} failed: {st}")));
        }
        Ok(engine.floor_hits()?)
    })();
    match result {
        Ok((hits, ns)) => {
            out!("{}", serde_json::json!({ "hits": hits, "ns": ns }));
            exit::OK
        }
        Err(e) => {
            eprintln!("tracer __floor: {e}");
            e.exit_code()
        }
    }
}

/// After a report: the terminal summary, the warnings, and where the index is.
pub fn print_summary(s: &render::ReportSummary) {
    outp!("{}", s.terminal);
    if !s.terminal.ends_with('\n') {
        out!();
    }
    for w in &s.warnings {
        eprintln!("tracer: warning: {w}");
    }
    out!("report: {}", s.out_dir.join("index.html").display());
}

/// After a recording: per target its calls, mean times and plan, the probe's cost, and a
/// histogram of its per-call times; the loop trip counts of nested targets; then the
/// counters that mean data was lost.
pub fn print_record_summary(o: &record::RecordOutcome) {
    let run = &o.run;
    for t in &run.targets {
        let rows: Vec<_> = run.spans.iter().filter(|r| r.target == t.name).collect();
        let calls: u64 = rows.iter().map(|r| r.calls).sum();
        let timed: u64 = rows.iter().map(|r| r.calls - r.untimed).sum();
        let wall: u64 = rows.iter().map(|r| r.wall.sum_ns).sum();
        let oncpu: u64 = rows.iter().map(|r| r.oncpu.sum_ns).sum();
        match &t.plan {
            Some(p) if timed > 0 => out!(
                "{:<18} {:>10} calls  mean {:>10.0} ns wall  {:>10.0} ns on-CPU   [{} via {}]",
                t.name,
                calls,
                wall as f64 / timed as f64,
                oncpu as f64 / timed as f64,
                p.plan,
                p.attach_points.join(",")
            ),
            Some(p) => out!(
                "{:<18} {:>10} calls  [{} via {}]{}",
                t.name,
                calls,
                p.plan,
                p.attach_points.join(","),
                if calls == 0 && plan::target_by_name(&t.name).is_none() {
                    "  attached, 0 calls: inlined at its hot call sites, or not on this path?"
                } else {
                    ""
                }
            ),
            None => out!("{:<18} not measurable on this kernel", t.name),
        }
        if let Some(c) = &t.probe_cost {
            // The on-CPU mean when measured (what the tables fit), else the wall mean.
            let per_call = if oncpu > 0 { oncpu } else { wall };
            let mean = (timed > 0).then(|| per_call as f64 / timed as f64);
            out!("{}", render::probecost::record_note(c, mean));
        }
        if let Some(h) = render::histogram::run_target(run, &t.name) {
            outp!("{h}");
        }
    }
    let trips = crate::analysis::trips::trip_counts("", &run.spans);
    if !trips.is_empty() {
        out!("{}:", render::trips::TITLE);
        for t in &trips {
            out!("  {}", render::trips::line(t, false));
        }
    }
    for (k, v) in &run.counters {
        let bad = matches!(
            k.as_str(),
            "ringbuf_drops" | "aggregate_map_full" | "thread_map_full" | "depth_overflow"
        );
        if bad && *v > 0 {
            let hint = crate::rundata::counter_meaning(k)
                .map(|m| format!(" ({m})"))
                .unwrap_or_default();
            eprintln!("tracer: warning: {k} = {v}{hint}");
        }
    }
    if let Some(r) = &run.partial_reason {
        eprintln!("tracer: partial run ({r})");
    }
    out!("run written to {}", o.dir.display());
}

/// `tracer probes`: how each target is measured on this kernel (text, or JSON with `json`);
/// exits 4 when one of them cannot be measured.
pub fn probes(
    targets: &[String],
    ropts: &ResolveOptions,
    json: bool,
    verbose: bool,
) -> Result<i32, TracerError> {
    let (resolved, engine) = record::resolve_only(targets, ropts, verbose)?;
    let kernel = kernel::kernel_info();
    let reports: Vec<_> = resolved.iter().map(|r| r.report()).collect();
    let facts = serde_json::json!({
        "btf": kernel::has_vmlinux_btf(),
        "btf_error": engine.btf_error(),
        "kprobe_pmu": kernel::has_kprobe_pmu(),
        "lockdown": kernel::privileges::lockdown(),
        "tracefs": engine.tracefs_root(),
    });
    drop(engine);
    if json {
        let doc = serde_json::json!({ "kernel": kernel, "facts": facts, "targets": reports });
        out!("{}", serde_json::to_string_pretty(&doc).expect("json"));
    } else {
        out!(
            "kernel {} ({}): BTF {}, kprobe PMU {}, lockdown {}",
            kernel.release,
            kernel.machine,
            if kernel::has_vmlinux_btf() {
                "yes"
            } else {
                "no"
            },
            if kernel::has_kprobe_pmu() {
                "yes"
            } else {
                "no"
            },
            kernel::privileges::lockdown().unwrap_or_else(|| "n/a".into())
        );
        for r in &reports {
            out!();
            match &r.plan {
                Some(p) => out!(
                    "{}: {} ({}) at {}{}",
                    r.name,
                    p.plan,
                    p.mechanism,
                    p.attach_points.join(", "),
                    if p.timed { "" } else { " [count only]" }
                ),
                None => out!("{}: NOT MEASURABLE on this kernel", r.name),
            }
            if let Some(p) = &r.plan {
                out!("  measures: {}", p.note);
            }
            if let Some(v) = &r.verification {
                out!(
                    "  verified: {} -> {} calls (expected {}) {}",
                    v.workload,
                    v.observed,
                    v.expected,
                    if v.passed { "ok" } else { "FAILED" }
                );
            }
            for rej in &r.rejected {
                out!("  rejected {}: {}", rej.plan, rej.reason);
            }
            let why = plan::target_by_name(&r.name)
                .map(|(_, t)| t.why)
                .unwrap_or(plan::ARBITRARY_WHY);
            out!("  why traced: {why}");
        }
    }
    Ok(if reports.iter().all(|r| r.plan.is_some()) {
        exit::OK
    } else {
        exit::UNSUPPORTED
    })
}
