//! The tracer's function probes on real Debian kernels (5.10, 6.1, 6.12) under qemu. This
//! machine's own kernel refuses kprobes and fentry, so these are the tests of the main path.
//!
//! Each test boots one VM that runs a script of tracer commands writing under /out; the
//! assertions run here on the files that come back, against the workloads' own counts
//! (forks == dup_mmap calls, waits == do_wait calls, pages touched ~ page allocations).
//! `#[ignore]`d for plain `cargo test`; `cargo xtask test` runs them one at a time.

mod common;

use std::collections::BTreeMap;
use std::fs;
use std::path::{Path, PathBuf};

use common::{host_tracer, read_json, status_of, verdict};
use serde_json::Value;
use xtask::kernel::Kernel;
use xtask::vm::VmReport;

/// Boot `kernel`, run `script` (busybox sh) with the small-N workloads script as `$WL`, and
/// return the report and the /out directory.
fn boot(kernel: Kernel, name: &str, script: &str, timeout_secs: u64) -> (VmReport, PathBuf) {
    common::boot(kernel, name, script, timeout_secs, |work, cfg| {
        let workloads_script = work.join("all-workloads.sh");
        fs::write(&workloads_script, ALL_WORKLOADS).unwrap();
        cfg.include(&workloads_script)
            .env("WL", workloads_script.to_str().unwrap())
    })
}

/// The four workloads at small N: enough to count exactly, quick under TCG.
const ALL_WORKLOADS: &str = "\
set -e
workloads waitpid --n 1,24 --iterations 6 --warmup 0
workloads spawn --n 1,24 --iterations 6 --warmup 0
workloads sysvipc --n 1,24 --iterations 3 --warmup 0
workloads mempolicy --variant mempolicy-page --n 64,512 --iterations 3 --warmup 0
";

const ALL_TARGETS: &str = "do_wait,dup_mmap,sysvipc_find_ipc,get_task_policy,page_alloc";

/// A run's view: plan per target, calls per (target, case name, n), ops per (case name, n).
struct RunView {
    run: Value,
    calls: BTreeMap<(String, String, u64), (u64, u64)>,
    ops: BTreeMap<(String, u64), u64>,
}

impl RunView {
    fn load(dir: &Path) -> RunView {
        let run = read_json(&dir.join("run.json"));
        let mut calls = BTreeMap::new();
        for r in run["spans"].as_array().unwrap() {
            let k = (
                r["target"].as_str().unwrap().to_string(),
                r["case_name"].as_str().unwrap().to_string(),
                r["n"].as_u64().unwrap(),
            );
            calls.insert(
                k,
                (
                    r["calls"].as_u64().unwrap(),
                    r["wall"]["min_ns"].as_u64().unwrap(),
                ),
            );
        }
        let mut ops = BTreeMap::new();
        for p in run["phases"].as_array().unwrap() {
            ops.insert(
                (
                    p["case_name"].as_str().unwrap().to_string(),
                    p["n"].as_u64().unwrap(),
                ),
                p["ops"].as_u64().unwrap(),
            );
        }
        RunView { run, calls, ops }
    }

    fn plan(&self, target: &str) -> String {
        let t = self.run["targets"]
            .as_array()
            .unwrap()
            .iter()
            .find(|t| t["name"] == target)
            .unwrap_or_else(|| panic!("{target} not in run"));
        t["plan"]["plan"].as_str().unwrap_or("(none)").to_string()
    }

    fn calls(&self, target: &str, case: &str, n: u64) -> u64 {
        self.calls
            .get(&(target.into(), case.into(), n))
            .map(|c| c.0)
            .unwrap_or(0)
    }

    fn phases(&self, case_prefix: &str) -> Vec<(String, u64, u64)> {
        self.ops
            .iter()
            .filter(|((c, _), _)| c.starts_with(case_prefix))
            .map(|((c, n), o)| (c.clone(), *n, *o))
            .collect()
    }

    /// Every target's calls match the workloads' own counts, phase by phase.
    fn assert_counts_match(&self, label: &str) {
        let waits = self
            .phases("waitpid")
            .into_iter()
            .chain(self.phases("waitid"));
        let mut checked = 0;
        for (case, n, ops) in waits {
            assert_eq!(
                self.calls("do_wait", &case, n),
                ops,
                "{label}: do_wait calls in {case} N={n}"
            );
            if case != "waitpid-wnohang" {
                // Each op forked the child it then waited for.
                assert_eq!(
                    self.calls("dup_mmap", &case, n),
                    ops,
                    "{label}: forks in {case} N={n}"
                );
            }
            checked += 1;
        }
        for (case, n, ops) in self.phases("spawn") {
            assert_eq!(
                self.calls("dup_mmap", &case, n),
                ops,
                "{label}: dup_mmap calls in {case} N={n}"
            );
            checked += 1;
        }
        for (case, n, reads) in self.phases("sysvipc") {
            if case.ends_with("sparse") {
                continue;
            }
            let calls = self.calls("sysvipc_find_ipc", &case, n);
            // One id lookup per record (plus one to find the end) for each full read.
            assert!(
                calls >= reads * n && calls <= reads * (n + 64) * 2,
                "{label}: sysvipc_find_ipc calls {calls} for {reads} reads of {n} records ({case})"
            );
            checked += 1;
        }
        for (case, n, pages) in self.phases("mempolicy-page") {
            let gtp = self.calls("get_task_policy", &case, n);
            let alloc = self.calls("page_alloc", &case, n);
            assert!(
                gtp >= pages,
                "{label}: get_task_policy {gtp} < {pages} pages touched (N={n})"
            );
            let diff = (gtp as f64 - alloc as f64).abs() / alloc as f64;
            assert!(
                diff <= 0.10,
                "{label}: get_task_policy {gtp} vs kmem:mm_page_alloc {alloc} differ by {:.0}% (N={n})",
                diff * 100.0
            );
            checked += 1;
        }
        assert!(
            checked >= 10,
            "{label}: only {checked} phases checked: {:?}",
            self.ops
        );
        for ((t, c, n), (calls, min)) in &self.calls {
            let timed = self.run["targets"]
                .as_array()
                .unwrap()
                .iter()
                .find(|x| x["name"] == *t)
                .is_some_and(|x| x["plan"]["timed"] == true);
            if timed && *calls > 0 && c != "unphased" {
                assert!(*min > 0, "{label}: {t} {c} N={n} has a zero-length call");
            }
        }
        let counters = &self.run["counters"];
        for bad in ["aggregate_map_full", "thread_map_full", "unpaired_exits"] {
            assert_eq!(counters[bad], 0, "{label}: counter {bad}");
        }
        // Stacks (callers, blocking points, samples) are kept: at most 0.1% lost. An on-CPU
        // sample (NMI) that interrupts a stack insert on its own CPU finds the map's bucket
        // lock held and is dropped: 2 of 1620 in one 6.12 run, 3 of 1867 in a 5.10 one, none
        // of the per-kind stores full.
        let taken = counters["stacks_taken"].as_u64().unwrap();
        let lost = counters["stack_errors"].as_u64().unwrap();
        assert!(taken > 0, "{label}: no stack taken");
        assert!(
            loss_within_rate(lost, taken),
            "{label}: {lost} of {taken} stacks lost: {counters}"
        );
    }
}

