//! The on-disk run format: what `tracer record` writes and what analysis reads without root.
//!
//! A run directory holds:
//!
//! | file | content |
//! | --- | --- |
//! | `run.json` | [`Run`]: metadata, attach plans, counters, per-(target, case, N) span aggregates with histograms, workload phases |
//! | `spans.csv` | the span aggregates as a flat table for spreadsheets and scripts |
//! | `stacks/<kind>/<target>/<case>/n<N>.folded` | folded stacks (`frame;frame;frame weight_ns`), kind = `oncpu`, `offcpu` or `callers` |
//! | `events.csv` | raw per-call spans, only with `--raw-events` (exact percentiles in reports) |
//!
//! The directory is written under a temporary name and renamed into place when complete, so a
//! directory named like the output is never half-written. `run.json`'s `status` says whether
//! the run itself was complete or was cut short (then `partial_reason` says why).

use std::collections::BTreeMap;
use std::io;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

mod counters;
mod folded;
mod interruptions;
mod stacks;

pub use counters::{
    COUNTER_NAMES, INFORMATIONAL_COUNTERS, SAMPLE_RATE_LIMIT_END, SAMPLE_RATE_LIMIT_START,
    counter_meaning,
};
pub use folded::Folded;
pub use interruptions::{Interruption, InterruptionCounting, Uncounted};
pub use stacks::{
    ENTRY_INTERRUPT, ENTRY_KERNEL, ENTRY_PAGE_FAULT, FoldedLine, PROFILE_TARGET, StackFile,
    StackKind, TRUNCATED_KERNEL_STACK, USER_FRAME, parse_folded, safe_component, stack_file_path,
    write_folded,
};

/// Format tag stored in every `run.json`; readers refuse other major versions.
pub const FORMAT: &str = "tracer-run/1";
pub const RUN_FILE: &str = "run.json";
/// The file a sweep directory keeps next to its run directories (the sweep writes it, the
/// analysis reads it).
pub const SWEEP_FILE: &str = "sweep.json";
pub const SPANS_CSV: &str = "spans.csv";
pub const STACKS_DIR: &str = "stacks";
pub const EVENTS_CSV: &str = "events.csv";
/// Header of `events.csv`, one row per call (raw-events mode).
pub const EVENTS_HEADER: &str = "end_ns,tid,tgid,target,case,n,wall_ns,oncpu_ns\n";
/// Suffix of the run directory where a discover sweep's top functions were timed exactly.
const CONFIRM_SUFFIX: &str = "-confirm";
/// Suffix of the run directory where a sweep counted its targets' loop trips
/// (`sweep::loops`).
const LOOPS_SUFFIX: &str = "-loops";

/// What a run directory of a sweep holds. A second pass over a measured run is stored beside
/// it under the measured run's name and a suffix; this is the one place that reads or writes
/// that suffix.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum RunRole {
    /// The sizes timed (or sampled) as asked.
    Measured,
    /// A discover sweep's second pass: its top functions timed exactly (`sweep::confirm`).
    Confirm,
    /// A sweep's loop-count pass: its counts join the measured run's verdicts; its times,
    /// which hold a probe per trip, are not fitted (`sweep::loops`).
    LoopCount,
}

impl RunRole {
    /// The role of the run directory named `label`, and the name of the measured run it
    /// belongs to (itself for a measured run).
    pub fn of(label: &str) -> (RunRole, &str) {
        if let Some(base) = label.strip_suffix(CONFIRM_SUFFIX) {
            (RunRole::Confirm, base)
        } else if let Some(base) = label.strip_suffix(LOOPS_SUFFIX) {
            (RunRole::LoopCount, base)
        } else {
            (RunRole::Measured, label)
        }
    }

    /// The directory name of this role's pass over the measured run `base`.
    pub fn dir_name(self, base: &str) -> String {
        match self {
            RunRole::Measured => base.to_string(),
            RunRole::Confirm => format!("{base}{CONFIRM_SUFFIX}"),
            RunRole::LoopCount => format!("{base}{LOOPS_SUFFIX}"),
        }
    }
}

