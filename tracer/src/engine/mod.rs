//! The probe engine: loads the eBPF object, configures it, attaches attach-slots to kernel
//! functions and tracepoints, and reads the in-kernel aggregates back.
//!
//! Everything attached belongs to the `Ebpf` object held here: dropping the engine (normal
//! exit, error, or unwinding) detaches every link and unloads every program, so nothing is
//! left attached. The order slots are attached and detached in is kept by `attach`.
//!
//! Layout: `slots` (the attach slots), `attach` (their one attach sequence), `fixed` (programs
//! attached by name), `raw_syscalls` (syscall tracepoints fed by one raw pair),
//! `user_probes` (USDT and phase-function uprobes), `filter` (the traced
//! tasks), `maps` (aggregates and snapshots), `floor` (the benchmark floor), `probe_runs`
//! (what attached probes cost), `errors`.
use std::path::{Path, PathBuf};

use aya::maps::{Array, MapData};
use aya::{Btf, Ebpf, EbpfLoader};
use tracer_ebpf::*;

use crate::kernel::tracefs::{self, EventFormat};

mod attach;
mod errors;
mod filter;
mod fixed;
mod floor;
mod interruptions;
mod maps;
mod probe_runs;
mod raw_syscalls;
mod slots;
mod user_probes;

use errors::map_error;
pub use errors::{AttachFailure, EngineError, error_chain};
pub use filter::Filter;
pub use maps::{Snapshot, merge_stats};
pub use probe_runs::ProbeRuns;
pub use slots::{Slot, TpRole};
pub use user_probes::UsdtAttached;

/// The eBPF object, built by build.rs and embedded.
static OBJECT: &[u8] = aya::include_bytes_aligned!(concat!(env!("OUT_DIR"), "/tracer-ebpf"));

/// Names of every program in the embedded eBPF object, as the kernel reports them (truncated
/// to 15 bytes), for checking from outside that nothing of ours stays loaded.
pub fn program_names() -> Vec<String> {
    let obj = aya_obj::Object::parse(OBJECT).expect("the embedded eBPF object parses");
    let mut names: Vec<String> = obj
        .programs
        .keys()
        .map(|n| n.chars().take(15).collect())
        .collect();
    names.sort();
    names
}

#[derive(Clone, Debug)]
pub struct EngineOptions {
    /// cpu-clock sampling frequency for on-CPU stacks (0 = off).
    pub sample_freq_hz: u64,
    pub caller_stacks: bool,
    pub offcpu_stacks: bool,
    /// Ring-buffer bytes for raw per-call events (0 = raw events off).
    pub raw_events_bytes: u32,
    /// Forward aya-log messages from the probes to the `log` crate.
    pub bpf_log: bool,
    /// Attach the scheduler programs (on/off-CPU split, process-tree following). Only the
    /// overhead floor measurement turns this off.
    pub scheduler: bool,
    /// Phases (distinct (case, N) pairs, plus one row for spans outside phases) the kernel
    /// aggregates can hold. Calls in phases beyond it are lost, counted in
    /// `aggregate_map_full`.
    pub max_phases: u32,
    /// Target indices the run uses (0..targets): the aggregate maps hold this many per
    /// phase.
    pub targets: u32,
    /// Discover mode: keep every sample of the traced tasks and where they block, not only
    /// what happens inside targets (needs `sample_freq_hz` > 0).
    pub discover: bool,
}

/// Default number of aggregate rows: 256 phases of 4 targets lock ~16 MiB (two 7.6 KiB
/// histograms per target and phase).
pub const DEFAULT_MAX_PHASES: u32 = 256;

/// Sets the stack-aggregate map's size instead of `stack_aggregates`' choice: for tests of
/// what happens when it fills, which the real sizes need hours of processes to reach.
pub const STACK_AGGREGATES_ENV: &str = "TRACER_STACK_AGGREGATES";

