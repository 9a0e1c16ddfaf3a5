//! Loss: aggregate mode must count every call at the highest rate the workloads drive;
//! raw-event mode (ring buffer to events.csv) is measured for a few ring sizes.

use anyhow::{Context, Result};
use serde::{Deserialize, Serialize};

use super::exec::{Cmd, argv};
use super::measure::{LEAN_FLAGS, Tools, TracerRun, Workload, record_argv};

/// One aggregate-mode run.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct AggregateRun {
    pub options: String,
    pub workload_ops: u64,
    pub counted: u64,
    /// Calls per second inside the phase.
    pub rate_per_s: f64,
    pub aggregate_map_full: u64,
    pub thread_map_full: u64,
    pub exact: bool,
}

/// One raw-events run.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct RawRun {
    pub ring: String,
    pub ring_bytes: u64,
    /// Calls the aggregates counted (every call, in and out of the phase).
    pub calls: u64,
    pub events_written: u64,
    pub ringbuf_drops: u64,
    /// Lines in events.csv (header excluded).
    pub csv_rows: u64,
    /// Offered call rate inside the phase.
    pub offered_per_s: f64,
    /// Events delivered per second: offered rate times the delivered fraction.
    pub delivered_per_s: f64,
    pub loss_fraction: f64,
    /// events_written + drops == calls, and csv rows == events_written.
    pub consistent: bool,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Loss {
    pub workload: Workload,
    pub aggregate: Vec<AggregateRun>,
    pub raw_workload: Workload,
    pub raw: Vec<RawRun>,
}

fn record(
    tools: &Tools,
    w: &Workload,
    extra: &[String],
    tag: &str,
) -> Result<(TracerRun, std::path::PathBuf)> {
    let dir = tools.scratch.join("loss");
    std::fs::create_dir_all(&dir)?;
    let json = dir.join(format!("{tag}.json"));
    let out = dir.join(tag);
    let mut a = record_argv(tools, &w.target, &out, Some(&json));
    a.extend(extra.iter().cloned());
    a.push("--".into());
    a.extend(w.command(&tools.workloads, &json));
    Cmd::new(a, &dir, tag).run()?;
    Ok((TracerRun::read(&out, &w.target)?, out))
}

/// Aggregate mode, lean and default options: count must equal the workload's ops.
pub fn aggregate(tools: &Tools, w: &Workload) -> Result<Vec<AggregateRun>> {
    let mut out = Vec::new();
    for (name, flags) in [
        (
            "lean (--no-callers --no-samples --no-offcpu)",
            argv(LEAN_FLAGS),
        ),
        ("default", Vec::new()),
    ] {
        eprintln!("xtask bench: loss: aggregate mode, {name}");
        let tag = format!(
            "aggregate-{}",
            if flags.is_empty() { "default" } else { "lean" }
        );
        let (run, dir) = record(tools, w, &flags, &tag)?;
        let _ = std::fs::remove_dir_all(dir);
        let ops = run.workload.as_ref().map_or(0, |r| r.ops);
        out.push(AggregateRun {
            options: name.into(),
            workload_ops: ops,
            counted: run.calls_in_case,
            rate_per_s: run.phase_ops as f64 / (run.phase_wall_ns as f64 / 1e9),
            aggregate_map_full: run.counter("aggregate_map_full"),
            thread_map_full: run.counter("thread_map_full"),
            exact: run.check_exact(&w.target).is_ok(),
        });
    }
    Ok(out)
}

/// Raw-event mode (lean options) for each ring size.
pub fn raw(tools: &Tools, w: &Workload, rings: &[&str]) -> Result<Vec<RawRun>> {
    let mut out = Vec::new();
    for ring in rings {
        eprintln!("xtask bench: loss: raw events, ring {ring}");
        let mut flags = argv(LEAN_FLAGS);
        flags.extend(argv(["--raw-events", ring]));
        let tag = format!("raw-{ring}");
        let (run, dir) = record(tools, w, &flags, &tag)?;
        let csv_rows = count_lines(&dir.join("events.csv"))?.saturating_sub(1);
        let _ = std::fs::remove_dir_all(&dir);
        out.push(raw_run(ring, &run, csv_rows));
    }
    Ok(out)
}

fn raw_run(ring: &str, run: &TracerRun, csv_rows: u64) -> RawRun {
    let written = run.counter("raw_events_written");
    let drops = run.counter("ringbuf_drops");
    let offered = run.phase_ops as f64 / (run.phase_wall_ns as f64 / 1e9);
    let loss = if run.calls_total > 0 {
        drops as f64 / run.calls_total as f64
    } else {
        0.0
    };
    RawRun {
        ring: ring.to_string(),
        ring_bytes: parse_size(ring),
        calls: run.calls_total,
        events_written: written,
        ringbuf_drops: drops,
        csv_rows,
        offered_per_s: offered,
        delivered_per_s: offered * (1.0 - loss),
        loss_fraction: loss,
        consistent: written + drops == run.calls_total && csv_rows == written,
    }
}

fn count_lines(p: &std::path::Path) -> Result<u64> {
    use std::io::Read;
    let mut f = std::fs::File::open(p).with_context(|| format!("{}", p.display()))?;
    let mut buf = vec![0u8; 1 << 20];
    let mut n = 0u64;
    loop {
        let k = f.read(&mut buf)?;
        if k == 0 {
            return Ok(n);
        }
        n += buf[..k].iter().filter(|&&b| b == b'\n').count() as u64;
    }
}

/// "256K" -> 262144.
pub fn parse_size(s: &str) -> u64 {
    let (num, mult) = match s.chars().last() {
        Some('K') => (&s[..s.len() - 1], 1 << 10),
        Some('M') => (&s[..s.len() - 1], 1 << 20),
        Some('G') => (&s[..s.len() - 1], 1 << 30),
        _ => (s, 1),
    };
    num.parse::<u64>().unwrap_or(0) * mult
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeMap;

    #[test]
    fn raw_run_accounting() {
        let mut counters = BTreeMap::new();
        counters.insert("raw_events_written".to_string(), 900);
        counters.insert("ringbuf_drops".to_string(), 100);
        let run = TracerRun {
            workload: None,
            calls_in_case: 800,
            calls_total: 1000,
            phase_ops: 800,
            phase_wall_ns: 400_000,
            counters,
            attach_ms: 0.0,
            verify_ms: 0.0,
            detach_ms: 0.0,
            peak_rss_kib: 0,
            map_memlock_bytes: 0,
            plan: String::new(),
            mechanism: String::new(),
        };
        let r = raw_run("256K", &run, 900);
        assert_eq!(r.ring_bytes, 262_144);
        assert_eq!(r.offered_per_s, 2_000_000.0);
        assert!((r.loss_fraction - 0.1).abs() < 1e-12);
        assert!((r.delivered_per_s - 1_800_000.0).abs() < 1e-6);
        assert!(r.consistent);
        assert!(
            !raw_run("256K", &run, 899).consistent,
            "a lost CSV row is noticed"
        );
    }

    #[test]
    fn sizes() {
        assert_eq!(parse_size("16M"), 16 << 20);
        assert_eq!(parse_size("4096"), 4096);
    }
}