#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct Run {
    pub format: String,
    pub status: RunStatus,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub partial_reason: Option<String>,
    pub tracer_version: String,
    pub kernel: KernelInfo,
    pub hostname: String,
    /// Seconds since the Unix epoch when recording started.
    pub started_unix: f64,
    pub duration_s: f64,
    /// The traced command, empty for `--pid`/`--comm`/`--system` runs.
    pub command: Vec<String>,
    /// The traced command's exit code (or 128 + signal), when there was one and it ended.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub command_exit: Option<i32>,
    /// Human description of the filter, e.g. "process tree of pid 1234".
    pub filter: String,
    /// cpu-clock sampling frequency for on-CPU stacks; 0 when sampling was off.
    pub sample_freq_hz: u64,
    /// One entry per traced target, in target-index order.
    pub targets: Vec<TargetReport>,
    /// Kernel-side counters (drops, unpaired exits, map-full ...), by name.
    pub counters: BTreeMap<String, u64>,
    /// Names of the workload cases seen in phases, by case id.
    pub cases: BTreeMap<u32, String>,
    pub spans: Vec<SpanRow>,
    pub phases: Vec<PhaseRow>,
    /// Folded-stack files of this run, relative to the run directory.
    pub stack_files: Vec<StackFile>,
    /// The workload's own report (its `--json` output), when the traced command was one of ours.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub workload: Option<serde_json::Value>,
    /// What the tracer itself cost: timings and memory (absent in older runs).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resources: Option<Resources>,
    /// Each run of the command: one for `tracer record`, one per N and repeat for an
    /// external sweep (absent in older runs).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub invocations: Vec<Invocation>,
    /// Whether every sample of the traced tasks was kept (`--discover`): the `profile` and
    /// `profile-offcpu` stacks.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub discover: bool,
    /// Discover mode: the traced tasks' kernel entries (syscalls by name, user page faults,
    /// the interruptions of `interruptions`) per phase, counted in the kernel.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub entries: Vec<EntryRow>,
    /// Discover mode: why kernel entries were not counted, when they were not.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub entries_unavailable: Option<String>,
    /// Discover mode, with the entries counted: which interruptions were counted among them
    /// (absent in older runs, which counted none).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub interruptions: Option<InterruptionCounting>,
}

/// One kind of kernel entry in one phase: how many times the traced tasks entered the kernel
/// that way. Its time is in the samples filed under it. (Runs recorded before 2026-12 also
/// hold `wall_ns`, the time from entry to exit summed, which nothing read: ignored.)
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq, Eq)]
pub struct EntryRow {
    pub case: u32,
    pub case_name: String,
    pub n: u64,
    /// A syscall's name (`wait4`), `page_fault`, or an interruption's
    /// ([`Interruption::name`]: `timer_interrupt`, `preemption`, ...).
    pub entry: String,
    pub calls: u64,
}

/// One run of the traced command.
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq)]
pub struct Invocation {
    /// The N this run was (0 for a plain `tracer record`).
    pub n: u64,
    pub command: Vec<String>,
    /// Exit code, or 128 + signal; None when it never ended.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub exit: Option<i32>,
    pub wall_s: f64,
    /// CPU time of the command's process tree (its reaped descendants included).
    pub user_s: f64,
    pub sys_s: f64,
    /// The machine's CPU time over the run, all CPUs together (absent in older runs): what
    /// the hypervisor took from them (steal), which rusage leaves out and the cpu-clock
    /// samples do not, and their busy time (everything but idle and iowait).
    #[serde(default, skip_serializing_if = "is_zero_f")]
    pub cpu_steal_s: f64,
    #[serde(default, skip_serializing_if = "is_zero_f")]
    pub cpu_busy_s: f64,
    /// The calls of this run alone, per target (an external sweep's runs; absent in older
    /// runs): what makes each run of a size its own point in the fits and compares.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub spans: Vec<InvocationSpan>,
    /// Processes of its tree still running when it exited: what they did afterwards counts
    /// toward whatever ran next.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub outlived: u64,
}

fn is_zero(v: &u64) -> bool {
    *v == 0
}

fn is_zero_f(v: &f64) -> bool {
    *v == 0.0
}

impl Default for InvocationSpan {
    fn default() -> Self {
        InvocationSpan {
            target: String::new(),
            case: command_case(),
            calls: 0,
            untimed: 0,
            wall: Dist::default(),
            oncpu: Dist::default(),
        }
    }
}