/// A sweep whose stacks the old stack-trace maps lost a few percent of (deep, varied ones;
/// 144,054 taken in the 6.1 waitpid sweep, 7,316 in the spawn one): at most 0.1% lost.
fn assert_stacks_kept(run: &Path, label: &Path) {
    let c = &read_json(&run.join("run.json"))["counters"];
    let taken = c["stacks_taken"].as_u64().unwrap();
    let lost = c["stack_errors"].as_u64().unwrap();
    assert!(taken > 1000, "{}: only {taken} stacks", label.display());
    assert!(
        loss_within_rate(lost, taken),
        "{}: {lost} of {taken} stacks lost: {c}",
        label.display()
    );
}

/// Are `lost` of `taken` stacks consistent with a loss rate of at most 0.1%? Rare drops are
/// counts, Poisson-distributed: the bound is the expected count at that rate (over at least
/// 2000 stacks) plus three of its standard deviations and one, so a few thousand stacks may
/// lose a handful by chance while 144,054 may lose at most 0.13%.
fn loss_within_rate(lost: u64, taken: u64) -> bool {
    let expected = 0.001 * taken.max(2000) as f64;
    lost as f64 <= expected + 3.0 * expected.sqrt() + 1.0
}

fn sweep_run(out: &Path, workload: &str) -> RunView {
    RunView::load(&out.join("sweep").join(workload))
}

/// ` --plan T=P` for each forced plan.
fn plan_args(forced: &[(&str, &str)]) -> String {
    forced
        .iter()
        .map(|(t, p)| format!(" --plan {t}={p}"))
        .collect()
}

/// Natural resolution through a sweep of every workload, plus a forced-kprobe record.
fn script(forced: &[(&str, &str)]) -> String {
    let plans = plan_args(forced);
    format!(
        "tracer sweep --all --n 1,24 --no-report --targets {ALL_TARGETS} -o /out/sweep -- --iterations 6 --warmup 0
echo sweep=$? >> /out/status
tracer record --targets {ALL_TARGETS}{plans} --markers /bin/workloads -o /out/forced -- sh $WL
echo forced=$? >> /out/status
tracer probes --verify --json > /out/probes.json
echo probes=$? >> /out/status
cat /proc/kallsyms > /out/kallsyms
"
    )
}

fn assert_sweep(out: &Path, label: &str, expect: &[(&str, &str)]) {
    let st = status_of(out);
    assert_eq!(st["sweep"], 0, "{label}: sweep exit");
    let mut all = RunView::load(&out.join("sweep/waitpid"));
    for w in ["spawn", "sysvipc", "mempolicy"] {
        let v = sweep_run(out, w);
        all.calls.extend(v.calls);
        all.ops.extend(v.ops);
    }
    for (target, plan) in expect {
        assert_eq!(all.plan(target), *plan, "{label}: plan of {target}");
    }
    all.assert_counts_match(label);
    assert_function_probe_costs_measured(&all.run, label);
    // Verification ran and passed for each chosen plan.
    for t in all.run["targets"].as_array().unwrap() {
        if !t["plan"].is_null() {
            assert_eq!(t["verification"]["passed"], true, "{label}: {}", t["name"]);
        }
    }
}

/// The tracer as the first process of a PID namespace with its own /proc (busybox unshare, as
/// a container starts it): every target resolved as the kernel allows, then the function plans
/// forced to kprobes, each over the four workloads.
fn in_pid_namespace(forced: &[(&str, &str)]) -> String {
    let plans = plan_args(forced);
    format!(
        "unshare -p -f --mount-proc tracer record --targets {ALL_TARGETS} --markers /bin/workloads -o /out/ns -- sh $WL
echo ns=$? >> /out/status
unshare -p -f --mount-proc tracer record --targets {ALL_TARGETS}{plans} --markers /bin/workloads -o /out/ns-forced -- sh $WL
echo ns_forced=$? >> /out/status
"
    )
}

fn assert_forced(out: &Path, label: &str, forced: &[(&str, &str)]) {
    let st = status_of(out);
    assert_eq!(st["forced"], 0, "{label}: forced record exit");
    let v = RunView::load(&out.join("forced"));
    for (target, plan) in forced {
        assert_eq!(v.plan(target), *plan, "{label}: forced plan of {target}");
    }
    v.assert_counts_match(label);
    assert_function_probe_costs_measured(&v.run, label);
}

/// Every function probe's own cost was measured at attach: a figure, not a reason. fentry
/// needs the calibration syscall's function in the kernel's BTF, which Debian's kernels have
/// for `getpgid` and `getsid` but not for the argument-less `getuid` and its kin.
fn assert_function_probe_costs_measured(run: &Value, label: &str) {
    let mut seen = 0;
    for t in run["targets"].as_array().unwrap() {
        let pc = &t["probe_cost"];
        let mech = pc["mechanism"].as_str().unwrap_or("");
        if mech.starts_with("fentry") || mech.starts_with("kprobe") {
            seen += 1;
            let ns = pc["probe_cost_ns"].as_f64();
            assert!(
                ns.is_some_and(|ns| ns > 0.0),
                "{label}: {}: {mech} probe cost not measured: {pc}",
                t["name"]
            );
        }
    }
    assert!(seen > 0, "{label}: no function probe in {run}");
}

/// The forced syscall brackets count every wait and every read of /proc/sysvipc/*, fed by
/// the raw_syscalls pair.
fn assert_brackets_count_exactly(kernel: Kernel) {
    let out = kernel_out(kernel);
    let label = kernel.version();
    assert_eq!(
        status_of(&out)["bracket"],
        0,
        "{label}: bracket record exit"
    );
    let v = RunView::load(&out.join("bracket"));
    assert_eq!(v.run["resources"]["raw_tracepoints"], true, "{label}");
    for t in ["do_wait", "sysvipc_find_ipc"] {
        assert_eq!(v.plan(t), "syscall-bracket", "{label}: plan of {t}");
        let target = v.run["targets"]
            .as_array()
            .unwrap()
            .iter()
            .find(|x| x["name"] == t)
            .unwrap();
        assert_eq!(target["verification"]["passed"], true, "{label}: {t}");
    }
    let waits = v.phases("waitpid-pid");
    assert_eq!(waits.len(), 2, "{label}: {waits:?}");
    for (case, n, ops) in waits {
        assert_eq!(
            v.calls("do_wait", &case, n),
            ops,
            "{label}: waits in {case} N={n}"
        );
    }
    let reads = v.phases("sysvipc");
    assert!(reads.len() >= 3, "{label}: {reads:?}");
    for (case, n, ops) in reads {
        // A full read is one read() returning records and one returning 0, more for a
        // larger file: never fewer, and never the workload's other reads.
        let calls = v.calls("sysvipc_find_ipc", &case, n);
        assert!(
            calls >= 2 * ops && calls <= ops * (2 + n),
            "{label}: {calls} read() calls for {ops} full reads of {n} records ({case})"
        );
    }
    assert_eq!(v.run["counters"]["unpaired_exits"], 0, "{label}");
}

