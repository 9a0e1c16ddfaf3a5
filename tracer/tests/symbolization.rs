//! Native symbolization test: the folded stacks of real recordings (tracepoints and perf_event
//! sampling on this machine's kernel; needs root) name only code that runs. No BPF program or
//! trampoline, no init or exit function, no neighbour of an unlisted address, no raw
//! `[unknown-0x..]`; user frames of a static musl binary are named from its symbol table, and
//! those of a stripped copy are `[binary+0xoffset]`.
use std::collections::BTreeSet;
use std::path::Path;
use std::process::Command;
use std::sync::Mutex;

use serde_json::Value;
use tracer::kernel::{kallsyms, symbolize};

/// The tests load programs and look at what is loaded: one at a time.
static SERIAL: Mutex<()> = Mutex::new(());

fn serial() -> std::sync::MutexGuard<'static, ()> {
    assert!(
        nix::unistd::geteuid().is_root(),
        "native eBPF tests need root (run them with sudo or through `cargo xtask test`)"
    );
    SERIAL.lock().unwrap_or_else(|e| e.into_inner())
}

/// Forks and reaps children from a function of its own, entering wait4 with an inline
/// `syscall` so the user stack starts in our code (musl's wrappers keep no frame pointer).
/// 800 forks a millisecond apart: 250 three milliseconds apart took as long, and on a quiet
/// host their samples held 65 to 85 distinct kernel frames, under the 100 the test asks.
const WAITER_C: &str = r#"
#include <time.h>
#include <unistd.h>

static inline __attribute__((always_inline)) long raw_wait4(long pid) {
    long ret;
    register long r10 __asm__("r10") = 0;
    __asm__ volatile("syscall"
                     : "=a"(ret)
                     : "a"(61L), "D"(pid), "S"(0L), "d"(0L), "r"(r10)
                     : "rcx", "r11", "memory");
    return ret;
}

__attribute__((noinline)) int wait_for_children(int rounds) {
    int reaped = 0;
    for (int i = 0; i < rounds; i++) {
        pid_t p = fork();
        if (p == 0) _exit(0);
        if (raw_wait4(p) == p) reaped++;
        struct timespec ts = {0, 1000000};
        nanosleep(&ts, 0);
    }
    return reaped;
}

int main(void) { return wait_for_children(800) == 800 ? 0 : 1; }
"#;

/// Static musl builds of WAITER_C: (with symbols, stripped).
fn build_waiters(dir: &Path) -> (std::path::PathBuf, std::path::PathBuf) {
    let src = dir.join("waiter.c");
    std::fs::write(&src, WAITER_C).unwrap();
    let bin = dir.join("waiter");
    let st = Command::new("musl-gcc")
        .args(["-static", "-O1", "-fno-omit-frame-pointer", "-o"])
        .arg(&bin)
        .arg(&src)
        .status()
        .expect("precondition: musl-gcc is installed (cargo xtask setup installs musl-tools)");
    assert!(st.success(), "musl-gcc failed: {st}");
    let stripped = dir.join("waiter-stripped");
    let st = Command::new("strip")
        .args(["-s", "-o"])
        .arg(&stripped)
        .arg(&bin)
        .status()
        .expect("precondition: strip (binutils) is installed");
    assert!(st.success(), "strip failed: {st}");
    (bin, stripped)
}

fn record(out: &Path, command: &Path) -> Value {
    let o = Command::new(env!("CARGO_BIN_EXE_tracer"))
        .args(["record", "--freq", "4999", "-o"])
        .arg(out)
        .arg("--")
        .arg(command)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert!(
        o.status.success(),
        "tracer record failed: {}: {stderr}",
        o.status
    );
    assert!(
        !stderr.contains("panicked") && !stderr.contains("backtrace"),
        "{stderr}"
    );
    let text = std::fs::read_to_string(out.join("run.json")).unwrap();
    serde_json::from_str(&text).unwrap()
}

/// Every stack file of a run: (kind, target, frames of each line).
fn stacks(out: &Path, run: &Value) -> Vec<(String, String, Vec<Vec<String>>)> {
    run["stack_files"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| {
            let text = std::fs::read_to_string(out.join(f["path"].as_str().unwrap())).unwrap();
            let lines = tracer::rundata::parse_folded(&text).unwrap();
            (
                f["kind"].as_str().unwrap().to_string(),
                f["target"].as_str().unwrap().to_string(),
                lines.into_iter().map(|l| l.frames).collect(),
            )
        })
        .collect()
}

