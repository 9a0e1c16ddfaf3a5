//! A synthetic run directory in the tracer's run format (`tracer/src/rundata.rs`), for timing
//! `tracer report` at a size no real recording here would reach quickly: raw spans in
//! `events.csv`, their aggregates (with the in-kernel histogram's buckets) in `run.json`,
//! and on-CPU stack samples as folded files listed in `stack_files`.
//!
//! The data has a shape the analysis can find: per target a fixed cost plus a cost per N,
//! and a "loop" frame whose share of the samples grows with N.

use std::collections::BTreeMap;
use std::io::{BufWriter, Write};
use std::path::Path;
use std::time::Instant;

use anyhow::{Context, Result};
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

/// What to generate.
#[derive(Debug, Clone, PartialEq)]
pub struct SynthSpec {
    /// Raw spans (rows of events.csv), spread over every target and N.
    pub spans: u64,
    /// On-CPU stack samples (one folded line each), spread the same way.
    pub samples: u64,
    pub ns: Vec<u64>,
    pub seed: u64,
}

impl SynthSpec {
    pub fn new(spans: u64, samples: u64) -> SynthSpec {
        SynthSpec {
            spans,
            samples,
            ns: vec![1, 10, 100, 1000, 4000, 16000],
            seed: 0x5eed,
        }
    }
}

/// What was generated.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct SynthInfo {
    pub spans: u64,
    pub samples: u64,
    pub rows: usize,
    pub stack_files: usize,
    pub events_csv_bytes: u64,
    pub stacks_bytes: u64,
    pub generate_s: f64,
}

/// A synthetic target: (name, case id, case name, syscall frame, ns fixed, ns per N, loop frame).
struct SynthTarget {
    name: &'static str,
    case: u32,
    case_name: &'static str,
    syscall: &'static str,
    fixed_ns: f64,
    per_n_ns: f64,
    loop_frame: &'static str,
}

const TARGETS: &[SynthTarget] = &[
    SynthTarget {
        name: "do_wait",
        case: 3,
        case_name: "waitpid-any",
        syscall: "__x64_sys_wait4",
        fixed_ns: 1500.0,
        per_n_ns: 40.0,
        loop_frame: "wait_consider_task",
    },
    SynthTarget {
        name: "dup_mmap",
        case: 10,
        case_name: "spawn",
        syscall: "__x64_sys_clone",
        fixed_ns: 30000.0,
        per_n_ns: 25.0,
        loop_frame: "vm_area_dup",
    },
    SynthTarget {
        name: "sysvipc_find_ipc",
        case: 20,
        case_name: "sysvipc-shm",
        syscall: "__x64_sys_read",
        fixed_ns: 800.0,
        per_n_ns: 120.0,
        loop_frame: "idr_get_next",
    },
    SynthTarget {
        name: "get_task_policy",
        case: 30,
        case_name: "mempolicy-page",
        syscall: "asm_exc_page_fault",
        fixed_ns: 250.0,
        per_n_ns: 0.0,
        loop_frame: "policy_nodemask",
    },
];

/// Same as the tracer's cpu-clock default (999 Hz).
const SAMPLE_FREQ_HZ: u64 = 999;
const SAMPLE_PERIOD_NS: u64 = 1_000_000_000 / SAMPLE_FREQ_HZ;

/// xorshift64*: deterministic and fast; statistical quality is beside the point here.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        self.0 = x;
        x.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    /// Uniform in [0, 1).
    fn unit(&mut self) -> f64 {
        (self.next() >> 11) as f64 / (1u64 << 53) as f64
    }
}

#[derive(Default)]
struct Dist {
    sum: u64,
    min: u64,
    max: u64,
    hist: BTreeMap<u32, u64>,
}

impl Dist {
    fn add(&mut self, v: u64) {
        if self.hist.is_empty() || v < self.min {
            self.min = v;
        }
        self.max = self.max.max(v);
        self.sum += v;
        *self.hist.entry(tracer_ebpf::hist_bucket(v)).or_default() += 1;
    }

    fn json(&self) -> Value {
        json!({
            "sum_ns": self.sum,
            "min_ns": self.min,
            "max_ns": self.max,
            "hist": self.hist.iter().map(|(b, c)| json!([b, c])).collect::<Vec<_>>(),
        })
    }
}

/// `total` split into `parts` near-equal shares.
fn share(total: u64, parts: usize, i: usize) -> u64 {
    let parts = parts as u64;
    total / parts + u64::from((i as u64) < total % parts)
}

