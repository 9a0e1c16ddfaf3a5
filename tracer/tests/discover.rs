//! Discover mode and external sweeps, natively on this machine's kernel (which refuses function
//! probes: everything here rests on perf_event sampling and tracepoints). The benchmarks are
//! small static C programs of the usual shape (setup, a timed loop in main, teardown, no
//! markers), built by the test from `tests/c/`.
use std::path::Path;
use std::process::Command;

use serde_json::Value;

mod common;
use common::serial;
use common::sweeps::{bench, discovery, sweep, sweep_under, text};

/// (N, exit status) of each run of an external sweep's command, from its run.json.
fn exits_by_n(run_json: &Path) -> Vec<(u64, i64)> {
    let run: Value = serde_json::from_str(&std::fs::read_to_string(run_json).unwrap()).unwrap();
    run["invocations"]
        .as_array()
        .unwrap()
        .iter()
        .map(|i| (i["n"].as_u64().unwrap(), i["exit"].as_i64().unwrap()))
        .collect()
}

fn ranked(d: &Value) -> Vec<String> {
    d["ranked"]
        .as_array()
        .unwrap()
        .iter()
        .map(|g| g["function"].as_str().unwrap().to_string())
        .collect()
}

fn class(g: &Value) -> String {
    g["scaling"]["class"].as_str().unwrap().to_string()
}

/// The sampled stacks of a whole-process profile: at least 99.9% of them recorded (every
/// distinct stack stored, none lost to another stack's slot).
fn assert_stacks_kept(run_json: &std::path::Path) {
    let run: Value = serde_json::from_str(&std::fs::read_to_string(run_json).unwrap()).unwrap();
    let c = |k: &str| run["counters"][k].as_u64().unwrap_or_else(|| panic!("{k}"));
    let (taken, lost) = (c("stacks_taken"), c("stack_errors"));
    assert!(taken > 1000, "only {taken} stacks taken");
    assert!(
        lost * 1000 <= taken,
        "{lost} of {taken} stacks lost (sampled {})",
        c("stacks_lost_sampled")
    );
    // The kernel's sample-rate limit, read when recording began and ended (a fall below the
    // frequency is a warning): this host's is well above the frequency the tests sample at.
    let (from, to) = (
        c("sample_rate_limit_start_hz"),
        c("sample_rate_limit_end_hz"),
    );
    assert!(
        from >= run["sample_freq_hz"].as_u64().unwrap() && to > 0,
        "{from} -> {to}"
    );
}

#[test]
fn discover_names_the_children_walk_of_waitpid_wnohang() {
    names_the_children_walk_under(&[]);
}

/// The same inside a PID namespace with its own /proc (a container): the samples are the
/// command's, found by its pid there, and the answer is the same walk.
#[test]
fn discover_inside_a_pid_namespace_names_the_same_walk() {
    names_the_children_walk_under(&["unshare", "-p", "-f", "--mount-proc"]);
}

