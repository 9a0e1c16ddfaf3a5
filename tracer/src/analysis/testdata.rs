//! Synthetic runs for unit tests.

use crate::rundata::{KernelInfo, PhaseRow, PlanUsed, Run, SpanRow, TargetReport};

use super::hist::from_values;

/// An analysis holding only these discoveries, each under a run of its `run`'s name.
pub fn analysis_of_discoveries(
    label: &str,
    discoveries: Vec<super::discover::Discovery>,
) -> super::Analysis {
    let mut runs: Vec<super::analyze::RunInfo> = Vec::new();
    for d in discoveries {
        match runs.iter_mut().find(|r| r.label == d.run) {
            Some(r) => r.discoveries.push(d),
            None => runs.push(super::analyze::RunInfo {
                label: d.run.clone(),
                dir: "/x".into(),
                kernel: d.kernel.clone(),
                status: crate::rundata::RunStatus::Complete,
                partial_reason: None,
                workload: None,
                sample_freq_hz: 0,
                targets: Vec::new(),
                counters: Default::default(),
                stacks: Vec::new(),
                cases: Vec::new(),
                discoveries: vec![d],
                trips: Vec::new(),
            }),
        }
    }
    super::Analysis {
        root: "/x".into(),
        label: label.into(),
        is_sweep: true,
        runs,
        warnings: Vec::new(),
    }
}

