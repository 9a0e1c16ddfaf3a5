//! `tracer compare` against real kernels' noise: external sweeps of `sysvipc_read {n} 10`
//! (tracer/tests/c/) on Debian 5.10 and 6.1 under qemu TCG, two runs per N each, saved with
//! every run's calls apart (`invocations[].spans`), reduced to `run.json`:
//!
//! | fixture | kernel | sweep |
//! | --- | --- | --- |
//! | `vm-sysvipc-compare/5.10` | 5.10 | N = 250..4000, 2 runs per N |
//! | `vm-sysvipc-compare/6.1-a` | 6.1 | the same |
//! | `vm-sysvipc-compare/6.1-b` | 6.1 | the same again, later in the same boot |
//!
//! Pseudo-sweeps are drawn from the runs: for 6.1, each size's four runs (two per sweep) are
//! split into two pairs, each pair one side of an A/A compare; for 5.10 -> 6.1, two of the four
//! 6.1 runs per size face the 5.10 sweep. On 5.10 sysvipc_find_ipc scans the ids below its
//! position (per call O(n)); on 6.1 it looks the next id up directly. The A/A pairs must not
//! say `grew` or `shrank`, nor name class sets with no class in common; the 5.10 -> 6.1 pairs
//! must say `shrank`.
//!
//! And built-in sweeps, one run per size: `tracer sweep waitpid --n 1,10,100,1000,2000,4000,6000
//! -- --variant waitpid-pid,waitpid-any --iterations 40 --repeats 2 --cpu 1`, three times on each
//! kernel (`vm-waitpid-compare/{5.10,6.1}-{a,b,c}`, do_wait's rows of the VM tests' sweep).
//! Under TCG a whole size drifts between sweeps (5.10's waitpid(-1) at N = 4000: 6.37, 9.36 and
//! 2.71 ms), which the workload's repeats inside one process do not see. waitpid(pid) walks
//! the children on 5.10 only (fixed in 5.13); waitpid(-1) walks them on both.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use tracer::analysis::compare::{Change, compare};
use tracer::analysis::hist;
use tracer::analysis::load::{Dataset, LoadedRun};
use tracer::analysis::{AnalysisOptions, analyze};
use tracer::rundata::{Invocation, Run, SpanRow};

fn fixture(name: &str) -> Run {
    fixture_in("vm-sysvipc-compare", name)
}

fn fixture_in(set: &str, name: &str) -> Run {
    let dir = Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures"))
        .join(set)
        .join(name);
    Run::read(&dir).unwrap_or_else(|e| panic!("{e}"))
}

const TARGET: &str = "sysvipc_find_ipc";

/// The command's runs of `run` by N, in the order they ran (failed ones left out).
fn runs_by_n(run: &Run) -> BTreeMap<u64, Vec<Invocation>> {
    let mut m: BTreeMap<u64, Vec<Invocation>> = BTreeMap::new();
    for i in run.invocations.iter().filter(|i| !i.failed()) {
        m.entry(i.n).or_default().push(i.clone());
    }
    m
}

/// A sweep made of the runs `chosen` (per N) of `base`: the span rows of the command's case are
/// the chosen runs' calls summed, the invocations those runs.
fn pseudo_sweep(base: &Run, chosen: &BTreeMap<u64, Vec<Invocation>>) -> Run {
    let mut run = base.clone();
    let template = base
        .spans
        .iter()
        .find(|s| s.target == TARGET && s.case_name == "command")
        .expect("the fixture has command spans")
        .clone();
    run.spans.retain(|s| s.case_name != "command");
    run.invocations.clear();
    for (&n, invs) in chosen {
        let mut row = SpanRow {
            n,
            calls: 0,
            untimed: 0,
            wall: Default::default(),
            oncpu: Default::default(),
            within: Default::default(),
            ..template.clone()
        };
        for i in invs {
            let sp = i
                .spans
                .iter()
                .find(|s| s.target == TARGET)
                .expect("each run has its calls");
            row.calls += sp.calls;
            row.untimed += sp.untimed;
            row.wall = hist::merge(&row.wall, &sp.wall);
            row.oncpu = hist::merge(&row.oncpu, &sp.oncpu);
            run.invocations.push(i.clone());
        }
        run.spans.push(row);
    }
    run.phases
        .retain(|p| p.case_name != "command" || chosen.contains_key(&p.n));
    run
}

/// The compare's decision on the target, its details, and whether the two sides' class sets
/// have a class in common.
fn change(a: Run, b: Run) -> (Change, String, bool) {
    change_of(a, b, TARGET, "command")
}

fn change_of(a: Run, b: Run, target: &str, case: &str) -> (Change, String, bool) {
    let an = |run: Run, label: &str| {
        analyze(
            &Dataset {
                root: PathBuf::from(label),
                is_sweep: false,
                runs: vec![
                    LoadedRun::read(label.into(), PathBuf::from("/nonexistent"), run).unwrap(),
                ],
                notes: vec![],
            },
            &AnalysisOptions::default(),
        )
    };
    let (aa, ab) = (an(a, "a"), an(b, "b"));
    let c = compare(&aa, &ab);
    let cl = c
        .classes
        .iter()
        .find(|cl| cl.target == target && cl.case_name == case)
        .expect("both sides have the target");
    let agree = cl.classes_a.iter().any(|c| cl.classes_b.contains(c));
    (
        cl.growth.change,
        format!("{:?} {:?} {:?}", cl.classes_a, cl.classes_b, cl.growth),
        agree,
    )
}