fn command_case() -> u32 {
    workloads::cases::CASE_COMMAND
}

fn is_command_case(c: &u32) -> bool {
    *c == workloads::cases::CASE_COMMAND
}

/// One target's calls during one run of the command (the difference of the kernel's
/// aggregates before and after it). `min_ns`/`max_ns` of its distributions are 0: a
/// difference of histograms does not keep them.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq, Eq)]
pub struct InvocationSpan {
    pub target: String,
    /// The workload case the calls were in: the command's own phase for a user's command
    /// (left out of the file), each case a built-in workload announced for its runs.
    #[serde(default = "command_case", skip_serializing_if = "is_command_case")]
    pub case: u32,
    pub calls: u64,
    pub untimed: u64,
    pub wall: Dist,
    pub oncpu: Dist,
}

impl Invocation {
    pub fn failed(&self) -> bool {
        self.exit != Some(0)
    }
}

/// The tracer's own footprint during a run.
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq)]
pub struct Resources {
    /// From the start of the session to every probe attached (load, resolve, calibrate).
    pub attach_ms: f64,
    /// Of which calibration (plan verification).
    pub verify_ms: f64,
    /// Of which measuring the probes' own cost (`probe_cost` of each target).
    #[serde(default)]
    pub probe_cost_ms: f64,
    /// From the stop decision to every probe detached.
    pub detach_ms: f64,
    /// The tracer's peak resident set (VmHWM) when the run was written.
    pub peak_rss_kib: u64,
    /// Kernel memory locked by the tracer's BPF maps (sum of their `memlock`).
    pub map_memlock_bytes: u64,
    /// Tracepoints were attached as raw tracepoints (the scheduler's, syscalls through
    /// `raw_syscalls`), not as one perf event each.
    #[serde(default)]
    pub raw_tracepoints: bool,
}

#[derive(Clone, Copy, Debug, Serialize, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum RunStatus {
    Complete,
    Partial,
}

#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq, Eq)]
pub struct KernelInfo {
    /// `uname -r`
    pub release: String,
    /// `uname -v`
    pub version: String,
    /// `uname -m`
    pub machine: String,
}

/// How one target was measured on this kernel, and why better plans were not used.
/// The plan target `name` was probed with in a run whose targets are `targets`.
pub fn plan_of<'a>(targets: &'a [TargetReport], name: &str) -> Option<&'a PlanUsed> {
    targets
        .iter()
        .find(|t| t.name == name)
        .and_then(|t| t.plan.as_ref())
}

#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct TargetReport {
    pub name: String,
    /// The plan in use; None when every plan was refused (then `rejected` says why).
    pub plan: Option<PlanUsed>,
    pub rejected: Vec<Rejection>,
    /// Calibration result of the plan in use, when `--verify` ran.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub verification: Option<Verification>,
    /// The plan's own cost per call on this machine, measured at attach (absent in runs
    /// recorded before it was measured, and for targets without a plan).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub probe_cost: Option<ProbeCost>,
}

/// What one call costs the probe of a plan (`probecost::measure_all`): the time it adds to a
/// traced call, measured at attach with the run's own programs and options.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct ProbeCost {
    /// The kind of probe measured: "fentry/fexit", "kprobe/kretprobe",
    /// "tracepoint (syscall enter/exit)" or "tracepoint (count only)".
    pub mechanism: String,
    /// Added ns per traced call; None when it could not be measured (`not_measured` says why).
    pub probe_cost_ns: Option<f64>,
    /// Interquartile range of the per-round estimates, ns per call.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub spread_ns: Option<(f64, f64)>,
    /// How it was measured, in one sentence.
    #[serde(default)]
    pub method: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub not_measured: Option<String>,
}

#[derive(Clone, Debug, Serialize, Deserialize, PartialEq, Eq)]
pub struct PlanUsed {
    /// Short plan name from the plan table, e.g. "fentry", "kprobe", "callers-kprobe",
    /// "syscall-bracket", "page-alloc-count".
    pub plan: String,
    /// Kernel mechanism: "fentry/fexit", "kprobe/kretprobe", "tracepoint", ...
    pub mechanism: String,
    /// Exact attach points, e.g. ["dup_mmap"] or ["syscalls:sys_enter_wait4", ...].
    pub attach_points: Vec<String>,
    /// False when the plan can only count calls (no durations).
    pub timed: bool,
    /// What the plan measures relative to the target, in one sentence.
    pub note: String,
}