/// The analysis of `run` (a do_wait [waitpid-pid] run, as [`waitpid_run`] makes) named
/// "bench", with do_wait's on-CPU samples at each of its sizes: each of `stacks(N)`'s paths
/// (from do_wait down) with its ns per call, 4000 samples per size.
pub fn analysis_with_stacks(
    mut run: Run,
    stacks: impl Fn(u64) -> Vec<(&'static str, u64)>,
) -> super::Analysis {
    use crate::rundata::{Folded, StackFile, StackKind};
    let mut ns: Vec<u64> = run.spans.iter().map(|s| s.n).collect();
    ns.sort_unstable();
    ns.dedup();
    let stacks: Vec<(StackFile, Folded)> = ns
        .iter()
        .map(|&n| {
            let paths = stacks(n);
            let text: String = paths
                .iter()
                .map(|(path, ns)| format!("entry;{path} {}\n", ns * 200))
                .collect();
            let file = StackFile {
                kind: StackKind::Oncpu,
                target: "do_wait".into(),
                case: 1,
                case_name: "waitpid-pid".into(),
                n,
                path: format!("stacks/oncpu/do_wait/waitpid-pid/n{n}.folded"),
                total_ns: paths.iter().map(|(_, ns)| ns * 200).sum(),
                count: 4000,
            };
            (file, Folded::parse(&text).unwrap())
        })
        .collect();
    run.stack_files = stacks.iter().map(|(f, _)| f.clone()).collect();
    let loaded = super::load::LoadedRun::recorded("bench".into(), "/x".into(), run, stacks);
    super::analyze(
        &super::load::Dataset {
            root: "/x".into(),
            is_sweep: false,
            runs: vec![loaded],
            notes: Vec::new(),
        },
        &Default::default(),
    )
}

/// The analysis of one run named "r", with the default options.
pub fn analysis_of(run: Run) -> super::Analysis {
    let ds = super::load::Dataset {
        root: "/x".into(),
        is_sweep: false,
        runs: vec![super::load::LoadedRun::read("r".into(), "/nonexistent".into(), run).unwrap()],
        notes: vec![],
    };
    super::analyze(&ds, &super::AnalysisOptions::default())
}

pub fn plan(points: &[&str]) -> PlanUsed {
    PlanUsed {
        plan: "fentry".into(),
        mechanism: "fentry/fexit".into(),
        attach_points: points.iter().map(|s| s.to_string()).collect(),
        timed: true,
        note: "times the function itself".into(),
    }
}

pub fn empty_run(kernel: &str, targets: &[&str]) -> Run {
    Run::empty(
        KernelInfo {
            release: kernel.into(),
            version: "#1".into(),
            machine: "x86_64".into(),
        },
        targets
            .iter()
            .map(|t| TargetReport {
                name: t.to_string(),
                plan: Some(plan(&[t])),
                rejected: vec![],
                verification: None,
                probe_cost: None,
            })
            .collect(),
    )
}

/// do_wait under waitpid-pid: 200 calls per N, each exactly `oncpu(n)` ns on CPU and 2000 ns
/// blocked; the workload reports 9000, 10000 and 11000 ns per op over three repeats.
pub fn waitpid_run(ns: &[u64], oncpu: impl Fn(u64) -> u64) -> Run {
    let mut run = empty_run("5.10.0-test", &["do_wait"]);
    run.cases.insert(1, "waitpid-pid".into());
    let mut results = Vec::new();
    for &n in ns {
        let on = oncpu(n);
        run.spans.push(SpanRow {
            target: "do_wait".into(),
            case: 1,
            case_name: "waitpid-pid".into(),
            n,
            calls: 200,
            untimed: 0,
            wall: from_values(&vec![on + 2000; 200]),
            oncpu: from_values(&vec![on; 200]),
            within: Default::default(),
            trips: Vec::new(),
        });
        run.phases.push(PhaseRow {
            case: 1,
            case_name: "waitpid-pid".into(),
            n,
            phases: 1,
            ops: 200,
            wall_ns: 200 * 10_000,
        });
        for (rep, t) in [9000.0, 11000.0, 10000.0].iter().enumerate() {
            results.push(serde_json::json!({"case":"waitpid-pid","case_id":1,"n":n,"repeat":rep,
                "iterations":200,"ops":200,"total_ns":(*t as u64)*200,"time_ns_per_op":t,"cpu_ns_per_op":t}));
        }
    }
    run.workload = Some(
        serde_json::json!({"workload":"waitpid","kernel":"5.10.0-test","results":results,"status":"complete"}),
    );
    run.validate().expect("valid synthetic run");
    run
}

/// An external sweep of a command `bench`, two runs per N, whose do_wait calls mix two
/// populations: 300 per run that walk N children (`1900 + 10·N` ns each) and N reaps of about
/// 2 µs, as long as a wait at the smallest N (a shell's waits among its background jobs'
/// reaps). One op per run, as a command's sweep counts them without `--ops`.
pub fn command_mix_run(ns: &[u64]) -> Run {
    use workloads::cases::CASE_COMMAND;
    let mut run = command_runs(ns, 2, |n, _| {
        let mut calls: Vec<u64> = (0..300).map(|i| 1900 + 10 * n + i % 7).collect();
        calls.extend((0..n).map(|i| 2000 + i % 50));
        calls
    });
    for &n in ns {
        run.phases.push(PhaseRow {
            case: CASE_COMMAND,
            case_name: "bench".into(),
            n,
            phases: 2,
            ops: 2,
            wall_ns: 2 * 100_000_000,
        });
    }
    run.validate().expect("valid synthetic run");
    run
}

/// An external sweep of a command `bench` with `runs` runs per N: 50 calls of do_wait per
/// run, each exactly `oncpu(n, run)` ns on CPU, every run its own invocation with its own
/// spans (as `tracer sweep -- CMD` records them).
pub fn command_run(ns: &[u64], runs: u32, oncpu: impl Fn(u64, u32) -> u64) -> Run {
    command_runs(ns, runs, |n, r| vec![oncpu(n, r); 50])
}

/// An external sweep of a command `bench` with `runs` runs per N, run `r` at N making do_wait
/// calls of `calls(n, r)` ns on CPU each.
fn command_runs(ns: &[u64], runs: u32, calls: impl Fn(u64, u32) -> Vec<u64>) -> Run {
    use crate::rundata::{Invocation, InvocationSpan};
    use workloads::cases::CASE_COMMAND;
    let mut run = empty_run("5.10.0-test", &["do_wait"]);
    run.cases.insert(CASE_COMMAND, "bench".into());
    for &n in ns {
        let mut all = Vec::new();
        for r in 0..runs {
            let calls = calls(n, r);
            all.extend_from_slice(&calls);
            run.invocations.push(Invocation {
                n,
                command: vec!["bench".into(), n.to_string()],
                exit: Some(0),
                wall_s: 0.1,
                user_s: 0.0,
                sys_s: 0.05,
                cpu_steal_s: 0.0,
                cpu_busy_s: 0.0,
                outlived: 0,
                spans: vec![InvocationSpan {
                    target: "do_wait".into(),
                    case: CASE_COMMAND,
                    calls: calls.len() as u64,
                    untimed: 0,
                    wall: from_values(&calls),
                    oncpu: from_values(&calls),
                }],
            });
        }
        run.spans.push(SpanRow {
            target: "do_wait".into(),
            case: CASE_COMMAND,
            case_name: "bench".into(),
            n,
            calls: all.len() as u64,
            untimed: 0,
            wall: from_values(&all),
            oncpu: from_values(&all),
            within: Default::default(),
            trips: Vec::new(),
        });
    }
    run.validate().expect("valid synthetic run");
    run
}
