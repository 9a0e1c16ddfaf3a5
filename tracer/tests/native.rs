//! Native integration tests: real eBPF on this machine's kernel (tracepoints, uprobes,
//! perf_event). They need root; run them through `cargo xtask test` (CI runs as root).
//! Tests in this file load programs and count what is loaded, so they run one at a time.
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::{Duration, Instant};

use serde_json::Value;
use tracer::engine::{Engine, EngineOptions, Filter};

mod common;
use common::{
    allowed_cpus, entry_calls, getpid_syscall, loaded_tracer_programs, nothing_loaded,
    record_targets, serial, tracer, workloads_bin,
};

fn read_run(dir: &Path) -> Value {
    let text = std::fs::read_to_string(dir.join("run.json"))
        .unwrap_or_else(|e| panic!("{}/run.json: {e}", dir.display()));
    serde_json::from_str(&text).expect("run.json parses")
}

fn target_calls(run: &Value, target: &str) -> (u64, u64, u64, u64, u64) {
    let mut calls = 0;
    let mut untimed = 0;
    let mut wall = 0;
    let mut oncpu = 0;
    let mut wall_max = 0;
    for r in run["spans"].as_array().unwrap() {
        if r["target"] == target {
            calls += r["calls"].as_u64().unwrap();
            untimed += r["untimed"].as_u64().unwrap();
            wall += r["wall"]["sum_ns"].as_u64().unwrap();
            oncpu += r["oncpu"]["sum_ns"].as_u64().unwrap();
            wall_max = wall_max.max(r["wall"]["max_ns"].as_u64().unwrap());
        }
    }
    (calls, untimed, wall, oncpu, wall_max)
}

fn tmpdir() -> tempfile::TempDir {
    tempfile::tempdir().unwrap()
}

#[test]
fn counts_wait4_calls_exactly() {
    let _g = serial();
    let tmp = tmpdir();
    let out = tmp.path().join("run");
    // The tracer's calibration child does exactly K fork+waitpid pairs when stdin is closed.
    let k = 37;
    let st = tracer()
        .args(["record", "--targets", "do_wait", "--no-samples", "-o"])
        .arg(&out)
        .arg("--")
        .arg(env!("CARGO_BIN_EXE_tracer"))
        .args(["__calibrate", "fork-wait", &k.to_string()])
        .stdin(Stdio::null())
        .status()
        .unwrap();
    assert!(st.success(), "tracer record failed: {st}");
    let run = read_run(&out);
    let (calls, untimed, wall, _, _) = target_calls(&run, "do_wait");
    assert_eq!(
        calls, k,
        "do_wait calls (plan {})",
        run["targets"][0]["plan"]
    );
    assert_eq!(untimed, 0);
    assert!(wall > 0, "durations must be measured");
    for r in run["spans"].as_array().unwrap() {
        assert!(r["wall"]["min_ns"].as_u64().unwrap() > 0, "{r}");
    }
    assert!(
        nothing_loaded(),
        "programs left loaded: {:?}",
        loaded_tracer_programs()
    );
}

/// The 32-bit program of `tests/asm/ia32_chroot.s`, assembled and linked here (binutils).
fn ia32_chroot(dir: &Path) -> PathBuf {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/asm/ia32_chroot.s");
    let (obj, bin) = (dir.join("ia32_chroot.o"), dir.join("ia32_chroot"));
    let ok = |c: &mut std::process::Command| {
        let st = c
            .status()
            .unwrap_or_else(|e| panic!("precondition: binutils installed: {c:?}: {e}"));
        assert!(st.success(), "{c:?}: {st}");
    };
    ok(std::process::Command::new("as")
        .arg("--32")
        .arg("-o")
        .arg(&obj)
        .arg(&src));
    ok(std::process::Command::new("ld")
        .args(["-m", "elf_i386", "-o"])
        .arg(&bin)
        .arg(&obj));
    bin
}

/// run.json of `tracer record ARGS -- sh -c 'ia32_chroot; ia32_chroot'`: a 64-bit shell
/// that runs the 32-bit program twice (2000 chroots, ia32's syscall 61, x86_64's wait4).
fn record_ia32_shell(args: &[&str]) -> Value {
    let tmp = tmpdir();
    let bin = ia32_chroot(tmp.path());
    let out = tmp.path().join("run");
    let script = format!("{0}; {0}; exit 0", bin.display());
    let st = tracer()
        .arg("record")
        .args(args)
        .arg("-o")
        .arg(&out)
        .args(["--", "sh", "-c", &script])
        .status()
        .unwrap();
    assert!(st.success(), "tracer record failed: {st}");
    read_run(&out)
}

