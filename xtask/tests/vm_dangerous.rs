//! Dangerous functions named with `--targets`, on Debian 6.1 under qemu, where function probes
//! work (this machine's kernel refuses them): a function on the kprobe blacklist and a
//! `notrace` one must each be refused with the reason before anything is probed, a function
//! made hot by a load is refused without `--force-hot` and traced with it, and the same
//! function without the load, like a quiet one, passes every check.
//!
//! The hot function is `__task_pid_nr_ns` (what getpid() calls; the syscall wrappers are not
//! traceable) under a tight getpid loop: the check is the same as for a kernel-wide hot spot
//! such as `_raw_spin_lock` (calls/s × measured probe time), but a forced probe there slows
//! every CPU of the emulated guest, while this one slows only the loop that makes it hot.
//! The assertions run here on what comes back in /out.
//! `#[ignore]`d for plain `cargo test`; `cargo xtask test` runs it.

use std::collections::BTreeMap;
use std::fs;
use std::path::{Path, PathBuf};

use serde_json::Value;
use xtask::guest;
use xtask::kernel::Kernel;
use xtask::vm::{self, VmConfig, VmStatus};

/// The guest picks its functions from the kernel's own lists, so the test does not depend on
/// one build's symbol set:
/// - blacklisted: on the kprobe blacklist but traceable (in available_filter_functions), so
///   only the blacklist can refuse the kprobe plan (`__die` on 6.1); the script unmounts
///   debugfs first, so the tracer must mount it for itself (and leave no mount behind);
/// - notrace: `trace_clock_local` (declared `notrace`) when it is in kallsyms and not in
///   available_filter_functions, else the first such text symbol;
const SCRIPT: &str = r#"
TR=/sys/kernel/tracing
[ -e $TR/available_filter_functions ] || mount -t tracefs nodev $TR
mkdir -p /tmp/dbg
mount -t debugfs none /tmp/dbg
awk -F'\t' '{ split($2, a, " "); print a[1] }' /tmp/dbg/kprobes/blacklist | sort -u > /tmp/bl
umount /tmp/dbg
# vm-init mounts debugfs; without it the tracer must mount it for itself to read the list.
umount /sys/kernel/debug
grep debugfs /proc/mounts > /out/mounts_before
awk '{ print $1 }' $TR/available_filter_functions | sort -u > /tmp/aff
awk 'NF == 3 && ($2 == "t" || $2 == "T") { print $3 }' /proc/kallsyms | sort -u > /tmp/text
# Functions of our own probes' path are refused earlier, as recursion: not these cases.
OWN='^(bpf_|__bpf_|htab_|array_map|pcpu_|perf_|kprobe|kretprobe|rethook|trace_call_bpf|migrate_|_raw_spin_.*irq)'
awk 'NR == FNR { aff[$1] = 1; next } ($1 in aff)' /tmp/aff /tmp/bl | awk 'NR == FNR { t[$1] = 1; next } ($1 in t)' /tmp/text - | grep -Ev "$OWN" | grep -E '^[a-z_][a-z0-9_]*$' | head -1 > /out/blacklisted
awk 'NR == FNR { aff[$1] = 1; next } !($1 in aff)' /tmp/aff /tmp/text | awk 'NR == FNR { b[$1] = 1; next } !($1 in b)' /tmp/bl - | grep -Ev "$OWN" | grep -E '^[a-z][a-z0-9_]*$' > /tmp/notrace
if grep -qx trace_clock_local /tmp/notrace; then echo trace_clock_local > /out/notrace; else head -1 /tmp/notrace > /out/notrace; fi
BL=$(cat /out/blacklisted)
NT=$(cat /out/notrace)

# Each step is bounded (a hang must not eat the VM's whole timeout) and its stderr shown on
# the console, which comes back even when /out does not.
T="timeout 240 tracer"
$T record --targets $BL --plan $BL=kprobe --no-samples -o /out/bl -- true > /out/bl.out 2> /out/bl.err
echo blacklisted=$? >> /out/status
cat /out/bl.err
$T probes --json --targets $NT > /out/nt.json 2> /out/nt.err
echo notrace=$? >> /out/status
cat /out/nt.json
$T record --targets $NT --no-samples -o /out/nt -- true > /out/nt.out 2> /out/nt.err2
echo notrace_record=$? >> /out/status
cat /out/nt.err2