/// Entries of the stack-aggregate map (`STACKS`). A whole-process profile files every
/// distinct stack per phase: four times the aggregates (a shell script's sweep filled 32768
/// and lost a fifth of its samples). Between the runs of a session the entries of ended
/// processes move out of it ([`Engine::drain_ended_stacks`]), so this bounds one run.
fn stack_aggregates(discover: bool) -> u32 {
    std::env::var(STACK_AGGREGATES_ENV)
        .ok()
        .and_then(|v| v.parse().ok())
        .filter(|&n: &u32| n > 0)
        .unwrap_or(if discover { 131072 } else { 32768 })
}

/// Set (to anything) to pair every traced call through the thread-state map, as before the
/// per-CPU fast path: for benchmarks and tests that compare the two.
pub const NO_FAST_PATH_ENV: &str = "TRACER_NO_FAST_PATH";

impl Default for EngineOptions {
    fn default() -> Self {
        EngineOptions {
            sample_freq_hz: 999,
            caller_stacks: true,
            offcpu_stacks: true,
            raw_events_bytes: 0,
            bpf_log: false,
            scheduler: true,
            max_phases: DEFAULT_MAX_PHASES,
            targets: MAX_TARGETS as u32,
            discover: false,
        }
    }
}

pub struct Engine {
    bpf: Ebpf,
    btf: Option<Btf>,
    btf_error: Option<String>,
    tracefs: PathBuf,
    pub mounted_tracefs: bool,
    config: Config,
    slots: slots::SlotsInUse,
    usdt: user_probes::UsdtLinks,
    fd_tracking: bool,
    logger: Option<aya_log::EbpfLogger<&'static dyn log::Log>>,
    pub options: EngineOptions,
    pub sample_period_ns: u64,
    /// Tracepoint slot -> "category:name" for reporting.
    tp_points: [Option<String>; TP_SLOTS],
    /// The raw syscall pair: attached, refused, or not tried.
    raw: raw_syscalls::RawState,
    /// (syscall number, tracepoint slot) of every slot fed through `SYSCALL_ROUTES`.
    routed: Vec<(u32, usize)>,
    /// Syscall numbers whose route was written (cleared again at detach).
    route_nrs: std::collections::BTreeSet<u32>,
    /// Some tracepoint was attached as a raw tracepoint in this engine's life.
    raw_used: bool,
    /// The raw-syscall floor programs are attached (benchmarks).
    floor_raw: bool,
    /// Discover mode: why kernel entries are not counted (None: counted, or not discover).
    pub entries_unavailable: Option<String>,
    /// Discover mode, with the entries counted: which interruptions are counted with them.
    pub interruptions: Option<crate::rundata::InterruptionCounting>,
    /// The scheduler's programs are the raw tracepoints (else the perf ones, or none).
    scheduler_raw: bool,
    /// Stack aggregates of ended processes, moved out of the kernel's map between runs
    /// (`drain_ended_stacks`).
    drained_stacks: std::collections::HashMap<StackKey, StackVal>,
}