#[test]
fn a_32_bit_process_syscalls_are_not_read_by_the_x86_64_numbers() {
    // ia32's syscall 61 is chroot; x86_64's is wait4, which brackets do_wait on this kernel.
    // The shell forks and waits for each of the two runs (wait4 in its own 64-bit table).
    let _g = serial();
    let run = record_ia32_shell(&["--targets", "do_wait", "--no-samples"]);
    let (calls, _, _, _, _) = target_calls(&run, "do_wait");
    assert!(
        (2..100).contains(&calls),
        "do_wait calls {calls}: the shell's waits, not the 2000 ia32 chroots (plan {})",
        run["targets"][0]["plan"]
    );
}

/// Discover names syscalls by the x86_64 table too, and remembers per CPU that a process
/// makes 64-bit syscalls: a shell's child that execs a 32-bit program must be read again
/// (its 2000 chroots, ia32's 61, are no wait4 calls).
#[test]
fn discover_reads_a_process_that_execs_a_32_bit_program_by_its_new_table() {
    let _g = serial();
    let run = record_ia32_shell(&["--discover"]);
    let (waits, execs) = (entry_calls(&run, "wait4"), entry_calls(&run, "execve"));
    assert!(
        execs >= 2,
        "the shell's children exec'd: {execs} execve calls"
    );
    assert!(
        (1..100).contains(&waits),
        "wait4 calls {waits}: the shell's waits, not the 2000 ia32 chroots"
    );
}

// Functions the fast-path fallback test attaches to: one that blocks, one that migrates.
#[unsafe(no_mangle)]
#[inline(never)]
pub extern "C" fn tracer_test_sleep(us: u64) -> u64 {
    std::thread::sleep(Duration::from_micros(us));
    std::hint::black_box(us)
}

/// Pins the calling thread to `cpu`: the kernel moves it there before the call returns, so
/// the call enters on one CPU and exits on another. Returns the CPU it returned on.
#[unsafe(no_mangle)]
#[inline(never)]
pub extern "C" fn tracer_test_move_to(cpu: u32) -> i32 {
    pin_to(&[cpu as usize]);
    unsafe { libc::sched_getcpu() }
}

#[unsafe(no_mangle)]
#[inline(never)]
pub extern "C" fn tracer_test_quick(x: u64) -> u64 {
    std::hint::black_box(x + 1)
}

fn pin_to(cpus: &[usize]) {
    let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
    for &c in cpus {
        unsafe { libc::CPU_SET(c, &mut set) };
    }
    let rc = unsafe { libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set) };
    assert_eq!(rc, 0, "sched_setaffinity {cpus:?}");
}

/// An engine following this test process (no sampler, no caller stacks), and the path of this
/// binary, whose functions the uprobe tests attach to.
fn engine_on_this_process() -> (Engine, PathBuf) {
    let opts = EngineOptions {
        sample_freq_hz: 0,
        caller_stacks: false,
        offcpu_stacks: true,
        ..Default::default()
    };
    let mut engine = Engine::load(opts).expect("load");
    engine
        .set_filter(&Filter::Follow(vec![std::process::id()]))
        .unwrap();
    (engine, std::env::current_exe().unwrap())
}

/// One session of the fallback test: 5 sleeps of 20 ms, 10 migrations, 1000 quick calls.
/// Returns the snapshot and the number of calls that returned on the CPU they were sent to.
fn block_migrate_and_quick(cpus: &[usize]) -> (tracer::engine::Snapshot, usize) {
    let (mut engine, me) = engine_on_this_process();
    for (i, f) in [
        "tracer_test_sleep",
        "tracer_test_move_to",
        "tracer_test_quick",
    ]
    .iter()
    .enumerate()
    {
        engine
            .attach_user_function(i as u32, &me, f)
            .unwrap()
            .unwrap_or_else(|e| panic!("uprobe {f}: {e:?}"));
    }
    for _ in 0..5 {
        tracer_test_sleep(20_000);
    }
    let mut moved = 0;
    for i in 0..10 {
        let to = cpus[i % 2];
        if tracer_test_move_to(to as u32) == to as i32 {
            moved += 1;
        }
    }
    pin_to(cpus);
    for i in 0..1000 {
        tracer_test_quick(i);
    }
    engine.detach_all();
    let snap = engine.snapshot().unwrap();
    drop(engine);
    (snap, moved)
}

