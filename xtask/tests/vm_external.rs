//! External sweeps of small unmodified C benchmarks (`tracer/tests/c/*.c`: static, no
//! markers, setup -> a timed loop in main -> teardown) on real Debian kernels under qemu,
//! checked against kernel history. The host kernel refuses function probes, so this is where
//! `--targets` on kernel functions and `--discover` meet kernels with the old and new code.
//!
//! One boot per kernel runs every sweep of that kernel (`kernel_out`, about 3.5 minutes
//! each under TCG); each test renders the sweeps it checks with the host's copy of the tracer
//! and asserts:
//!
//! - `waitpid_pid_do_wait_grows_on_5_10_only`: `wait_children N N pid` (fork +
//!   waitpid(child) with N idle children). do_wait per call is O(n) on 5.10 (waitpid(pid)
//!   walked the whole children list until 5.13) and O(1) on 6.1 (the pid is looked up); the
//!   calls per N are exactly the benchmark's: N timed + N teardown reaps.
//! - `waitpid_wnohang_do_wait_grows_on_both`: `wait_children N 8000 wnohang`. waitpid(-1)
//!   still walks every child on 6.1: O(n) on both; 8000 + N calls per N.
//! - `fork_with_n_vmas_is_linear`: `fork_vmas N 40`. dup_mmap per call O(n) in VMAs on both,
//!   40 calls per N; on 5.10 dup_mmap is inlined and the plan must say it timed copy_process.
//! - `proc_sysvipc_shm_find_ipc_per_call_grows_on_5_10_only`: `sysvipc_read N 10`.
//!   sysvipc_find_ipc counted the ids below the position on every call before 5.15: O(n) per
//!   call on 5.10; on 6.1 (idr_get_next, timed through its callers) O(1); at least one call
//!   per segment per read.
//! - `discover_names_wait_consider_task_on_5_10_and_nothing_in_do_wait_on_6_1`:
//!   `wait_children N N pid` under `--discover --ops {n}` (no target): on 5.10 the ranking
//!   has wait_consider_task O(n) per op, called from do_wait, and it is the root-cause frame;
//!   on 6.1 no ranked function is on the wait path or under it. Both rest on samples at
//!   every N.
//! - `copy_process_as_a_named_function_resolves_and_sweeps`: `tracer probes --targets
//!   copy_process` resolves it to fentry on both kernels; on 6.1 the VMA sweep with
//!   copy_process as an extra target counts one call per fork and finds it O(n) in VMAs.
//!
//! The waitpid(pid) loop runs N iterations (`{n} {n}`) on purpose. A run's do_wait calls are
//! its timed calls plus its N teardown reaps (the shape is unmodified), and a reap finds its
//! child at once on both kernels (on 5.10 the oldest child is at the head of the list). With
//! a fixed loop the reaps' share grows with N and the per-call mean flattens: measured on
//! 5.10 with 100 iterations, do_wait came out O(1), 310µs -> 269µs per call over
//! N=100..2000 (100 timed calls among 200..2100). With N iterations the mix is one timed call
//! per reap at every N, so the mean keeps the timed call's shape, and `--ops {n}` makes
//! discover's time per op one iteration plus one child's setup and teardown, constant on 6.1.
//! The WNOHANG polls are cheap, so a fixed 8000 of them keep the reaps to at most a fifth of
//! the calls instead.
//!
//! Why the N lists: under TCG the 5.10 walk costs ~0.3-0.7 µs per child while a waitpid call
//! has a fixed on-CPU cost of a few hundred µs with heavy tails (calls of several ms at every
//! N), so the walk only dominates from N≈2000: 5.10's waitpid(pid) list goes to 4000 (about
//! 70 s of forks); 6.1 needs no large N to show no growth. Below ~250 children the walk stays
//! within qemu's software TLB and is several times cheaper per child, which bends the curve,
//! so the wait sweeps start at 250. Forks copy 4000 VMAs in tens of ms: 1..4000 with 40
//! forks. /proc/sysvipc/shm reads are O(N²) on 5.10; 500..4000 segments (SHMMNI is 4096)
//! keep ten reads within seconds. The verdict sweeps take no stack samples (`--no-samples`):
//! under TCG each sample costs tens of µs in the call it lands in, and the root causes are
//! not asserted here; discover is all samples, so it has a sweep of its own.

