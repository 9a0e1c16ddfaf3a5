//! Property tests for the pure parts the tracer's results rest on: the in-kernel histogram's
//! bucket math and percentile error bound, merging per-CPU statistics, the folded-stack and
//! run-data readers (which read files a user may have truncated or edited), and the `--n`
//! list parser. No root, no kernel: `cargo test -p tracer --test properties`.
//!
//! The readers must answer every input with a value or an error, never a panic: a panic in
//! `tracer report` is a crash with a backtrace where the user should get "exit 6: corrupt run".
use std::path::{Path, PathBuf};

use proptest::prelude::*;
use tracer::analysis::hist::{self, from_values, quantile};
use tracer::analysis::{AnalysisOptions, Dataset, analyze, load::LoadedRun};
use tracer::engine::merge_stats;
use tracer::rundata::{self, Dist, FoldedLine, Run};
use tracer_ebpf::{
    HIST_BUCKETS, HIST_SUB, SpanStats, hist_bucket, hist_bucket_high, hist_bucket_low, log2_floor,
};

/// A real run as `tracer sweep` writes it (the saved fixture), the seed for mutations.
const FIXTURE_RUN: &str = include_str!("fixtures/sweep-5.10/spawn/run.json");

/// Proptest settings: `cases` per property, no regression files (tests/ has no lib.rs for
/// proptest to put them next to; a failure prints its minimal input instead).
fn config(cases: u32) -> ProptestConfig {
    ProptestConfig {
        cases,
        failure_persistence: None,
        ..ProptestConfig::default()
    }
}

fn fixture_run() -> Run {
    Run::from_json(FIXTURE_RUN, Path::new("fixture/run.json")).expect("fixture reads")
}

// ---------------------------------------------------------------------------------------------
// Histogram buckets

/// Every bucket, exhaustively: buckets tile the u64 range without gaps or overlaps, each
/// bucket's low edge maps back to it, and above 16 ns a bucket is at most 1/16 of its low edge
/// wide (the resolution the percentile error bound rests on).
#[test]
fn buckets_tile_the_range_exactly() {
    assert_eq!(hist_bucket_low(0), 0);
    assert_eq!(hist_bucket(u64::MAX), HIST_BUCKETS - 1);
    assert_eq!(hist_bucket_high(HIST_BUCKETS - 1), u64::MAX);
    for b in 0..HIST_BUCKETS {
        let (lo, hi) = (hist_bucket_low(b), hist_bucket_high(b));
        assert!(lo < hi, "bucket {b}: [{lo}, {hi}) is empty");
        assert_eq!(hist_bucket(lo), b, "low edge of bucket {b}");
        assert_eq!(hist_bucket(hi - 1), b, "last value of bucket {b}");
        if b + 1 < HIST_BUCKETS {
            assert_eq!(hi, hist_bucket_low(b + 1), "gap after bucket {b}");
            let width = hi - lo;
            if lo >= HIST_SUB {
                assert!(
                    width <= lo / HIST_SUB,
                    "bucket {b}: width {width} > {lo}/16"
                );
            } else {
                assert_eq!(width, 1, "bucket {b} below 16 ns holds one value");
            }
        }
    }
}

fn any_ns() -> impl Strategy<Value = u64> {
    // Mostly realistic nanosecond values, sometimes anything (the kernel never clamps).
    prop_oneof![
        4 => 0u64..100_000_000_000,
        1 => any::<u64>(),
        1 => (0u32..64).prop_map(|e| 1u64 << e),
        1 => (1u32..64).prop_map(|e| (1u64 << e) - 1),
    ]
}

proptest! {
    #![proptest_config(config(256))]

    #[test]
    fn every_value_lies_in_its_bucket(v in any_ns()) {
        let b = hist_bucket(v);
        prop_assert!(b < HIST_BUCKETS);
        prop_assert!(hist_bucket_low(b) <= v);
        let hi = hist_bucket_high(b);
        prop_assert!(v < hi || hi == u64::MAX, "{v} not below {hi}");
        if v > 0 {
            prop_assert_eq!(log2_floor(v), 63 - v.leading_zeros());
        }
    }

    #[test]
    fn buckets_are_monotonic(a in any_ns(), b in any_ns()) {
        let (lo, hi) = (a.min(b), a.max(b));
        prop_assert!(hist_bucket(lo) <= hist_bucket(hi));
    }
}