fn names_the_children_walk_under(wrapper: &[&str]) {
    let _g = serial();
    let b = bench("wait_children");
    let b = b.to_str().unwrap();
    let (s, _dir, o) = sweep_under(
        wrapper,
        &[
            "--discover",
            "--n",
            "10,200,600,1500",
            "--ops",
            "10000",
            "--",
            b,
            "{n}",
            "10000",
            "wnohang",
        ],
    );
    assert!(o.status.success(), "{}", text(&o));
    let d = discovery(&s);
    let names = ranked(d);
    // The walk is do_wait_thread's loop over the children, inlined into __do_wait, calling
    // wait_consider_task once per child. The list walk's own time sits in __do_wait: most
    // runs here put 75% or more of __do_wait's added time in wait_consider_task (the
    // pass-through share: the callee leads), one in four about 69% (__do_wait leads, 27.7
    // against 19.0 µs per op added). Both are the walk.
    let walk = ["wait_consider_task", "__do_wait"];
    let top_name = names.first().map(String::as_str).unwrap_or("(none)");
    assert!(walk.contains(&top_name), "{top_name}: {}", text(&o));
    let top = &d["ranked"][0];
    assert_ne!(class(top), "O(1)");
    let callers: Vec<String> = serde_json::from_value(top["callers"].clone()).unwrap();
    assert!(
        callers.iter().any(|c| c == "__do_wait" || c == "do_wait"),
        "called from the wait path: {callers:?}"
    );
    // The self time that grows most is the callee's, whichever function leads.
    assert_eq!(d["cause"]["function"], "wait_consider_task", "{}", text(&o));
    assert_eq!(d["per"], "op", "--ops gives per-op times");
    assert_stacks_kept(&_dir.path().join("sweep/wait_children/run.json"));
    // This kernel allows no function probe: the confirmation pass says so and is skipped,
    // and the answer says the finding rests on samples.
    assert!(
        text(&o).contains(&format!("no exact confirmation of {top_name}")),
        "{}",
        text(&o)
    );
    assert!(!_dir.path().join("sweep/wait_children-confirm").exists());
    // Per call of the syscall it runs in, the walk is the kernel loop: every wait4 of the
    // timed loop visits the N children.
    let (entry, frame) = top_loop(d);
    assert_eq!(entry, "wait4", "{}", text(&o));
    assert!(walk.contains(&frame.as_str()), "{frame}: {}", text(&o));
    // The terminal leads with the answer: the loop, in its syscall.
    let stdout = String::from_utf8_lossy(&o.stdout);
    let first = stdout
        .lines()
        .find(|l| l.contains("[command]:"))
        .unwrap_or_default();
    assert!(
        first.contains(&format!(
            "{frame} in wait4: its time per wait4 call grows O("
        )),
        "answer first: {stdout}"
    );
}

/// The top kernel loop of a discovery: (entry, the frame whose time per call grows most).
fn top_loop(d: &Value) -> (String, String) {
    let l = &d["entries"]["loops"][0];
    let s = |v: &Value| v.as_str().unwrap_or("(none)").to_string();
    (s(&l["entry"]), s(&l["frames"][0]["function"]))
}

/// `tracer sweep --discover --n NS [--ops OPS] -- BENCH {n} ARG` for one of `tests/c`'s
/// benchmarks: its summary's first discovery, and the output. The sweep must succeed.
fn discover_bench(
    name: &str,
    ns: &str,
    ops: Option<&str>,
    arg: &str,
) -> (Value, std::process::Output) {
    let b = bench(name);
    let mut args = vec!["--discover", "--n", ns];
    if let Some(ops) = ops {
        args.extend(["--ops", ops]);
    }
    args.extend(["--", b.to_str().unwrap(), "{n}", arg]);
    let (s, _dir, o) = sweep(&args);
    assert!(o.status.success(), "{}", text(&o));
    (discovery(&s).clone(), o)
}

#[test]
fn discover_finds_the_per_read_growth_of_proc_sysvipc_shm() {
    let _g = serial();
    let (d, o) = discover_bench("sysvipc_read", "10,300,1000,2500", Some("60"), "60");
    let top = &d["ranked"][0];
    assert_ne!(class(top), "O(1)", "{}", text(&o));
    // What it names on this kernel: the per-segment show function of the seq_file that
    // /proc/sysvipc/shm reads through (or, where inlined, a function below seq_read).
    let f = top["function"].as_str().unwrap();
    let callers = top["callers"].to_string();
    assert!(
        f.starts_with("sysvipc_") || callers.contains("sysvipc_") || callers.contains("seq_read"),
        "{f} via {callers}: {}",
        text(&o)
    );
    assert!(
        top["added_share"].as_f64().unwrap() > 0.5,
        "it carries most of the added time: {top}"
    );
}