#[test]
#[ignore = "boots a VM: run through cargo xtask test"]
fn linux_5_10_syscall_brackets_through_raw_syscalls_count_exactly() {
    assert_brackets_count_exactly(Kernel::V5_10);
}

#[test]
#[ignore = "boots a VM: run through cargo xtask test"]
fn linux_6_1_syscall_brackets_through_raw_syscalls_count_exactly() {
    assert_brackets_count_exactly(Kernel::V6_1);
}

/// get_task_policy's own symbol is present on every kernel here, yet probes on it never
/// fire on the page path; verification must have said so.
fn assert_gtp_rejected_by_calibration(out: &Path, label: &str) {
    let probes = read_json(&out.join("probes.json"));
    let gtp = probes["targets"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["name"] == "get_task_policy")
        .unwrap();
    for plan in ["fentry", "kprobe"] {
        let r = gtp["rejected"]
            .as_array()
            .unwrap()
            .iter()
            .find(|r| r["plan"] == plan);
        let reason = r.unwrap_or_else(|| panic!("{label}: {plan} not rejected"))["reason"]
            .as_str()
            .unwrap();
        assert!(
            reason.contains("counted 0 calls") && reason.contains("inlined"),
            "{label}: {reason}"
        );
    }
}

const FORCED_5_10: [(&str, &str); 4] = [
    ("do_wait", "kprobe"),
    ("dup_mmap", "caller-copy_process-kprobe"),
    ("sysvipc_find_ipc", "kprobe"),
    ("get_task_policy", "callers-5.10-kprobe"),
];
const FORCED_6_1: [(&str, &str); 4] = [
    ("do_wait", "callers-kprobe"),
    ("dup_mmap", "kprobe"),
    ("sysvipc_find_ipc", "callers-kprobe"),
    ("get_task_policy", "callers-6.1-kprobe"),
];
const FORCED_6_12: [(&str, &str); 4] = [
    ("do_wait", "callers-fentry"),
    ("dup_mmap", "caller-copy_process-kprobe"),
    ("sysvipc_find_ipc", "callers-kprobe"),
    ("get_task_policy", "callers-6.10-kprobe"),
];

/// waitpid(pid) and waitpid(-1) over N children, for the 5.10 vs 6.1 scaling comparison.
/// Under TCG a do_wait call costs ~200 µs before any child is walked, so the walk only
/// dominates from N≈1000: the sizes from there give the fit points of clear growth (5.10's
/// waitpid(pid) is about 8 times dearer per call at 3000 than at 1), and the loop-count
/// pass counts the walk exactly at any size. Three rounds, each a process per N in a
/// shuffled order: one pass over rising N once read a slowdown late in the sweep as 6.1's
/// waitpid(pid) growing (O(n^2) from N = 4000 and 6000 alone); the median of three runs
/// leaves such a run out. Only do_wait is traced: every other target's probes and stacks on
/// each of the rounds' forks would triple the sweep's time under TCG. Sizes up to 6000 took
/// 160-170 s of the suite's guests; a run at 6000 alone forks for 26-30 s.
const WAITPID_SCALING: &str =
    "tracer sweep waitpid -t do_wait --repeat 3 --n 1,100,1000,3000 --no-report \
    -o /out/scaling -- --variant waitpid-pid,waitpid-any --iterations 20 --cpu 1
echo scaling=$? >> /out/status
";

/// The largest N of `WAITPID_SCALING`.
const WAITPID_LARGEST: f64 = 3000.0;

/// Fork with N VMAs, the same on 6.1 and 6.12 so `tracer compare` can show `__mt_dup`
/// (6.8) taking the per-VMA maple-tree stores out of dup_mmap.
const SPAWN_SWEEP: &str = "tracer sweep spawn --n 1,100,1000,4000 --no-report -o /out/spawn -- --variant spawn --iterations 6 --cpu 1
echo spawn=$? >> /out/status
";

/// Reads of /proc/sysvipc/* with N objects (5.10): its scan's callee, lib/'s idr_find, is
/// outside ftrace, so the loop-count pass counts it at its calls in sysvipc_find_ipc.
const SYSVIPC_SWEEP: &str = "tracer sweep sysvipc -t sysvipc_find_ipc --n 10,100,400 --no-report -o /out/sysvipc -- --iterations 20
echo sysvipc=$? >> /out/status
";

/// The calibration target's function plans (the native tests cover its tracepoint plan).
const GETPID_PLANS: &str = "for plan in fentry kprobe; do
  tracer record --targets getpid --plan getpid=$plan --no-samples -o /out/getpid-$plan -- workloads getpid --variant getpid-syscall --n 5000 --iterations 3 --warmup 0 2> /out/getpid-$plan.err
  echo getpid_$plan=$? >> /out/status
done
";

/// Syscall brackets forced where function probes would be chosen: their tracepoints go
/// through the raw_syscalls routes, the read bracket through fd tracking of the static musl
/// workload's open() calls.
const BRACKETS: &str = "tracer record --targets do_wait,sysvipc_find_ipc --plan do_wait=syscall-bracket --plan sysvipc_find_ipc=syscall-bracket --markers /bin/workloads -o /out/bracket -- sh -c 'workloads waitpid --variant waitpid-pid --n 1,10 --iterations 5 && workloads sysvipc --n 1,10,100 --iterations 3'
echo bracket=$? >> /out/status
";

/// A kernel without BTF: hide /sys/kernel/btf and ask what the tracer can do.
const NO_BTF: &str = "mount -t tmpfs none /sys/kernel/btf
tracer probes --json > /out/nobtf.json 2> /out/nobtf.err
echo nobtf=$? >> /out/status
";

/// K forks under a kprobe and under fentry on dup_mmap, and a blocking wait (6.1).
const K_FORKS: u64 = 23;

fn k_forks_script() -> String {
    format!(
        "for plan in kprobe fentry; do
  tracer record --targets dup_mmap --plan dup_mmap=$plan --no-samples -o /out/$plan -- tracer __calibrate fork-wait {K_FORKS} < /dev/null
  echo $plan=$? >> /out/status
done
tracer record --targets do_wait -o /out/blocking -- sh -c 'echo 0.5 | xargs sleep'
echo blocking=$? >> /out/status
"
    )
}

