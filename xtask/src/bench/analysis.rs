//! Analysis speed: `tracer report` on a synthetic run (raw spans in events.csv, aggregates in
//! run.json, stack samples in folded files), with and without flamegraphs, and once with
//! events.csv moved away: with it the report's percentiles are exact (read from every span),
//! without it they are estimated from the histograms.

use anyhow::{Context, Result, ensure};
use serde::{Deserialize, Serialize};

use super::exec::{Cmd, argv, fresh_dir, path_str};
use super::measure::Tools;
use super::synth::{SynthInfo, SynthSpec, generate};

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct ReportTiming {
    pub name: String,
    pub command: String,
    pub wall_s: f64,
    pub maxrss_kib: u64,
    pub files_written: usize,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Analysis {
    pub synth: SynthInfo,
    pub timings: Vec<ReportTiming>,
    /// Table rows of the full report, and how many of them have exact percentiles (read from
    /// events.csv) rather than histogram estimates.
    #[serde(default)]
    pub table_rows: usize,
    #[serde(default)]
    pub exact_rows: usize,
}

pub fn measure(tools: &Tools, spec: &SynthSpec) -> Result<Analysis> {
    let root = fresh_dir(tools.scratch.join("analysis"))?;
    let run = root.join("synthetic-run");
    eprintln!(
        "xtask bench: analysis: generating {} spans and {} stack samples",
        spec.spans, spec.samples
    );
    let synth = generate(&run, spec)?;
    let mut timings = Vec::new();
    let cases: [(&str, &[&str], bool); 3] = [
        ("full report (flamegraphs)", &[], true),
        ("--no-flamegraphs", &["--no-flamegraphs"], true),
        ("full report, events.csv moved away", &[], false),
    ];
    for (i, (name, extra, with_events)) in cases.iter().enumerate() {
        let hidden = root.join("events.csv.away");
        if !with_events {
            std::fs::rename(run.join("events.csv"), &hidden)?;
        }
        let out = root.join(format!("report-{i}"));
        let mut a = argv([
            path_str(&tools.tracer).as_str(),
            "report",
            &path_str(&run),
            "-o",
            &path_str(&out),
        ]);
        a.extend(argv(*extra));
        eprintln!("xtask bench: analysis: tracer report, {name}");
        let o = Cmd::new(a, &root, format!("report-{i}")).run();
        if !with_events {
            std::fs::rename(&hidden, run.join("events.csv"))?;
        }
        let o = o?;
        let summary = std::fs::read_to_string(out.join("summary.json"))
            .with_context(|| format!("tracer report ({name}) wrote no summary.json"))?;
        ensure!(
            summary.contains("sysvipc_find_ipc"),
            "tracer report ({name}) summary does not mention the synthetic targets"
        );
        timings.push(ReportTiming {
            name: name.to_string(),
            command: format!("tracer report RUN -o OUT {}", extra.join(" "))
                .trim_end()
                .to_string(),
            wall_s: o.wall.as_secs_f64(),
            maxrss_kib: o.maxrss_kib,
            files_written: count_files(&out),
        });
    }
    let (table_rows, exact_rows) = percentile_sources(&root.join("report-0"))?;
    let (_, exact_without) = percentile_sources(&root.join("report-2"))?;
    ensure!(
        exact_without == 0,
        "tracer report claims exact percentiles without events.csv"
    );
    let _ = std::fs::remove_dir_all(&root);
    Ok(Analysis {
        synth,
        timings,
        table_rows,
        exact_rows,
    })
}

/// (rows, rows with exact percentiles) over a report's `tables/*.csv`.
fn percentile_sources(report: &std::path::Path) -> Result<(usize, usize)> {
    let (mut rows, mut exact) = (0, 0);
    for e in std::fs::read_dir(report.join("tables"))? {
        let p = e?.path();
        if p.extension().is_none_or(|x| x != "csv") {
            continue;
        }
        let text = std::fs::read_to_string(&p)?;
        let mut lines = text.lines();
        let header: Vec<&str> = lines.next().unwrap_or("").split(',').collect();
        let col = header
            .iter()
            .position(|h| *h == "percentiles_from")
            .with_context(|| format!("{}: no percentiles_from column", p.display()))?;
        for l in lines {
            rows += 1;
            exact += usize::from(l.split(',').nth(col) == Some("raw-spans"));
        }
    }
    Ok((rows, exact))
}

fn count_files(dir: &std::path::Path) -> usize {
    let Ok(rd) = std::fs::read_dir(dir) else {
        return 0;
    };
    rd.filter_map(Result::ok)
        .map(|e| {
            let p = e.path();
            if p.is_dir() { count_files(&p) } else { 1 }
        })
        .sum()
}