// ---------------------------------------------------------------------------------------------
// Percentiles and histogram merging

fn exact_quantile(sorted: &[u64], q: f64) -> f64 {
    let n = sorted.len() as u64;
    let rank = ((q * n as f64).ceil() as u64).clamp(1, n);
    sorted[(rank - 1) as usize] as f64
}

fn values() -> impl Strategy<Value = Vec<u64>> {
    // Bounded so that 600 values cannot overflow the u64 sum.
    prop::collection::vec(
        prop_oneof![
            3 => 0u64..50_000,
            2 => 0u64..(1u64 << 40),
            1 => (0u64..64).prop_map(|x| 1_000 + x),
        ],
        1..600,
    )
}

proptest! {
    #![proptest_config(config(256))]

    /// Any data set, any quantile: the estimate is within one bucket width of the exact
    /// nearest-rank value (1/16 relative above 16 ns, 1 ns below), and never outside the
    /// exact min/max.
    #[test]
    fn percentile_error_is_bounded_by_bucket_width(
        mut vals in values(),
        qs in prop::collection::vec(0.0f64..=1.0, 1..8),
    ) {
        let d = from_values(&vals);
        vals.sort_unstable();
        let (min, max) = (vals[0] as f64, *vals.last().unwrap() as f64);
        let mut last = f64::NEG_INFINITY;
        let mut qs = qs;
        qs.sort_by(f64::total_cmp);
        for q in qs {
            let est = quantile(&d, q).expect("non-empty");
            let exact = exact_quantile(&vals, q);
            let tol = (exact / HIST_SUB as f64).max(1.0);
            prop_assert!((est - exact).abs() <= tol * (1.0 + 1e-12),
                "q={q}: estimate {est}, exact {exact}, tolerance {tol}");
            prop_assert!(est >= min && est <= max, "q={q}: {est} outside [{min}, {max}]");
            prop_assert!(est >= last, "quantiles must not decrease with q");
            last = est;
        }
        prop_assert_eq!(hist::count(&d), vals.len() as u64);
    }

    /// Merging histograms is the histogram of the union, in any order.
    #[test]
    fn histogram_merge_is_the_union(a in values(), b in values(), c in values()) {
        let (da, db, dc) = (from_values(&a), from_values(&b), from_values(&c));
        let mut all = a.clone();
        all.extend(&b);
        all.extend(&c);
        let ab_c = hist::merge(&hist::merge(&da, &db), &dc);
        let a_bc = hist::merge(&da, &hist::merge(&db, &dc));
        let cba = hist::merge(&hist::merge(&dc, &db), &da);
        prop_assert_eq!(&ab_c, &from_values(&all));
        prop_assert_eq!(&ab_c, &a_bc);
        prop_assert_eq!(&ab_c, &cba);
        prop_assert_eq!(hist::merge(&Dist::default(), &da), da);
    }

    /// Whatever a (hand-edited or corrupt) run.json holds in a histogram, the percentile and
    /// spread estimators answer without panicking.
    #[test]
    fn estimators_never_panic_on_arbitrary_histograms(
        hist in prop::collection::vec((any::<u32>(), any::<u64>()), 0..12),
        sum_ns in any::<u64>(),
        min_ns in any::<u64>(),
        max_ns in any::<u64>(),
        q in any::<f64>(),
    ) {
        let d = Dist { sum_ns, min_ns, max_ns, hist };
        let _ = quantile(&d, q);
        let _ = hist::std_dev(&d);
        let _ = hist::mean(&d);
        let _ = hist::count(&d);
        let _ = hist::merge(&d, &d);
    }
}

// ---------------------------------------------------------------------------------------------
// Per-CPU span statistics