/// Write a synthetic run into `dir` (created; must not hold another run).
pub fn generate(dir: &Path, spec: &SynthSpec) -> Result<SynthInfo> {
    let t0 = Instant::now();
    std::fs::create_dir_all(dir)?;
    let mut rng = Rng(spec.seed | 1);
    let rows = TARGETS.len() * spec.ns.len();
    let events_path = dir.join("events.csv");
    let mut ev = BufWriter::with_capacity(
        1 << 20,
        std::fs::File::create(&events_path).context("events.csv")?,
    );
    ev.write_all(b"end_ns,tid,tgid,target,case,n,wall_ns,oncpu_ns\n")?;
    let mut spans = Vec::new();
    let mut phases = Vec::new();
    let mut stack_files = Vec::new();
    let mut stacks_bytes = 0u64;
    let mut clock: u64 = 1_000_000_000;
    let mut row = 0;
    for (ti, t) in TARGETS.iter().enumerate() {
        let tid = 4000 + ti as u64;
        for &n in &spec.ns {
            let calls = share(spec.spans, rows, row);
            let samples = share(spec.samples, rows, row);
            row += 1;
            let mean = t.fixed_ns + t.per_n_ns * n as f64;
            let (mut wall, mut oncpu) = (Dist::default(), Dist::default());
            let phase_start = clock;
            for _ in 0..calls {
                // +-10% jitter and a 1% tail at 4x: enough for histograms to mean something.
                let mut w = mean * (0.9 + 0.2 * rng.unit());
                if rng.next().is_multiple_of(100) {
                    w *= 4.0;
                }
                let w = w.max(1.0) as u64;
                let on = w - w / 20;
                clock += w + 500;
                wall.add(w);
                oncpu.add(on);
                writeln!(ev, "{clock},{tid},{tid},{},{},{n},{w},{on}", t.name, t.case)?;
            }
            spans.push(json!({
                "target": t.name, "case": t.case, "case_name": t.case_name, "n": n,
                "calls": calls, "untimed": 0, "wall": wall.json(), "oncpu": oncpu.json(),
            }));
            phases.push(json!({
                "case": t.case, "case_name": t.case_name, "n": n, "phases": 1,
                "ops": calls, "wall_ns": clock - phase_start,
            }));
            if samples > 0 {
                let rel = format!("stacks/oncpu/{}/{}/n{n}.folded", t.name, t.case_name);
                let text = folded_samples(t, n, samples, &mut rng);
                let path = dir.join(&rel);
                std::fs::create_dir_all(path.parent().expect("has parent"))?;
                std::fs::write(&path, &text)?;
                stacks_bytes += text.len() as u64;
                stack_files.push(json!({
                    "kind": "oncpu", "target": t.name, "case": t.case,
                    "case_name": t.case_name, "n": n, "path": rel,
                    "total_ns": samples * SAMPLE_PERIOD_NS, "count": samples,
                }));
            }
        }
    }
    ev.flush()?;
    drop(ev);
    let duration_s = (clock - 1_000_000_000) as f64 / 1e9;
    let run = run_json(spec, duration_s, &spans, &phases, &stack_files);
    std::fs::write(dir.join("run.json"), serde_json::to_string_pretty(&run)?)?;
    Ok(SynthInfo {
        spans: spec.spans,
        samples: spec.samples,
        rows,
        stack_files: stack_files.len(),
        events_csv_bytes: std::fs::metadata(&events_path)?.len(),
        stacks_bytes,
        generate_s: t0.elapsed().as_secs_f64(),
    })
}

/// The synthetic run's run.json: its targets (fentry, as if measured), rows, phases and stack
/// files.
fn run_json(
    spec: &SynthSpec,
    duration_s: f64,
    spans: &[serde_json::Value],
    phases: &[serde_json::Value],
    stack_files: &[serde_json::Value],
) -> serde_json::Value {
    let cases: BTreeMap<String, &str> = TARGETS
        .iter()
        .map(|t| (t.case.to_string(), t.case_name))
        .collect();
    json!({
        "format": "tracer-run/1",
        "status": "complete",
        "tracer_version": "synthetic",
        "kernel": {"release": "synthetic", "version": "", "machine": "x86_64"},
        "hostname": "synthetic",
        "started_unix": 0.0,
        "duration_s": duration_s,
        "command": ["synthetic"],
        "filter": "synthetic data (xtask bench)",
        "sample_freq_hz": SAMPLE_FREQ_HZ,
        "targets": TARGETS.iter().map(|t| json!({
            "name": t.name,
            "plan": {"plan": "fentry", "mechanism": "fentry/fexit", "attach_points": [t.name],
                     "timed": true, "note": "synthetic"},
            "rejected": [],
        })).collect::<Vec<_>>(),
        "counters": {"ringbuf_drops": 0, "raw_events_written": spec.spans},
        "cases": cases,
        "spans": spans,
        "phases": phases,
        "stack_files": stack_files,
    })
}