/// Split a caller stack (root first) into its user and kernel parts at the syscall entry.
fn split_at_syscall_entry(frames: &[String]) -> (&[String], &[String]) {
    let at = frames
        .iter()
        .position(|f| f.starts_with("entry_SYSCALL"))
        .unwrap_or_else(|| panic!("a caller stack enters the kernel by a syscall: {frames:?}"));
    frames.split_at(at)
}

/// Checks every kernel frame: a text symbol that runs after boot, or one of the bracketed
/// names the collector gives to what has none. Returns how many kernel frames were checked.
fn check_kernel_frames(
    frames: &[String],
    runs: &BTreeSet<&str>,
    init_only: &BTreeSet<String>,
) -> usize {
    for (i, f) in frames.iter().enumerate() {
        // An unwind that ended at an address no symbol covers says so at the root, only there.
        if f == tracer::rundata::TRUNCATED_KERNEL_STACK {
            assert_eq!(i, 0, "a truncated stack's mark not at its root: {frames:?}");
            continue;
        }
        assert!(
            !f.starts_with("bpf_prog_") && !f.starts_with("bpf_trampoline_"),
            "a BPF frame: {f} in {frames:?}"
        );
        assert!(
            !symbolize::is_bpf_frame(f),
            "a BPF frame: {f} in {frames:?}"
        );
        assert!(
            !init_only.contains(f),
            "an init/exit function: {f} in {frames:?}"
        );
        assert!(
            runs.contains(f.as_str())
                || matches!(
                    f.as_str(),
                    "[no-kernel-stack]" | "[lost-kernel-stack]" | "[probe-only-stack]"
                ),
            "not a kernel text symbol that runs: {f} in {frames:?}"
        );
    }
    frames.len()
}