#[test]
fn discover_finds_the_per_vma_work_of_fork() {
    let _g = serial();
    let (d, o) = discover_bench("fork_vmas", "1,500,2000,8000", Some("60"), "60");
    let top = &d["ranked"][0];
    let f = top["function"].as_str().unwrap();
    assert!(
        f == "dup_mmap" || top["callers"].to_string().contains("\"dup_mmap\""),
        "the per-VMA work of fork: {f} ({})",
        text(&o)
    );
    // One dup_mmap iteration per VMA, but each costs more as N grows (1.15 µs per VMA at
    // N=500, 1.68 µs at N=8000 on this host): the time fits O(n log n)
    // about as often as O(n). Either is the per-VMA loop; anything else is not.
    assert!(
        ["O(n)", "O(n log n)"].contains(&class(top).as_str()),
        "{}",
        text(&o)
    );
}

/// The same syscalls at every N, and N times 100000 rounds of user-space arithmetic: nothing
/// grows in the kernel. On a busy machine the longer spin takes more interrupts and
/// preemptions, whose time can grow enough to be ranked: then that growth is the run's
/// length, said as such, and nothing else is ranked.
#[test]
fn discover_says_nothing_grows_when_kernel_time_is_flat() {
    let _g = serial();
    let (d, o) = discover_bench("flat_syscalls", "1,10,30,100", Some("200000"), "200000");
    let d = &d;
    let stdout = String::from_utf8_lossy(&o.stdout);
    if ranked(d).is_empty() {
        assert!(
            stdout.contains("nothing in the kernel grows with N"),
            "{}",
            text(&o)
        );
    } else {
        assert_eq!(
            d["entries"]["growth"]["reason"],
            "run_length",
            "{}",
            text(&o)
        );
        assert!(
            stdout.contains("because the run is longer: "),
            "{}",
            text(&o)
        );
    }
    assert!(
        d["entries"]["more_calls"].as_array().unwrap().is_empty(),
        "{}",
        text(&o)
    );
    assert!(
        d["entries"]["loops"].as_array().unwrap().is_empty(),
        "{}",
        text(&o)
    );
    // The samples did see the kernel time: a negative that rests on data.
    assert!(
        d["samples"]
            .as_array()
            .unwrap()
            .iter()
            .all(|c| c.as_u64().unwrap() > 50)
    );
}

/// The samples account for a syscall loop's CPU time, or the report says what they missed.
/// On a quiet host they cover 80-120% of it; beside a guest on the other core of this 2-core
/// host they once covered 70% (a fresh-clone suite, no sample-rate throttling: the limit
/// stayed at 100000/s) while the kernel's share of the samples and of rusage agreed within
/// 1.5 points. What the data fixes under load is that share, and that a shortfall is said.
/// Beside busy guests they covered 122% on a CI machine (3.57 s sampled, 2.92 s by rusage,
/// the kernel's share 84% and 86%) and 124% here (3.40 s against 2.75 s, the kernel's
/// share 88% and 85%, the hypervisor's steal 0.14% of the busy time: not the cause, which
/// is not known). Time the hypervisor steals is taken out of the samples before judging;
/// above 120% the report must say the samples hold more than rusage, and up to 130% is
/// accepted when it does.
#[test]
fn discover_coverage_matches_system_time_on_short_syscalls() {
    let _g = serial();
    let (d, o) = discover_bench("zero_read", "1,2", None, "3000000");
    // rusage splits a task's run time into user and system by tick sampling, so its system
    // time is itself an estimate: the loop runs ~1 s per N to keep that split tight.
    let cov = d["coverage"].as_array().unwrap();
    assert_eq!(cov.len(), 2, "per N");
    for c in cov {
        let sys = c["sys_s"].as_f64().unwrap();
        let ratio = c["ratio_without_steal"]
            .as_f64()
            .or(c["ratio"].as_f64())
            .unwrap();
        assert!(sys > 0.02, "the loop spends its time in the kernel: {c}");
        assert!(
            (0.5..=1.3).contains(&ratio),
            "sampled on-CPU time within 30% of the CPU time, or at worst half of it: {c}"
        );
        if ratio > 1.2 {
            assert!(
                text(&o).contains("over 120.0%: the samples include CPU time"),
                "coverage {ratio:.2} unsaid: {}",
                text(&o)
            );
        }
        if ratio < 0.8 {
            assert!(
                text(&o).contains("the samples missed CPU time"),
                "coverage {ratio:.2} unsaid: {}",
                text(&o)
            );
        }
        // One long process: rusage's tick-based split is tight, and agrees with the samples.
        let (k, r) = (
            c["kernel_share_sampled"].as_f64().unwrap(),
            c["kernel_share_rusage"].as_f64().unwrap(),
        );
        assert!((k - r).abs() < 0.15, "kernel shares {k} and {r}: {c}");
    }
}

