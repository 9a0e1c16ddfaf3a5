//! The human table on stdout, in Google Benchmark's layout:
//! `name/N  time  cpu  iterations  counters`, one row per repeat, plus `_median` and
//! `_stddev` rows when a (case, N) was repeated.

use std::io::Write;

use workloads::numbers;
use workloads::report::Measurement;

const NAME_WIDTH: usize = 36;
const RULE_WIDTH: usize = 96;

/// Formats a duration in ns with a unit that keeps 3-4 significant digits.
pub fn fmt_ns(ns: f64) -> String {
    numbers::duration_ns(ns, numbers::DurationStyle::Bench)
}

/// Formats a counter the way Google Benchmark does (k, M, G suffixes).
pub fn fmt_counter(v: f64) -> String {
    let (x, suffix) = if v.abs() >= 1e9 {
        (v / 1e9, "G")
    } else if v.abs() >= 1e6 {
        (v / 1e6, "M")
    } else if v.abs() >= 1e3 {
        (v / 1e3, "k")
    } else {
        (v, "")
    };
    let s = format!("{x:.4}");
    let s = s.trim_end_matches('0').trim_end_matches('.');
    format!("{s}{suffix}")
}

pub fn header(workload: &str, kernel: &str, unit: &str) -> String {
    let rule = "-".repeat(RULE_WIDTH);
    format!(
        "workloads {workload} on Linux {kernel}\n\
         Time and CPU are per operation ({unit}); CPU is the measuring thread's own.\n\
         {rule}\n{:<NAME_WIDTH$} {:>15} {:>15} {:>12} UserCounters...\n{rule}\n",
        "Benchmark", "Time", "CPU", "Iterations"
    )
}

pub fn row_name(m: &Measurement, repeats: u32) -> String {
    if repeats > 1 {
        format!("{}/{}/repeats:{}", m.case, m.n, repeats)
    } else {
        format!("{}/{}", m.case, m.n)
    }
}

pub fn row(
    name: &str,
    time_ns: f64,
    cpu_ns: f64,
    iterations: u64,
    counters: &[(String, f64)],
) -> String {
    let mut line = format!(
        "{name:<NAME_WIDTH$} {:>15} {:>15} {:>12}",
        fmt_ns(time_ns),
        fmt_ns(cpu_ns),
        iterations
    );
    for (k, v) in counters {
        line.push_str(&format!(" {k}={}", fmt_counter(*v)));
    }
    line
}

fn stddev(xs: &[f64]) -> f64 {
    if xs.len() < 2 {
        return 0.0;
    }
    let mean = xs.iter().sum::<f64>() / xs.len() as f64;
    (xs.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / (xs.len() - 1) as f64).sqrt()
}

/// The rows for one (case, N): one per repeat, then aggregates when there are several.
pub fn rows(ms: &[Measurement], repeats: u32) -> Vec<String> {
    let mut out = Vec::new();
    for m in ms {
        let counters: Vec<(String, f64)> =
            m.counters.iter().map(|(k, v)| (k.clone(), *v)).collect();
        out.push(row(
            &row_name(m, repeats),
            m.time_ns_per_op,
            m.cpu_ns_per_op,
            m.iterations,
            &counters,
        ));
    }
    if ms.len() > 1 {
        let name = row_name(&ms[0], repeats);
        let t: Vec<f64> = ms.iter().map(|m| m.time_ns_per_op).collect();
        let c: Vec<f64> = ms.iter().map(|m| m.cpu_ns_per_op).collect();
        let k = ms.len() as u64;
        out.push(row(
            &format!("{name}_median"),
            numbers::median(&t).unwrap_or(0.0),
            numbers::median(&c).unwrap_or(0.0),
            k,
            &[],
        ));
        out.push(row(
            &format!("{name}_stddev"),
            stddev(&t),
            stddev(&c),
            k,
            &[],
        ));
    }
    out
}

/// Prints lines to stdout, ignoring a closed pipe (the JSON file still gets written).
pub fn print(lines: &[String]) {
    let mut out = std::io::stdout().lock();
    for l in lines {
        let _ = writeln!(out, "{l}");
    }
    let _ = out.flush();
}

#[cfg(test)]
mod tests {
    use super::*;
    use workloads::report::PhaseTotals;

    #[test]
    fn durations_keep_a_few_digits() {
        assert_eq!(fmt_ns(615.0), "615 ns");
        assert_eq!(fmt_ns(1.234), "1.23 ns");
        assert_eq!(fmt_ns(52_345.0), "52.3 us");
        assert_eq!(fmt_ns(12_345_678.0), "12.3 ms");
        assert_eq!(fmt_ns(20e9), "20.0 s");
    }

    #[test]
    fn counters_use_si_suffixes() {
        assert_eq!(fmt_counter(1626016.0), "1.626M");
        assert_eq!(fmt_counter(64000.0), "64k");
        assert_eq!(fmt_counter(12.0), "12");
        assert_eq!(fmt_counter(0.5), "0.5");
    }

    #[test]
    fn repeated_cases_get_median_and_stddev_rows() {
        let mk = |r, ns| {
            Measurement::new(
                "spawn",
                10,
                64,
                r,
                PhaseTotals {
                    iterations: 10,
                    ops: 10,
                    total_ns: ns,
                    cpu_total_ns: ns,
                },
            )
        };
        let ms = vec![mk(0, 1000), mk(1, 3000), mk(2, 2000)];
        let rows = rows(&ms, 3);
        assert_eq!(rows.len(), 5);
        assert!(rows[0].starts_with("spawn/64/repeats:3 "));
        assert!(
            rows[3].starts_with("spawn/64/repeats:3_median") && rows[3].contains("200 ns"),
            "{}",
            rows[3]
        );
        assert!(
            rows[4].starts_with("spawn/64/repeats:3_stddev") && rows[4].contains("100 ns"),
            "{}",
            rows[4]
        );
        assert_eq!(super::rows(&ms[..1], 1).len(), 1);
    }
}
