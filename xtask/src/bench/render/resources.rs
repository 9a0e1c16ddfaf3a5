//! Sections 3 to 5: start-up and shut-down times, memory, and analysis speed.

use std::fmt::Write;

use super::mib;
use crate::bench::analysis::Analysis;
use crate::bench::memory::Memory;
use crate::bench::startup::Startup;
use crate::bench::stats::Summary;

/// Section 3: time to attached and to exit, with the tracer's own figures.
pub(super) fn startup_section(md: &mut String, s: &Startup) {
    md.push_str("## 3. Start-up and shut-down\n\n");
    let _ = writeln!(
        md,
        "{} repetitions each, interleaved. The traced command is `date +%s%N`; both tools \
         hold it until every probe is attached, so *launch → command starts* (its printed \
         time minus the launch time) is the time to attached as seen from outside, \
         process start-up included, and *command starts → exit* covers detaching, reading \
         the maps and writing the output. attach / verify / detach are the tracer's own \
         figures from run.json (`resources`). Medians, (min–max).\n",
        s.reps
    );
    md.push_str(
        "| command | launch → command starts | command starts → exit | total wall | attach_ms | verify_ms | detach_ms |\n\
         | --- | ---: | ---: | ---: | ---: | ---: | ---: |\n",
    );
    let f = |x: &Option<Summary>| {
        x.map_or("–".into(), |s| {
            format!("{:.0} ms ({:.0}–{:.0})", s.median, s.min, s.max)
        })
    };
    for x in &s.results {
        let _ = writeln!(
            md,
            "| {}{} | {} | {} | {} | {} | {} | {} |",
            x.name,
            x.probes.map_or(String::new(), |p| format!(" ({p} probes)")),
            f(&x.to_attached_ms),
            f(&x.to_exit_ms),
            f(&x.wall_ms),
            f(&x.attach_ms),
            f(&x.verify_ms),
            f(&x.detach_ms)
        );
    }
    md.push('\n');
}

/// Section 4: peak memory of a long run at the highest call rate.
pub(super) fn memory_section(md: &mut String, mem: &Memory) {
    md.push_str("## 4. Memory\n\n");
    let _ = writeln!(
        md,
        "`{}`{}: {} calls at {:.2} M calls/s, default options (caller stacks, sampling, \
         off-CPU on).\n",
        mem.command,
        if mem.seconds < 60 {
            format!(
                " for {} s (**--quick: shortened from the one minute of the target**)",
                mem.seconds
            )
        } else {
            format!(" for {} s", mem.seconds)
        },
        mem.calls,
        mem.rate_per_s / 1e6
    );
    md.push_str("| figure | value |\n| --- | ---: |\n");
    let _ = writeln!(
        md,
        "| peak RSS (VmHWM in run.json, at the end of the run) | {} |",
        mib(mem.peak_rss_kib)
    );
    let _ = writeln!(
        md,
        "| largest VmRSS sampled every 250 ms | {} |",
        mib(mem.sampled_peak_rss_kib)
    );
    let _ = writeln!(
        md,
        "| ru_maxrss of the process tree (upper bound: includes the workload) | {} |",
        mib(mem.maxrss_tree_kib)
    );
    let _ = writeln!(
        md,
        "| kernel memory locked by the tracer's maps (memlock) | {:.1} MiB |",
        mem.map_memlock_bytes as f64 / (1024.0 * 1024.0)
    );
    let _ = writeln!(
        md,
        "| every call counted | {} |\n",
        if mem.exact { "yes" } else { "**no**" }
    );
}

/// Section 5: how long `tracer report` takes on a large synthetic run.
pub(super) fn analysis_section(md: &mut String, a: &Analysis) {
    md.push_str("## 5. Analysis speed\n\n");
    let _ = writeln!(
        md,
        "A synthetic run written by the bench in the tracer's run format: {} raw spans in \
         `events.csv` ({:.0} MiB) with matching aggregates and histograms in `run.json` \
         ({} rows: 4 targets × 6 sizes), and {} on-CPU stack samples in {} folded files \
         ({:.0} MiB, one line per sample); generated in {:.1} s.\n",
        a.synth.spans,
        a.synth.events_csv_bytes as f64 / (1024.0 * 1024.0),
        a.synth.rows,
        a.synth.samples,
        a.synth.stack_files,
        a.synth.stacks_bytes as f64 / (1024.0 * 1024.0),
        a.synth.generate_s
    );
    md.push_str("| run | wall | peak RSS | files written |\n| --- | ---: | ---: | ---: |\n");
    for t in &a.timings {
        let _ = writeln!(
            md,
            "| `{}` ({}) | {:.2} s | {} | {} |",
            t.command,
            t.name,
            t.wall_s,
            mib(t.maxrss_kib),
            t.files_written
        );
    }
    md.push('\n');
    if a.exact_rows == 0 {
        md.push_str(
            "**`tracer report` does not read `events.csv`**: its output is identical with the \
             file moved away. Its percentiles come from the in-kernel histograms in \
             `run.json` alone.\n\n",
        );
    } else {
        let _ = writeln!(
            md,
            "`tracer report` reads every raw span: with `events.csv` present, {} of the \
             report's {} table rows give exact nearest-rank p50/p90/p99 from the raw spans \
             (a row keeps the histogram estimate, within 1/16 of the value, when the ring \
             buffer dropped any of its spans); with the file moved away all are histogram \
             estimates. The difference in wall time between the two is the cost of reading \
             the {} spans.\n",
            a.exact_rows, a.table_rows, a.synth.spans
        );
    }
}