/// A shell running many short commands: rusage books the kernel time of each process shorter
/// than a tick as user time, so its system time is a fraction of what the samples see in the
/// kernel. The coverage compares whole CPU times (within the tolerance, never "over 100%" for
/// this), and says how the two kernel shares differ and why. 300 and 1000 commands: 100 on a
/// quiet host were 35 ms of CPU time, few enough samples that one run's coverage read 77%.
/// Beside a busy core 1000 of them read 79% with 336 ms sampled: short-lived processes lose
/// some of their samples (at their start and end), more so when they wait for a CPU, so the
/// lower bound is 70%; the upper stays at 120%.
#[test]
fn discover_coverage_of_a_shell_running_short_commands_is_whole_cpu_time() {
    let _g = serial();
    let (s, _dir, o) = sweep(&[
        "--discover",
        "--n",
        "300,1000",
        "--repeat",
        "1",
        "--",
        "sh",
        "-c",
        "i=0; while [ $i -lt {n} ]; do /bin/true; i=$((i+1)); done",
    ]);
    assert!(o.status.success(), "{}", text(&o));
    let d = discovery(&s);
    let cov = d["coverage"].as_array().unwrap();
    assert_eq!(cov.len(), 2, "per N");
    let mut split_off = false;
    for c in cov {
        let ratio = c["ratio_without_steal"]
            .as_f64()
            .or(c["ratio"].as_f64())
            .unwrap();
        assert!(
            (0.7..=1.2).contains(&ratio),
            "sampled on-CPU time within 70-120% of the tree's CPU time: {c}"
        );
        let k = c["kernel_share_sampled"].as_f64().unwrap();
        let r = c["kernel_share_rusage"].as_f64().unwrap();
        split_off |= k > r + 0.1;
    }
    let line = text(&o)
        .lines()
        .find(|l| l.contains("coverage:"))
        .unwrap_or_default()
        .to_string();
    assert!(line.contains("of the command tree's CPU time"), "{line}");
    assert!(!line.contains("over 120"), "{line}");
    // Where rusage's split puts less in the kernel than the samples, the line says why.
    assert_eq!(
        split_off,
        line.contains("whose split is estimated from clock ticks"),
        "{line}"
    );
}

#[test]
fn external_sweep_keeps_the_other_sizes_when_one_fails() {
    let _g = serial();
    let (summary, out, o) = sweep(&[
        "--discover",
        "--n",
        "10,20,30",
        "--",
        "sh",
        "-c",
        "test {n} -ne 20 && test $TRACER_N = {n}",
    ]);
    assert_eq!(o.status.code(), Some(8), "{}", text(&o));
    assert!(text(&o).contains("failed at N = 20"), "{}", text(&o));
    // Three runs per N by default, each round in its own order.
    let mut exits = exits_by_n(&out.path().join("sweep/sh/run.json"));
    assert!(
        !(exits[..3] == exits[3..6] && exits[3..6] == exits[6..9]),
        "the rounds are shuffled: {exits:?}"
    );
    exits.sort_unstable();
    assert_eq!(
        exits,
        [[(10, 0); 3], [(20, 1); 3], [(30, 0); 3]].concat(),
        "TRACER_N and {{n}} agree"
    );
    assert!(
        summary.to_string().contains("the command failed at N=20"),
        "the report says which N was left out"
    );
}

