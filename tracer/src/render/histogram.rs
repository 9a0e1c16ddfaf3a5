//! Per-call time histograms for the terminal, laid out like bcc's funclatency
//! (`usecs : count distribution` with a bar of stars per power of two), which is what people
//! who time kernel functions read first; with the call count and p50/p90/p99 under it.
//!
//! The run keeps log-linear histograms (16 buckets per power of two of nanoseconds). Bins here
//! are powers of two in the unit shown (`4 -> 7` µs), so a bucket goes to the bin that holds
//! its midpoint (clamped to the exact min/max): in nanoseconds that is exact, in larger units a
//! value within 1/16 of a bin edge may land in the neighbouring bin. Percentiles come from
//! [`crate::analysis::hist::quantile`] (within 1/16 of the exact value).

use crate::analysis::hist;
use crate::analysis::table::{CaseTable, Metric};
use crate::analysis::{Analysis, CaseResult};
use crate::rundata::{Dist, Run};

use super::fmt::ns;

/// One histogram to show; several are laid side by side on the same bins.
pub struct Column<'a> {
    /// Above the bars: `distribution` for a lone histogram, `N=100` in a sweep.
    pub title: String,
    pub dist: &'a Dist,
}

/// Units as funclatency names them, with their size in ns.
const UNITS: [(&str, f64); 4] = [
    ("nsecs", 1.0),
    ("usecs", 1e3),
    ("msecs", 1e6),
    ("secs", 1e9),
];

/// Bin of a value in units: 0 holds 0 and 1, bin k ≥ 1 holds 2^k ..= 2^(k+1) - 1.
fn bin(units: u64) -> u32 {
    if units < 2 {
        0
    } else {
        63 - units.leading_zeros()
    }
}

fn bin_range(k: u32) -> (u64, u64) {
    if k == 0 {
        (0, 1)
    } else {
        (1u64 << k, (1u64 << k).saturating_mul(2) - 1)
    }
}

/// Counts per bin (index = bin) of `d` in units of `unit_ns`.
fn binned(d: &Dist, unit_ns: f64) -> Vec<u64> {
    let mut bins = vec![0u64; 64];
    let exact = d.max_ns >= d.min_ns && d.max_ns > 0;
    for &(b, c) in &d.hist {
        if c == 0 {
            continue;
        }
        let (lo, hi) = hist::bucket_range(b);
        let mut mid = (lo + hi) / 2.0;
        if exact {
            mid = mid.clamp(d.min_ns as f64, d.max_ns as f64);
        }
        let k = bin((mid / unit_ns) as u64) as usize;
        bins[k] = bins[k].saturating_add(c);
    }
    bins
}

/// The largest unit in which the smallest 10th percentile is still at least 4, so that no
/// more than a tenth of any column falls into the bottom bins (`0 -> 1`, `2 -> 3`) where a
/// larger unit would blur it; nanoseconds for anything faster than 4 µs.
fn unit_for(columns: &[Column]) -> (&'static str, f64) {
    let p10 = columns
        .iter()
        .filter_map(|c| hist::quantile(c.dist, 0.1))
        .fold(f64::INFINITY, f64::min);
    UNITS
        .iter()
        .rev()
        .find(|(_, size)| p10 / size >= 4.0)
        .copied()
        .unwrap_or(UNITS[0])
}

/// `N calls: p50 … p90 … p99 … max …`, or that there were none.
fn percentiles(d: &Dist) -> String {
    let n = hist::count(d);
    let q = |p| hist::quantile(d, p).map_or_else(|| "n/a".into(), ns);
    if n == 0 {
        return "no timed calls".into();
    }
    format!(
        "{n} calls: p50 {}  p90 {}  p99 {}  max {}",
        q(0.5),
        q(0.9),
        q(0.99),
        ns(d.max_ns as f64)
    )
}