/// Calls that block (a 20 ms sleep) and calls that migrate (the thread re-pinned to the other
/// CPU inside the call) leave the per-CPU fast path at the switch and are paired exactly by the
/// thread-state path: every call counted and timed, the sleeps' wall time at least 20 ms and
/// mostly off-CPU, nothing unpaired or abandoned; the calls moved off the fast path are counted
/// (`fast_path_spills`), and a session with the fast path off (`TRACER_NO_FAST_PATH`) counts
/// the same calls and moves none.
#[test]
fn blocking_and_migrating_calls_leave_the_fast_path_and_are_timed_exactly() {
    let _g = serial();
    let cpus = allowed_cpus();
    assert!(
        cpus.len() >= 2,
        "precondition: two CPUs to migrate between (allowed: {cpus:?})"
    );
    let two = [cpus[0], cpus[1]];
    let check = |snap: &tracer::engine::Snapshot, moved: usize, label: &str| {
        let rows = |t: u32| -> Vec<tracer_ebpf::SpanStats> {
            snap.spans
                .iter()
                .filter(|(k, v)| k.target == t && v.calls > 0)
                .map(|(_, v)| *v)
                .collect()
        };
        let sum = |t: u32| {
            rows(t)
                .into_iter()
                .fold(tracer_ebpf::SpanStats::default(), |mut a, v| {
                    a.calls += v.calls;
                    a.untimed += v.untimed;
                    a.wall_sum += v.wall_sum;
                    a.oncpu_sum += v.oncpu_sum;
                    a
                })
        };
        let (sleep, mv, quick) = (sum(0), sum(1), sum(2));
        assert_eq!((sleep.calls, sleep.untimed), (5, 0), "{label}: sleeps");
        let shortest = rows(0).iter().map(|v| v.wall_min).min().unwrap_or(0);
        assert!(
            shortest >= 20_000_000,
            "{label}: a 20 ms sleep took {shortest} ns"
        );
        assert!(
            sleep.oncpu_sum * 2 < sleep.wall_sum,
            "{label}: sleeps mostly off-CPU: {} of {} ns on-CPU",
            sleep.oncpu_sum,
            sleep.wall_sum
        );
        assert_eq!((mv.calls, mv.untimed), (10, 0), "{label}: migrating calls");
        assert_eq!(
            moved, 10,
            "{label}: every call returned on the CPU it was sent to"
        );
        assert_eq!(
            (quick.calls, quick.untimed),
            (1000, 0),
            "{label}: quick calls"
        );
        let c = &snap.counters;
        assert_eq!(
            c[tracer_ebpf::counter::UNPAIRED_EXIT as usize],
            0,
            "{label}: unpaired"
        );
        assert_eq!(
            c[tracer_ebpf::counter::ABANDONED_FRAMES as usize],
            0,
            "{label}: abandoned"
        );
        c[tracer_ebpf::counter::FAST_PATH_SPILLS as usize]
    };
    let (snap, moved) = block_migrate_and_quick(&two);
    let spills = check(&snap, moved, "fast path");
    // Each sleep is switched out inside its call, and so is every migration after the first
    // (the first may find the thread on its CPU already; the rest alternate).
    assert!(
        spills >= 5 + 9,
        "fast path: {spills} calls moved off it, expected >= 14"
    );

    // SAFETY: the serial guard keeps the other tests of this binary from reading the
    // environment meanwhile.
    unsafe { std::env::set_var(tracer::engine::NO_FAST_PATH_ENV, "1") };
    let (snap, moved) = block_migrate_and_quick(&two);
    unsafe { std::env::remove_var(tracer::engine::NO_FAST_PATH_ENV) };
    pin_to(&cpus);
    let spills = check(&snap, moved, "exact path only");
    assert_eq!(spills, 0, "without the fast path nothing is moved off it");
    assert!(nothing_loaded());
}

// Functions the uprobe pairing test attaches to in this very test binary.
#[unsafe(no_mangle)]
#[inline(never)]
pub extern "C" fn tracer_test_recurse(depth: u32) -> u64 {
    if depth <= 1 {
        return tracer_test_leaf(depth);
    }
    std::hint::black_box(tracer_test_recurse(depth - 1)) + 1
}

#[unsafe(no_mangle)]
#[inline(never)]
pub extern "C" fn tracer_test_leaf(x: u32) -> u64 {
    std::hint::black_box(x as u64 * 3)
}

