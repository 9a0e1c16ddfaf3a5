//! Building the run: the `Run` written to disk, from the engine's snapshot and what the
//! recording session knows about the command it ran.
use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use crate::engine::Snapshot;
use crate::kernel::{self, symbolize::KernelSymbolizer};
use crate::rundata::{self, Folded, Run, RunStatus, StackFile, TargetReport};
use crate::symbols::UserSymbolizer;

/// What the session knows of a run besides the kernel's aggregates.
pub struct RunFacts {
    /// When recording started: the run lasts until it is built.
    pub started: Instant,
    pub started_unix: f64,
    pub command: Vec<String>,
    pub command_exit: Option<i32>,
    pub filter: String,
    /// Why the run was cut short, when it was.
    pub partial_reason: Option<String>,
    pub sample_freq_hz: u64,
    pub targets: Vec<TargetReport>,
    /// Counters the session keeps itself, beside the kernel's.
    pub session_counters: Vec<(&'static str, u64)>,
    pub workload: Option<serde_json::Value>,
    pub invocations: Vec<rundata::Invocation>,
    pub discover: bool,
    pub attach_time: Duration,
    pub verify_time: Duration,
    pub probe_cost_time: Duration,
    pub detach_time: Duration,
    pub raw_tracepoints: bool,
    /// Discover mode: why kernel entries were not counted, when they were not.
    pub entries_unavailable: Option<String>,
    /// Discover mode: which interruptions were counted with the entries.
    pub interruptions: Option<rundata::InterruptionCounting>,
}

/// The run and its folded-stack files (metadata, content). `target_names[i]` names kernel
/// target id i.
pub fn build_run(
    snap: &Snapshot,
    target_names: &[String],
    ksyms: &KernelSymbolizer,
    usyms: &mut UserSymbolizer,
    facts: RunFacts,
) -> (Run, Vec<(StackFile, Folded)>) {
    for (k, _) in &snap.stacks {
        if k.tgid != 0 {
            usyms.remember(k.tgid);
        }
    }
    let spans = super::span_rows(snap, target_names);
    let phases = super::phase_rows(snap);
    let stacks = super::stack_files(snap, target_names, ksyms, usyms);
    let mut cases: BTreeMap<u32, String> = BTreeMap::new();
    for r in &spans {
        cases.insert(r.case, r.case_name.clone());
    }
    for p in &phases {
        cases.insert(p.case, p.case_name.clone());
    }
    let mut counters = super::counters(snap);
    for (name, v) in facts.session_counters {
        counters.insert(name.into(), v);
    }
    let status = match facts.partial_reason {
        Some(_) => RunStatus::Partial,
        None => RunStatus::Complete,
    };
    let ms = |d: Duration| d.as_secs_f64() * 1e3;
    let run = Run {
        format: rundata::FORMAT.into(),
        status,
        partial_reason: facts.partial_reason,
        tracer_version: env!("CARGO_PKG_VERSION").into(),
        kernel: kernel::kernel_info(),
        hostname: kernel::hostname(),
        started_unix: facts.started_unix,
        duration_s: facts.started.elapsed().as_secs_f64(),
        command: facts.command,
        command_exit: facts.command_exit,
        filter: facts.filter,
        sample_freq_hz: facts.sample_freq_hz,
        targets: facts.targets,
        counters,
        cases,
        spans,
        phases,
        stack_files: stacks.iter().map(|(m, _)| m.clone()).collect(),
        workload: facts.workload,
        resources: Some(rundata::Resources {
            attach_ms: ms(facts.attach_time),
            verify_ms: ms(facts.verify_time),
            probe_cost_ms: ms(facts.probe_cost_time),
            detach_ms: ms(facts.detach_time),
            peak_rss_kib: kernel::peak_rss_kib(),
            map_memlock_bytes: kernel::bpf_map_memlock_bytes(),
            raw_tracepoints: facts.raw_tracepoints,
        }),
        invocations: facts.invocations,
        discover: facts.discover,
        entries: super::entry_rows(snap),
        entries_unavailable: facts.entries_unavailable,
        interruptions: facts.interruptions,
    };
    (run, stacks)
}