/// Render `columns` as log2 histograms side by side, each bar `bar` characters wide, headed
/// by `label` and the unit (e.g. `on-CPU usecs`), followed by one percentile line per column.
pub fn log2(label: &str, columns: &[Column], bar: usize) -> String {
    let mut out = String::new();
    if columns.iter().all(|c| hist::count(c.dist) == 0) {
        out.push_str("    no timed calls\n");
        return out;
    }
    let (unit, size) = unit_for(columns);
    let bins: Vec<Vec<u64>> = columns.iter().map(|c| binned(c.dist, size)).collect();
    let used = |k: usize| bins.iter().any(|b| b[k] > 0);
    let first = (0..64).find(|&k| used(k)).unwrap_or(0);
    let last = (0..64).rev().find(|&k| used(k)).unwrap_or(0);
    let width = bins
        .iter()
        .flat_map(|b| b[first..=last].iter())
        .map(|c| c.to_string().len())
        .max()
        .unwrap_or(1)
        .max("count".len());
    let head = format!("{label} {unit}");
    out.push_str(&format!("{head:>20}        :"));
    for (i, c) in columns.iter().enumerate() {
        let cell = format!("{:<width$} {}", "count", c.title);
        // Pad all but the last header cell to the width of a row's cell.
        if i + 1 < columns.len() {
            out.push_str(&format!(" {cell:<w$}", w = width + bar + 3));
        } else {
            out.push_str(&format!(" {cell}"));
        }
    }
    out.push('\n');
    let peaks: Vec<u64> = bins
        .iter()
        .map(|b| b.iter().copied().max().unwrap_or(0))
        .collect();
    for k in first..=last {
        let (lo, hi) = bin_range(k as u32);
        out.push_str(&format!("{lo:>14} -> {hi:<10}:"));
        for (b, &peak) in bins.iter().zip(&peaks) {
            let stars = if peak == 0 {
                0
            } else {
                (b[k] as u128 * bar as u128 / peak as u128) as usize
            };
            out.push_str(&format!(
                " {:<width$} |{}{}|",
                b[k],
                "*".repeat(stars),
                " ".repeat(bar - stars)
            ));
        }
        out.push('\n');
    }
    for c in columns {
        if columns.len() > 1 {
            out.push_str(&format!("    {}: {}\n", c.title, percentiles(c.dist)));
        } else {
            out.push_str(&format!("    {}\n", percentiles(c.dist)));
        }
    }
    out
}

/// Which of a span's two times a histogram shows: on-CPU when the run measured it (the loop's
/// cost, as the reports fit), else wall.
fn metric_of(spans: &[&crate::rundata::SpanRow]) -> (&'static str, bool) {
    if spans.iter().any(|s| s.oncpu.sum_ns > 0) {
        ("on-CPU", true)
    } else {
        ("wall", false)
    }
}

/// The histogram of every timed call of `target` in `run` (all cases and N merged), for the
/// summary `tracer record` prints; None when the target has no timed call.
pub fn run_target(run: &Run, target: &str) -> Option<String> {
    let spans: Vec<_> = run.spans.iter().filter(|s| s.target == target).collect();
    let (label, oncpu) = metric_of(&spans);
    let merged = spans.iter().fold(Dist::default(), |acc, s| {
        hist::merge(&acc, if oncpu { &s.oncpu } else { &s.wall })
    });
    (hist::count(&merged) > 0).then(|| {
        log2(
            label,
            &[Column {
                title: "distribution".into(),
                dist: &merged,
            }],
            40,
        )
    })
}

/// The tables whose histograms the terminal shows: every growing case shown, and for a target
/// with none, its timed case with the most timed calls (so each measured target gets one;
/// without `full`, only among the cases that exist for that target).
fn histogram_tables<'a>(
    a: &'a Analysis,
    growing: &[&'a CaseResult],
    full: bool,
) -> Vec<&'a CaseTable> {
    let mut chosen: Vec<&CaseTable> = growing.iter().map(|c| &c.table).collect();
    let mut seen: Vec<&str> = growing.iter().map(|c| c.table.target.as_str()).collect();
    let tables: Vec<&CaseTable> = a.cases().map(|c| &c.table).collect();
    let calls = |t: &CaseTable| -> u64 { t.rows.iter().map(|r| r.timed_calls).sum() };
    for (i, t) in tables.iter().enumerate() {
        if seen.contains(&t.target.as_str()) {
            continue;
        }
        // The first of the most timed calls, among this one and the tables after it.
        let best = tables[i..]
            .iter()
            .filter(|u| u.target == t.target && calls(u) > 0)
            .filter(|u| {
                full || (workloads::cases::is_thread_target(&u.case_name, &t.target)
                    && u.role() != crate::rundata::RunRole::Confirm)
            })
            .rev()
            .max_by_key(|u| calls(u));
        seen.push(&t.target);
        chosen.extend(best.copied());
    }
    chosen
}