impl Engine {
    /// Load the programs and attach the always-on ones (scheduler, optional sampler).
    pub fn load(options: EngineOptions) -> Result<Engine, EngineError> {
        let (tracefs_root, mounted_tracefs) = tracefs::ensure_mounted()?;
        // aya's loader parses the kernel's BTF for itself (tens of milliseconds); ours, kept
        // for attaching fentry programs, is parsed on another core meanwhile.
        let (parsed, mut loader) = std::thread::scope(|s| {
            let ours = s.spawn(Btf::from_sys_fs);
            let loader = EbpfLoader::new();
            (ours.join(), loader)
        });
        let (btf, btf_error) = match parsed {
            Ok(Ok(b)) => (Some(b), None),
            Ok(Err(e)) => (None, Some(e.to_string())),
            Err(_) => (None, Some("parsing the kernel's BTF panicked".to_string())),
        };
        let ringbuf = if options.raw_events_bytes > 0 {
            options.raw_events_bytes.next_power_of_two().max(4096)
        } else {
            4096
        };
        let log_level: u8 = if options.bpf_log { 0xff } else { 0 };
        loader.btf(btf.as_ref());
        loader.map_max_entries("EVENTS", ringbuf);
        let phases = options.max_phases.max(2);
        let stride = options.targets.clamp(1, MAX_TARGETS as u32);
        loader.map_max_entries("PHASE_ROWS", phases);
        loader.map_max_entries("ROW_OWNER", phases);
        loader.map_max_entries("SPANS", phases * stride);
        loader.map_max_entries("HIST", phases * stride * HIST_KINDS);
        // A call's trips are other targets' calls inside it: none with one target.
        loader.map_max_entries("TRIP_HIST", if stride > 1 { phases * stride } else { 1 });
        // Stack maps are the big consumers of locked memory: size them by what is recorded.
        let stacks_for_calls = options.caller_stacks || options.offcpu_stacks || options.discover;
        loader.map_max_entries("STACK_TRACES", if stacks_for_calls { 16384 } else { 1 });
        loader.map_max_entries("STACKS", stack_aggregates(options.discover));
        loader.map_max_entries(
            "SAMPLED_STACKS",
            match (options.sample_freq_hz > 0, options.discover) {
                // Whole-process profiles have many more distinct stacks than samples taken
                // inside a few targets: fewer collisions, fewer lost stacks.
                (true, true) => 32768,
                (true, false) => 16384,
                (false, _) => 1,
            },
        );
        loader.override_global("AYA_LOG_LEVEL", &log_level, false);
        let mut bpf = loader.load(OBJECT).map_err(EngineError::Load)?;

        let logger = if options.bpf_log {
            match aya_log::EbpfLogger::init_with_logger(&mut bpf, log::logger()) {
                Ok(l) => Some(l),
                Err(e) => {
                    log::warn!("probe log messages unavailable: {e}");
                    None
                }
            }
        } else {
            None
        };

        let sample_period_ns = 1_000_000_000u64
            .checked_div(options.sample_freq_hz)
            .unwrap_or(0);
        let mut engine = Engine {
            bpf,
            btf,
            btf_error,
            tracefs: tracefs_root,
            mounted_tracefs,
            config: Config::default(),
            slots: slots::SlotsInUse::new(),
            usdt: Default::default(),
            fd_tracking: false,
            logger,
            options,
            sample_period_ns,
            tp_points: Default::default(),
            raw: Default::default(),
            routed: Vec::new(),
            route_nrs: Default::default(),
            raw_used: false,
            floor_raw: false,
            entries_unavailable: None,
            interruptions: None,
            scheduler_raw: false,
            drained_stacks: Default::default(),
        };
        engine.init_config()?;
        if engine.options.scheduler {
            engine.attach_scheduler()?;
        }
        if engine.options.discover && engine.options.sample_freq_hz > 0 {
            // Before the sampler, so that its first samples find the syscalls they ran in.
            engine.entries_unavailable = engine.attach_entries();
        }
        if engine.options.sample_freq_hz > 0 {
            engine.attach_sampler()?;
        }
        Ok(engine)
    }

    pub fn tracefs_root(&self) -> &Path {
        &self.tracefs
    }

    pub fn btf(&self) -> Option<&Btf> {
        self.btf.as_ref()
    }

    /// Whether tracepoints were attached as raw tracepoints (see `raw_syscalls`).
    pub fn raw_tracepoints(&self) -> bool {
        self.raw_used
    }

    /// True when the kernel's BTF has function `name` (fentry can attach to it).
    pub fn in_btf(&self, name: &str) -> bool {
        self.btf.as_ref().is_some_and(|b| {
            b.id_by_type_name_kind(name, aya_obj::btf::BtfKind::Func)
                .is_ok()
        })
    }

    pub fn btf_error(&self) -> Option<&str> {
        self.btf_error.as_deref()
    }