mod common;

use std::collections::BTreeMap;
use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::{Mutex, OnceLock};

use common::{host_tracer, read_json, status_of, verdict};
use serde_json::Value;
use xtask::kernel::Kernel;

/// The C benchmarks the sweeps run, from `tracer/tests/c/`.
const BENCHES: &[&str] = &["wait_children", "fork_vmas", "sysvipc_read"];

/// The benchmarks compiled statically on the host (glibc's libc.a: they run in the guest's
/// bare initramfs), once per test process, into a directory the guest gets at the same path.
fn bench_dir() -> PathBuf {
    static DIR: OnceLock<PathBuf> = OnceLock::new();
    DIR.get_or_init(|| {
        let dir = common::work_dir("benches");
        let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("../tracer/tests/c");
        for name in BENCHES {
            let c = src.join(format!("{name}.c"));
            let st = Command::new("cc")
                .args(["-O2", "-static", "-o"])
                .arg(dir.join(name))
                .arg(&c)
                .status()
                .expect("precondition: a C compiler (cc) with a static libc is installed");
            assert!(st.success(), "compiling {}", c.display());
        }
        dir
    })
    .clone()
}

/// One external sweep in the guest: `tracer sweep ARGS -o /out/NAME -- $B/COMMAND`.
struct Sweep {
    name: &'static str,
    args: &'static str,
    command: &'static str,
}

/// fork + waitpid(child) with N idle children, N timed iterations (see the top). 5.10 needs
/// the larger N: its walk only outgrows the call's fixed cost from N≈2000.
const WAIT_PID_5_10: Sweep = Sweep {
    name: "pid",
    args: "--n 250,500,1000,2000,4000 --targets do_wait --no-samples",
    command: "wait_children {n} {n} pid",
};
const WAIT_PID_6_1: Sweep = Sweep {
    name: "pid",
    args: "--n 250,500,1000,2000 --targets do_wait --no-samples",
    command: "wait_children {n} {n} pid",
};
/// The same benchmark under discover: no target, every kernel stack of the tree sampled.
const WAIT_PID_DISCOVER: Sweep = Sweep {
    name: "discover",
    args: "--n 100,500,1000,2000 --discover --ops {n}",
    command: "wait_children {n} {n} pid",
};
/// waitpid(-1, WNOHANG) polls with N idle children: a fixed loop (see the top).
const WAIT_WNOHANG: Sweep = Sweep {
    name: "wnohang",
    args: "--n 250,500,1000,2000 --targets do_wait --no-samples",
    command: "wait_children {n} 8000 wnohang",
};
/// The polls of WAIT_WNOHANG's command.
const WNOHANG_POLLS: u64 = 8000;
const VMAS: Sweep = Sweep {
    name: "vmas",
    args: "--n 1,500,2000,4000 --targets dup_mmap --no-samples",
    command: "fork_vmas {n} 40",
};
/// 6.1 only: the same, plus a function that is no built-in target. (On 5.10 dup_mmap is
/// itself measured on copy_process.)
const VMAS_ARBITRARY: Sweep = Sweep {
    name: "vmas",
    args: "--n 1,500,2000,4000 --targets dup_mmap,copy_process --no-samples",
    command: "fork_vmas {n} 40",
};
const SYSVIPC: Sweep = Sweep {
    name: "sysvipc",
    args: "--n 500,1000,2000,4000 --targets sysvipc_find_ipc --no-samples",
    command: "sysvipc_read {n} 10",
};
/// The forks of the VMA sweeps' command.
const VMA_FORKS: u64 = 40;
/// The reads of SYSVIPC's command.
const SHM_READS: u64 = 10;