#[test]
fn external_sweep_times_a_named_target_per_n() {
    let _g = serial();
    let b = bench("wait_children");
    // On this kernel do_wait resolves to the wait4/waitid syscall bracket.
    let (s, dir, o) = sweep(&[
        "--targets",
        "do_wait",
        "--no-samples",
        "--n",
        "10,300,1000,2000",
        "--repeat",
        "2",
        "--",
        b.to_str().unwrap(),
        "{n}",
        "3000",
        "wnohang",
    ]);
    assert!(o.status.success(), "{}", text(&o));
    let v = &s["verdicts"];
    let v = v
        .as_array()
        .unwrap()
        .iter()
        .find(|v| v["target"] == "do_wait" && v["case_name"] == "command")
        .unwrap_or_else(|| panic!("a do_wait verdict for the command: {s}"));
    // Linear in the children walked; the walk over thousands of task_structs also misses
    // cache more at the largest N, which can tip the class one step up.
    let class = v["scaling"]["class"].as_str().unwrap();
    assert!(
        matches!(class, "O(n)" | "O(n log n)"),
        "{class}: {}",
        text(&o)
    );
    let run: Value = serde_json::from_str(
        &std::fs::read_to_string(dir.path().join("sweep/wait_children/run.json")).unwrap(),
    )
    .unwrap();
    // Two rounds, then up to two more runs of a size whose runs disagree (default cap: 2R).
    let runs = runs_by_n(&run);
    assert_eq!(
        runs.keys().copied().collect::<Vec<_>>(),
        [10, 300, 1000, 2000]
    );
    assert!(runs.values().all(|&r| (2..=4).contains(&r)), "{runs:?}");
    // 3000 polls plus N teardown reaps per run: the report says the mean mixes them and
    // splits them by the per-call histogram.
    let p = s["populations"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["target"] == "do_wait")
        .unwrap_or_else(|| panic!("the mix of polls and reaps is found: {s}"));
    let fixed = p["fixed_per_op"].as_f64().unwrap();
    let per_n = p["per_n"].as_f64().unwrap();
    assert!((fixed - 3000.0).abs() < 150.0, "3000 polls per run: {p}");
    assert!((per_n - 1.0).abs() < 0.1, "one reap per child: {p}");
    assert_eq!(p["separated"], true, "{p}");
    // Which population is the slower one is not asserted: the teardown kills all N children
    // and then reaps them while they exit together, and on this 2-core host the reaps' time
    // at N=2000 has come out both below the polls' (a fresh clone, quiet) and 3x above it
    // (61µs vs 19.5µs, another fresh clone): a property of the load, not of the kernel.
    assert!(
        String::from_utf8_lossy(&o.stdout).contains("Mixed call populations"),
        "{}",
        text(&o)
    );
    for p in run["phases"].as_array().unwrap() {
        let n = p["n"].as_u64().unwrap();
        assert_eq!(p["phases"], runs[&n], "each run of an N is one phase: {p}");
    }
}

/// Successful runs of the command per N, from a run.json.
fn runs_by_n(run: &Value) -> std::collections::BTreeMap<u64, u64> {
    let mut m = std::collections::BTreeMap::new();
    for i in run["invocations"].as_array().unwrap() {
        if i["exit"] == 0 {
            *m.entry(i["n"].as_u64().unwrap()).or_default() += 1;
        }
    }
    m
}