    fn init_config(&mut self) -> Result<(), EngineError> {
        let sw = EventFormat::load(&self.tracefs, "sched", "sched_switch")?;
        let fork = EventFormat::load(&self.tracefs, "sched", "sched_process_fork")?;
        let mut c = Config {
            filter: FILTER_FOLLOW,
            max_phases: self.options.max_phases.max(2),
            target_stride: self.options.targets.clamp(1, MAX_TARGETS as u32),
            switch_next_pid_off: sw.offset("next_pid")?,
            // Preemptions are counted where it is there (every kernel since 2.6), not
            // refused without it.
            switch_prev_state_off: sw.offset("prev_state").unwrap_or(NO_OFFSET),
            task_state_off: NO_OFFSET,
            fork_child_pid_off: fork.offset("child_pid")?,
            sample_period_ns: self.sample_period_ns,
            ..Config::default()
        };
        if self.options.caller_stacks {
            c.flags |= FLAG_CALLER_STACKS;
        }
        if self.options.offcpu_stacks {
            c.flags |= FLAG_OFFCPU_STACKS;
        }
        if self.options.sample_freq_hz > 0 {
            c.flags |= FLAG_ONCPU_SAMPLES;
        }
        if self.options.raw_events_bytes > 0 {
            c.flags |= FLAG_RAW_EVENTS;
        }
        if self.options.discover && self.options.sample_freq_hz > 0 {
            c.flags |= FLAG_DISCOVER;
        }
        // The fast path needs sched_switch to move a call that blocks off its CPU's slot.
        if self.options.scheduler && std::env::var_os(NO_FAST_PATH_ENV).is_none() {
            c.flags |= FLAG_FAST_PATH;
        }
        c.default_case = CASE_UNPHASED;
        c.default_row = ROW_UNPHASED;
        if let Some(ns) = crate::kernel::privileges::pid_namespace() {
            c.pidns_dev = ns.dev;
            c.pidns_ino = ns.ino;
        }
        // Syscall tracepoint layouts are stable, but read them anyway when present.
        if let Ok(f) = EventFormat::load(&self.tracefs, "syscalls", "sys_enter_openat") {
            c.openat_filename_off = f.offset("filename").unwrap_or(24);
        }
        if let Ok(f) = EventFormat::load(&self.tracefs, "syscalls", "sys_exit_openat") {
            c.openat_ret_off = f.offset("ret").unwrap_or(16);
        }
        if let Ok(f) = EventFormat::load(&self.tracefs, "syscalls", "sys_enter_close") {
            c.close_fd_off = f.offset("fd").unwrap_or(16);
        }
        self.config = c;
        self.write_config()?;
        self.init_rows()
    }

    /// The raw-event ring buffer (only when raw events were requested), taken out of the
    /// object so it can be polled while the rest of the engine is borrowed.
    pub fn take_events(&mut self) -> Option<aya::maps::RingBuf<MapData>> {
        if self.options.raw_events_bytes == 0 {
            return None;
        }
        let map = self.bpf.take_map("EVENTS")?;
        aya::maps::RingBuf::try_from(map).ok()
    }

    /// Forward queued probe log messages (with -v).
    pub fn flush_logs(&mut self) {
        if let Some(l) = self.logger.as_mut() {
            l.flush();
        }
    }

    fn write_config(&mut self) -> Result<(), EngineError> {
        let map = self.bpf.map_mut("CONFIG").expect("CONFIG map");
        let mut arr: Array<&mut MapData, Config> =
            Array::try_from(map).map_err(map_error("CONFIG"))?;
        arr.set(0, self.config, 0).map_err(map_error("CONFIG"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The list the tests use to find leftovers covers every program, slots included: a
    /// short list would make "nothing loaded" pass vacuously.
    #[test]
    fn program_names_cover_every_program_of_the_object() {
        let names = program_names();
        let fixed = [
            "sched_switch",
            "sampler",
            "phase_begin",
            "floor_kprobe",
            "floor_kretprobe",
            "floor_fexit",
            "floor_tp",
            "floor_tp_timed",
            "floor_kprobe_ti",
            "floor_kretprobe",
            "floor_fentry_ti",
            "floor_fexit_tim",
        ];
        for n in fixed {
            assert!(names.iter().any(|x| x == n), "{n} missing from {names:?}");
        }
        for i in 0..FN_SLOTS {
            for k in ["fentry", "fexit", "kprobe", "kretprobe"] {
                assert!(names.contains(&format!("{k}_{i}")), "{k}_{i}");
            }
        }
        assert!(names.contains(&format!("tp_{}", TP_SLOTS - 1)));
        assert!(names.contains(&format!("uretprobe_{}", UPROBE_SLOTS - 1)));
        assert!(names.iter().all(|n| n.len() <= 15));
    }
}