/// One boot per kernel runs everything that kernel is tested for (boots are the expensive
/// part of the suite); the tests below each check their part of the results.
static BOOTS: common::Boots<Kernel> =
    common::Boots::new(&[Kernel::V5_10, Kernel::V6_1, Kernel::V6_12], boot_kernel);

fn kernel_out(kernel: Kernel) -> PathBuf {
    BOOTS.out(kernel)
}

fn boot_kernel(kernel: Kernel) -> PathBuf {
    let mut s = match kernel {
        Kernel::V5_10 => script(&FORCED_5_10),
        Kernel::V6_1 => script(&FORCED_6_1),
        Kernel::V6_12 => script(&FORCED_6_12),
    };
    match kernel {
        Kernel::V5_10 => {
            // dup_mmap is inlined on 5.10: asking for it must fail cleanly, saying why.
            s.push_str(
                "tracer record --targets dup_mmap --plan dup_mmap=fentry -o /out/inlined -- true 2> /out/inlined.err
echo inlined=$? >> /out/status
",
            );
            s.push_str(WAITPID_SCALING);
            s.push_str(SYSVIPC_SWEEP);
            s.push_str(BRACKETS);
            s.push_str(&in_pid_namespace(&FORCED_5_10));
        }
        Kernel::V6_1 => {
            s.push_str(BRACKETS);
            s.push_str(&k_forks_script());
            s.push_str(WAITPID_SCALING);
            s.push_str(SPAWN_SWEEP);
            s.push_str(GETPID_PLANS);
            // Last, because it hides the kernel's BTF from everything after it.
            s.push_str(NO_BTF);
        }
        Kernel::V6_12 => s.push_str(SPAWN_SWEEP),
    }
    s.push_str("exit 0\n");
    boot(kernel, kernel.version(), &s, 1200).1
}

#[test]
#[ignore = "boots a VM: run through cargo xtask test"]
fn linux_5_10_resolves_every_target_and_counts_match() {
    let out = kernel_out(Kernel::V5_10);
    assert_sweep(
        &out,
        "5.10",
        &[
            ("do_wait", "fentry"),
            ("dup_mmap", "caller-copy_process-fentry"),
            ("sysvipc_find_ipc", "fentry"),
            ("get_task_policy", "callers-5.10-fentry"),
        ],
    );
    assert_forced(&out, "5.10 forced", &FORCED_5_10);
    assert_gtp_rejected_by_calibration(&out, "5.10");
}

/// Inside a PID namespace the probes find the command by its pid there: every count as
/// outside, with the plans chosen (fentry) and forced (kprobes) on 5.10.
#[test]
#[ignore = "boots a VM: run through cargo xtask test"]
fn linux_5_10_counts_inside_a_pid_namespace_as_outside() {
    let out = kernel_out(Kernel::V5_10);
    let st = status_of(&out);
    assert_eq!((st["ns"], st["ns_forced"]), (0, 0), "{st:?}");
    let natural = RunView::load(&out.join("ns"));
    assert_eq!(natural.plan("do_wait"), "fentry");
    natural.assert_counts_match("5.10 in a PID namespace");
    let forced = RunView::load(&out.join("ns-forced"));
    for (target, plan) in FORCED_5_10 {
        assert_eq!(forced.plan(target), plan, "forced plan of {target}");
    }
    forced.assert_counts_match("5.10 in a PID namespace, kprobes");
}

#[test]
#[ignore = "boots a VM: run through cargo xtask test"]
fn linux_5_10_refuses_inlined_dup_mmap_with_a_reason() {
    let out = kernel_out(Kernel::V5_10);
    let st = status_of(&out);
    assert_eq!(st["inlined"], 4, "asking for an inlined function exits 4");
    let err = fs::read_to_string(out.join("inlined.err")).unwrap();
    assert!(err.contains("dup_mmap not in kallsyms: inlined"), "{err}");
    assert!(!err.contains("panicked"), "{err}");
    assert!(
        !out.join("inlined").exists(),
        "no run directory for a run that never started"
    );
}

#[test]
#[ignore = "boots a VM: run through cargo xtask test"]
fn linux_6_1_resolves_every_target_and_counts_match() {
    let out = kernel_out(Kernel::V6_1);
    assert_sweep(
        &out,
        "6.1",
        &[
            ("do_wait", "fentry"),
            ("dup_mmap", "fentry"),
            ("sysvipc_find_ipc", "callers-fentry"),
            ("get_task_policy", "callers-6.1-fentry"),
        ],
    );
    assert_forced(&out, "6.1 forced", &FORCED_6_1);
    assert_gtp_rejected_by_calibration(&out, "6.1");
}

#[test]
#[ignore = "boots a VM: run through cargo xtask test"]
fn linux_6_12_resolves_every_target_and_counts_match() {
    let out = kernel_out(Kernel::V6_12);
    assert_sweep(
        &out,
        "6.12",
        &[
            ("do_wait", "fentry"),
            ("dup_mmap", "caller-copy_process-fentry"),
            ("sysvipc_find_ipc", "callers-fentry"),
            ("get_task_policy", "callers-6.10-fentry"),
        ],
    );
    assert_forced(&out, "6.12 forced", &FORCED_6_12);
    assert_gtp_rejected_by_calibration(&out, "6.12");
}

/// Issue 2's acceptance test: on 6.1, both a kprobe/kretprobe pair and an fentry/fexit pair
/// on dup_mmap count a program's K forks exactly, with durations; plus the blocking wait.
#[test]
#[ignore = "boots a VM: run through cargo xtask test"]
fn linux_6_1_dup_mmap_kprobe_and_fentry_count_k_forks_exactly() {
    let out = kernel_out(Kernel::V6_1);
    let st = status_of(&out);
    let k = K_FORKS;
    for plan in ["kprobe", "fentry"] {
        assert_eq!(st[plan], 0, "record with {plan}");
        let v = RunView::load(&out.join(plan));
        assert_eq!(v.plan("dup_mmap"), plan);
        let mech = v.run["targets"][0]["plan"]["mechanism"]
            .as_str()
            .unwrap()
            .to_string();
        assert!(mech.starts_with(plan), "{mech}");
        let total: u64 = v
            .calls
            .iter()
            .filter(|(k, _)| k.0 == "dup_mmap")
            .map(|(_, c)| c.0)
            .sum();
        assert_eq!(total, k, "{plan}: dup_mmap calls for {k} forks");
        for r in v.run["spans"].as_array().unwrap() {
            assert!(
                r["wall"]["min_ns"].as_u64().unwrap() > 0,
                "{plan}: zero duration in {r}"
            );
        }
    }
    // do_wait via fentry, blocked ~0.5 s in the kernel waiting for the child.
    assert_eq!(st["blocking"], 0);
    let v = RunView::load(&out.join("blocking"));
    assert_eq!(v.plan("do_wait"), "fentry");
    let rows = v.run["spans"].as_array().unwrap();
    let wall: u64 = rows
        .iter()
        .map(|r| r["wall"]["sum_ns"].as_u64().unwrap())
        .sum();
    let oncpu: u64 = rows
        .iter()
        .map(|r| r["oncpu"]["sum_ns"].as_u64().unwrap())
        .sum();
    let max: u64 = rows
        .iter()
        .map(|r| r["wall"]["max_ns"].as_u64().unwrap())
        .max()
        .unwrap();
    assert!(max >= 400_000_000, "longest do_wait {max} ns");
    assert!(
        (oncpu as f64) < 0.1 * wall as f64,
        "on-CPU {oncpu} of {wall} ns wall"
    );
}