/// A shell running the C benchmark with K idle children and 2000 waitpid(-1, WNOHANG) polls,
/// each walking all K, K a different multiple of N in every run (from a counter the runs
/// share): the runs of one size disagree by design. Over two sizes every growing shape fits
/// exactly: however much they disagree, more runs cannot narrow the verdict, no size runs
/// again, and the last line says so. Over four sizes a size runs again only for a verdict the
/// line names as one that could still change, never past --max-repeat, and the line's runs
/// per size are the run's; --max-repeat equal to --repeat adds none. (Whether the four sizes'
/// verdict is open after the rounds depends on the host's timing: the rule itself is unit
/// tested in `record::extra`.)
#[test]
fn extra_runs_go_only_to_verdicts_that_could_still_change() {
    let _g = serial();
    let tmp = tempfile::tempdir().unwrap();
    let counter = tmp.path().join("count");
    std::fs::write(&counter, "0").unwrap();
    let script = format!(
        "c=$(cat {c}); echo $((c + 1)) > {c}; exec {b} $(( {{n}} * (1 + c % 4) )) 2000 wnohang",
        c = counter.display(),
        b = bench("wait_children").display()
    );
    let sweep_with = |extra: &[&str]| {
        let mut args = vec![
            "--targets",
            "do_wait",
            "--no-samples",
            "--no-report",
            "--name",
            "jobs",
        ];
        args.extend_from_slice(extra);
        args.extend_from_slice(&["--", "sh", "-c", &script]);
        let (_, dir, o) = sweep(&args);
        assert!(o.status.success(), "{}", text(&o));
        let run: Value = serde_json::from_str(
            &std::fs::read_to_string(dir.path().join("sweep/jobs/run.json")).unwrap(),
        )
        .unwrap();
        (runs_by_n(&run), text(&o))
    };
    let (runs, out) = sweep_with(&["--n", "100,300", "--max-repeat", "5"]);
    assert_eq!(runs.values().copied().collect::<Vec<_>>(), [3, 3], "{out}");
    assert!(!out.contains("[extra run"), "{out}");
    assert!(
        out.contains("\ntracer: jobs: runs per size: N=100 3, N=300 3; more runs of these sizes would not narrow do_wait "),
        "{out}"
    );

    let (runs, out) = sweep_with(&["--n", "30,100,300,1000", "--max-repeat", "5"]);
    assert!(
        runs.values().all(|&r| (3..=5).contains(&r)),
        "{runs:?}\n{out}"
    );
    let said = runs
        .iter()
        .map(|(n, r)| format!("N={n} {r}"))
        .collect::<Vec<_>>()
        .join(", ");
    let extra = out.lines().filter(|l| l.contains(" [extra run ")).count();
    assert_eq!(
        extra,
        runs.values().map(|r| r - 3).sum::<u64>() as usize,
        "{out}"
    );
    for l in out.lines().filter(|l| l.contains(" [extra run ")) {
        assert!(
            l.contains(": do_wait ") && l.contains(" could read "),
            "{l}"
        );
    }
    if extra > 0 {
        assert!(
            out.contains(&format!(
                "\ntracer: jobs: runs per size: {said}; extra runs where a verdict could still change: N="
            )),
            "{out}"
        );
    }

    let (runs, out) = sweep_with(&["--n", "30,100,300,1000", "--max-repeat", "3"]);
    assert!(runs.values().all(|&r| r == 3), "{runs:?}\n{out}");
    assert!(!out.contains("[extra run"), "{out}");
}