#[test]
fn pairs_nested_and_recursive_calls_exactly() {
    let _g = serial();
    let (mut engine, me) = engine_on_this_process();
    engine
        .attach_user_function(0, &me, "tracer_test_recurse")
        .unwrap()
        .expect("uprobe recurse");
    engine
        .attach_user_function(1, &me, "tracer_test_leaf")
        .unwrap()
        .expect("uprobe leaf");

    // 10 recursions 5 deep: 50 recurse spans and 10 leaf spans nested inside them.
    for _ in 0..10 {
        assert_eq!(tracer_test_recurse(5), 7);
    }
    // 3 recursions 20 deep plus the leaf: 21 open calls, 16 remembered -> the innermost 5
    // (4 recurse, 1 leaf) of each are counted untimed.
    for _ in 0..3 {
        tracer_test_recurse(20);
    }
    engine.detach_all();
    let snap = engine.snapshot().unwrap();
    let recurse = snap
        .spans
        .iter()
        .filter(|(k, _)| k.target == 0)
        .map(|(_, v)| *v)
        .fold(tracer_ebpf::SpanStats::default(), |mut a, v| {
            a.calls += v.calls;
            a.untimed += v.untimed;
            a.wall_sum += v.wall_sum;
            a
        });
    let leaf_calls: u64 = snap
        .spans
        .iter()
        .filter(|(k, _)| k.target == 1)
        .map(|(_, v)| v.calls)
        .sum();
    assert_eq!(recurse.calls, 50 + 60, "every recursive call is counted");
    assert_eq!(
        recurse.untimed,
        3 * 4,
        "calls beyond the frame stack are counted untimed"
    );
    assert_eq!(leaf_calls, 13, "nested target counted once per call");
    // The leaf's timed calls ran inside a recurse call (its innermost enclosing other target);
    // the three beyond the frame stack are untimed and not counted. A recursive call of the
    // same target is no trip of another's loop.
    let within = |t: u32| {
        snap.spans.iter().filter(|(k, _)| k.target == t).fold(
            [0u64; tracer_ebpf::MAX_TARGETS],
            |mut a, (_, v)| {
                for (x, y) in a.iter_mut().zip(v.within) {
                    *x += y;
                }
                a
            },
        )
    };
    assert_eq!(
        within(1),
        [10, 0, 0, 0, 0, 0, 0, 0],
        "leaf calls inside recurse"
    );
    assert_eq!(
        within(0),
        [0; tracer_ebpf::MAX_TARGETS],
        "recursion is not nesting"
    );
    let c = &snap.counters;
    assert_eq!(
        c[tracer_ebpf::counter::UNPAIRED_EXIT as usize],
        0,
        "every exit found its entry"
    );
    assert_eq!(c[tracer_ebpf::counter::DEPTH_OVERFLOW as usize], 15);
    // Exact pairing: the 5-deep recursion's outermost span contains the other four, so the
    // largest recurse span is at least as long as the largest leaf span.
    let max_recurse = snap
        .spans
        .iter()
        .filter(|(k, _)| k.target == 0)
        .map(|(_, v)| v.wall_max)
        .max();
    let max_leaf = snap
        .spans
        .iter()
        .filter(|(k, _)| k.target == 1)
        .map(|(_, v)| v.wall_max)
        .max();
    assert!(max_recurse >= max_leaf, "{max_recurse:?} < {max_leaf:?}");
    // Histogram holds exactly the timed calls.
    let hist_total: u64 = snap
        .hist
        .iter()
        .filter(|((k, kind), _)| k.target == 0 && *kind == tracer_ebpf::HIST_WALL)
        .flat_map(|(_, b)| b.values())
        .sum();
    assert_eq!(hist_total, recurse.calls - recurse.untimed);
    drop(engine);
    assert!(nothing_loaded());
}

#[test]
fn blocking_wait_reports_its_wall_time_as_off_cpu() {
    let _g = serial();
    let tmp = tmpdir();
    let out = tmp.path().join("run");
    let st = tracer()
        .args(["record", "--targets", "do_wait", "-o"])
        .arg(&out)
        // xargs blocks in waitpid() for its child (a shell would sigsuspend instead).
        .args(["--", "sh", "-c", "echo 0.4 | xargs sleep"])
        .status()
        .unwrap();
    assert!(st.success());
    let run = read_run(&out);
    let (calls, _, wall, oncpu, wall_max) = target_calls(&run, "do_wait");
    assert!(calls >= 1);
    assert!(
        wall_max >= 350_000_000,
        "the wait lasted ~0.4 s, longest span {wall_max} ns"
    );
    assert!(
        (oncpu as f64) < 0.05 * wall as f64,
        "blocked time must be off-CPU: on-CPU {oncpu} of {wall} ns"
    );
    // And where it blocked is recorded.
    let files = run["stack_files"].as_array().unwrap();
    let off = files
        .iter()
        .find(|f| f["kind"] == "offcpu" && f["target"] == "do_wait");
    let off = off.expect("an off-CPU stack file for do_wait");
    let text = std::fs::read_to_string(out.join(off["path"].as_str().unwrap())).unwrap();
    assert!(
        text.contains("schedule"),
        "off-CPU stacks end in the scheduler: {text}"
    );
}