#[derive(Clone, Debug, Serialize, Deserialize, PartialEq, Eq)]
pub struct Rejection {
    pub plan: String,
    pub reason: String,
}

#[derive(Clone, Debug, Serialize, Deserialize, PartialEq, Eq)]
pub struct Verification {
    /// What the calibration did, e.g. "fork+exit+wait x16".
    pub workload: String,
    pub expected: String,
    pub observed: u64,
    pub passed: bool,
}

/// Aggregates of one (target, case, N).
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq, Eq)]
pub struct SpanRow {
    pub target: String,
    /// Workload case id (0 = outside any phase).
    pub case: u32,
    pub case_name: String,
    pub n: u64,
    /// All calls, timed or not.
    pub calls: u64,
    /// Calls counted without a duration (count-only plans, recursion beyond the frame stack).
    pub untimed: u64,
    /// Wall time of the timed calls.
    pub wall: Dist,
    /// On-CPU part of the wall time (wall - oncpu = time blocked off-CPU).
    pub oncpu: Dist,
    /// Timed calls made inside an open call of another traced target, by that target (the
    /// innermost one enclosing them): with its calls, how many times per call of it this
    /// one ran. Absent in runs with one target, and before the field existed.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub within: BTreeMap<String, u64>,
    /// Its timed calls by their trips: how many of them closed 1, 2, ... timed calls of other
    /// targets directly inside them (sparse `(bucket, calls)`, buckets as in
    /// `tracer_ebpf::hist_bucket`); the calls with none are the rest. What `within` sums,
    /// per call: calls that run a loop and calls that do not, told apart. Absent in runs
    /// with one target, and before the field existed.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub trips: Vec<(u32, u64)>,
}

/// A distribution of nanosecond values from the in-kernel log-linear histogram.
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq, Eq)]
pub struct Dist {
    pub sum_ns: u64,
    pub min_ns: u64,
    pub max_ns: u64,
    /// Sparse histogram: (bucket index, count), buckets as in `tracer_ebpf::hist_bucket`.
    pub hist: Vec<(u32, u64)>,
}

/// Phases announced by the workload for one (case, N).
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq, Eq)]
pub struct PhaseRow {
    pub case: u32,
    pub case_name: String,
    pub n: u64,
    /// Completed begin/end pairs.
    pub phases: u64,
    /// Operations the workload did inside them (e.g. forks, waits, reads).
    pub ops: u64,
    /// Wall time inside the phases.
    pub wall_ns: u64,
}

/// Errors reading a run directory.
#[derive(Debug, thiserror::Error)]
pub enum ReadError {
    #[error("{path}: {source}")]
    Io { path: PathBuf, source: io::Error },
    #[error("{path} is not a tracer run: {source}")]
    Parse {
        path: PathBuf,
        source: serde_json::Error,
    },
    #[error("{path}: unsupported run format {found:?} (this tracer reads {FORMAT:?})")]
    Format { path: PathBuf, found: String },
    #[error("{path}: {what}")]
    Invalid { path: PathBuf, what: String },
}

impl Run {
    /// A complete run of `targets` on `kernel` with nothing recorded yet (synthetic runs
    /// start from it and fill in what they test).
    pub fn empty(kernel: KernelInfo, targets: Vec<TargetReport>) -> Run {
        Run {
            format: FORMAT.into(),
            status: RunStatus::Complete,
            partial_reason: None,
            tracer_version: "test".into(),
            kernel,
            hostname: "h".into(),
            started_unix: 0.0,
            duration_s: 1.0,
            command: vec![],
            command_exit: Some(0),
            filter: "test".into(),
            sample_freq_hz: 0,
            targets,
            counters: BTreeMap::new(),
            cases: BTreeMap::new(),
            spans: vec![],
            phases: vec![],
            stack_files: vec![],
            workload: None,
            resources: None,
            invocations: Vec::new(),
            discover: false,
            entries: Vec::new(),
            entries_unavailable: None,
            interruptions: None,
        }
    }