#[test]
fn a_command_without_n_in_its_arguments_is_swept_and_the_note_says_so() {
    // Allowed: the command may read N from TRACER_N alone. Each run checks it got its N.
    let _g = serial();
    let (_, out, o) = sweep(&[
        "--targets",
        "getpid",
        "--no-samples",
        "--no-report",
        "--max-repeat",
        "3",
        "--n",
        "3,7",
        "--",
        "sh",
        "-c",
        "case $TRACER_N in 3|7) exit 0;; esac; exit 1",
    ]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    assert!(
        text(&o).contains("the command has no {n} in its arguments"),
        "{}",
        text(&o)
    );
    let mut exits = exits_by_n(&out.path().join("sweep/sh/run.json"));
    exits.sort_unstable();
    assert_eq!(exits, [[(3, 0); 3], [(7, 0); 3]].concat());
}

#[test]
fn external_sweep_input_errors_are_usage_errors() {
    let _g = serial();
    // `tracer sweep ARGS` exits 2 and says `why`.
    let refused = |args: &[&str], why: &str| {
        let o = Command::new(env!("CARGO_BIN_EXE_tracer"))
            .arg("sweep")
            .args(args)
            .output()
            .unwrap();
        assert_eq!(o.status.code(), Some(2), "{args:?}: {}", text(&o));
        assert!(text(&o).contains(why), "{args:?}: {}", text(&o));
    };
    refused(&["--", "true", "{n}"], "needs --n");
    refused(&["--n", "1,2", "--", "/no/such/bench", "{n}"], "not found");
    refused(
        &["--n", "1,2", "--ops", "{n}*", "--", "true"],
        "the expression ends early",
    );
    let repeat_3_max_2 = ["--repeat", "3", "--max-repeat", "2"];
    let too_few = "--max-repeat 2: must be at least --repeat (3)";
    refused(
        &[&["--n", "1,2"], &repeat_3_max_2[..], &["--", "true"]].concat(),
        too_few,
    );
    refused(
        &["waitpid", "--n", "1,2", "--ops", "4"],
        "--ops, --name and --phase-fn apply to a command",
    );
    // A workload's rounds are checked as a command's are, three by default.
    refused(&["waitpid", "--n", "1,2", "--max-repeat", "2"], too_few);
    refused(
        &[&["waitpid", "--n", "1,2"], &repeat_3_max_2[..]].concat(),
        too_few,
    );
    refused(
        &["--n", "1,2", "--extra-time", "0", "--", "true"],
        "must be positive",
    );
    refused(
        &["--n", "1,2", "--targets", "not a function", "--", "true"],
        "not a kernel function name",
    );
}

/// `tracer record --discover` of `tests/c/entry_moves` (1000 nanosleeps that block, 50 ppolls
/// that are woken on another CPU than they entered on, 100000 getppids that never leave their
/// CPU, then a count of the ppolls that did move), with `env` set: the run.json, and the
/// number of ppolls that returned on the other CPU.
fn record_entry_moves(env: &[(&str, &str)]) -> (Value, u64) {
    let cpus = common::allowed_cpus();
    assert!(
        cpus.len() >= 2,
        "precondition: two CPUs to migrate between (allowed: {cpus:?})"
    );
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("run");
    let o = common::tracer()
        .envs(env.iter().copied())
        .args(["record", "--discover", "-o"])
        .arg(&out)
        .arg("--")
        .arg(bench("entry_moves"))
        .args([cpus[0].to_string(), cpus[1].to_string()])
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", text(&o));
    let moved = String::from_utf8_lossy(&o.stdout)
        .lines()
        .find_map(|l| l.trim().parse().ok())
        .unwrap_or_else(|| panic!("entry_moves printed no count: {}", text(&o)));
    (common::read_json(&out.join("run.json")), moved)
}

/// Discover counts every syscall of the traced tree at its entry, in its CPU's cache of
/// counts (added to the shared map when another syscall takes the slot, and by userspace
/// when it reads them), and keeps the open one in its CPU's slot while the thread stays
/// there: syscalls that block, and syscalls that return on another CPU, are counted as
/// exactly as the ones that do neither, with the slot and without it, and none is lost.
#[test]
fn discover_counts_syscalls_that_block_or_migrate_exactly() {
    let _g = serial();
    for (label, env) in [
        ("per-CPU slot", vec![]),
        ("map only", vec![(tracer::engine::NO_FAST_PATH_ENV, "1")]),
    ] {
        let (run, moved) = record_entry_moves(&env);
        assert_eq!(
            moved, 50,
            "{label}: every ppoll returned on the CPU it was sent to"
        );
        let calls = |name: &str| common::entry_calls(&run, name);
        assert_eq!(calls("nanosleep"), 1000, "{label}: nanosleep calls");
        assert_eq!(calls("ppoll"), 50, "{label}: ppoll calls");
        assert_eq!(calls("getppid"), 100_000, "{label}: getppid calls");
        assert_eq!(
            run["counters"]["entries_lost"].as_u64().unwrap_or(0),
            0,
            "{label}: entries lost"
        );
    }
}

/// `tracer compare A B -o OUT` of two sweep directories: compare.json, and the output.
fn compare_dirs(a: &Path, b: &Path) -> (Value, tempfile::TempDir, std::process::Output) {
    let out = tempfile::tempdir().expect("tempdir");
    let dir = out.path().join("cmp");
    let o = Command::new(env!("CARGO_BIN_EXE_tracer"))
        .arg("compare")
        .arg(a)
        .arg(b)
        .arg("-o")
        .arg(&dir)
        .output()
        .expect("tracer runs");
    assert!(o.status.success(), "{}", text(&o));
    (common::read_json(&dir.join("compare.json")), out, o)
}

/// Two discover sweeps of one program compare their kernel loop, matched by program and
/// syscall: poll(2) over N idle pipes asks every pipe on each call (O(n) on every kernel), so
/// the same sweep twice never reads grew or shrank, and its line names the loop on both
/// sides. Whether it reads `same` depends on the machine: at rest it does (asserted on two
/// saved sweeps, `analysis_fixture.rs`), but beside a busy neighbour two sweeps read a growth
/// per call of ×51.9 and ×24.7 (a 0.75 µs call at N = 100 is where a neighbour's cache and
/// preemptions weigh most), beyond the margin: `inconclusive` is then the honest answer and
/// is accepted here. A discover sweep of another program is no match: the compare says so
/// and compares nothing of theirs.
#[test]
fn discover_compares_one_programs_loop_and_refuse_two_programs() {
    let _g = serial();
    let poll = bench("poll_pipes");
    let run = || {
        let (_, dir, o) = sweep(&[
            "--discover",
            "--n",
            "100,300,1000,3000",
            "--repeat",
            "2",
            "--",
            poll.to_str().unwrap(),
            "{n}",
            "20000",
        ]);
        assert!(o.status.success(), "{}", text(&o));
        dir
    };
    let (a, b) = (run(), run());
    let (c, _out, o) = compare_dirs(&a.path().join("sweep"), &b.path().join("sweep"));
    let loops: Vec<&Value> = c["verdicts"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|v| v["discovered"].is_object())
        .collect();
    let poll_loop = loops
        .iter()
        .find(|v| v["discovered"]["entry"] == "poll")
        .unwrap_or_else(|| panic!("no poll loop compared: {}", text(&o)));
    let change = poll_loop["change"].as_str().unwrap_or_default();
    assert!(
        change == "same" || change == "inconclusive",
        "{change}: {}",
        text(&o)
    );
    assert!(
        ["frame_a", "frame_b"]
            .iter()
            .all(|f| poll_loop["discovered"][f].is_string()),
        "a loop on both sides: {}",
        text(&o)
    );
    assert!(
        loops
            .iter()
            .all(|v| v["change"] != "grew" && v["change"] != "shrank"),
        "{}",
        text(&o)
    );
    assert!(
        String::from_utf8_lossy(&o.stdout).contains(&format!("in poll [command]: {change}: ")),
        "{}",
        text(&o)
    );

    let (_, other, o) = sweep(&[
        "--discover",
        "--n",
        "10,100",
        "--repeat",
        "1",
        "--",
        bench("wait_children").to_str().unwrap(),
        "{n}",
        "10",
        "pid",
    ]);
    assert!(o.status.success(), "{}", text(&o));
    let (c, _out, o) = compare_dirs(&a.path().join("sweep"), &other.path().join("sweep"));
    assert!(
        c["verdicts"]
            .as_array()
            .unwrap()
            .iter()
            .all(|v| !v["discovered"].is_object()),
        "{c}"
    );
    let why = c["unmatched"].as_str().unwrap_or_default();
    assert!(
        why.contains("poll_pipes [command]") && why.contains("wait_children [command]"),
        "{why}: {}",
        text(&o)
    );
    assert!(String::from_utf8_lossy(&o.stdout).contains("no kernel loop compared"));
}