/// The `k`-th way of splitting each size's four runs into two pairs (three ways per size,
/// chosen per size by the digits of `k` in base 3).
fn split(
    pool: &BTreeMap<u64, Vec<Invocation>>,
    mut k: usize,
) -> [BTreeMap<u64, Vec<Invocation>>; 2] {
    let mut sides: [BTreeMap<u64, Vec<Invocation>>; 2] = Default::default();
    for (&n, runs) in pool {
        assert_eq!(runs.len(), 4, "two runs per N in each 6.1 sweep at N={n}");
        let partner = 1 + k % 3;
        k /= 3;
        let (mut x, mut y) = (vec![runs[0].clone(), runs[partner].clone()], Vec::new());
        for (j, r) in runs.iter().enumerate() {
            if j != 0 && j != partner {
                y.push(r.clone());
            }
        }
        if k % 2 == 1 {
            std::mem::swap(&mut x, &mut y);
        }
        sides[0].insert(n, x);
        sides[1].insert(n, y);
    }
    sides
}

#[test]
fn resampled_a_a_pairs_never_flag_a_change_and_the_fixed_scan_shrinks() {
    let (a, b) = (fixture("6.1-a"), fixture("6.1-b"));
    let mut pool = runs_by_n(&a);
    for (n, runs) in runs_by_n(&b) {
        pool.entry(n).or_default().extend(runs);
    }
    let old = fixture("5.10");
    let pairs = 30;
    let (mut flagged, mut same, mut detected) = (0, 0, 0);
    for k in 0..pairs {
        let [x, y] = split(&pool, k * 7 + 1);
        let (c, line, agree) = change(pseudo_sweep(&a, &x), pseudo_sweep(&a, &y));
        eprintln!("A/A {k}: {c:?} {line}");
        assert!(agree, "A/A {k}: the class sets conflict: {line}");
        flagged += usize::from(c.flagged());
        same += usize::from(c == Change::Same);
        let (c, line, _) = change(old.clone(), pseudo_sweep(&a, &x));
        eprintln!("5.10 -> 6.1 {k}: {c:?} {line}");
        detected += usize::from(c == Change::Shrank);
    }
    eprintln!("{pairs} A/A pairs: {flagged} flagged, {same} same; 5.10 -> 6.1: {detected} shrank");
    assert_eq!(flagged, 0, "A/A pairs flagged as changed");
    assert_eq!(detected, pairs, "5.10 -> 6.1 pairs called shrank");
}

/// Every pair of the three built-in sweeps per kernel: from 5.10 to 6.1 waitpid(pid) `shrank`
/// in all nine, waitpid(-1) (growth x54..x83 on 5.10, x18..x35 on 6.1, through the same walk) is
/// flagged in none, and no two sweeps of one kernel flag either case. One run per size: every
/// decision says so.
#[test]
fn built_in_sweeps_of_one_run_per_size_flag_only_the_fixed_walk() {
    let sweeps =
        |k: &str| ["a", "b", "c"].map(|i| fixture_in("vm-waitpid-compare", &format!("{k}-{i}")));
    let (old, new) = (sweeps("5.10"), sweeps("6.1"));
    let decide = |a: &Run, b: &Run, case: &str| {
        let (c, line, _) = change_of(a.clone(), b.clone(), "do_wait", case);
        assert!(line.contains("one run per size on A and B"), "{line}");
        (c, line)
    };
    for a in &old {
        for b in &new {
            let (c, line) = decide(a, b, "waitpid-pid");
            assert_eq!(c, Change::Shrank, "5.10 -> 6.1 waitpid(pid): {line}");
            let (c, line) = decide(a, b, "waitpid-any");
            assert!(!c.flagged(), "5.10 -> 6.1 waitpid(-1): {line}");
        }
    }
    for side in [&old, &new] {
        for (i, a) in side.iter().enumerate() {
            for (j, b) in side.iter().enumerate() {
                if i == j {
                    continue;
                }
                for case in ["waitpid-pid", "waitpid-any"] {
                    let (c, line) = decide(a, b, case);
                    assert!(!c.flagged(), "A/A {case}: {line}");
                }
            }
        }
    }
}

/// The per-N table of a sweep whose sizes had runs of their own names the fitted centre and,
/// beside each size's spread, how many runs it rests on (extra runs make them differ).
#[test]
fn tables_say_how_many_runs_each_size_rests_on() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = Path::new(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/fixtures/vm-sysvipc-compare/6.1-a"
    ));
    let opts = tracer::render::ReportOptions {
        flamegraphs: false,
        ..Default::default()
    };
    tracer::pipeline::report(dir, tmp.path(), &opts).unwrap();
    let md = std::fs::read_to_string(tmp.path().join("tables/sysvipc_find_ipc.md")).unwrap();
    assert!(
        md.contains("median over the runs of each run's 10%-trimmed mean"),
        "{md}"
    );
    let runs = runs_by_n(&fixture("6.1-a"));
    for (n, invs) in runs {
        let row = md
            .lines()
            .find(|l| l.starts_with(&format!("| {n} |")))
            .unwrap_or_else(|| panic!("no row for N={n}: {md}"));
        assert!(
            row.contains(&format!("% ({} runs) |", invs.len())),
            "N={n}: {row}"
        );
    }
}