# A quiet function passes every check and is traced.
$T record --targets kernel_wait4 --no-samples -o /out/cool -- sh -c 'sleep 0.1 & wait' > /out/cool.out 2> /out/cool.err
echo cool=$? >> /out/status
cat /out/cool.err

grep debugfs /proc/mounts > /out/mounts_after
ls -a /tmp > /out/tmp_after
exit 0
"#;

/// The hot function, in a boot of its own with one CPU. With two, patching a function that
/// the other vCPU runs in a tight loop left both vCPUs soft-locked under TCG in two of two
/// boots (`watchdog: BUG: soft lockup - CPU#1 stuck for 45s! [workloads]` beside the
/// attaching tracer on CPU#0), as a `_raw_spin_lock` probe under fork+exec did before; on
/// one CPU the loop is simply preempted while the tracer attaches.
const HOT_SCRIPT: &str = r#"
# Hot: the same function, refused under a getpid loop, traced with --force-hot, and traced
# without it once the loop is gone (the refusal is about the rate, not the name).
HOT=__task_pid_nr_ns
T="timeout 240 tracer"
awk '{ print $1 }' /sys/kernel/tracing/available_filter_functions | grep -qx $HOT && echo yes > /out/hot_traceable
timeout 60 workloads getpid --variant getpid-syscall -n 100000 --min-time 50 > /dev/null 2>&1 &
LOAD=$!
sleep 2
$T record --targets $HOT --no-samples -o /out/hot -- true > /out/hot.out 2> /out/hot.err
echo hot=$? >> /out/status
cat /out/hot.err
$T record --targets $HOT --force-hot --no-samples -o /out/hotforced -- true > /out/hotforced.out 2> /out/hotforced.err
echo hot_forced=$? >> /out/status
cat /out/hotforced.err
kill $LOAD
wait $LOAD
$T record --targets $HOT --no-samples -o /out/unloaded -- true > /out/unloaded.out 2> /out/unloaded.err
echo unloaded=$? >> /out/status
cat /out/unloaded.err
exit 0
"#;

fn status_of(out: &Path) -> BTreeMap<String, i32> {
    fs::read_to_string(out.join("status"))
        .expect("status file")
        .lines()
        .filter_map(|l| l.split_once('='))
        .map(|(k, v)| (k.to_string(), v.trim().parse().unwrap()))
        .collect()
}

fn read(out: &Path, name: &str) -> String {
    fs::read_to_string(out.join(name)).unwrap_or_else(|e| panic!("{name}: {e}"))
}

fn assert_clean(stderr: &str, what: &str) {
    assert!(
        !stderr.contains("panicked") && !stderr.contains("backtrace"),
        "{what}: {stderr}"
    );
}

fn boot(name: &str, script: &str, cpus: u32) -> PathBuf {
    let work = std::env::temp_dir().join(format!("tracer-vm-{name}-{}", std::process::id()));
    let _ = fs::remove_dir_all(&work);
    fs::create_dir_all(&work).unwrap();
    let sp = work.join("script.sh");
    fs::write(&sp, format!("set -x\n{script}")).unwrap();
    let out = work.join("out");
    let guest = guest::build().expect("building the guest binaries");
    let cfg = VmConfig::new(Kernel::V6_1, ["sh", sp.to_str().unwrap()])
        .guest(guest)
        .include(&sp)
        .out_dir(&out)
        .cpus(cpus)
        .timeout_secs(600);
    let r = vm::run(&cfg).expect("the VM starts");
    let comm = fs::read_to_string(format!("/proc/{}/comm", r.qemu_pid)).unwrap_or_default();
    assert!(!comm.starts_with("qemu-system"), "qemu left behind");
    assert!(
        matches!(r.status, VmStatus::Exited(0)),
        "{:?}\n{}",
        r.status,
        r.command_output.as_deref().unwrap_or(&r.console)
    );
    out
}