    /// Read and validate `DIR/run.json`.
    pub fn read(dir: &Path) -> Result<Run, ReadError> {
        let path = dir.join(RUN_FILE);
        let text = std::fs::read_to_string(&path).map_err(|source| ReadError::Io {
            path: path.clone(),
            source,
        })?;
        Run::from_json(&text, &path)
    }

    pub fn from_json(text: &str, path: &Path) -> Result<Run, ReadError> {
        // Check the format tag before the full parse so an old or foreign file gets a precise error.
        let probe: serde_json::Value =
            serde_json::from_str(text).map_err(|source| ReadError::Parse {
                path: path.to_path_buf(),
                source,
            })?;
        let found = probe
            .get("format")
            .and_then(|f| f.as_str())
            .unwrap_or("")
            .to_string();
        if found != FORMAT {
            return Err(ReadError::Format {
                path: path.to_path_buf(),
                found,
            });
        }
        let run: Run = serde_json::from_value(probe).map_err(|source| ReadError::Parse {
            path: path.to_path_buf(),
            source,
        })?;
        run.validate().map_err(|what| ReadError::Invalid {
            path: path.to_path_buf(),
            what,
        })?;
        Ok(run)
    }

    /// Internal consistency checks that a truncated or hand-edited file would fail.
    pub fn validate(&self) -> Result<(), String> {
        let names: Vec<&str> = self.targets.iter().map(|t| t.name.as_str()).collect();
        for row in &self.spans {
            if !names.contains(&row.target.as_str()) {
                return Err(format!("span row for unknown target {:?}", row.target));
            }
            if row.untimed > row.calls {
                return Err(format!(
                    "{} n={}: untimed calls exceed calls",
                    row.target, row.n
                ));
            }
            for d in [&row.wall, &row.oncpu] {
                if let Some((b, _)) = d.hist.iter().find(|(b, _)| *b >= tracer_ebpf::HIST_BUCKETS) {
                    return Err(format!(
                        "{} n={}: histogram bucket {b} out of range (0..{})",
                        row.target,
                        row.n,
                        tracer_ebpf::HIST_BUCKETS
                    ));
                }
            }
            let hist_total = row
                .wall
                .hist
                .iter()
                .try_fold(0u64, |a, (_, c)| a.checked_add(*c))
                .ok_or_else(|| format!("{} n={}: histogram counts overflow", row.target, row.n))?;
            // A full histogram map drops buckets (counted in aggregate_map_full), never calls.
            let maps_full = self
                .counters
                .get("aggregate_map_full")
                .is_some_and(|&c| c > 0);
            if hist_total > row.calls - row.untimed
                || (hist_total < row.calls - row.untimed && !maps_full)
            {
                return Err(format!(
                    "{} n={}: histogram holds {hist_total} calls, row says {}",
                    row.target,
                    row.n,
                    row.calls - row.untimed
                ));
            }
        }
        for f in &self.stack_files {
            if f.path.contains("..") || f.path.starts_with('/') {
                return Err(format!(
                    "stack file path {:?} escapes the run directory",
                    f.path
                ));
            }
        }
        Ok(())
    }

    pub fn to_json(&self) -> String {
        serde_json::to_string_pretty(self).expect("run data serializes")
    }

    /// The span rows as CSV (header + one line per row).
    pub fn spans_csv(&self) -> String {
        let mut out = String::from(
            "target,case,case_name,n,calls,untimed,wall_sum_ns,wall_min_ns,wall_max_ns,oncpu_sum_ns,oncpu_min_ns,oncpu_max_ns\n",
        );
        for r in &self.spans {
            out.push_str(&format!(
                "{},{},{},{},{},{},{},{},{},{},{},{}\n",
                r.target,
                r.case,
                r.case_name,
                r.n,
                r.calls,
                r.untimed,
                r.wall.sum_ns,
                r.wall.min_ns,
                r.wall.max_ns,
                r.oncpu.sum_ns,
                r.oncpu.min_ns,
                r.oncpu.max_ns
            ));
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wrong_format_is_named() {
        let err = Run::from_json(r#"{"format":"other/9"}"#, Path::new("x/run.json")).unwrap_err();
        assert!(err.to_string().contains("unsupported run format"), "{err}");
        let err = Run::from_json("{", Path::new("x/run.json")).unwrap_err();
        assert!(err.to_string().contains("not a tracer run"), "{err}");
    }
}