/// Programs of ours still loaded, after giving the kernel's asynchronous (RCU) frees a moment.
fn leftover_programs() -> Vec<String> {
    let ours = tracer::engine::program_names();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
    loop {
        let left: Vec<String> = aya::programs::loaded_programs()
            .filter_map(Result::ok)
            .filter_map(|p| p.name_as_str().map(str::to_string))
            .filter(|n| ours.contains(n))
            .collect();
        if left.is_empty() || std::time::Instant::now() > deadline {
            return left;
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
}

#[test]
fn recorded_stacks_name_only_code_that_runs() {
    let _g = serial();
    let tmp = tempfile::tempdir().unwrap();
    let (waiter, stripped) = build_waiters(tmp.path());

    let text = std::fs::read_to_string("/proc/kallsyms").unwrap();
    let init_only = symbolize::init_only_symbols(&text);
    assert!(
        !init_only.is_empty(),
        "precondition: this kernel lists init functions (start_kernel...)"
    );
    assert!(
        init_only.contains("start_kernel"),
        "start_kernel runs only at boot"
    );
    // Text symbols that run: everything named that is not init-only. Our probes' own BPF
    // programs are gone from kallsyms by now, and would be bracketed if not.
    let runs: BTreeSet<&str> = kallsyms::lines(&text)
        .filter(|l| matches!(l.kind, 't' | 'T' | 'w' | 'W') && l.module != Some("bpf"))
        .map(|l| l.name)
        .filter(|n| !init_only.contains(*n))
        .collect();

    let mut kernel_checked = 0;
    for (bin, named) in [(&waiter, true), (&stripped, false)] {
        let out = tmp.path().join(format!("run-{named}"));
        let run = record(&out, bin);
        let base = bin.file_name().unwrap().to_string_lossy().into_owned();
        let mut saw_user_frames = false;
        for (kind, target, lines) in stacks(&out, &run) {
            for frames in &lines {
                for f in frames {
                    assert!(
                        !f.contains("[unknown-0x"),
                        "raw address frame {f} in {frames:?}"
                    );
                }
                if kind != "callers" {
                    kernel_checked += check_kernel_frames(frames, &runs, &init_only);
                    continue;
                }
                let (user, kernel) = split_at_syscall_entry(frames);
                kernel_checked += check_kernel_frames(kernel, &runs, &init_only);
                // Only the waiter itself calls wait4 (its children exit at once).
                if target != "do_wait" {
                    continue;
                }
                saw_user_frames |= !user.is_empty();
                if named {
                    // The static binary's .symtab names the function that entered wait4
                    // and its caller.
                    assert!(
                        user.ends_with(&["main".to_string(), "wait_for_children".to_string()]),
                        "static musl frames named from .symtab: {frames:?}"
                    );
                } else {
                    for f in user {
                        assert!(
                            f.starts_with(&format!("[{base}+0x")) && f.ends_with(']'),
                            "a stripped binary's frames are [binary+0xoffset]: {frames:?}"
                        );
                    }
                }
            }
        }
        assert!(
            saw_user_frames,
            "{base}: do_wait has caller stacks with user frames"
        );
        let survivors = std::fs::read_dir("/proc").unwrap().flatten().any(|e| {
            std::fs::read(e.path().join("cmdline"))
                .is_ok_and(|c| c.starts_with(bin.as_os_str().as_encoded_bytes()))
        });
        assert!(
            !survivors,
            "{base} or one of its children outlived the recording"
        );
    }
    eprintln!("kernel frames checked: {kernel_checked}");
    assert!(
        kernel_checked > 100,
        "enough kernel frames to mean something: {kernel_checked}"
    );
    let left = leftover_programs();
    assert!(left.is_empty(), "programs left loaded: {left:?}");
}

#[test]
fn our_loaded_programs_are_bpf_frames_bounded_by_their_jit_length() {
    let _g = serial();
    let engine = tracer::engine::Engine::load(tracer::engine::EngineOptions::default())
        .expect("load the probes");
    let k = symbolize::KernelSymbolizer::load().unwrap();
    let text = std::fs::read_to_string("/proc/kallsyms").unwrap();
    let jited: std::collections::HashMap<u64, u32> = aya::programs::loaded_programs()
        .filter_map(Result::ok)
        .map(|p| (p.tag(), p.size_jitted()))
        .collect();
    let ours = tracer::engine::program_names();
    let mut checked = 0;
    for l in kallsyms::lines(&text).filter(|l| l.module == Some("bpf")) {
        // bpf_prog_<16 hex digits of tag>_<name>
        let Some(rest) = l.name.strip_prefix("bpf_prog_") else {
            continue;
        };
        let (tag, name) = rest.split_at(16);
        let name = name.trim_start_matches('_');
        // program_names() gives the kernel's 15-byte program names; kallsyms the full one.
        let short: String = name.chars().take(15).collect();
        if !ours.contains(&short) {
            continue;
        }
        let frame = format!("[bpf_prog {name}]");
        assert_eq!(k.frame_name(l.addr, false), frame);
        assert!(symbolize::is_bpf_frame(&frame));
        let len = u64::from(jited[&u64::from_str_radix(tag, 16).unwrap()]);
        assert!(len > 0, "{name} is JIT-compiled");
        // A program ends at its JIT length, or where the next symbol starts if that is
        // sooner (the kernel's JIT length may include padding the next image reuses).
        let next = kallsyms::lines(&text)
            .map(|x| x.addr)
            .filter(|&a| a > l.addr)
            .min()
            .unwrap_or(u64::MAX);
        let end = (l.addr + len).min(next);
        assert_eq!(
            k.frame_name(end - 1, false),
            frame,
            "{name}: JIT length {len}, next symbol at +{}",
            next - l.addr
        );
        assert_ne!(k.frame_name(end, false), frame, "{name} ends at {end:#x}");
        checked += 1;
    }
    // Programs are loaded when first attached; the engine loads a few up front.
    let loaded = aya::programs::loaded_programs()
        .filter_map(Result::ok)
        .filter_map(|p| p.name_as_str().map(str::to_string))
        .filter(|n| ours.contains(n))
        .count();
    assert!(loaded > 0, "precondition: the engine loaded programs");
    assert_eq!(
        checked, loaded,
        "every loaded program of ours is listed in kallsyms and named as a BPF frame"
    );
    drop(engine);
    let left = leftover_programs();
    assert!(left.is_empty(), "programs left loaded: {left:?}");
}
