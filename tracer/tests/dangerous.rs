//! Dangerous functions named with `--targets`, on this machine's kernel: our own probes' path
//! is refused as recursion (exit 2, before anything loads, with or without root), and a
//! function the kernel keeps out of tracing (`notrace`) is refused with that reason where
//! `available_filter_functions` is readable; where it is not (this host), the tracer says the
//! check was skipped. The kprobe blacklist and hot functions need function probes: they are
//! tested on Debian 6.1 in `xtask/tests/vm_dangerous.rs`.
//!
//! Needs root for the runs that load probes (CI runs as root).
use std::collections::BTreeSet;
use std::path::Path;
use std::process::{Command, Output, Stdio};

const TRACER: &str = env!("CARGO_BIN_EXE_tracer");

fn tracer(args: &[&str]) -> Output {
    Command::new(TRACER)
        .args(args)
        .env("RUST_BACKTRACE", "1")
        .stdin(Stdio::null())
        .output()
        .unwrap()
}

fn stderr(o: &Output) -> String {
    let s = String::from_utf8_lossy(&o.stderr).into_owned();
    assert!(!s.contains("panicked") && !s.contains("backtrace"), "{s}");
    s
}

fn no_debugfs_left() {
    let mounts = std::fs::read_to_string("/proc/self/mounts").unwrap();
    assert!(
        !mounts.contains(".tracer-debugfs"),
        "a private debugfs mount stayed:\n{mounts}"
    );
    let tmp: Vec<String> = std::fs::read_dir(std::env::temp_dir())
        .unwrap()
        .filter_map(|e| e.ok())
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n.starts_with(".tracer-debugfs"))
        .collect();
    assert!(tmp.is_empty(), "{tmp:?}");
}

#[test]
fn our_own_helpers_are_refused_as_recursion_with_exit_2_and_nothing_written() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("run");
    let out_s = out.to_str().unwrap();
    for (args, name) in [
        (
            vec![
                "record",
                "--targets",
                "bpf_map_lookup_elem",
                "-o",
                out_s,
                "--",
                "true",
            ],
            "bpf_map_lookup_elem",
        ),
        (
            vec![
                "record",
                "--targets",
                "do_wait,htab_map_update_elem",
                "-o",
                out_s,
                "true",
            ],
            "htab_map_update_elem",
        ),
        (
            vec!["probes", "--targets", "ktime_get_mono_fast_ns"],
            "ktime_get_mono_fast_ns",
        ),
        (
            vec![
                "sweep",
                "--targets",
                "bpf_ringbuf_submit",
                "-o",
                out_s,
                "--n",
                "1,2",
                "--",
                "true",
            ],
            "bpf_ringbuf_submit",
        ),
    ] {
        // Only names this kernel has reach the check (others are "no such function").
        let ksyms = std::fs::read_to_string("/proc/kallsyms").unwrap();
        if !ksyms
            .lines()
            .any(|l| l.split_whitespace().nth(2) == Some(name))
        {
            continue;
        }
        let o = tracer(&args);
        let err = stderr(&o);
        assert_eq!(o.status.code(), Some(2), "{args:?}: {err}");
        assert!(
            err.contains(&format!("cannot trace {name}: our own probes call it"))
                && err.contains("recurse"),
            "{args:?}: {err}"
        );
        assert!(!out.exists(), "{args:?} wrote {}", out.display());
    }
    // bpf_map_lookup_elem is in every kernel that runs eBPF: the loop above checked it.
    let ksyms = std::fs::read_to_string("/proc/kallsyms").unwrap();
    assert!(ksyms.contains(" bpf_map_lookup_elem\n"));
}

/// Text symbols of the kernel proper (no module), from /proc/kallsyms.
fn kernel_text_symbols() -> BTreeSet<String> {
    std::fs::read_to_string("/proc/kallsyms")
        .unwrap()
        .lines()
        .filter_map(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            (f.len() == 3 && (f[1] == "t" || f[1] == "T")).then(|| f[2].to_string())
        })
        .collect()
}

#[test]
fn notrace_functions_are_refused_or_the_skipped_check_is_said() {
    assert!(
        nix::unistd::geteuid().is_root(),
        "this test loads probes: run it as root"
    );
    let tracefs = ["/sys/kernel/tracing", "/sys/kernel/debug/tracing"]
        .into_iter()
        .map(Path::new)
        .find(|p| p.join("events").is_dir())
        .expect("tracefs mounted");
    let aff = tracefs.join("available_filter_functions");
    match std::fs::read_to_string(&aff) {
        Ok(text) => {
            // A real notrace function of this kernel: a text symbol absent from the list.
            let traceable: BTreeSet<&str> = text
                .lines()
                .filter_map(|l| l.split_whitespace().next())
                .collect();
            let name = kernel_text_symbols()
                .into_iter()
                .filter(|n| !traceable.contains(n.as_str()))
                .filter(|n| n.chars().all(|c| c.is_ascii_lowercase() || c == '_'))
                .filter(|n| tracer::guard::recursion(n).is_none())
                .find(|n| n == "trace_clock_local" || !n.starts_with('_'))
                .expect("a text symbol that is not traceable");
            let o = tracer(&["probes", "--json", "--targets", &name]);
            let err = stderr(&o);
            assert_eq!(o.status.code(), Some(4), "{name}: {err}");
            let doc: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
            let t = &doc["targets"][0];
            assert!(t["plan"].is_null(), "{name}: {t}");
            for r in t["rejected"].as_array().unwrap() {
                assert!(
                    r["reason"].as_str().unwrap().contains("not traceable"),
                    "{name}: {r}"
                );
            }
        }
        Err(e) => {
            // This host: tracefs refuses the read (EPERM). The tracer goes on, saying which
            // check it could not make, and the kernel's own refusals are still reported.
            let o = tracer(&["probes", "--targets", "copy_process"]);
            let err = stderr(&o);
            assert!(
                err.contains("available_filter_functions unreadable")
                    && err.contains("notrace functions are not recognised"),
                "{aff:?} is unreadable ({e}) but the tracer did not say so: {err}"
            );
        }
    }
    no_debugfs_left();
}