/// One CPU's `SpanStats` as the eBPF side leaves it: idle (all zero), only untimed calls
/// (zero times), or `timed` calls with min <= every value <= max and a consistent sum.
fn cpu_stats() -> impl Strategy<Value = SpanStats> {
    (
        0u8..3,
        1u64..1_000,
        0u64..50,
        0u64..1_000_000_000,
        0u64..1_000_000_000,
        0.0f64..=1.0,
        0u64..1_000_000_000,
        0u64..1_000_000_000,
        0.0f64..=1.0,
    )
        .prop_map(
            |(kind, timed, untimed, wmin, wspan, wfrac, omin, ospan, ofrac)| {
                match kind {
                    0 => SpanStats::default(),
                    1 => SpanStats {
                        calls: untimed + 1,
                        untimed: untimed + 1,
                        ..SpanStats::default()
                    },
                    _ => {
                        // With one timed call, min = max = sum.
                        let (wspan, ospan) = if timed == 1 { (0, 0) } else { (wspan, ospan) };
                        let extra = |span: u64, frac: f64| {
                            ((span as f64 * (timed - 1) as f64) * frac) as u64
                        };
                        SpanStats {
                            calls: timed + untimed,
                            untimed,
                            wall_sum: wmin * timed
                                + wspan
                                + extra(wspan, wfrac).min(wspan * (timed - 1)),
                            wall_min: wmin,
                            wall_max: wmin + wspan,
                            oncpu_sum: omin * timed
                                + ospan
                                + extra(ospan, ofrac).min(ospan * (timed - 1)),
                            oncpu_min: omin,
                            oncpu_max: omin + ospan,
                            within: [timed.min(3), 0, 0, 0, 0, 0, 0, 0],
                        }
                    }
                }
            },
        )
}

fn per_cpu() -> impl Strategy<Value = Vec<SpanStats>> {
    prop::collection::vec(cpu_stats(), 0..16)
}

proptest! {
    #![proptest_config(config(256))]

    #[test]
    fn merging_per_cpu_stats_sums_exactly(cpus in per_cpu()) {
        let m = merge_stats(cpus.iter());
        let timed: Vec<&SpanStats> = cpus.iter().filter(|s| s.calls > s.untimed).collect();
        prop_assert_eq!(m.calls, cpus.iter().map(|s| s.calls).sum::<u64>());
        prop_assert_eq!(m.untimed, cpus.iter().map(|s| s.untimed).sum::<u64>());
        prop_assert_eq!(m.wall_sum, timed.iter().map(|s| s.wall_sum).sum::<u64>());
        prop_assert_eq!(m.oncpu_sum, timed.iter().map(|s| s.oncpu_sum).sum::<u64>());
        prop_assert_eq!(m.within[0], cpus.iter().map(|s| s.within[0]).sum::<u64>());
        // Idle CPUs keep a zero min: it must not win.
        prop_assert_eq!(m.wall_min, timed.iter().map(|s| s.wall_min).min().unwrap_or(0));
        prop_assert_eq!(m.oncpu_min, timed.iter().map(|s| s.oncpu_min).min().unwrap_or(0));
        prop_assert_eq!(m.wall_max, timed.iter().map(|s| s.wall_max).max().unwrap_or(0));
        prop_assert_eq!(m.oncpu_max, timed.iter().map(|s| s.oncpu_max).max().unwrap_or(0));
        if m.calls > m.untimed {
            prop_assert!(m.wall_min <= m.wall_max);
            let timed_calls = m.calls - m.untimed;
            prop_assert!(m.wall_min.saturating_mul(timed_calls) <= m.wall_sum);
            prop_assert!(m.wall_sum <= m.wall_max.saturating_mul(timed_calls));
        }
    }

    #[test]
    fn merging_per_cpu_stats_is_order_independent(
        (cpus, shuffled) in per_cpu().prop_flat_map(|v| (Just(v.clone()), Just(v).prop_shuffle())),
        split in any::<prop::sample::Index>(),
    ) {
        let m = merge_stats(cpus.iter());
        prop_assert_eq!(merge_stats(shuffled.iter()), m);
        // Merging merged halves (e.g. two snapshots) is merging everything.
        let k = if cpus.is_empty() { 0 } else { split.index(cpus.len() + 1) };
        let halves = [merge_stats(cpus[..k].iter()), merge_stats(cpus[k..].iter())];
        prop_assert_eq!(merge_stats(halves.iter()), m);
    }
}