/// funclatency-style histograms of the smallest and largest N of each chosen table, side by
/// side.
pub(super) fn smallest_and_largest_n(a: &Analysis, growing: &[&CaseResult], full: bool) -> String {
    let mut out = String::new();
    for t in histogram_tables(a, growing, full) {
        let with: Vec<(u64, &Dist)> = t
            .rows
            .iter()
            .filter_map(|r| r.hist.as_ref().map(|h| (r.n, h)))
            .filter(|(_, h)| hist::count(h) > 0)
            .collect();
        let (Some(first), Some(last)) = (
            with.iter().min_by_key(|x| x.0),
            with.iter().max_by_key(|x| x.0),
        ) else {
            continue;
        };
        let mut columns = vec![Column {
            title: format!("N={}", first.0),
            dist: first.1,
        }];
        if last.0 != first.0 {
            columns.push(Column {
                title: format!("N={}", last.0),
                dist: last.1,
            });
        }
        let run = if a.is_sweep {
            format!(" · {}", t.run)
        } else {
            String::new()
        };
        out.push_str(&format!(
            "\n{}{run} · per-call histogram, smallest and largest N\n",
            t.key()
        ));
        let label = match t.metric {
            Metric::WallMean => "wall",
            _ => "on-CPU",
        };
        out.push_str(&log2(label, &columns, 20));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::analysis::hist::from_values;
    use crate::analysis::testdata::empty_run;
    use crate::rundata::SpanRow;

    fn values(spec: &[(u64, usize)]) -> Vec<u64> {
        spec.iter()
            .flat_map(|&(v, n)| std::iter::repeat_n(v, n))
            .collect()
    }

    /// The percentile line expected for `d` (percentiles interpolate inside a bucket: the
    /// histogram module's tests bound their error).
    fn line(d: &Dist) -> String {
        let q = |p| ns(hist::quantile(d, p).unwrap());
        format!(
            "{} calls: p50 {}  p90 {}  p99 {}  max {}",
            hist::count(d),
            q(0.5),
            q(0.9),
            q(0.99),
            ns(d.max_ns as f64)
        )
    }

    /// Rows of the histogram: (low, high, [count per column], [stars per column]).
    fn rows(text: &str) -> Vec<(u64, u64, Vec<u64>, Vec<usize>)> {
        text.lines()
            .filter(|l| l.contains("->"))
            .map(|l| {
                let (range, rest) = l.split_once(':').unwrap();
                let (lo, hi) = range.split_once("->").unwrap();
                let cells: Vec<&str> = rest.split('|').collect();
                let counts = cells
                    .iter()
                    .step_by(2)
                    .filter(|c| !c.trim().is_empty())
                    .map(|c| c.trim().parse().unwrap())
                    .collect();
                let stars = cells
                    .iter()
                    .skip(1)
                    .step_by(2)
                    .map(|c| c.matches('*').count())
                    .collect();
                (
                    lo.trim().parse().unwrap(),
                    hi.trim().parse().unwrap(),
                    counts,
                    stars,
                )
            })
            .collect()
    }

    #[test]
    fn one_histogram_has_funclatency_bins_stars_and_percentiles() {
        // 100 calls at 3 µs, 50 at 40 µs, 10 at 300 µs (10th percentile 3 µs: unit ns).
        let d = from_values(&values(&[(3_000, 100), (40_000, 50), (300_000, 10)]));
        let text = log2(
            "wall",
            &[Column {
                title: "distribution".into(),
                dist: &d,
            }],
            40,
        );
        assert!(text.contains("wall nsecs"), "{text}");
        assert!(text.contains("count distribution"), "{text}");
        let r = rows(&text);
        // From the bin of 3000 (2048..4095) to that of 300000 (262144..524287), gaps included.
        assert_eq!((r[0].0, r[0].1), (2048, 4095), "{text}");
        assert_eq!(
            (r.last().unwrap().0, r.last().unwrap().1),
            (262_144, 524_287)
        );
        assert_eq!(r.len(), 8, "{text}");
        let by_lo = |lo: u64| r.iter().find(|x| x.0 == lo).unwrap();
        assert_eq!(by_lo(2048).2, vec![100]);
        assert_eq!(by_lo(2048).3, vec![40], "the peak gets the full bar");
        assert_eq!(by_lo(32_768).2, vec![50]);
        assert_eq!(by_lo(32_768).3, vec![20]);
        assert_eq!(by_lo(262_144).3, vec![4]);
        assert_eq!(by_lo(8192).2, vec![0]);
        // Every call is in exactly one bin.
        assert_eq!(r.iter().map(|x| x.2[0]).sum::<u64>(), 160);
        assert!(text.contains(&line(&d)), "{text}");
        assert!(line(&d).starts_with("160 calls: p50 3."), "{}", line(&d));
        assert!(line(&d).contains("p90 4") && line(&d).ends_with("max 300µs"));
    }

    #[test]
    fn side_by_side_histograms_share_bins_and_pick_the_unit_from_the_faster_column() {
        let small = from_values(&values(&[(20_000, 30), (25_000, 10)]));
        let large = from_values(&values(&[(3_000_000, 40)]));
        let cols = [
            Column {
                title: "N=1".into(),
                dist: &small,
            },
            Column {
                title: "N=8000".into(),
                dist: &large,
            },
        ];
        let text = log2("on-CPU", &cols, 20);
        assert!(text.contains("on-CPU usecs"), "{text}");
        let r = rows(&text);
        assert_eq!((r[0].0, r[0].1), (16, 31), "{text}");
        assert_eq!(r[0].2, vec![40, 0]);
        assert_eq!(r[0].3, vec![20, 0]);
        let last = r.last().unwrap();
        assert_eq!((last.0, last.1), (2048, 4095), "{text}");
        assert_eq!(last.2, vec![0, 40]);
        assert_eq!(last.3, vec![0, 20]);
        assert!(text.contains(&format!("N=1: {}", line(&small))), "{text}");
        assert!(
            text.contains(&format!("N=8000: {}", line(&large))),
            "{text}"
        );
        assert!(line(&small).starts_with("40 calls: p50 20."));
        assert!(line(&large).starts_with("40 calls: p50 3.0"));
        // All rows line up: the bars of the second column start at the same offset.
        let offsets: Vec<usize> = text
            .lines()
            .filter(|l| l.contains("->"))
            .map(|l| l.match_indices('|').nth(2).unwrap().0)
            .collect();
        assert!(offsets.windows(2).all(|w| w[0] == w[1]), "{text}");
    }

    #[test]
    fn empty_and_tiny_values() {
        let empty = Dist::default();
        let text = log2(
            "wall",
            &[Column {
                title: "distribution".into(),
                dist: &empty,
            }],
            40,
        );
        assert!(text.contains("no timed calls"), "{text}");
        let tiny = from_values(&[0, 1, 1, 3]);
        let r = rows(&log2(
            "wall",
            &[Column {
                title: "distribution".into(),
                dist: &tiny,
            }],
            40,
        ));
        assert_eq!(r[0], (0, 1, vec![3], vec![40]));
        assert_eq!(r[1], (2, 3, vec![1], vec![13]));
    }

    #[test]
    fn a_run_target_merges_its_rows_and_prefers_on_cpu_time() {
        let mut run = empty_run("6.1", &["do_wait", "dup_mmap"]);
        for (n, on) in [(1u64, 2_000u64), (100, 50_000)] {
            run.spans.push(SpanRow {
                target: "do_wait".into(),
                case: 0,
                case_name: "unphased".into(),
                n,
                calls: 10,
                untimed: 0,
                wall: from_values(&[on + 1_000_000; 10]),
                oncpu: from_values(&[on; 10]),
                within: Default::default(),
                trips: Vec::new(),
            });
        }
        let text = run_target(&run, "do_wait").unwrap();
        assert!(text.contains("on-CPU nsecs"), "{text}");
        let r = rows(&text);
        assert_eq!(r.iter().map(|x| x.2[0]).sum::<u64>(), 20, "{text}");
        assert_eq!(r[0].0, 1024, "{text}");
        // Without on-CPU time, wall time.
        for s in &mut run.spans {
            s.oncpu = Dist::default();
        }
        let text = run_target(&run, "do_wait").unwrap();
        assert!(text.contains("wall usecs"), "{text}");
        assert_eq!(run_target(&run, "dup_mmap"), None);
    }
}