fn script(kernel: Kernel) -> String {
    // The counts the tests expect are the commands' own arguments.
    assert!(WAIT_WNOHANG.command.contains(&format!(" {WNOHANG_POLLS} ")));
    assert!(VMAS.command.ends_with(&format!(" {VMA_FORKS}")));
    assert_eq!(VMAS.command, VMAS_ARBITRARY.command);
    assert!(SYSVIPC.command.ends_with(&format!(" {SHM_READS}")));
    let sweeps: &[&Sweep] = match kernel {
        Kernel::V6_1 => &[
            &WAIT_PID_6_1,
            &WAIT_PID_DISCOVER,
            &WAIT_WNOHANG,
            &VMAS_ARBITRARY,
            &SYSVIPC,
        ],
        _ => &[
            &WAIT_PID_5_10,
            &WAIT_PID_DISCOVER,
            &WAIT_WNOHANG,
            &VMAS,
            &SYSVIPC,
        ],
    };
    let mut s = String::new();
    for sw in sweeps {
        // Reports are rendered on the host: faster than under TCG, and what is tested is
        // the data the guest recorded.
        s.push_str(&format!(
            "tracer sweep {} --no-report -o /out/{} -- $B/{} > /out/{}.log 2>&1\necho {}=$? >> /out/status\n",
            sw.args, sw.name, sw.command, sw.name, sw.name
        ));
    }
    s.push_str(
        "tracer probes --targets copy_process --json > /out/probes.json 2> /out/probes.err
echo probes=$? >> /out/status
exit 0
",
    );
    s
}

/// One boot per kernel runs every sweep of that kernel (boots and TCG are the expensive
/// part); the tests below each check their part of the results.
fn kernel_out(kernel: Kernel) -> PathBuf {
    static OUTS: OnceLock<Mutex<BTreeMap<&'static str, PathBuf>>> = OnceLock::new();
    let outs = OUTS.get_or_init(Default::default);
    let mut outs = outs.lock().unwrap_or_else(|e| e.into_inner());
    if let Some(p) = outs.get(kernel.version()) {
        return p.clone();
    }
    let benches = bench_dir();
    let name = format!("external-{}", kernel.version());
    let (_, out) = common::boot(kernel, &name, &script(kernel), 900, |_, cfg| {
        cfg.include(&benches).env("B", benches.to_str().unwrap())
    });
    outs.insert(kernel.version(), out.clone());
    out
}

/// The sweep's log, for failure messages.
fn log(out: &Path, sweep: &Sweep) -> String {
    fs::read_to_string(out.join(format!("{}.log", sweep.name))).unwrap_or_default()
}

/// Render one sweep of `kernel` on the host and return its summary.json and run.json.
fn report(kernel: Kernel, sweep: &Sweep) -> (Value, Value) {
    let out = kernel_out(kernel);
    let code = status_of(&out)[sweep.name];
    assert_eq!(
        code,
        0,
        "{} sweep {} exited {code}:\n{}",
        kernel.version(),
        sweep.name,
        log(&out, sweep)
    );
    let dir = out.join(sweep.name);
    host_tracer(&["report", dir.to_str().unwrap(), "--no-flamegraphs"]);
    let bench = sweep.command.split(' ').next().unwrap();
    (
        read_json(&dir.join("report/summary.json")),
        read_json(&dir.join(bench).join("run.json")),
    )
}

/// The scaling class of `target` over the command's N, with its line for messages.
fn class_of(summary: &Value, target: &str) -> (String, String) {
    let v = verdict(summary, target, "command");
    (
        v["scaling"]["class"]
            .as_str()
            .unwrap_or("(none)")
            .to_string(),
        v["line"].as_str().unwrap_or_default().to_string(),
    )
}

/// The plan `target` was measured with.
fn plan_of(run: &Value, target: &str) -> String {
    run["targets"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["name"] == target)
        .unwrap_or_else(|| panic!("{target} not in run"))["plan"]["plan"]
        .as_str()
        .unwrap_or("(none)")
        .to_string()
}

/// Calls of `target` in the command's phase at each N.
fn calls_by_n(run: &Value, target: &str) -> BTreeMap<u64, u64> {
    run["spans"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|r| r["target"] == target && r["case_name"] == "command")
        .map(|r| (r["n"].as_u64().unwrap(), r["calls"].as_u64().unwrap()))
        .collect()
}