// ---------------------------------------------------------------------------------------------
// Folded stacks

/// A frame as symbolizers produce them: anything but the separators `;` and line breaks
/// (demangled Rust and C++ names contain spaces, `<`, `>`, `::`, unicode).
fn frame() -> impl Strategy<Value = String> {
    prop_oneof![
        3 => "[a-z_][a-z0-9_.]{0,24}",
        1 => "[^;\n\r]{1,16}",
        1 => Just("[unknown]".to_string()),
        1 => Just("<alloc::vec::Vec<T> as core::ops::Drop>::drop".to_string()),
    ]
}

fn folded_lines() -> impl Strategy<Value = Vec<FoldedLine>> {
    prop::collection::vec(
        (prop::collection::vec(frame(), 1..12), any::<u64>())
            .prop_map(|(frames, weight)| FoldedLine { frames, weight }),
        0..40,
    )
}

proptest! {
    #![proptest_config(config(256))]

    #[test]
    fn folded_stacks_round_trip(lines in folded_lines()) {
        let mut text = Vec::new();
        rundata::write_folded(&mut text, &lines).unwrap();
        let text = String::from_utf8(text).unwrap();
        let back = rundata::parse_folded(&text)
            .map_err(|e| TestCaseError::fail(format!("{e} in {text:?}")))?;
        prop_assert_eq!(back, lines);
    }

    #[test]
    fn folded_reader_never_panics(text in "(?s).{0,400}") {
        if let Ok(lines) = rundata::parse_folded(&text) {
            // Whatever it accepted, it writes back in a form it reads identically.
            let mut out = Vec::new();
            rundata::write_folded(&mut out, &lines).unwrap();
            let again = rundata::parse_folded(std::str::from_utf8(&out).unwrap()).unwrap();
            prop_assert_eq!(again, lines);
        }
    }

    #[test]
    fn folded_reader_never_panics_on_near_valid_text(
        parts in prop::collection::vec(
            prop_oneof![
                Just(";"), Just(" "), Just("\n"), Just("\r\n"), Just("1"), Just("18446744073709551616"),
                Just("-3"), Just("a"), Just("schedule"), Just("\t"), Just("é"), Just(""),
            ],
            0..60,
        )
    ) {
        let text: String = parts.concat();
        let _ = rundata::parse_folded(&text);
    }
}

// ---------------------------------------------------------------------------------------------
// run.json

#[derive(Clone, Debug)]
enum Mutation {
    Flip(prop::sample::Index, u8),
    Insert(prop::sample::Index, u8),
    Delete(prop::sample::Index),
    Truncate(prop::sample::Index),
    /// Replace a number with another (huge, negative, fractional ...).
    Number(prop::sample::Index, String),
}

fn mutation() -> impl Strategy<Value = Mutation> {
    let num = prop_oneof![
        Just("18446744073709551615".to_string()),
        Just("18446744073709551616".to_string()),
        Just("-1".to_string()),
        Just("1e400".to_string()),
        Just("0.5".to_string()),
        Just("4294967295".to_string()),
        Just("9007199254740993".to_string()),
        any::<u64>().prop_map(|v| v.to_string()),
    ];
    prop_oneof![
        2 => (any::<prop::sample::Index>(), any::<u8>()).prop_map(|(i, b)| Mutation::Flip(i, b)),
        2 => (any::<prop::sample::Index>(), prop::sample::select(b"{}[],:\"0-e.\\ ".to_vec()))
            .prop_map(|(i, b)| Mutation::Insert(i, b)),
        2 => any::<prop::sample::Index>().prop_map(Mutation::Delete),
        1 => any::<prop::sample::Index>().prop_map(Mutation::Truncate),
        4 => (any::<prop::sample::Index>(), num).prop_map(|(i, n)| Mutation::Number(i, n)),
    ]
}