#[test]
#[ignore = "boots a VM: run through cargo xtask test"]
fn linux_6_1_getpid_fentry_and_kprobe_count_every_syscall() {
    let out = kernel_out(Kernel::V6_1);
    let st = status_of(&out);
    for plan in ["fentry", "kprobe"] {
        let code = st[&format!("getpid_{plan}")];
        if plan == "fentry" && code == 4 {
            // Syscall wrappers carry no BTF on some kernels (6.1 among them): the forced plan
            // must then be refused with that reason, not attached or crashed.
            let err = fs::read_to_string(out.join("getpid-fentry.err")).unwrap();
            assert!(err.contains("not in the kernel's BTF"), "{err}");
            assert!(!out.join("getpid-fentry").exists());
            continue;
        }
        assert_eq!(code, 0, "getpid with {plan}");
        let v = RunView::load(&out.join(format!("getpid-{plan}")));
        assert_eq!(v.plan("getpid"), plan);
        let phases = v.phases("getpid-syscall");
        assert!(!phases.is_empty(), "no getpid phases");
        for (case, n, ops) in phases {
            assert_eq!(
                v.calls("getpid", &case, n),
                ops,
                "{plan}: getpid calls in {case} N={n}"
            );
        }
    }
}

/// Without kernel BTF, fentry plans are rejected with that reason and kprobes take over.
#[test]
#[ignore = "boots a VM: run through cargo xtask test"]
fn linux_6_1_without_btf_falls_back_to_kprobes_and_says_why() {
    let out = kernel_out(Kernel::V6_1);
    assert_eq!(
        status_of(&out)["nobtf"],
        0,
        "{}",
        fs::read_to_string(out.join("nobtf.err")).unwrap()
    );
    let doc = read_json(&out.join("nobtf.json"));
    assert_eq!(doc["facts"]["btf"], false);
    for t in doc["targets"].as_array().unwrap() {
        let name = t["name"].as_str().unwrap();
        let fentry = t["rejected"]
            .as_array()
            .unwrap()
            .iter()
            .find(|r| r["plan"] == "fentry");
        if let Some(r) = fentry {
            assert!(r["reason"].as_str().unwrap().contains("BTF"), "{name}: {r}");
        }
        let mech = t["plan"]["mechanism"].as_str().unwrap_or("");
        assert!(
            !mech.starts_with("fentry"),
            "{name} used fentry without BTF"
        );
        assert!(!t["plan"].is_null(), "{name}: no plan without BTF");
    }
}

/// Kernel lockdown (confidentiality) forbids what the probes need; the tracer must end in
/// one clear message, not a crash.
#[test]
#[ignore = "boots a VM: run through cargo xtask test"]
fn linux_6_1_lockdown_ends_in_one_clear_message() {
    let script = "mount -t securityfs none /sys/kernel/security
cat /sys/kernel/security/lockdown > /out/lockdown
tracer record --no-verify -o /out/run -- true > /out/stdout 2> /out/stderr
echo record=$? >> /out/status
exit 0
";
    let (_, out) = common::boot(Kernel::V6_1, "lockdown", script, 300, |_, mut cfg| {
        cfg.extra_cmdline.push("lockdown=confidentiality".into());
        cfg
    });
    let mode = fs::read_to_string(out.join("lockdown")).unwrap_or_default();
    assert!(
        mode.contains("[confidentiality]"),
        "lockdown not active: {mode:?}"
    );
    let code = status_of(&out)["record"];
    let stderr = fs::read_to_string(out.join("stderr")).unwrap();
    assert!(
        !stderr.contains("panicked") && !stderr.contains("backtrace"),
        "{stderr}"
    );
    // Either the probes still work (code 0) or the tracer names lockdown as the reason.
    if code != 0 {
        assert!(
            stderr.contains("lockdown"),
            "exit {code} without naming lockdown: {stderr}"
        );
        assert!([3, 4].contains(&code), "exit {code}: {stderr}");
        assert_eq!(
            stderr
                .trim()
                .lines()
                .filter(|l| l.starts_with("tracer:"))
                .count(),
            1,
            "{stderr}"
        );
        assert!(
            !out.join("run").exists(),
            "no run directory for a run that never started"
        );
    }
}

fn root_cause<'a>(summary: &'a Value, target: &str, case: &str) -> &'a Value {
    summary["root_causes"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["target"] == target && r["case_name"] == case && r["kind"] == "oncpu")
        .unwrap_or_else(|| panic!("no on-CPU root cause for {target} [{case}]"))
}

/// Classes that say the time grows at least linearly.
const LINEAR_OR_WORSE: [&str; 3] = ["O(n)", "O(n log n)", "O(n^2)"];

/// The on-CPU root cause of do_wait's growth in `case` names the children walk.
fn assert_walk_is_the_root_cause(summary: &Value, case: &str, kernel: &str) {
    let rc = root_cause(summary, "do_wait", case);
    let path: Vec<&str> = rc["cause"]["culprit"]["path"]
        .as_array()
        .map(|a| a.iter().map(|f| f.as_str().unwrap()).collect())
        .unwrap_or_default();
    assert!(
        path.contains(&"wait_consider_task"),
        "{kernel} {case} root cause {path:?}: {}",
        rc["cause"]["line"]
    );
}