#[test]
#[ignore = "boots a VM: run through cargo xtask test"]
fn linux_6_1_refuses_blacklisted_and_notrace_functions_with_the_reason() {
    let out = boot("dangerous", SCRIPT, 2);
    let st = status_of(&out);

    // Blacklisted: the forced kprobe plan is refused by the blacklist check, not by the
    // kernel's EINVAL, and nothing is recorded.
    let bl = read(&out, "blacklisted").trim().to_string();
    assert!(!bl.is_empty(), "no blacklisted, traceable function found");
    let err = read(&out, "bl.err");
    assert_clean(&err, "blacklisted");
    assert_eq!(st["blacklisted"], 4, "{bl}: {err}");
    assert!(
        err.contains(&format!("{bl} is on the kernel's kprobe blacklist")),
        "{bl}: {err}"
    );
    assert!(
        !out.join("bl").exists(),
        "a run directory for a refused run"
    );
    // A VM refuses it too: no hint to run it in one.
    assert!(!err.contains("inside a VM"), "{err}");
    // The tracer mounted debugfs for itself, read the list and left no mount behind.
    assert_eq!(
        read(&out, "mounts_before").trim(),
        "",
        "debugfs still mounted"
    );
    assert_eq!(
        read(&out, "mounts_after").trim(),
        "",
        "a debugfs mount stayed"
    );
    assert!(
        !read(&out, "tmp_after").contains(".tracer-debugfs"),
        "the private debugfs directory stayed"
    );

    // notrace: both rungs refused with that reason (a kprobe would otherwise attach).
    let nt = read(&out, "notrace").trim().to_string();
    assert!(!nt.is_empty(), "no notrace text symbol found");
    assert_eq!(st["notrace"], 4, "{nt}: {}", read(&out, "nt.err"));
    let doc: Value = serde_json::from_str(&read(&out, "nt.json")).unwrap();
    let t = &doc["targets"][0];
    assert_eq!(t["name"], nt.as_str());
    assert!(t["plan"].is_null(), "{nt} was attached: {t}");
    let rejected = t["rejected"].as_array().unwrap();
    for plan in ["fentry", "kprobe"] {
        let r = rejected
            .iter()
            .find(|r| r["plan"] == plan)
            .unwrap_or_else(|| panic!("{nt}: no {plan} rejection: {t}"));
        assert!(
            r["reason"].as_str().unwrap().contains("not traceable"),
            "{nt} {plan}: {r}"
        );
    }
    let err = read(&out, "nt.err2");
    assert_clean(&err, "notrace record");
    assert_eq!(st["notrace_record"], 4, "{err}");
    assert!(err.contains("not traceable"), "{err}");
    assert!(!err.contains("inside a VM"), "{err}");

    // A quiet function is traced: the checks do not refuse everything.
    let err = read(&out, "cool.err");
    assert_eq!(st["cool"], 0, "{err}");
    assert!(!err.contains("--force-hot"), "{err}");
    let run: Value = serde_json::from_str(&read(&out, "cool/run.json")).unwrap();
    assert!(!run["targets"][0]["plan"].is_null(), "{}", run["targets"]);
}

#[test]
#[ignore = "boots a VM: run through cargo xtask test"]
fn linux_6_1_refuses_a_function_made_hot_by_a_load_without_force_hot() {
    let out = boot("hot", HOT_SCRIPT, 1);
    let st = status_of(&out);
    // Hot: refused under the load with the rate and the expected overhead, nothing recorded;
    // traced with --force-hot; traced without it once the load is gone.
    assert_eq!(read(&out, "hot_traceable").trim(), "yes");
    let err = read(&out, "hot.err");
    assert_clean(&err, "hot");
    assert_eq!(st["hot"], 4, "{err}");
    assert!(
        err.contains("__task_pid_nr_ns is called")
            && err.contains("times/s")
            && err.contains("% of one CPU")
            && err.contains("pass --force-hot"),
        "{err}"
    );
    assert!(
        !out.join("hot").exists(),
        "a run directory for a refused run"
    );
    let err = read(&out, "hotforced.err");
    assert_clean(&err, "hot, forced");
    assert_eq!(st["hot_forced"], 0, "{err}");
    assert!(err.contains("traced anyway (--force-hot)"), "{err}");
    let run: Value = serde_json::from_str(&read(&out, "hotforced/run.json")).unwrap();
    let plan = &run["targets"][0]["plan"];
    assert!(
        ["fentry", "kprobe"].contains(&plan["plan"].as_str().unwrap_or("")),
        "{plan}"
    );
    let err = read(&out, "unloaded.err");
    assert_clean(&err, "unloaded");
    assert_eq!(st["unloaded"], 0, "{err}");
    assert!(!err.contains("--force-hot"), "{err}");
}