/// The N values of a sweep's `--n` list.
fn n_list(sweep: &Sweep) -> Vec<u64> {
    let list = sweep.args.split_whitespace().nth(1).unwrap();
    list.split(',').map(|n| n.parse().unwrap()).collect()
}

/// `target`'s verdict in each (kernel, sweep) against the class kernel history says, and its
/// calls per N against the benchmark's own count (`calls_ok(n, calls)`). Every kernel is
/// checked before the test fails, so a failure shows both kernels' verdicts.
fn assert_verdicts(
    what: &str,
    target: &str,
    cases: &[(Kernel, &Sweep, &str)],
    calls_ok: impl Fn(u64, u64) -> bool,
) {
    let mut wrong = Vec::new();
    for (kernel, sweep, want) in cases {
        let v = kernel.version();
        let (summary, run) = report(*kernel, sweep);
        let (class, line) = class_of(&summary, target);
        eprintln!("{v} {what}: {line}");
        if class != *want {
            wrong.push(format!("{v} {what}: {class}, expected {want}: {line}"));
        }
        let calls = calls_by_n(&run, target);
        for n in n_list(sweep) {
            let c = calls.get(&n).copied().unwrap_or(0);
            if !calls_ok(n, c) {
                wrong.push(format!("{v} {what}: {c} {target} calls at N={n}"));
            }
        }
    }
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}

#[test]
#[ignore = "boots a VM: run through cargo xtask test"]
fn waitpid_pid_do_wait_grows_on_5_10_only() {
    // Every do_wait of a run is in the command's phase: N timed calls, N teardown reaps.
    assert_verdicts(
        "waitpid(pid) with N children",
        "do_wait",
        &[
            (Kernel::V5_10, &WAIT_PID_5_10, "O(n)"),
            (Kernel::V6_1, &WAIT_PID_6_1, "O(1)"),
        ],
        |n, calls| calls == 2 * n,
    );
}

#[test]
#[ignore = "boots a VM: run through cargo xtask test"]
fn waitpid_wnohang_do_wait_grows_on_both() {
    assert_verdicts(
        "waitpid(-1, WNOHANG) with N children",
        "do_wait",
        &[
            (Kernel::V5_10, &WAIT_WNOHANG, "O(n)"),
            (Kernel::V6_1, &WAIT_WNOHANG, "O(n)"),
        ],
        |n, calls| calls == WNOHANG_POLLS + n,
    );
}

#[test]
#[ignore = "boots a VM: run through cargo xtask test"]
fn fork_with_n_vmas_is_linear() {
    // 5.10 inlines dup_mmap: the plan must say it measured copy_process instead.
    for (kernel, sweep, plan) in [
        (Kernel::V5_10, &VMAS, "caller-copy_process-fentry"),
        (Kernel::V6_1, &VMAS_ARBITRARY, "fentry"),
    ] {
        let (_, run) = report(kernel, sweep);
        assert_eq!(plan_of(&run, "dup_mmap"), plan, "{}", kernel.version());
    }
    assert_verdicts(
        "fork with N VMAs",
        "dup_mmap",
        &[
            (Kernel::V5_10, &VMAS, "O(n)"),
            (Kernel::V6_1, &VMAS_ARBITRARY, "O(n)"),
        ],
        |_, calls| calls == VMA_FORKS,
    );
}

#[test]
#[ignore = "boots a VM: run through cargo xtask test"]
fn proc_sysvipc_shm_find_ipc_per_call_grows_on_5_10_only() {
    // At least one lookup per segment per read.
    assert_verdicts(
        "reading /proc/sysvipc/shm with N segments",
        "sysvipc_find_ipc",
        &[
            (Kernel::V5_10, &SYSVIPC, "O(n)"),
            (Kernel::V6_1, &SYSVIPC, "O(1)"),
        ],
        |n, calls| calls >= SHM_READS * n,
    );
}

/// The one discovery of a discover sweep.
fn discovery(summary: &Value) -> &Value {
    let d = &summary["discoveries"];
    assert_eq!(d.as_array().map(Vec::len), Some(1), "one discovery: {d}");
    &d[0]
}