/// Issue 5's acceptance test: waitpid(pid) makes do_wait grow with N on 5.10 through its
/// 5.10's sysvipc_find_ipc scans the ids below the position it looks for, one idr_find each:
/// the loop-count pass, which cannot probe idr_find itself (lib/ is built without ftrace),
/// counts it at its call sites in sysvipc_find_ipc. In a namespace of their own the N ids
/// are 0..N-1 and a full read's calls look up N/2 + 1 ids each on average, exactly; the
/// verdict's class is O(n), with the count.
#[test]
#[ignore = "boots a VM: run through cargo xtask test"]
fn sysvipc_scan_is_counted_at_its_call_sites_on_5_10() {
    let out = kernel_out(Kernel::V5_10);
    assert_eq!(status_of(&out)["sysvipc"], 0);
    let sweep = out.join("sysvipc");
    host_tracer(&["report", sweep.to_str().unwrap(), "--no-flamegraphs"]);
    let summary = read_json(&sweep.join("report/summary.json"));
    let run = read_json(&sweep.join("sysvipc-loops/run.json"));
    let idr_find = run["targets"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["name"] == "idr_find")
        .unwrap_or_else(|| panic!("idr_find not a target of the pass: {}", run["targets"]));
    // Both of the scan's loops call it: two call sites.
    assert_eq!(idr_find["plan"]["plan"], "call-sites", "{idr_find}");
    assert_eq!(
        idr_find["plan"]["attach_points"].as_array().map(Vec::len),
        Some(2),
        "{idr_find}"
    );
    for case in ["sysvipc-shm", "sysvipc-msg"] {
        let t = summary["trip_counts"]
            .as_array()
            .unwrap()
            .iter()
            .find(|t| t["inner"] == "idr_find" && t["case_name"] == case)
            .unwrap_or_else(|| panic!("no idr_find count for {case}: {}", summary["trip_counts"]));
        let points = t["points"].as_array().unwrap();
        assert_eq!(points.len(), 3, "{t}");
        for p in points {
            let (n, per_call) = (p["n"].as_f64().unwrap(), p["per_call"].as_f64().unwrap());
            let extra = per_call - n / 2.0;
            assert!(
                (0.5..3.0).contains(&extra),
                "{case} N={n}: {per_call} per call"
            );
        }
        let v = verdict(&summary, "sysvipc_find_ipc", case);
        assert_eq!(v["class"], "O(n)", "{}", v["line"]);
        assert_eq!(v["by_loop"]["inner"], "idr_find", "{}", v["line"]);
        // The count puts the loop in sysvipc_find_ipc: a frame below it (idr_find tail-calls
        // into __radix_tree_lookup, which the stacks put right under it) is each trip's
        // work, never "a loop in <frame> itself".
        let rc = summary["root_causes"]
            .as_array()
            .unwrap()
            .iter()
            .find(|r| r["target"] == "sysvipc_find_ipc" && r["case_name"] == case)
            .unwrap_or_else(|| panic!("no root cause for {case}"));
        let said = rc["cause"]["description"].as_str().unwrap_or_default();
        assert!(
            !said.starts_with("a loop in ") || said.starts_with("a loop in sysvipc_find_ipc "),
            "{}",
            rc["cause"]["line"]
        );
    }
}

/// walk over the children, which 6.1 no longer has (the 5.13 fix); the 5.10 root cause
/// names the walk, and the two runs compare; waitpid(-1) grows on both through the same walk.
#[test]
#[ignore = "boots a VM: run through cargo xtask test"]
fn waitpid_do_wait_grows_on_5_10_and_is_constant_on_6_1() {
    let old = kernel_out(Kernel::V5_10);
    let new = kernel_out(Kernel::V6_1);
    let mut summaries = Vec::new();
    for out in [&old, &new] {
        assert_eq!(status_of(out)["scaling"], 0);
        let sweep = out.join("scaling");
        assert_stacks_kept(&sweep.join("waitpid"), out);
        host_tracer(&["report", sweep.to_str().unwrap(), "--no-flamegraphs"]);
        summaries.push(read_json(&sweep.join("report/summary.json")));
    }
    let v510 = verdict(&summaries[0], "do_wait", "waitpid-pid");
    let v61 = verdict(&summaries[1], "do_wait", "waitpid-pid");
    let classes = |v: &Value| -> Vec<String> {
        v["classes"]
            .as_array()
            .unwrap()
            .iter()
            .map(|c| c.as_str().unwrap().to_string())
            .collect()
    };
    let set510 = classes(v510);
    let set61 = classes(v61);
    // The walk visits each child once per wait: the loop count names O(n); where the time
    // alone decides, its time per child rises with N in some runs under TCG (vm_external's
    // LINEAR_OR_WORSE has the numbers), so the set may reach O(n log n) or O(n^2). Growth
    // at least linear is the walk.
    assert!(
        !set510.is_empty() && set510.iter().all(|c| LINEAR_OR_WORSE.contains(&c.as_str())),
        "5.10 do_wait: {}",
        v510["line"]
    );
    // Fixed in 5.13: no loop over the children gives 6.1 its class, and its time per call
    // adds a fraction of 5.10's. Not "no class like N": under TCG 6.1's wait itself rises a
    // little with N outside the walk (context switches: 199 -> 332 µs over N = 1..3000 in
    // one suite, 257 -> 352 µs in a `cargo xtask run`), and two sizes above the baseline
    // leave every growing class open to the time alone. The count (below) is what the data
    // fixes: the walk runs twice per call at every N.
    assert!(!set61.is_empty(), "6.1 do_wait: {}", v61["line"]);
    assert!(v61["by_loop"].is_null(), "6.1 do_wait: {}", v61["line"]);
    let growth = |v: &Value| {
        let pts = v["scaling"]["points"].as_array().unwrap();
        let t = |p: &Value| p["t"].as_f64().unwrap();
        let (lo, hi) = (pts.first().unwrap(), pts.last().unwrap());
        t(hi) / t(lo)
    };
    // The time's growth only as far as a loaded host leaves it: 6.1's waitpid(pid) read
    // x3.64 over N = 1..3000 in one suite beside a busy build (192 µs -> 699 µs, up at
    // N = 1000 and down again at 3000: "no rising trend"), against x15.8 on 5.10, and x1.4
    // to x1.7 on a quiet host. The count below fixes the rest.
    let (g510, g61) = (growth(v510), growth(v61));
    assert!(
        g510 > 2.0 * g61,
        "do_wait waitpid(pid) per call over the sweep: x{g510:.2} on 5.10, x{g61:.2} on 6.1\n{}\n{}",
        v510["line"],
        v61["line"]
    );
    assert_walk_is_the_root_cause(&summaries[0], "waitpid-pid", "5.10");
    // The sweep's loop-count pass (waitpid-loops, on by default) counted the walk exactly:
    // each waitpid(pid) on 5.10 considers the N + 1 children once, or twice when it sleeps
    // before the child exits; on 6.1 it looks the child up, whatever N is.
    let largest = WAITPID_LARGEST;
    let walk510 = pid_walk(&summaries[0]);
    let last = walk510.last().unwrap();
    assert!(
        (largest + 1.0..=2.0 * (largest + 1.0) + 2.0).contains(last),
        "5.10 wait_consider_task per waitpid(pid) at N={largest}: {walk510:?}"
    );
    let walk61 = pid_walk(&summaries[1]);
    assert!(
        walk61.len() == 4 && walk61.iter().all(|c| (1.0..=3.0).contains(c)),
        "6.1 wait_consider_task per waitpid(pid): {walk61:?}"
    );
    // waitpid(-1) still walks the children on 6.1 (only the PIDTYPE_PID case was fixed):
    // growing on both kernels, through the same loop. The verdict's class set (the loop
    // count's class where the pass counted the walk): the time alone can leave every growing
    // class when the walk outgrows the fixed cost at the two largest sizes only.
    for (summary, kernel) in [(&summaries[0], "5.10"), (&summaries[1], "6.1")] {
        let v = verdict(summary, "do_wait", "waitpid-any");
        let set: Vec<&str> = v["classes"]
            .as_array()
            .unwrap()
            .iter()
            .map(|c| c.as_str().unwrap())
            .collect();
        assert!(
            !set.is_empty() && set.iter().all(|c| LINEAR_OR_WORSE.contains(c)),
            "{kernel} do_wait waitpid(-1): {}",
            v["line"]
        );
        assert_walk_is_the_root_cause(summary, "waitpid-any", kernel);
    }
    let cmp = old.parent().unwrap().join("compare");
    host_tracer(&[
        "compare",
        old.join("scaling").to_str().unwrap(),
        new.join("scaling").to_str().unwrap(),
        "-o",
        cmp.to_str().unwrap(),
        "--no-flamegraphs",
    ]);
    // The compare decides on growth: waitpid(pid)'s walk went away (shrank); waitpid(-1)
    // walks the children on both kernels, whatever its fixed cost did (not flagged).
    let c = read_json(&cmp.join("compare.json"));
    let change = |case: &str| {
        let v = c["verdicts"]
            .as_array()
            .unwrap()
            .iter()
            .find(|v| v["target"] == "do_wait" && v["case_name"] == case)
            .unwrap_or_else(|| panic!("no compare verdict for do_wait [{case}]: {c}"));
        (
            v["change"].as_str().unwrap().to_string(),
            v["line"].to_string(),
        )
    };
    let (pid, line) = change("waitpid-pid");
    assert_eq!(pid, "shrank", "{line}");
    let (any, line) = change("waitpid-any");
    assert!(any != "grew" && any != "shrank", "{line}");
    // A per-N row of the sizes both sides share.
    let csv = fs::read_to_string(cmp.join("compare.csv")).unwrap();
    assert!(
        csv.lines()
            .any(|l| l.contains("do_wait") && l.split(',').any(|f| f == "1000")),
        "{csv}"
    );
    assert!(cmp.join("index.html").exists());
}