fn apply(text: &str, muts: &[Mutation]) -> String {
    let mut b = text.as_bytes().to_vec();
    for m in muts {
        if b.is_empty() {
            break;
        }
        match m {
            Mutation::Flip(i, x) => {
                let i = i.index(b.len());
                b[i] ^= x | 1;
            }
            Mutation::Insert(i, x) => {
                let i = i.index(b.len() + 1);
                b.insert(i, *x);
            }
            Mutation::Delete(i) => {
                let i = i.index(b.len());
                b.remove(i);
            }
            Mutation::Truncate(i) => {
                let i = i.index(b.len());
                b.truncate(i);
            }
            Mutation::Number(i, n) => {
                // Replace the run of digits at or after a random position.
                let start = i.index(b.len());
                if let Some(s) = (start..b.len()).find(|&k| b[k].is_ascii_digit()) {
                    let e = (s..b.len())
                        .find(|&k| !b[k].is_ascii_digit())
                        .unwrap_or(b.len());
                    b.splice(s..e, n.bytes());
                }
            }
        }
    }
    String::from_utf8_lossy(&b).into_owned()
}

/// Analysis of a run the reader accepted must not panic either (that is what `tracer report`
/// does next).
fn analyze_one(run: Run) {
    let ds = Dataset {
        root: PathBuf::from("/nonexistent/run"),
        is_sweep: false,
        runs: vec![
            LoadedRun::read(
                "run".into(),
                PathBuf::from("/nonexistent/run"),
                Run {
                    // The stack files do not exist here; what is tested is the numbers.
                    stack_files: Vec::new(),
                    ..run
                },
            )
            .expect("nothing to read"),
        ],
        notes: Vec::new(),
    };
    analyze(&ds, &AnalysisOptions::default());
}

proptest! {
    #![proptest_config(config(160))]

    #[test]
    fn run_reader_never_panics_on_mutated_runs(
        muts in prop::collection::vec(mutation(), 1..6),
    ) {
        let text = apply(FIXTURE_RUN, &muts);
        if let Ok(run) = Run::from_json(&text, Path::new("m/run.json")) {
            prop_assert!(run.validate().is_ok(), "accepted a run that does not validate");
            analyze_one(run);
        }
    }

    #[test]
    fn run_reader_never_panics_on_arbitrary_text(text in "(?s).{0,300}") {
        let _ = Run::from_json(&text, Path::new("x/run.json"));
    }

    /// Well-formed JSON with hostile numbers in the places the reader checks and the analysis
    /// sums: histogram counts and bucket indices, calls, untimed.
    #[test]
    fn run_reader_and_analysis_never_panic_on_hostile_numbers(
        row in any::<prop::sample::Index>(),
        hist in prop::collection::vec((any::<u32>(), any::<u64>()), 0..6),
        calls in any::<u64>(),
        untimed in any::<u64>(),
        sum_ns in any::<u64>(),
        n in any::<u64>(),
    ) {
        let mut run = fixture_run();
        let i = row.index(run.spans.len());
        let r = &mut run.spans[i];
        r.wall.hist = hist.clone();
        r.oncpu.hist = hist;
        r.calls = calls;
        r.untimed = untimed;
        r.wall.sum_ns = sum_ns;
        r.n = n;
        let text = serde_json::to_string(&run).unwrap();
        if let Ok(run) = Run::from_json(&text, Path::new("h/run.json")) {
            analyze_one(run);
        }
    }

    /// What the tracer writes it reads back identically, timestamps and durations included
    /// (a report re-rendered from saved data must see the numbers that were recorded).
    #[test]
    fn run_json_round_trips_exactly(
        counter in any::<u64>(),
        started in 1.0e9f64..2.0e9,
        dur in 0.0f64..1e6,
        exit in any::<Option<i32>>(),
    ) {
        let mut run = fixture_run();
        run.counters.insert("aggregate_map_full".into(), counter);
        run.started_unix = started;
        run.duration_s = dur;
        run.command_exit = exit;
        let back = Run::from_json(&run.to_json(), Path::new("r/run.json")).unwrap();
        prop_assert_eq!(back, run);
    }
}