/// `samples` folded lines (weight = one sample period) under target `t` at size `n`: the
/// loop frame's share grows from ~10% at small N towards 90%.
fn folded_samples(t: &SynthTarget, n: u64, samples: u64, rng: &mut Rng) -> String {
    const OTHERS: [&str; 4] = [
        "_raw_spin_lock",
        "kmem_cache_alloc",
        "memcpy_orig",
        "up_read",
    ];
    let loop_share = if t.per_n_ns > 0.0 {
        0.1 + 0.8 * (n as f64 / (n as f64 + 1000.0))
    } else {
        0.1
    };
    let mut s = String::with_capacity(samples as usize * 120);
    for _ in 0..samples {
        let callee = if rng.unit() < loop_share {
            t.loop_frame
        } else {
            OTHERS[(rng.next() % OTHERS.len() as u64) as usize]
        };
        let leaf = rng.next() % 32;
        s.push_str(&format!(
            "entry_SYSCALL_64_after_hwframe;do_syscall_64;{};{};{callee};leaf_{leaf} {SAMPLE_PERIOD_NS}\n",
            t.syscall, t.name
        ));
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shares_sum_to_total() {
        let total: u64 = (0..7).map(|i| share(100, 7, i)).sum();
        assert_eq!(total, 100);
        assert_eq!(share(5, 10, 9), 0);
    }

    #[test]
    fn generated_run_is_consistent_and_reportable() {
        let dir = tempfile::tempdir().unwrap();
        let run_dir = dir.path().join("synth");
        let info = generate(&run_dir, &SynthSpec::new(24_000, 12_000)).unwrap();
        assert_eq!((info.rows, info.stack_files), (24, 24));
        // events.csv: header plus one line per span, in the recorder's column order.
        let csv = std::fs::read_to_string(run_dir.join("events.csv")).unwrap();
        let mut lines = csv.lines();
        assert_eq!(
            lines.next(),
            Some("end_ns,tid,tgid,target,case,n,wall_ns,oncpu_ns")
        );
        assert_eq!(lines.count(), 24_000);
        // The tracer's own reader accepts it (histogram totals, stack totals) ...
        let run = tracer::rundata::Run::read(&run_dir).expect("the tracer reads the run");
        assert_eq!(run.spans.iter().map(|s| s.calls).sum::<u64>(), 24_000);
        let samples: u64 = run.stack_files.iter().map(|f| f.count).sum();
        assert_eq!(samples, 12_000);
        // ... and `tracer report` renders it, finding the growth that was put in.
        let out = dir.path().join("report");
        let summary = tracer::pipeline::report(&run_dir, &out, &Default::default())
            .expect("tracer report accepts the synthetic run");
        let verdict = |target: &str| {
            summary
                .verdicts
                .iter()
                .find(|v| v.starts_with(target))
                .unwrap_or_else(|| panic!("no verdict for {target}: {:?}", summary.verdicts))
                .clone()
        };
        assert!(verdict("sysvipc_find_ipc").contains("O(n)"), "{summary:?}");
        assert!(verdict("get_task_policy").contains("O(1)"), "{summary:?}");
        assert!(
            summary
                .root_causes
                .iter()
                .any(|r| r.contains("sysvipc_find_ipc") && r.contains("idr_get_next")),
            "{:?}",
            summary.root_causes
        );
        assert!(out.join("summary.json").is_file());
    }

    #[test]
    fn a_wrong_histogram_would_be_rejected() {
        // Guard the property the generator relies on: the reader checks histogram totals.
        let dir = tempfile::tempdir().unwrap();
        generate(dir.path(), &SynthSpec::new(240, 0)).unwrap();
        let p = dir.path().join("run.json");
        let mut v: Value = serde_json::from_str(&std::fs::read_to_string(&p).unwrap()).unwrap();
        v["spans"][0]["calls"] = json!(v["spans"][0]["calls"].as_u64().unwrap() + 1);
        std::fs::write(&p, v.to_string()).unwrap();
        let err = tracer::rundata::Run::read(dir.path()).unwrap_err();
        assert!(err.to_string().contains("histogram holds"), "{err}");
    }
}