/// A ranked function's name, class and caller chain.
fn grower(g: &Value) -> (&str, &str, Vec<&str>) {
    (
        g["function"].as_str().unwrap(),
        g["scaling"]["class"].as_str().unwrap(),
        g["callers"]
            .as_array()
            .unwrap()
            .iter()
            .map(|c| c.as_str().unwrap())
            .collect(),
    )
}

/// The wait path's functions: do_wait and what it calls to find and reap a child.
const WAIT_PATH: &[&str] = &[
    "do_wait",
    "__do_wait",
    "do_wait_pid",
    "do_wait_thread",
    "wait_consider_task",
    "wait_task_zombie",
];

#[test]
#[ignore = "boots a VM: run through cargo xtask test"]
fn discover_names_wait_consider_task_on_5_10_and_nothing_in_do_wait_on_6_1() {
    let ns = n_list(&WAIT_PID_DISCOVER);
    for kernel in [Kernel::V5_10, Kernel::V6_1] {
        let v = kernel.version();
        let (summary, _) = report(kernel, &WAIT_PID_DISCOVER);
        let d = discovery(&summary);
        assert_eq!(d["per"], "op", "{v}: --ops gives per-op times");
        let got: Vec<u64> = d["ns"]
            .as_array()
            .unwrap()
            .iter()
            .map(|n| n.as_u64().unwrap())
            .collect();
        assert_eq!(got, ns, "{v}: every N sampled");
        // Whatever it concludes rests on samples at every N.
        for s in d["samples"].as_array().unwrap() {
            assert!(s.as_u64().unwrap() > 200, "{v}: samples {}", d["samples"]);
        }
        let ranked: Vec<_> = d["ranked"].as_array().unwrap().iter().map(grower).collect();
        if kernel == Kernel::V5_10 {
            let w = ranked
                .iter()
                .find(|g| g.0 == "wait_consider_task")
                .unwrap_or_else(|| panic!("{v}: wait_consider_task not ranked: {ranked:?}"));
            assert_eq!(w.1, "O(n)", "{v}: {ranked:?}");
            assert!(w.2.contains(&"do_wait"), "{v}: called from do_wait: {w:?}");
            assert_eq!(
                d["cause"]["function"], "wait_consider_task",
                "{v}: the frame whose own time grows: {}",
                d["cause"]
            );
        } else {
            for g in &ranked {
                assert!(
                    !WAIT_PATH.contains(&g.0) && !g.2.iter().any(|c| WAIT_PATH.contains(c)),
                    "{v}: {} grows {} in the wait path: {ranked:?}",
                    g.0,
                    g.1
                );
            }
        }
    }
}

/// A kernel function that is no built-in target, named on the command line: `tracer probes`
/// resolves it, and a sweep times it per call (one call per fork of the benchmark's loop).
#[test]
#[ignore = "boots a VM: run through cargo xtask test"]
fn copy_process_as_a_named_function_resolves_and_sweeps() {
    for kernel in [Kernel::V5_10, Kernel::V6_1] {
        let out = kernel_out(kernel);
        assert_eq!(status_of(&out)["probes"], 0, "{}", kernel.version());
        let probes = read_json(&out.join("probes.json"));
        let t = &probes["targets"][0];
        assert_eq!(t["name"], "copy_process", "{probes}");
        assert_eq!(
            t["plan"]["plan"],
            "fentry",
            "{}: {probes}",
            kernel.version()
        );
        assert_eq!(t["plan"]["attach_points"][0], "copy_process");
    }
    let (summary, run) = report(Kernel::V6_1, &VMAS_ARBITRARY);
    assert_eq!(plan_of(&run, "copy_process"), "fentry");
    let calls = calls_by_n(&run, "copy_process");
    for n in n_list(&VMAS_ARBITRARY) {
        assert_eq!(
            calls.get(&n),
            Some(&VMA_FORKS),
            "copy_process calls at N={n}"
        );
    }
    let (class, line) = class_of(&summary, "copy_process");
    assert_eq!(class, "O(n)", "copy_process with N VMAs: {line}");
}