// ---------------------------------------------------------------------------------------------
// --n lists

fn nlist_token() -> impl Strategy<Value = String> {
    prop_oneof![
        4 => (1u64..100_000).prop_map(|v| v.to_string()),
        1 => any::<u64>().prop_map(|v| v.to_string()),
        1 => Just("18446744073709551616".to_string()),
        1 => Just("0".to_string()),
        1 => (1u64..100).prop_map(|v| format!("{v}k")),
        1 => (1u64..50).prop_map(|v| format!("{v}m")),
        1 => Just("1_000".to_string()),
        1 => Just("_1".to_string()),
        1 => Just("1__0".to_string()),
        1 => Just("99999999999999999m".to_string()),
        1 => Just("1.5".to_string()),
        1 => Just("".to_string()),
        1 => Just(" 7 ".to_string()),
    ]
}

fn nlist_item() -> impl Strategy<Value = String> {
    let factor = prop_oneof![
        Just("2".to_string()),
        Just("1.5".to_string()),
        Just("1.0000001".to_string()),
        Just("1".to_string()),
        Just("0.5".to_string()),
        Just("NaN".to_string()),
        Just("inf".to_string()),
        Just("1e300".to_string()),
        Just("18446744073709551615".to_string()),
        (2u32..20).prop_map(|f| f.to_string()),
    ];
    prop_oneof![
        3 => nlist_token(),
        2 => (nlist_token(), nlist_token(), factor).prop_map(|(a, b, f)| format!("{a}..{b}*{f}")),
        2 => (nlist_token(), nlist_token(), nlist_token()).prop_map(|(a, b, s)| format!("{a}..{b}+{s}")),
        1 => (nlist_token(), nlist_token()).prop_map(|(a, b)| format!("{a}..{b}")),
        1 => Just("1..2..3*2".to_string()),
        1 => "[0-9.,*+km_ -]{0,12}",
    ]
}

fn check_nlist(text: &str) -> Result<(), TestCaseError> {
    if let Ok(v) = workloads::nlist::parse(text) {
        prop_assert!(!v.is_empty(), "{text:?} parsed to nothing");
        prop_assert!(
            v.len() <= workloads::nlist::MAX_VALUES,
            "{text:?}: {} values",
            v.len()
        );
        prop_assert!(v[0] >= 1, "{text:?} gave a zero size");
        prop_assert!(
            v.windows(2).all(|w| w[0] < w[1]),
            "{text:?} not strictly ascending: {v:?}"
        );
        // The canonical form reads back as the same list.
        let canon = workloads::nlist::NList(v.clone()).to_string();
        prop_assert_eq!(workloads::nlist::parse(&canon).unwrap(), v);
    }
    Ok(())
}

proptest! {
    #![proptest_config(config(256))]

    #[test]
    fn nlist_parser_never_panics_and_output_is_sorted_unique_bounded(
        items in prop::collection::vec(nlist_item(), 0..6),
    ) {
        check_nlist(&items.join(","))?;
    }

    #[test]
    fn nlist_parser_never_panics_on_arbitrary_text(text in "(?s).{0,60}") {
        check_nlist(&text)?;
    }

    #[test]
    fn nlist_of_plain_numbers_is_their_sorted_set(vals in prop::collection::vec(1u64..1_000_000_000, 1..50)) {
        let text = vals.iter().map(u64::to_string).collect::<Vec<_>>().join(",");
        let mut want = vals.clone();
        want.sort_unstable();
        want.dedup();
        prop_assert_eq!(workloads::nlist::parse(&text).unwrap(), want);
    }

    /// Both ends of a range are always included, and nothing outside them.
    #[test]
    fn nlist_ranges_include_both_ends(start in 1u64..10_000, len in 0u64..1_000_000, step in 1u64..5000, factor in 2u64..10) {
        let end = start + len;
        for text in [format!("{start}..{end}+{step}"), format!("{start}..{end}*{factor}")] {
            match workloads::nlist::parse(&text) {
                Ok(v) => {
                    prop_assert_eq!(v[0], start, "{}", text);
                    prop_assert_eq!(*v.last().unwrap(), end, "{}", text);
                }
                Err(workloads::nlist::NListError::TooMany) => {}
                Err(e) => return Err(TestCaseError::fail(format!("{text}: {e}"))),
            }
        }
    }
}