/// Start `tracer record` on a long command and wait until its probes are attached.
fn start_recording(out: &Path, extra: &[&str]) -> std::process::Child {
    let child = tracer()
        .arg("record")
        .args(extra)
        .args(["--no-verify", "-o"])
        .arg(out)
        .args(["--", "sleep", "30"])
        .stdin(Stdio::null())
        .spawn()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(30);
    while loaded_tracer_programs()
        .iter()
        .filter(|n| {
            // Per-event or raw tracepoint programs, whichever this kernel took.
            ["tp_", "rtp_", "sched_", "rsched_", "raw_sys_"]
                .iter()
                .any(|p| n.starts_with(p))
        })
        .count()
        < 4
    {
        assert!(Instant::now() < deadline, "tracer never attached");
        std::thread::sleep(Duration::from_millis(50));
    }
    // The command is released (exec'd from its held state) once every probe is attached:
    // wait for it, however long attaching takes on a loaded machine.
    while no_sleep_30_left() {
        assert!(Instant::now() < deadline, "the command was never released");
        std::thread::sleep(Duration::from_millis(20));
    }
    child
}

fn wait_exit(mut child: std::process::Child, within: Duration) -> i32 {
    let deadline = Instant::now() + within;
    loop {
        if let Some(st) = child.try_wait().unwrap() {
            return st.code().unwrap_or(-1);
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            panic!("tracer did not exit within {within:?}");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn no_sleep_30_left() -> bool {
    // Our recorded command must not outlive a stopped recording.
    !std::fs::read_dir("/proc").unwrap().flatten().any(|e| {
        std::fs::read_to_string(e.path().join("cmdline")).is_ok_and(|c| c == "sleep\x0030\x00")
    })
}

#[test]
fn every_way_of_ending_a_recording_detaches_everything() {
    let _g = serial();
    let tmp = tmpdir();
    use nix::sys::signal::{Signal, kill};
    use nix::unistd::Pid;

    for (sig, name) in [
        (Signal::SIGINT, "SIGINT"),
        (Signal::SIGTERM, "SIGTERM"),
        (Signal::SIGHUP, "SIGHUP"),
    ] {
        let out = tmp.path().join(format!("sig-{name}"));
        let child = start_recording(&out, &[]);
        kill(Pid::from_raw(child.id() as i32), sig).unwrap();
        let code = wait_exit(child, Duration::from_secs(20));
        assert_eq!(code, 7, "{name}: interrupted runs exit 7");
        let run = read_run(&out);
        assert_eq!(run["status"], "partial", "{name}");
        assert!(run["partial_reason"].as_str().unwrap().contains(name));
        assert!(nothing_loaded(), "{name}: {:?}", loaded_tracer_programs());
        assert!(no_sleep_30_left(), "{name}: the traced command survived");
    }

    // Duration: complete run, exit 0, the command is stopped.
    let out = tmp.path().join("duration");
    let child = start_recording(&out, &["--duration", "1s"]);
    assert_eq!(wait_exit(child, Duration::from_secs(20)), 0);
    assert_eq!(read_run(&out)["status"], "complete");
    assert!(nothing_loaded());
    assert!(no_sleep_30_left());

    // The command failing: data complete, exit 8, its status recorded.
    let out = tmp.path().join("fails");
    let st = tracer()
        .args(["record", "--no-verify", "-o"])
        .arg(&out)
        .args(["--", "sh", "-c", "exit 3"])
        .status()
        .unwrap();
    assert_eq!(st.code(), Some(8));
    let run = read_run(&out);
    assert_eq!(run["command_exit"], 3);
    assert_eq!(run["status"], "complete");
    assert!(nothing_loaded());

    // A signal during attach/calibration: nothing written, nothing left.
    let out = tmp.path().join("early");
    let child = tracer()
        .args(["record", "-o"])
        .arg(&out)
        .args(["--", "sleep", "30"])
        .stdin(Stdio::null())
        .spawn()
        .unwrap();
    std::thread::sleep(Duration::from_millis(150));
    kill(Pid::from_raw(child.id() as i32), Signal::SIGINT).unwrap();
    let code = wait_exit(child, Duration::from_secs(30));
    assert_ne!(code, 0);
    assert!(nothing_loaded(), "{:?}", loaded_tracer_programs());
    assert!(no_sleep_30_left());
    if out.exists() {
        // Only acceptable if the signal arrived after attaching: then it is a partial run.
        assert_eq!(read_run(&out)["status"], "partial");
    }
    let leftovers: Vec<PathBuf> = std::fs::read_dir(tmp.path())
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .filter(|p| {
            p.file_name()
                .unwrap()
                .to_string_lossy()
                .contains(".partial-")
        })
        .collect();
    assert!(
        leftovers.is_empty(),
        "temporary output left behind: {leftovers:?}"
    );
}

#[test]
fn probes_explains_every_target_on_this_kernel() {
    let _g = serial();
    let out = tracer().args(["probes", "--json"]).output().unwrap();
    let doc: Value = serde_json::from_slice(&out.stdout).expect("probes --json output");
    let facts = &doc["facts"];
    let targets = doc["targets"].as_array().unwrap();
    assert_eq!(targets.len(), 4);
    for t in targets {
        let name = t["name"].as_str().unwrap();
        let plan = &t["plan"];
        let rejected = t["rejected"].as_array().unwrap();
        assert!(
            !plan.is_null() || !rejected.is_empty(),
            "{name}: neither a plan nor a reason"
        );
        for r in rejected {
            assert!(!r["reason"].as_str().unwrap().is_empty());
        }
        if facts["kprobe_pmu"] == false {
            let kp = rejected
                .iter()
                .find(|r| r["plan"] == "kprobe")
                .expect("kprobe rejected");
            assert!(
                kp["reason"].as_str().unwrap().contains("CONFIG_KPROBES"),
                "{kp}"
            );
        }
        if plan["plan"] == "syscall-bracket" || plan["plan"] == "page-alloc-count" {
            // Tracepoint fallbacks are only chosen after the function plans were rejected.
            assert!(rejected.iter().any(|r| r["plan"] == "fentry"), "{name}");
        }
    }
    assert!(out.status.code() == Some(0) || out.status.code() == Some(4));
    assert!(nothing_loaded());
}

#[test]
fn records_syscall_bracket_spans_and_stacks_with_sampling() {
    let _g = serial();
    let tmp = tmpdir();
    let out = tmp.path().join("run");
    // A busy child that forks and reads /proc/sysvipc while being sampled.
    let script = "i=0; while [ $i -lt 40 ]; do /bin/true; cat /proc/sysvipc/shm > /dev/null; i=$((i+1)); done";
    let st = tracer()
        .args(["record", "--freq", "4999", "-o"])
        .arg(&out)
        .args(["--", "sh", "-c", script])
        .status()
        .unwrap();
    assert!(st.success());
    let run = read_run(&out);
    let (forks, ..) = target_calls(&run, "dup_mmap");
    assert_eq!(forks, 80, "40 /bin/true + 40 cat = 80 forks by the shell");
    let (reads, ..) = target_calls(&run, "sysvipc_find_ipc");
    assert!(
        reads >= 80,
        "each cat reads /proc/sysvipc/shm at least twice: {reads}"
    );
    let (pages, untimed, ..) = target_calls(&run, "get_task_policy");
    assert!(pages > 0 && (untimed == pages || run["targets"][3]["plan"]["timed"] == true));
    let kinds: Vec<&str> = run["stack_files"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f["kind"].as_str().unwrap())
        .collect();
    assert!(kinds.contains(&"callers"), "{kinds:?}");
    for f in run["stack_files"].as_array().unwrap() {
        let text = std::fs::read_to_string(out.join(f["path"].as_str().unwrap())).unwrap();
        let parsed = tracer::rundata::parse_folded(&text).expect("folded stacks parse");
        let total: u64 = parsed.iter().map(|l| l.weight).sum();
        assert_eq!(total, f["total_ns"].as_u64().unwrap());
    }
    assert_eq!(run["counters"]["aggregate_map_full"], 0);
    let csv = std::fs::read_to_string(out.join("spans.csv")).unwrap();
    assert_eq!(
        csv.lines().count(),
        run["spans"].as_array().unwrap().len() + 1
    );
}

fn do_wait_calls(run: &Value) -> u64 {
    target_calls(run, "do_wait").0
}

#[test]
fn comm_cgroup_and_system_filters_select_the_right_tasks() {
    let _g = serial();
    let tmp = tmpdir();
    let cal = env!("CARGO_BIN_EXE_tracer");

    // --comm: only the task named "xargs" is traced; the shell that waits for xargs is not.
    let out = tmp.path().join("comm");
    let st = tracer()
        .args([
            "record",
            "--targets",
            "do_wait",
            "--no-samples",
            "--comm",
            "xargs",
            "-o",
        ])
        .arg(&out)
        .args([
            "--",
            "sh",
            "-c",
            "echo 0.01 | xargs sleep; echo 0.01 | xargs sleep; /bin/true",
        ])
        .status()
        .unwrap();
    assert!(st.success());
    let run = read_run(&out);
    assert!(run["filter"].as_str().unwrap().contains("xargs"));
    assert_eq!(
        do_wait_calls(&run),
        2,
        "one wait per xargs, none of the shell's"
    );

    // --cgroup: a fresh cgroup v2 directory; the command moves itself in, then does K waits.
    let root = ["/sys/fs/cgroup/unified", "/sys/fs/cgroup"]
        .into_iter()
        .map(PathBuf::from)
        .find(|p| p.join("cgroup.procs").exists() && p.join("cgroup.controllers").exists())
        .expect("a cgroup v2 hierarchy (cgroup.controllers) at /sys/fs/cgroup[/unified]");
    let cg = root.join(format!("tracer-test-{}", std::process::id()));
    std::fs::create_dir(&cg).unwrap();
    let out = tmp.path().join("cgroup");
    let script = format!(
        "echo $$ > {}/cgroup.procs && exec {cal} __calibrate fork-wait 9",
        cg.display()
    );
    let st = tracer()
        .args(["record", "--targets", "do_wait", "--no-samples", "--cgroup"])
        .arg(&cg)
        .arg("-o")
        .arg(&out)
        .args(["--", "sh", "-c", &script])
        .stdin(Stdio::null())
        .status()
        .unwrap();
    let _ = std::fs::remove_dir(&cg);
    assert!(st.success());
    assert_eq!(
        do_wait_calls(&read_run(&out)),
        9,
        "exactly the cgroup's 9 waits"
    );

    // --system: everything, so at least the command's own waits.
    let out = tmp.path().join("system");
    let st = tracer()
        .args([
            "record",
            "--targets",
            "do_wait",
            "--no-samples",
            "--system",
            "-o",
        ])
        .arg(&out)
        .args(["--", cal, "__calibrate", "fork-wait", "12"])
        .stdin(Stdio::null())
        .status()
        .unwrap();
    assert!(st.success());
    let run = read_run(&out);
    assert_eq!(run["filter"], "system-wide");
    assert!(do_wait_calls(&run) >= 12);
    assert!(nothing_loaded());
}

#[test]
fn verbose_shows_the_probes_own_log_messages() {
    let _g = serial();
    let tmp = tmpdir();
    let workloads = workloads_bin();
    let out = tmp.path().join("run");
    // `tracer GLOBAL record --targets getpid --no-verify OPTIONS -o run -- workloads getpid ...`
    let record = |global: &[&str], options: &[&str]| {
        tracer()
            .args(global)
            .args(["record", "--targets", "getpid", "--no-verify"])
            .args(options)
            .arg("-o")
            .arg(&out)
            .arg("--")
            .arg(&workloads)
            .args(getpid_syscall("100"))
            .args(["--iterations", "1"])
            .output()
            .unwrap()
    };
    let o = record(&["-v"], &[]);
    assert!(o.status.success());
    let stderr = String::from_utf8_lossy(&o.stderr);
    // Logged by the uprobe on the workload's phase marker, through aya-log.
    assert!(
        stderr.contains("phase begin") && stderr.contains("n 100"),
        "{stderr}"
    );
    let quiet = record(&[], &["--force"]);
    assert!(!String::from_utf8_lossy(&quiet.stderr).contains("phase begin"));
}

/// With `--raw-events`, the report's percentiles are the exact nearest-rank values of every
/// call's span, recomputed here from events.csv independently of the tracer's own reader.
#[test]
fn raw_events_make_the_reported_percentiles_exact() {
    let _g = serial();
    let tmp = tmpdir();
    let out = tmp.path().join("run");
    let workloads = workloads_bin();
    let st = record_targets(tracer(), "getpid")
        .args(["--raw-events", "4M", "-o"])
        .arg(&out)
        .arg("--")
        .arg(&workloads)
        .args(getpid_syscall("1000,5000"))
        .args(["--iterations", "3", "--warmup", "0"])
        .status()
        .unwrap();
    assert!(st.success());
    let run = read_run(&out);
    assert_eq!(
        run["counters"]["ringbuf_drops"], 0,
        "precondition: no span lost"
    );
    let rep = tmp.path().join("rep");
    let st = tracer()
        .arg("report")
        .arg(&out)
        .args(["--no-flamegraphs", "-o"])
        .arg(&rep)
        .status()
        .unwrap();
    assert!(st.success());

    // Our own nearest-rank percentiles of the on-CPU times, per N.
    let events = std::fs::read_to_string(out.join("events.csv")).unwrap();
    let mut by_n: std::collections::BTreeMap<u64, Vec<u64>> = Default::default();
    for line in events.lines().skip(1) {
        let f: Vec<&str> = line.split(',').collect();
        if f[3] == "getpid" && f[4] != "0" {
            by_n.entry(f[5].parse().unwrap())
                .or_default()
                .push(f[7].parse().unwrap());
        }
    }
    assert_eq!(by_n.keys().copied().collect::<Vec<_>>(), [1000, 5000]);
    let table = std::fs::read_to_string(rep.join("tables/getpid.csv")).unwrap();
    let mut lines = table.lines();
    let header: Vec<&str> = lines.next().unwrap().split(',').collect();
    let col = |name: &str| header.iter().position(|h| *h == name).unwrap();
    let mut seen = 0;
    for line in lines {
        let f: Vec<&str> = line.split(',').collect();
        let n: u64 = f[col("n")].parse().unwrap();
        let mut v = by_n[&n].clone();
        v.sort_unstable();
        assert_eq!(f[col("calls")].parse::<usize>().unwrap(), v.len(), "N={n}");
        assert_eq!(f[col("percentiles_from")], "raw-spans", "N={n}");
        for (name, q) in [
            ("oncpu_p50_ns", 0.5),
            ("oncpu_p90_ns", 0.9),
            ("oncpu_p99_ns", 0.99),
        ] {
            let rank = ((q * v.len() as f64).ceil() as usize).max(1);
            assert_eq!(f[col(name)], v[rank - 1].to_string(), "{name} at N={n}");
        }
        seen += 1;
    }
    assert_eq!(seen, 2, "{table}");
    let md = std::fs::read_to_string(rep.join("tables/getpid.md")).unwrap();
    assert!(md.contains("percentiles: exact"), "{md}");
}

/// `--repeat` on a built-in workload: one workload process per N and round, each run's calls
/// kept per case (exact: one do_wait per timed wait), the runs adding up to the run's spans,
/// the workload's own rows merged as repeats, and the tables fitting the median of the runs.
#[test]
fn a_workload_swept_by_rounds_keeps_each_run_apart() {
    let _g = serial();
    let tmp = tmpdir();
    let out = tmp.path().join("sweep");
    let o = tracer()
        .args([
            "sweep",
            "waitpid",
            "-t",
            "do_wait",
            "--no-samples",
            "--no-flamegraphs",
        ])
        .args(["--repeat", "3", "--max-repeat", "3", "--n", "1,200", "-o"])
        .arg(&out)
        .args(["--", "--variant", "waitpid-pid,waitpid-any"])
        .args(["--iterations", "10", "--warmup", "0"])
        .stdin(Stdio::null())
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&o.stderr);
    assert!(o.status.success(), "{text}");
    // The loop-count pass counts do_wait's walk where wait_consider_task can be probed, and
    // says why not where it cannot (this project's kernel refuses function probes).
    let pass = out.join("waitpid-loops");
    if pass.exists() {
        let counted = read_run(&pass);
        assert!(
            counted["spans"]
                .as_array()
                .unwrap()
                .iter()
                .any(|r| r["target"] == "wait_consider_task"
                    && r["within"]["do_wait"].as_u64() > Some(0)),
            "{counted}"
        );
    } else {
        assert!(
            text.contains("no loop count for do_wait: wait_consider_task cannot be probed here"),
            "{text}"
        );
    }
    let run = read_run(&out.join("waitpid"));
    let invs = run["invocations"].as_array().unwrap();
    let ns: Vec<u64> = invs.iter().map(|i| i["n"].as_u64().unwrap()).collect();
    assert_eq!(ns.len(), 6, "{ns:?}");
    assert_eq!(ns.iter().filter(|&&n| n == 200).count(), 3, "{ns:?}");
    let mut total: std::collections::BTreeMap<(u64, u64), u64> = Default::default();
    for i in invs {
        assert_eq!(i["exit"], 0, "{i}");
        let n = i["n"].as_u64().unwrap();
        let spans = i["spans"].as_array().unwrap();
        assert_eq!(spans.len(), 2, "one span per case: {i}");
        for s in spans {
            assert_eq!(s["target"], "do_wait");
            assert_eq!(s["calls"], 10, "N={n}: each timed wait once: {s}");
            *total.entry((s["case"].as_u64().unwrap(), n)).or_default() += 10;
        }
    }
    for r in run["spans"].as_array().unwrap() {
        if r["target"] == "do_wait" && r["case_name"] != "unphased" {
            let key = (r["case"].as_u64().unwrap(), r["n"].as_u64().unwrap());
            assert_eq!(r["calls"].as_u64(), total.get(&key).copied(), "{r}");
        }
    }
    let rows = run["workload"]["results"].as_array().unwrap();
    let mut repeats: Vec<u64> = rows
        .iter()
        .filter(|r| r["case"] == "waitpid-any" && r["n"] == 200)
        .map(|r| r["repeat"].as_u64().unwrap())
        .collect();
    repeats.sort_unstable();
    assert_eq!(repeats, [0, 1, 2], "each run's row a repeat");
    assert_eq!(run["workload"]["config"]["n"], serde_json::json!([1, 200]));
    let md = std::fs::read_to_string(out.join("report/tables/do_wait.md")).unwrap();
    assert!(
        md.contains("median over the runs of each run's"),
        "the fitted value is the runs' median:\n{md}"
    );
    assert!(nothing_loaded(), "{:?}", loaded_tracer_programs());
}