/// wait_consider_task calls per do_wait call under waitpid(pid), per N, as the sweep's
/// loop-count pass counted them.
fn pid_walk(summary: &Value) -> Vec<f64> {
    let t = summary["trip_counts"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| {
            t["run"] == "waitpid-loops"
                && t["outer"] == "do_wait"
                && t["inner"] == "wait_consider_task"
                && t["case_name"] == "waitpid-pid"
        })
        .unwrap_or_else(|| panic!("no loop count of waitpid(pid): {}", summary["trip_counts"]));
    t["points"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["per_call"].as_f64().unwrap())
        .collect()
}

/// Issue 5's acceptance test on 6.1: fork time is O(n) in VMAs and the per-VMA work is named.
#[test]
#[ignore = "boots a VM: run through cargo xtask test"]
fn spawn_dup_mmap_is_linear_in_vmas_on_6_1_and_names_per_vma_work() {
    let out = kernel_out(Kernel::V6_1);
    assert_eq!(status_of(&out)["spawn"], 0);
    let sweep = out.join("spawn");
    assert_stacks_kept(&sweep.join("spawn"), &out);
    host_tracer(&["report", sweep.to_str().unwrap()]);
    let summary = read_json(&sweep.join("report/summary.json"));
    let v = verdict(&summary, "dup_mmap", "spawn");
    let class = v["scaling"]["class"].as_str().unwrap();
    assert!(
        class == "O(n)" || class == "O(n log n)",
        "dup_mmap class {class}: {}",
        v["line"]
    );
    // The default loop-count pass (spawn-loops) counted one vm_area_dup per VMA, and that
    // count, not the time's fit, names the class.
    let copies = summary["trip_counts"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| {
            t["run"] == "spawn-loops" && t["inner"] == "vm_area_dup" && t["case_name"] == "spawn"
        })
        .unwrap_or_else(|| panic!("no loop count of dup_mmap: {}", summary["trip_counts"]));
    let at_4000 = copies["points"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["n"] == 4000)
        .and_then(|p| p["per_call"].as_f64())
        .unwrap_or_default();
    assert!(
        (4000.0..=4100.0).contains(&at_4000),
        "vm_area_dup per fork at N=4000: {copies}"
    );
    assert_eq!(v["class"], "O(n)", "{}", v["line"]);
    assert_eq!(v["by_loop"]["inner"], "vm_area_dup", "{}", v["line"]);
    let rc = root_cause(&summary, "dup_mmap", "spawn");
    let line = rc["cause"]["line"].as_str().unwrap_or_default().to_string();
    let description = rc["cause"]["description"].as_str().unwrap_or_default();
    assert!(
        description.contains("per VMA"),
        "root cause does not name per-VMA work: {line}"
    );
    // Flamegraphs render from the VM's stacks, including the differential.
    let svgs: Vec<_> = walk(&sweep.join("report/flamegraphs"))
        .into_iter()
        .filter(|p| p.extension().is_some_and(|e| e == "svg"))
        .collect();
    assert!(
        svgs.iter()
            .any(|p| p.to_string_lossy().contains("diff-n1-n4000")),
        "{svgs:?}"
    );
}

fn walk(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    if let Ok(rd) = fs::read_dir(dir) {
        for e in rd.flatten() {
            let p = e.path();
            if p.is_dir() {
                out.extend(walk(&p));
            } else {
                out.push(p);
            }
        }
    }
    out
}

/// Names the kernel never executes on a traced path: the symbols of its init sections
/// (`__init` and `__exit` code, freed after boot), from the guest's /proc/kallsyms.
fn init_symbols(out: &Path) -> std::collections::BTreeSet<String> {
    let text = fs::read_to_string(out.join("kallsyms")).expect("the guest's kallsyms");
    let syms: Vec<(u64, &str, &str)> = text
        .lines()
        .filter_map(|l| {
            let mut f = l.split_whitespace();
            let addr = u64::from_str_radix(f.next()?, 16).ok()?;
            Some((addr, f.next()?, f.next()?))
        })
        .collect();
    let at = |name: &str| {
        syms.iter()
            .find(|(_, _, n)| *n == name)
            .unwrap_or_else(|| panic!("{name} not in kallsyms"))
            .0
    };
    let (begin, end) = (at("__init_begin"), at("__init_end"));
    assert!(begin != 0 && begin < end, "kallsyms without addresses");
    let init: std::collections::BTreeSet<String> = syms
        .iter()
        .filter(|(a, ty, _)| (begin..end).contains(a) && matches!(*ty, "t" | "T"))
        .map(|(_, _, n)| n.to_string())
        .collect();
    assert!(init.len() > 100, "only {} init symbols", init.len());
    init
}