// ---------------------------------------------------------------------------------------------
// USDT notes (`.note.stapsdt`), read from binaries a user hands the tracer

use tracer::usdt::{self, note, testelf};

/// A real note section (the USDT benchmark's, static build), the seed for mutations.
const USDT_NOTES: &[u8] = include_bytes!("../fuzz/seeds/stapsdt/usdt_phases");

fn note_text() -> impl Strategy<Value = String> {
    "[a-z_%@$()0-9 ,-]{0,24}"
}

proptest! {
    #![proptest_config(config(256))]

    /// Any bytes as a note section: notes or an error; and as the note section of an
    /// executable: probes whose sites lie in its text segment, or a named error.
    #[test]
    fn stapsdt_reader_never_panics_on_arbitrary_bytes(data in prop::collection::vec(any::<u8>(), 0..300)) {
        let _ = note::parse_notes(&data);
        let elf = testelf::x86_64_elf(&data);
        if let Ok(probes) = usdt::probes(&elf) {
            for p in probes {
                prop_assert!(p.file_offset >= testelf::TEXT_OFFSET);
                prop_assert!(p.file_offset < testelf::TEXT_OFFSET + testelf::TEXT_SIZE);
            }
        }
        let _ = usdt::phase_sites(&elf);
        let _ = usdt::probes(&data);
    }

    /// A real note section with bytes overwritten: never a panic, and the untouched prefix
    /// of notes is still what it was.
    #[test]
    fn stapsdt_reader_never_panics_on_mutated_notes(
        muts in prop::collection::vec((0usize..USDT_NOTES.len(), any::<u8>()), 1..6),
        cut in 0usize..=USDT_NOTES.len(),
    ) {
        let mut data = USDT_NOTES.to_vec();
        for (at, b) in muts {
            data[at] = b;
        }
        data.truncate(cut);
        let _ = note::parse_notes(&data);
        let _ = usdt::phase_sites(&testelf::x86_64_elf(&data));
    }

    /// Notes written by `encode_note` read back exactly.
    #[test]
    fn stapsdt_notes_round_trip(
        notes in prop::collection::vec((note_text(), note_text(), note_text(), any::<u64>(), any::<u64>(), any::<u64>()), 0..6),
    ) {
        let notes: Vec<note::RawNote> = notes
            .into_iter()
            .map(|(provider, name, args, pc, base, semaphore)| note::RawNote { provider, name, pc, base, semaphore, args })
            .collect();
        let bytes: Vec<u8> = notes.iter().flat_map(note::encode_note).collect();
        prop_assert_eq!(note::parse_notes(&bytes).unwrap(), notes);
    }

    #[test]
    fn usdt_argument_parser_never_panics(text in "(?s).{0,40}", spec in "-?[1248]@[-$%(),0-9a-z]{0,16}") {
        let _ = usdt::args::parse_args(&text);
        let _ = usdt::args::parse_arg(&spec);
    }
}

/// The seed itself: the benchmark's four phase sites, read as the tracer reads them.
#[test]
fn the_usdt_seed_holds_the_benchmarks_four_phase_probes() {
    let notes = note::parse_notes(USDT_NOTES).unwrap();
    assert_eq!(notes.len(), 4);
    assert!(
        notes
            .iter()
            .all(|n| n.provider == "tracer" && n.semaphore != 0)
    );
    assert_eq!(notes.iter().filter(|n| n.name == "phase_begin").count(), 2);
}