/// A BPF program or trampoline, by our names for them (`[bpf_prog NAME]`, `[bpf_trampoline]`)
/// or the kernel's (`bpf_prog_TAG_NAME`, `bpf_trampoline_KEY`, `ftrace_trampoline`); kernel
/// functions such as `bpf_trampoline_put` are real frames.
fn is_probe_machinery(frame: &str) -> bool {
    let numbered_trampoline = frame
        .strip_prefix("bpf_trampoline_")
        .is_some_and(|k| !k.is_empty() && k.bytes().all(|b| b.is_ascii_digit()));
    frame.starts_with("[bpf")
        || frame.starts_with("bpf_prog_")
        || numbered_trampoline
        || frame == "ftrace_trampoline"
}

/// Every frame name of every folded stack of a kernel's runs, and every root-cause frame of
/// the reports rendered from them: none is a BPF program or trampoline (the probe's own
/// frames, dropped), and none is an init-section symbol (an address resolved to a wrong
/// neighbour, as `exit_amd_microcode` once was on 6.1).
fn assert_no_phantom_frames(kernel: Kernel) {
    let out = kernel_out(kernel);
    let label = kernel.version();
    let init = init_symbols(&out);
    let folded: Vec<PathBuf> = walk(&out)
        .into_iter()
        .filter(|p| p.extension().is_some_and(|e| e == "folded"))
        .collect();
    assert!(
        folded.len() > 20,
        "{label}: only {} folded files",
        folded.len()
    );
    let mut frames = 0usize;
    for f in &folded {
        for line in fs::read_to_string(f).unwrap().lines() {
            let stack = line.rsplit_once(' ').map_or(line, |(s, _)| s);
            for frame in stack.split(';') {
                frames += 1;
                assert!(
                    !is_probe_machinery(frame) && !init.contains(frame),
                    "{label}: phantom frame {frame} in {}: {line}",
                    f.display()
                );
            }
        }
    }
    assert!(frames > 1000, "{label}: only {frames} frames");
    let mut runs = vec![out.join("sweep/waitpid"), out.join("sweep/spawn")];
    if kernel == Kernel::V6_1 {
        runs.push(out.join("spawn"));
    }
    let mut causes = 0;
    for run in runs {
        host_tracer(&["report", run.to_str().unwrap(), "--no-flamegraphs"]);
        let summary = read_json(&run.join("report/summary.json"));
        let mut names = Vec::new();
        collect_cause_frames(&summary, false, &mut names);
        causes += names.len();
        for n in names {
            assert!(
                !is_probe_machinery(&n) && !init.contains(&n),
                "{label}: a root cause of {} names {n}",
                run.display()
            );
        }
    }
    assert!(causes > 0, "{label}: no root-cause frame to check");
}

/// The frame names under every `cause` object (paths, culprits, callees), and the words of
/// its line that could be symbols.
fn collect_cause_frames(v: &Value, in_cause: bool, out: &mut Vec<String>) {
    match v {
        Value::Object(m) => {
            for (k, x) in m {
                collect_cause_frames(x, in_cause || k == "cause", out);
            }
        }
        Value::Array(a) => a
            .iter()
            .for_each(|x| collect_cause_frames(x, in_cause, out)),
        Value::String(s) if in_cause => out.extend(
            s.split(|c: char| !(c.is_ascii_alphanumeric() || c == '_' || c == '.'))
                .filter(|w| w.contains('_'))
                .map(str::to_string),
        ),
        _ => {}
    }
}

#[test]
#[ignore = "boots a VM: run through cargo xtask test"]
fn no_phantom_frames_in_stacks_or_root_causes_on_5_10() {
    assert_no_phantom_frames(Kernel::V5_10);
}

#[test]
#[ignore = "boots a VM: run through cargo xtask test"]
fn no_phantom_frames_in_stacks_or_root_causes_on_6_1() {
    assert_no_phantom_frames(Kernel::V6_1);
}

/// Issue 13's kernel history: from 6.1 to 6.12, fork's per-VMA maple-tree stores left
/// dup_mmap (`__mt_dup` copies the tree whole since 6.8). Both scale O(n) in VMAs, so the
/// classes alone say "O(n) -> O(n)"; compare must name the maple-tree store as the frame
/// whose share of the time fell most.
#[test]
#[ignore = "boots a VM: run through cargo xtask test"]
fn compare_names_the_maple_tree_store_as_what_fell_from_6_1_to_6_12() {
    let (old, new) = (kernel_out(Kernel::V6_1), kernel_out(Kernel::V6_12));
    for out in [&old, &new] {
        assert_eq!(status_of(out)["spawn"], 0, "{}", out.display());
    }
    let cmp = new.parent().unwrap().join("compare-spawn");
    let _ = fs::remove_dir_all(&cmp);
    host_tracer(&[
        "compare",
        old.join("spawn").to_str().unwrap(),
        new.join("spawn").to_str().unwrap(),
        "-o",
        cmp.to_str().unwrap(),
        "--no-flamegraphs",
    ]);
    let c = read_json(&cmp.join("compare.json"));
    // Both kernels copy the VMAs one by one: fork's dup_mmap grows with N on each.
    let verdict = c["verdicts"]
        .as_array()
        .unwrap()
        .iter()
        .find(|k| k["target"] == "dup_mmap" && k["case_name"] == "spawn")
        .unwrap_or_else(|| panic!("no compare verdict for dup_mmap [spawn]: {c}"));
    for side in ["classes_a", "classes_b"] {
        let set = verdict[side].as_array().unwrap();
        assert!(
            !set.is_empty() && !set.iter().any(|c| c == "O(1)"),
            "{side}: {}",
            verdict["line"]
        );
    }
    let shifts: Vec<&Value> = c["frame_shifts"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|s| s["target"] == "dup_mmap" && s["case_name"] == "spawn")
        .collect();
    let change = |s: &Value| s["b"].as_f64().unwrap() - s["a"].as_f64().unwrap();
    let fell = shifts
        .iter()
        .min_by(|x, y| change(x).total_cmp(&change(y)))
        .unwrap_or_else(|| panic!("no frame shift for dup_mmap [spawn]: {c}"));
    let frame = fell["frame"].as_str().unwrap();
    assert!(
        frame.starts_with("mas_") || frame.starts_with("mtree_"),
        "the frame that fell most is {frame}: {shifts:?}"
    );
    assert!(change(fell) <= -0.10, "{fell}");
    let text = fs::read_to_string(cmp.join("compare.txt")).unwrap();
    assert!(
        text.contains("Where the time moved:") && text.contains(&format!("{frame} ")),
        "{text}"
    );
}
