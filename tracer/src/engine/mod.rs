//! The probe engine: loads the eBPF object, configures it, attaches attach-slots to kernel
//! functions and tracepoints, and reads the in-kernel aggregates back.
//!
//! Everything attached belongs to the `Ebpf` object held here: dropping the engine (normal
//! exit, error, or unwinding) detaches every link and unloads every program, so nothing is
//! left attached. Attach order matters for pairing: exits are attached before entries and
//! detached after them, so a call in flight at either moment yields at most an unpaired exit
//! (counted and ignored), never an entry without an exit that would leave a thread "inside"
//! a target forever.
use std::collections::{BTreeMap, HashMap as StdHashMap};
use std::path::{Path, PathBuf};

use aya::maps::{Array, HashMap, MapData, PerCpuArray};
use aya::programs::perf_event::{PerfEventConfig, PerfEventScope, SamplePolicy, SoftwareEvent};
use aya::programs::{
    FEntry, FExit, KProbe, PerfEvent, ProgramError, TracePoint, UProbe, uprobe::UProbeScope,
};
use aya::{Btf, Ebpf, EbpfLoader};
use tracer_ebpf::*;

use crate::kernel::tracefs::{self, EventFormat, TracefsError};
use crate::plan::FnMech;

mod user_probes;
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

#[derive(Debug, thiserror::Error)]
pub enum EngineError {
    #[error("loading the eBPF object failed: {0}")]
    Load(#[source] aya::EbpfError),
    #[error(transparent)]
    Tracefs(#[from] TracefsError),
    #[error("{what}: {source}")]
    Program { what: String, source: ProgramError },
    #[error("map {name}: {source}")]
    Map {
        name: &'static str,
        source: aya::maps::MapError,
    },
    #[error("listing online CPUs: {0}")]
    Cpus(std::io::Error),
    #[error("no free {kind} attach slot (at most {max} attach points of this kind per run)")]
    NoSlot { kind: &'static str, max: usize },
    #[error("target index {target} is beyond the {targets} targets the maps were sized for")]
    TargetIndex { target: u32, targets: u32 },
    #[error("{what}: {source}")]
    UserProbe {
        what: String,
        source: std::io::Error,
    },
    #[error(
        "{binary}: {sites} USDT phase probe sites, more than the {max} the tracer's probes have room for"
    )]
    UsdtSlots {
        binary: String,
        sites: usize,
        max: usize,
    },
}

/// Why one attach point could not be used, classified for the plan report.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AttachFailure {
    /// The kernel refused to load or attach (EPERM/EACCES): lockdown, restricted BPF,
    /// missing capability.
    Refused(String),
    /// The function is not in vmlinux BTF (inlined, not built, or no BTF at all).
    NotInBtf(String),
    /// Anything else (EINVAL on attach, a blacklisted function, ...).
    Failed(String),
}

impl AttachFailure {
    pub fn message(&self) -> &str {
        match self {
            AttachFailure::Refused(m) | AttachFailure::NotInBtf(m) | AttachFailure::Failed(m) => m,
        }
    }
}

/// One attach slot in use.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Slot {
    /// fentry_i/fexit_i pair.
    Fentry(usize),
    /// kprobe_i/kretprobe_i pair.
    Kprobe(usize),
    /// tp_i.
    Tracepoint(usize),
    /// uprobe_i/uretprobe_i pair.
    Uprobe(usize),
}

/// What to do at a tracepoint slot.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TpRole {
    Enter,
    Exit,
    Point,
}

/// The traced set of tasks.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Filter {
    /// Every task on the system.
    System,
    /// These processes and everything they fork from now on.
    Follow(Vec<u32>),
    /// Tasks whose comm (first 15 bytes of the name) is this.
    Comm(String),
    /// Tasks in this cgroup v2 (by id = inode number of its directory).
    Cgroup { path: PathBuf, id: u64 },
}

impl Filter {
    pub fn describe(&self) -> String {
        match self {
            Filter::System => "system-wide".into(),
            Filter::Follow(pids) => format!(
                "process tree of pid {}",
                pids.iter()
                    .map(u32::to_string)
                    .collect::<Vec<_>>()
                    .join(",")
            ),
            Filter::Comm(c) => format!("tasks named {c:?}"),
            Filter::Cgroup { path, id } => format!("cgroup {} (id {id})", path.display()),
        }
    }
}

/// What a function's probes did during a counting window (`Engine::probe_runs`).
#[derive(Clone, Debug, PartialEq)]
pub struct ProbeRuns {
    /// Entry-program runs: calls of the function, by every task.
    pub calls: u64,
    pub elapsed: std::time::Duration,
    /// Mean run time of each program, measured by the kernel (None: it never ran).
    pub entry_ns_per_run: Option<f64>,
    pub exit_ns_per_run: Option<f64>,
}

/// Raw aggregates read from the kernel maps.
#[derive(Clone, Debug, Default)]
pub struct Snapshot {
    pub spans: BTreeMap<AggKey, SpanStats>,
    /// (agg, kind) -> bucket -> count
    pub hist: BTreeMap<(AggKey, u32), BTreeMap<u32, u64>>,
    pub stacks: Vec<(StackKey, StackVal)>,
    pub phases: Vec<(PhaseKey, PhaseStats)>,
    pub counters: [u64; counter::COUNT as usize],
    /// Stack id -> instruction pointers (innermost first), for caller and off-CPU stacks.
    pub traces: StdHashMap<i32, Vec<u64>>,
    /// The same for on-CPU samples (their own stack map).
    pub sampled: StdHashMap<i32, Vec<u64>>,
}

pub struct Engine {
    bpf: Ebpf,
    btf: Option<Btf>,
    btf_error: Option<String>,
    tracefs: PathBuf,
    pub mounted_tracefs: bool,
    config: Config,
    fentry_used: [bool; FN_SLOTS],
    kprobe_used: [bool; FN_SLOTS],
    tp_used: [bool; TP_SLOTS],
    uprobe_used: [bool; UPROBE_SLOTS],
    usdt: user_probes::UsdtLinks,
    fd_tracking: bool,
    logger: Option<aya_log::EbpfLogger<&'static dyn log::Log>>,
    pub options: EngineOptions,
    pub sample_period_ns: u64,
    /// Tracepoint slot -> "category:name" for reporting.
    tp_points: [Option<String>; TP_SLOTS],
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
        // Stack maps are the big consumers of locked memory: size them by what is recorded.
        let stacks_for_calls = options.caller_stacks || options.offcpu_stacks || options.discover;
        loader.map_max_entries("STACK_TRACES", if stacks_for_calls { 16384 } else { 1 });
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
            fentry_used: [false; FN_SLOTS],
            kprobe_used: [false; FN_SLOTS],
            tp_used: [false; TP_SLOTS],
            uprobe_used: [false; UPROBE_SLOTS],
            usdt: Default::default(),
            fd_tracking: false,
            logger,
            options,
            sample_period_ns,
            tp_points: Default::default(),
        };
        engine.init_config()?;
        if engine.options.scheduler {
            engine.attach_scheduler()?;
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
        c.default_case = CASE_UNPHASED;
        c.default_row = ROW_UNPHASED;
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

    /// Claim aggregate row 0 for spans outside phases; the probes hand out the others.
    fn init_rows(&mut self) -> Result<(), EngineError> {
        let unphased = PhaseKey {
            case: CASE_UNPHASED,
            _pad: 0,
            n: 0,
        };
        self.own_row(ROW_UNPHASED, unphased)?;
        let mut next: Array<&mut MapData, u64> =
            Array::try_from(self.bpf.map_mut("NEXT_ROW").expect("NEXT_ROW"))
                .map_err(map_error("NEXT_ROW"))?;
        next.set(0, ROW_UNPHASED as u64 + 1, 0)
            .map_err(map_error("NEXT_ROW"))?;
        // Threads may have cached a phase and row from before: make them look again.
        self.bump_phase_gen()
    }

    /// Record that aggregate `row` belongs to phase `key` (both directions, as the probes do).
    fn own_row(&mut self, row: u32, key: PhaseKey) -> Result<(), EngineError> {
        let mut owner: HashMap<&mut MapData, u32, PhaseKey> =
            HashMap::try_from(self.bpf.map_mut("ROW_OWNER").expect("ROW_OWNER"))
                .map_err(map_error("ROW_OWNER"))?;
        owner.insert(row, key, 0).map_err(map_error("ROW_OWNER"))?;
        let mut rows: HashMap<&mut MapData, PhaseKey, u32> =
            HashMap::try_from(self.bpf.map_mut("PHASE_ROWS").expect("PHASE_ROWS"))
                .map_err(map_error("PHASE_ROWS"))?;
        rows.insert(key, row, 0).map_err(map_error("PHASE_ROWS"))
    }

    /// The aggregate rows in use and the phase each belongs to (a phase may own more than
    /// one row when two CPUs raced to give it one; its rows are summed).
    fn rows(&self) -> Result<Vec<(u32, PhaseKey)>, EngineError> {
        let m: HashMap<&MapData, u32, PhaseKey> =
            HashMap::try_from(self.bpf.map("ROW_OWNER").expect("ROW_OWNER"))
                .map_err(map_error("ROW_OWNER"))?;
        let mut rows = Vec::new();
        for item in m.iter() {
            rows.push(item.map_err(map_error("ROW_OWNER"))?);
        }
        rows.sort_unstable_by_key(|r| r.0);
        Ok(rows)
    }

    /// Every (row, target) aggregate that saw a call, with its `SPANS` element.
    fn span_elements(&self) -> Result<Vec<(u32, AggKey, SpanStats)>, EngineError> {
        let stride = self.config.target_stride;
        let m: PerCpuArray<&MapData, SpanStats> =
            PerCpuArray::try_from(self.bpf.map("SPANS").expect("SPANS"))
                .map_err(map_error("SPANS"))?;
        let mut out = Vec::new();
        for (row, phase) in self.rows()? {
            for target in 0..stride {
                let ix = span_index(row, stride, target);
                let per_cpu = m.get(&ix, 0).map_err(map_error("SPANS"))?;
                let stats = merge_stats(per_cpu.iter());
                if stats.calls > 0 {
                    let key = AggKey {
                        target,
                        case: phase.case,
                        n: phase.n,
                    };
                    out.push((ix, key, stats));
                }
            }
        }
        Ok(out)
    }

    fn write_config(&mut self) -> Result<(), EngineError> {
        let map = self.bpf.map_mut("CONFIG").expect("CONFIG map");
        let mut arr: Array<&mut MapData, Config> =
            Array::try_from(map).map_err(map_error("CONFIG"))?;
        arr.set(0, self.config, 0).map_err(map_error("CONFIG"))
    }

    fn tracepoint(&mut self, prog: &str, category: &str, name: &str) -> Result<(), EngineError> {
        let what = format!("attaching {prog} to {category}:{name}");
        let p: &mut TracePoint = self
            .bpf
            .program_mut(prog)
            .expect("program exists")
            .try_into()
            .map_err(|source| EngineError::Program {
                what: what.clone(),
                source,
            })?;
        // One program may serve several tracepoints (the floor's): load it once.
        if p.fd().is_err() {
            p.load().map_err(|source| EngineError::Program {
                what: what.clone(),
                source,
            })?;
        }
        p.attach(category, name)
            .map_err(|source| EngineError::Program { what, source })?;
        Ok(())
    }

    fn attach_scheduler(&mut self) -> Result<(), EngineError> {
        self.tracepoint("sched_switch", "sched", "sched_switch")?;
        self.tracepoint("sched_fork", "sched", "sched_process_fork")?;
        self.tracepoint("sched_exit", "sched", "sched_process_exit")?;
        Ok(())
    }

    fn attach_sampler(&mut self) -> Result<(), EngineError> {
        let cpus = aya::util::online_cpus().map_err(|(_, e)| EngineError::Cpus(e))?;
        let period = self.sample_period_ns;
        let p: &mut PerfEvent = self
            .bpf
            .program_mut("sampler")
            .expect("sampler")
            .try_into()
            .map_err(|source| EngineError::Program {
                what: "sampler".into(),
                source,
            })?;
        p.load().map_err(|source| EngineError::Program {
            what: "loading sampler".into(),
            source,
        })?;
        for cpu in cpus {
            p.attach(
                PerfEventConfig::Software(SoftwareEvent::CpuClock),
                PerfEventScope::AllProcessesOneCpu { cpu },
                SamplePolicy::Period(period),
                false,
            )
            .map_err(|source| EngineError::Program {
                what: format!("opening the cpu-clock sampler on CPU {cpu}"),
                source,
            })?;
        }
        Ok(())
    }

    /// Set which tasks are traced.
    pub fn set_filter(&mut self, filter: &Filter) -> Result<(), EngineError> {
        self.config.filter = match filter {
            Filter::System => FILTER_ALL,
            Filter::Follow(pids) => {
                for &pid in pids {
                    self.follow(pid)?;
                }
                // The last pid is the command's (or the --pid given): the hot one.
                self.config.root_tgid = pids.last().copied().unwrap_or(0);
                FILTER_FOLLOW
            }
            Filter::Comm(c) => {
                let mut comm = [0u8; 16];
                for (d, s) in comm.iter_mut().zip(c.bytes().take(15)) {
                    *d = s;
                }
                self.config.comm = comm;
                FILTER_COMM
            }
            Filter::Cgroup { id, .. } => {
                self.config.cgroup_id = *id;
                FILTER_CGROUP
            }
        };
        self.write_config()
    }

    /// Add a process (and, through sched_process_fork, its future children) to the traced set.
    pub fn follow(&mut self, pid: u32) -> Result<(), EngineError> {
        let map = self.bpf.map_mut("FOLLOW").expect("FOLLOW map");
        let mut m: HashMap<&mut MapData, u32, u8> =
            HashMap::try_from(map).map_err(map_error("FOLLOW"))?;
        m.insert(pid, 1, 0).map_err(map_error("FOLLOW"))
    }

    pub fn unfollow(&mut self, pid: u32) {
        if let Some(map) = self.bpf.map_mut("FOLLOW")
            && let Ok(mut m) = HashMap::<&mut MapData, u32, u8>::try_from(map)
        {
            let _ = m.remove(&pid);
        }
    }

    /// The phase process `pid` is in, if any.
    pub fn current_phase(&self, pid: u32) -> Option<CurrentPhase> {
        let map = self.bpf.map("CURRENT_PHASE")?;
        let m = HashMap::<&MapData, u32, CurrentPhase>::try_from(map).ok()?;
        m.get(&pid, 0).ok()
    }

    /// Pids currently followed (the traced process tree).
    pub fn followed(&self) -> Vec<u32> {
        let Some(map) = self.bpf.map("FOLLOW") else {
            return Vec::new();
        };
        let Ok(m) = HashMap::<&MapData, u32, u8>::try_from(map) else {
            return Vec::new();
        };
        m.keys().filter_map(Result::ok).collect()
    }

    fn set_slot(&mut self, index: u32, conf: SlotConf) -> Result<(), EngineError> {
        if conf.role != ROLE_NONE && conf.target >= self.config.target_stride {
            return Err(EngineError::TargetIndex {
                target: conf.target,
                targets: self.config.target_stride,
            });
        }
        let map = self.bpf.map_mut("SLOTS").expect("SLOTS map");
        let mut arr: Array<&mut MapData, SlotConf> =
            Array::try_from(map).map_err(map_error("SLOTS"))?;
        arr.set(index, conf, 0).map_err(map_error("SLOTS"))
    }

    /// Time calls of kernel function `symbol` as target `target`.
    pub fn attach_function(
        &mut self,
        target: u32,
        mech: FnMech,
        symbol: &str,
    ) -> Result<Result<Slot, AttachFailure>, EngineError> {
        match mech {
            FnMech::Fentry => self.attach_fentry(target, symbol),
            FnMech::Kprobe => self.attach_kprobe(target, symbol),
        }
    }

    fn attach_fentry(
        &mut self,
        target: u32,
        symbol: &str,
    ) -> Result<Result<Slot, AttachFailure>, EngineError> {
        let Some(btf) = self.btf.as_ref() else {
            return Ok(Err(AttachFailure::NotInBtf(format!(
                "no kernel BTF ({})",
                self.btf_error
                    .as_deref()
                    .unwrap_or("/sys/kernel/btf/vmlinux missing")
            ))));
        };
        if btf
            .id_by_type_name_kind(symbol, aya_obj_btf_func_kind())
            .is_err()
        {
            return Ok(Err(AttachFailure::NotInBtf(format!(
                "{symbol} is not in the kernel's BTF (inlined or not built)"
            ))));
        }
        let Some(i) = self.fentry_used.iter().position(|u| !u) else {
            return Err(EngineError::NoSlot {
                kind: "fentry",
                max: FN_SLOTS,
            });
        };
        self.set_slot(
            i as u32,
            SlotConf {
                target,
                role: ROLE_ENTER,
                flags: 0,
                arg_off: 0,
            },
        )?;
        let btf = self.btf.as_ref().expect("checked above");
        let exit_name = format!("fexit_{i}");
        let entry_name = format!("fentry_{i}");
        // Exit first: see the module comment.
        let res = (|| -> Result<(), ProgramError> {
            let p: &mut FExit = self
                .bpf
                .program_mut(&exit_name)
                .expect("fexit slot")
                .try_into()?;
            p.load(symbol, btf)?;
            p.attach()?;
            let p: &mut FEntry = self
                .bpf
                .program_mut(&entry_name)
                .expect("fentry slot")
                .try_into()?;
            p.load(symbol, btf)?;
            p.attach()?;
            Ok(())
        })();
        match res {
            Ok(()) => {
                self.fentry_used[i] = true;
                Ok(Ok(Slot::Fentry(i)))
            }
            Err(e) => {
                self.unload_prog(&entry_name);
                self.unload_prog(&exit_name);
                self.set_slot(i as u32, SlotConf::default())?;
                Ok(Err(classify(&format!("fentry/fexit on {symbol}"), &e)))
            }
        }
    }

    fn attach_kprobe(
        &mut self,
        target: u32,
        symbol: &str,
    ) -> Result<Result<Slot, AttachFailure>, EngineError> {
        let Some(i) = self.kprobe_used.iter().position(|u| !u) else {
            return Err(EngineError::NoSlot {
                kind: "kprobe",
                max: FN_SLOTS,
            });
        };
        self.set_slot(
            (FN_SLOTS + i) as u32,
            SlotConf {
                target,
                role: ROLE_ENTER,
                flags: 0,
                arg_off: 0,
            },
        )?;
        let exit_name = format!("kretprobe_{i}");
        let entry_name = format!("kprobe_{i}");
        let res = (|| -> Result<(), ProgramError> {
            let p: &mut KProbe = self
                .bpf
                .program_mut(&exit_name)
                .expect("kretprobe")
                .try_into()?;
            p.load()?;
            p.attach(symbol, 0)?;
            let p: &mut KProbe = self
                .bpf
                .program_mut(&entry_name)
                .expect("kprobe")
                .try_into()?;
            p.load()?;
            p.attach(symbol, 0)?;
            Ok(())
        })();
        match res {
            Ok(()) => {
                self.kprobe_used[i] = true;
                Ok(Ok(Slot::Kprobe(i)))
            }
            Err(e) => {
                self.unload_prog(&entry_name);
                self.unload_prog(&exit_name);
                self.set_slot((FN_SLOTS + i) as u32, SlotConf::default())?;
                Ok(Err(classify(&format!("kprobe/kretprobe on {symbol}"), &e)))
            }
        }
    }

    /// Use tracepoint `category:name` as `role` of target `target`. With `tracked_fd_off`,
    /// enters only when the fd at that record offset was opened from the configured prefix.
    pub fn attach_tracepoint(
        &mut self,
        target: u32,
        role: TpRole,
        category: &str,
        name: &str,
        tracked_fd_off: Option<u32>,
    ) -> Result<Result<Slot, AttachFailure>, EngineError> {
        if !tracefs::event_exists(&self.tracefs, category, name) {
            return Ok(Err(AttachFailure::Failed(format!(
                "tracepoint {category}:{name} does not exist on this kernel"
            ))));
        }
        let Some(j) = self.tp_used.iter().position(|u| !u) else {
            return Err(EngineError::NoSlot {
                kind: "tracepoint",
                max: TP_SLOTS,
            });
        };
        let (flags, arg_off) = match tracked_fd_off {
            Some(off) => (SLOT_FLAG_TRACKED_FD, off),
            None => (0, 0),
        };
        let role = match role {
            TpRole::Enter => ROLE_ENTER,
            TpRole::Exit => ROLE_EXIT,
            TpRole::Point => ROLE_POINT,
        };
        self.set_slot(
            SLOT_BASE_TP + j as u32,
            SlotConf {
                target,
                role,
                flags,
                arg_off,
            },
        )?;
        let prog = format!("tp_{j}");
        let res = (|| -> Result<(), ProgramError> {
            let p: &mut TracePoint = self.bpf.program_mut(&prog).expect("tp slot").try_into()?;
            p.load()?;
            p.attach(category, name)?;
            Ok(())
        })();
        match res {
            Ok(()) => {
                self.tp_used[j] = true;
                self.tp_points[j] = Some(format!("{category}:{name}"));
                Ok(Ok(Slot::Tracepoint(j)))
            }
            Err(e) => {
                self.unload_prog(&prog);
                self.set_slot(SLOT_BASE_TP + j as u32, SlotConf::default())?;
                Ok(Err(classify(&format!("tracepoint {category}:{name}"), &e)))
            }
        }
    }

    /// Time calls of the user-space function `symbol` in `binary` as target `target`.
    pub fn attach_user_function(
        &mut self,
        target: u32,
        binary: &Path,
        symbol: &str,
    ) -> Result<Result<Slot, AttachFailure>, EngineError> {
        let Some(i) = self.uprobe_used.iter().position(|u| !u) else {
            return Err(EngineError::NoSlot {
                kind: "uprobe",
                max: UPROBE_SLOTS,
            });
        };
        self.set_slot(
            SLOT_BASE_UPROBE + i as u32,
            SlotConf {
                target,
                role: ROLE_ENTER,
                flags: 0,
                arg_off: 0,
            },
        )?;
        let exit_name = format!("uretprobe_{i}");
        let entry_name = format!("uprobe_{i}");
        let res = (|| -> Result<(), ProgramError> {
            for name in [&exit_name, &entry_name] {
                let p: &mut UProbe = self
                    .bpf
                    .program_mut(name)
                    .expect("uprobe slot")
                    .try_into()?;
                p.load()?;
                p.attach(symbol, binary, UProbeScope::AllProcesses)?;
            }
            Ok(())
        })();
        match res {
            Ok(()) => {
                self.uprobe_used[i] = true;
                Ok(Ok(Slot::Uprobe(i)))
            }
            Err(e) => {
                self.unload_prog(&entry_name);
                self.unload_prog(&exit_name);
                self.set_slot(SLOT_BASE_UPROBE + i as u32, SlotConf::default())?;
                Ok(Err(classify(
                    &format!("uprobe on {}:{symbol}", binary.display()),
                    &e,
                )))
            }
        }
    }

    /// Track fds of files opened under `prefix` (for fd-filtered syscall brackets).
    pub fn enable_fd_tracking(
        &mut self,
        prefix: &str,
    ) -> Result<Result<(), AttachFailure>, EngineError> {
        if prefix.len() > 32 || prefix.is_empty() {
            return Ok(Err(AttachFailure::Failed(format!(
                "path prefix {prefix:?} must be 1..=32 bytes"
            ))));
        }
        let mut p = [0u8; 32];
        p[..prefix.len()].copy_from_slice(prefix.as_bytes());
        self.config.path_prefix = p;
        self.config.path_prefix_len = prefix.len() as u32;
        self.write_config()?;
        if self.fd_tracking {
            return Ok(Ok(()));
        }
        for (prog, name) in [
            ("openat_exit", "sys_exit_openat"),
            ("openat_enter", "sys_enter_openat"),
            ("close_enter", "sys_enter_close"),
        ] {
            if !tracefs::event_exists(&self.tracefs, "syscalls", name) {
                return Ok(Err(AttachFailure::Failed(format!(
                    "tracepoint syscalls:{name} does not exist on this kernel"
                ))));
            }
            if let Err(e) = self.tracepoint(prog, "syscalls", name) {
                return Ok(Err(AttachFailure::Failed(e.to_string())));
            }
        }
        self.fd_tracking = true;
        Ok(Ok(()))
    }

    /// Detach and free a slot. Entries are detached before exits (see the module comment).
    pub fn release(&mut self, slot: &Slot) {
        let (progs, index): (Vec<String>, usize) = match *slot {
            Slot::Fentry(i) => {
                self.fentry_used[i] = false;
                (vec![format!("fentry_{i}"), format!("fexit_{i}")], i)
            }
            Slot::Kprobe(i) => {
                self.kprobe_used[i] = false;
                (
                    vec![format!("kprobe_{i}"), format!("kretprobe_{i}")],
                    FN_SLOTS + i,
                )
            }
            Slot::Tracepoint(j) => {
                self.tp_used[j] = false;
                self.tp_points[j] = None;
                (vec![format!("tp_{j}")], SLOT_BASE_TP as usize + j)
            }
            Slot::Uprobe(i) => {
                self.uprobe_used[i] = false;
                (
                    vec![format!("uprobe_{i}"), format!("uretprobe_{i}")],
                    SLOT_BASE_UPROBE as usize + i,
                )
            }
        };
        for p in &progs {
            self.unload_prog(p);
        }
        let _ = self.set_slot(index as u32, SlotConf::default());
    }

    /// Stop slots from recording without detaching them now: their configuration is cleared
    /// (the programs return at once) and they are closed with everything else by
    /// `detach_all` or the engine's Drop. Closing a tracepoint waits for an RCU grace period
    /// (70-90 ms here) that would add to attach time; at the end it overlaps with the others'.
    pub fn retire(&mut self, slots: &[Slot]) {
        for s in slots {
            let index = match *s {
                Slot::Fentry(i) => i,
                Slot::Kprobe(i) => FN_SLOTS + i,
                Slot::Tracepoint(j) => {
                    self.tp_points[j] = None;
                    SLOT_BASE_TP as usize + j
                }
                Slot::Uprobe(i) => SLOT_BASE_UPROBE as usize + i,
            };
            let _ = self.set_slot(index as u32, SlotConf::default());
        }
    }

    fn unload_prog(&mut self, name: &str) {
        if let Some(p) = self.bpf.program_mut(name) {
            unload(p);
        }
    }

    /// The uprobe program `prog` of the object, loaded (once; later attaches reuse it).
    /// `what` names the attach for errors.
    fn loaded_uprobe(&mut self, prog: &str, what: &str) -> Result<&mut UProbe, EngineError> {
        let p: &mut UProbe = self
            .bpf
            .program_mut(prog)
            .unwrap_or_else(|| panic!("uprobe program {prog} is in the object"))
            .try_into()
            .map_err(|source| EngineError::Program {
                what: what.to_string(),
                source,
            })?;
        if p.fd().is_err() {
            p.load().map_err(|source| EngineError::Program {
                what: what.to_string(),
                source,
            })?;
        }
        Ok(p)
    }

    /// Attach the phase-marker uprobes to `binary` if it exports the marker symbols.
    /// Returns false (and attaches nothing) when the binary does not speak the protocol.
    pub fn attach_phase_markers(&mut self, binary: &Path) -> Result<bool, EngineError> {
        if !crate::symbols::elf_has_symbols(
            binary,
            &[
                workloads::marker::BEGIN_SYMBOL,
                workloads::marker::END_SYMBOL,
            ],
        ) {
            return Ok(false);
        }
        for (prog, sym) in [
            ("phase_begin", workloads::marker::BEGIN_SYMBOL),
            ("phase_end", workloads::marker::END_SYMBOL),
        ] {
            let what = format!("uprobe {prog} on {}:{sym}", binary.display());
            let p = self.loaded_uprobe(prog, &what)?;
            p.attach(sym, binary, UProbeScope::AllProcesses)
                .map_err(|source| EngineError::Program { what, source })?;
        }
        Ok(true)
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

    /// Detach and unload every program. Maps stay readable.
    pub fn detach_all(&mut self) {
        // USDT perf events hold their programs: closed first, like any entry side.
        self.usdt.close();
        // Entry-side programs first, so in-flight calls can still exit.
        let exit_side = |n: &str| {
            n.starts_with("fexit_")
                || n.starts_with("kretprobe_")
                || n.starts_with("uretprobe_")
                || n.starts_with("sched_")
        };
        let (mut exits, mut entries): (Vec<_>, Vec<_>) = self
            .bpf
            .programs_mut()
            .partition(|(name, _)| exit_side(name));
        // Closing a tracepoint's perf event waits for an RCU grace period (tens of
        // milliseconds), one after the other when done in one thread: ~1.5 s for the default
        // targets. Programs are independent, so each group is closed from several threads.
        for group in [&mut entries, &mut exits] {
            let threads = group.len().clamp(1, DETACH_THREADS);
            let mut shares: Vec<Vec<&mut aya::programs::Program>> =
                (0..threads).map(|_| Vec::new()).collect();
            for (i, (_, prog)) in group.drain(..).enumerate() {
                shares[i % threads].push(prog);
            }
            std::thread::scope(|s| {
                for share in shares {
                    s.spawn(move || {
                        for prog in share {
                            unload(prog);
                        }
                    });
                }
            });
        }
        self.fentry_used = [false; FN_SLOTS];
        self.kprobe_used = [false; FN_SLOTS];
        self.tp_used = [false; TP_SLOTS];
        self.uprobe_used = [false; UPROBE_SLOTS];
        self.fd_tracking = false;
    }

    /// Runs of the programs of `slot` for `window`, system-wide, with what they cost: the
    /// kernel counts every run and its time while BPF statistics are enabled (5.8+). An entry
    /// program runs for every call of its function by any task (the task filter is applied
    /// inside it), so its run count is the function's call rate. Nothing is recorded and no
    /// filter changes: this is exactly what the attached probes cost everyone else.
    /// The counts are read every 10 ms and the window ends early once `enough` says so: a
    /// probe on a very hot function must not stay attached longer than it takes to see that
    /// it is.
    pub fn probe_runs(
        &self,
        slot: &Slot,
        window: std::time::Duration,
        mut enough: impl FnMut(&ProbeRuns) -> bool,
    ) -> Result<ProbeRuns, String> {
        let names = match *slot {
            Slot::Fentry(i) => [format!("fentry_{i}"), format!("fexit_{i}")],
            Slot::Kprobe(i) => [format!("kprobe_{i}"), format!("kretprobe_{i}")],
            _ => return Err("only function probes are counted".into()),
        };
        let stats = aya::sys::enable_stats(aya::sys::Stats::RunTime)
            .map_err(|e| format!("enabling BPF run-time statistics: {e}"))?;
        let read = |name: &str| -> Result<(u64, u64), String> {
            let info = self
                .bpf
                .program(name)
                .ok_or_else(|| format!("no program {name}"))?
                .info()
                .map_err(|e| format!("{name}: {e}"))?;
            Ok((info.run_count(), info.run_time().as_nanos() as u64))
        };
        let before = [read(&names[0])?, read(&names[1])?];
        let t0 = std::time::Instant::now();
        let step = std::time::Duration::from_millis(10);
        loop {
            std::thread::sleep(step.min(window.saturating_sub(t0.elapsed())));
            let after = [read(&names[0])?, read(&names[1])?];
            let elapsed = t0.elapsed();
            let d = |i: usize| {
                (
                    after[i].0.saturating_sub(before[i].0),
                    after[i].1.saturating_sub(before[i].1),
                )
            };
            let ((entry_runs, entry_ns), (exit_runs, exit_ns)) = (d(0), d(1));
            let runs = ProbeRuns {
                calls: entry_runs,
                elapsed,
                entry_ns_per_run: (entry_runs > 0).then(|| entry_ns as f64 / entry_runs as f64),
                exit_ns_per_run: (exit_runs > 0).then(|| exit_ns as f64 / exit_runs as f64),
            };
            if elapsed >= window || enough(&runs) {
                drop(stats);
                return Ok(runs);
            }
        }
    }

    /// Sum of calls per target over all phases (for progress and calibration).
    pub fn calls_per_target(&self) -> Result<[u64; MAX_TARGETS], EngineError> {
        let mut out = [0u64; MAX_TARGETS];
        for (_, k, stats) in self.span_elements()? {
            if let Some(slot) = out.get_mut(k.target as usize) {
                *slot += stats.calls;
            }
        }
        Ok(out)
    }

    /// Read every aggregate.
    pub fn snapshot(&self) -> Result<Snapshot, EngineError> {
        let mut snap = Snapshot::default();

        let hist: Array<&MapData, HistRow> =
            Array::try_from(self.bpf.map("HIST").expect("HIST")).map_err(map_error("HIST"))?;
        for (ix, key, stats) in self.span_elements()? {
            let merged = snap.spans.entry(key).or_default();
            *merged = merge_stats([*merged, stats].iter());
            for kind in [HIST_WALL, HIST_ONCPU] {
                let row = hist
                    .get(&hist_index(ix, kind), 0)
                    .map_err(map_error("HIST"))?;
                let dest = snap.hist.entry((key, kind)).or_default();
                for (bucket, &count) in row.iter().enumerate() {
                    if count > 0 {
                        *dest.entry(bucket as u32).or_default() += count;
                    }
                }
            }
        }

        let m: HashMap<&MapData, StackKey, StackVal> =
            HashMap::try_from(self.bpf.map("STACKS").expect("STACKS"))
                .map_err(map_error("STACKS"))?;
        for item in m.iter() {
            snap.stacks.push(item.map_err(map_error("STACKS"))?);
        }

        let m: HashMap<&MapData, PhaseKey, PhaseStats> =
            HashMap::try_from(self.bpf.map("PHASE_STATS").expect("PHASE_STATS"))
                .map_err(map_error("PHASE_STATS"))?;
        for item in m.iter() {
            snap.phases.push(item.map_err(map_error("PHASE_STATS"))?);
        }

        let m: PerCpuArray<&MapData, u64> =
            PerCpuArray::try_from(self.bpf.map("COUNTERS").expect("COUNTERS"))
                .map_err(map_error("COUNTERS"))?;
        for (i, c) in snap.counters.iter_mut().enumerate() {
            let v = m.get(&(i as u32), 0).map_err(map_error("COUNTERS"))?;
            *c = v.iter().sum();
        }

        for (map, oncpu) in [("STACK_TRACES", false), ("SAMPLED_STACKS", true)] {
            let traces: HashMap<&MapData, u32, StackBuf> =
                HashMap::try_from(self.bpf.map(map).expect("stack map")).map_err(map_error(map))?;
            let mut wanted: Vec<i32> = Vec::new();
            for (k, _) in &snap.stacks {
                if is_sampled_kind(k.kind) == oncpu {
                    wanted.extend([k.kstack, k.ustack].into_iter().filter(|&id| id >= 0));
                }
            }
            wanted.sort_unstable();
            wanted.dedup();
            let dest = if oncpu {
                &mut snap.sampled
            } else {
                &mut snap.traces
            };
            for id in wanted {
                // A missing id renders as a lost-stack frame rather than failing the run.
                if let Ok(t) = traces.get(&(id as u32), 0) {
                    dest.insert(
                        id,
                        t.ips.iter().copied().take_while(|&ip| ip != 0).collect(),
                    );
                }
            }
        }
        Ok(snap)
    }

    /// Make `(case, n)` the phase of every traced process that announces none itself (one
    /// run of an external sweep's command), claiming its aggregate row as the phase markers
    /// would. Call only while no traced process runs: the probes claim rows too.
    pub fn set_default_phase(&mut self, case: u32, n: u64) -> Result<(), EngineError> {
        let key = PhaseKey { case, _pad: 0, n };
        let row = self.claim_row(key)?;
        self.config.default_case = case;
        self.config.default_n = n;
        self.config.default_row = row;
        self.write_config()?;
        self.bump_phase_gen()
    }

    /// Back to unphased for processes without a phase of their own.
    pub fn clear_default_phase(&mut self) -> Result<(), EngineError> {
        self.config.default_case = CASE_UNPHASED;
        self.config.default_n = 0;
        self.config.default_row = ROW_UNPHASED;
        self.write_config()?;
        self.bump_phase_gen()
    }

    /// The row of a phase: its own if it has one, else the next free one (`NO_ROW` when
    /// all are taken; the calls are then counted as lost, as for marker phases).
    fn claim_row(&mut self, key: PhaseKey) -> Result<u32, EngineError> {
        {
            let rows: HashMap<&MapData, PhaseKey, u32> =
                HashMap::try_from(self.bpf.map("PHASE_ROWS").expect("PHASE_ROWS"))
                    .map_err(map_error("PHASE_ROWS"))?;
            if let Ok(r) = rows.get(&key, 0) {
                return Ok(r);
            }
        }
        let mut next: Array<&mut MapData, u64> =
            Array::try_from(self.bpf.map_mut("NEXT_ROW").expect("NEXT_ROW"))
                .map_err(map_error("NEXT_ROW"))?;
        let row = next.get(&0, 0).map_err(map_error("NEXT_ROW"))?;
        if row >= self.config.max_phases as u64 {
            return Ok(NO_ROW);
        }
        next.set(0, row + 1, 0).map_err(map_error("NEXT_ROW"))?;
        let row = row as u32;
        self.own_row(row, key)?;
        Ok(row)
    }

    fn bump_phase_gen(&mut self) -> Result<(), EngineError> {
        let mut generation: Array<&mut MapData, u64> =
            Array::try_from(self.bpf.map_mut("PHASE_GEN").expect("PHASE_GEN"))
                .map_err(map_error("PHASE_GEN"))?;
        let g = generation.get(&0, 0).map_err(map_error("PHASE_GEN"))?;
        generation
            .set(0, g.wrapping_add(1), 0)
            .map_err(map_error("PHASE_GEN"))
    }

    /// Add one finished run of an external command to its phase's statistics (what the
    /// end marker does for workloads that announce their phases).
    pub fn add_phase_stats(
        &mut self,
        case: u32,
        n: u64,
        ops: u64,
        wall_ns: u64,
    ) -> Result<(), EngineError> {
        let key = PhaseKey { case, _pad: 0, n };
        let mut m: HashMap<&mut MapData, PhaseKey, PhaseStats> =
            HashMap::try_from(self.bpf.map_mut("PHASE_STATS").expect("PHASE_STATS"))
                .map_err(map_error("PHASE_STATS"))?;
        let mut v = m.get(&key, 0).unwrap_or_default();
        v.phases += 1;
        v.ops += ops;
        v.wall_ns += wall_ns;
        m.insert(key, v, 0).map_err(map_error("PHASE_STATS"))
    }

    /// Forget all aggregates (after calibration, before the real run).
    pub fn clear(&mut self) -> Result<(), EngineError> {
        fn clear_hash<K: aya::Pod, V: aya::Pod>(
            bpf: &mut Ebpf,
            name: &'static str,
        ) -> Result<(), EngineError> {
            let mut m: HashMap<&mut MapData, K, V> =
                HashMap::try_from(bpf.map_mut(name).expect("map"))
                    .map_err(|source| EngineError::Map { name, source })?;
            let keys: Vec<K> = m.keys().filter_map(Result::ok).collect();
            for k in keys {
                let _ = m.remove(&k);
            }
            Ok(())
        }
        let ncpu = aya::util::nr_cpus().map_err(|(_, e)| EngineError::Cpus(e))?;
        let stride = self.config.target_stride;
        let used = self.rows()?;
        {
            let mut spans: PerCpuArray<&mut MapData, SpanStats> =
                PerCpuArray::try_from(self.bpf.map_mut("SPANS").expect("SPANS"))
                    .map_err(map_error("SPANS"))?;
            for &(row, _) in &used {
                for target in 0..stride {
                    let zeros = aya::maps::PerCpuValues::try_from(vec![SpanStats::default(); ncpu])
                        .map_err(EngineError::Cpus)?;
                    spans
                        .set(span_index(row, stride, target), zeros, 0)
                        .map_err(map_error("SPANS"))?;
                }
            }
        }
        {
            let mut hist: Array<&mut MapData, HistRow> =
                Array::try_from(self.bpf.map_mut("HIST").expect("HIST"))
                    .map_err(map_error("HIST"))?;
            let zero: HistRow = [0; HIST_BUCKETS as usize];
            for &(row, _) in &used {
                for target in 0..stride {
                    for kind in [HIST_WALL, HIST_ONCPU] {
                        let ix = hist_index(span_index(row, stride, target), kind);
                        hist.set(ix, zero, 0).map_err(map_error("HIST"))?;
                    }
                }
            }
        }
        clear_hash::<StackKey, StackVal>(&mut self.bpf, "STACKS")?;
        clear_hash::<PhaseKey, PhaseStats>(&mut self.bpf, "PHASE_STATS")?;
        clear_hash::<u32, CurrentPhase>(&mut self.bpf, "CURRENT_PHASE")?;
        clear_hash::<u32, PhaseKey>(&mut self.bpf, "ROW_OWNER")?;
        clear_hash::<PhaseKey, u32>(&mut self.bpf, "PHASE_ROWS")?;
        clear_hash::<u32, OffStart>(&mut self.bpf, "OFF_START")?;
        self.init_rows()?;
        clear_hash::<u32, StackBuf>(&mut self.bpf, "STACK_TRACES")?;
        clear_hash::<u32, StackBuf>(&mut self.bpf, "SAMPLED_STACKS")?;
        let mut m: PerCpuArray<&mut MapData, u64> =
            PerCpuArray::try_from(self.bpf.map_mut("COUNTERS").expect("COUNTERS"))
                .map_err(map_error("COUNTERS"))?;
        for i in 0..counter::COUNT {
            let zeros =
                aya::maps::PerCpuValues::try_from(vec![0u64; ncpu]).map_err(EngineError::Cpus)?;
            m.set(i, zeros, 0).map_err(map_error("COUNTERS"))?;
        }
        Ok(())
    }

    /// Attach the cheapest possible probe of a mechanism (a per-CPU counter increment) to
    /// `point`: the floor against which the span machinery's cost is measured.
    /// `mech` is "tracepoint" (point = category:name), "kprobe" or "fentry" (point = function;
    /// both ends are counted, kprobe+kretprobe or fentry+fexit, so a call makes 2 hits).
    /// With `timed`, the programs also read the clock at both ends and keep the entry time
    /// until the exit: the floor of any timing probe.
    pub fn attach_floor(
        &mut self,
        mech: &str,
        point: &str,
        timed: bool,
    ) -> Result<(), EngineError> {
        let what = format!("floor {mech} on {point}");
        let sfx = if timed { "_timed" } else { "" };
        let err = |source| EngineError::Program {
            what: what.clone(),
            source,
        };
        match mech {
            "tracepoint" => {
                let (cat, name) = point.split_once(':').ok_or_else(|| EngineError::Program {
                    what: what.clone(),
                    source: ProgramError::NotAttached,
                })?;
                self.tracepoint(&format!("floor_tp{sfx}"), cat, name)?;
            }
            "kprobe" => {
                for prog in ["floor_kprobe", "floor_kretprobe"] {
                    let p: &mut KProbe = self
                        .bpf
                        .program_mut(&format!("{prog}{sfx}"))
                        .expect("floor kprobe programs")
                        .try_into()
                        .map_err(err)?;
                    if p.fd().is_err() {
                        p.load().map_err(err)?;
                    }
                    p.attach(point, 0).map_err(err)?;
                }
            }
            _ => {
                let btf = self.btf.as_ref().ok_or_else(|| EngineError::Program {
                    what: what.clone(),
                    source: ProgramError::NotLoaded,
                })?;
                let p: &mut FEntry = self
                    .bpf
                    .program_mut(&format!("floor_fentry{sfx}"))
                    .expect("floor_fentry")
                    .try_into()
                    .map_err(err)?;
                p.load(point, btf).map_err(err)?;
                p.attach().map_err(err)?;
                let p: &mut FExit = self
                    .bpf
                    .program_mut(&format!("floor_fexit{sfx}"))
                    .expect("floor_fexit")
                    .try_into()
                    .map_err(err)?;
                p.load(point, btf).map_err(err)?;
                p.attach().map_err(err)?;
            }
        }
        Ok(())
    }

    /// Hits counted by the floor programs, and the nanoseconds the timed ones measured.
    pub fn floor_hits(&self) -> Result<(u64, u64), EngineError> {
        let m: PerCpuArray<&MapData, u64> =
            PerCpuArray::try_from(self.bpf.map("COUNTERS").expect("COUNTERS"))
                .map_err(map_error("COUNTERS"))?;
        let sum = |ix: u32| -> Result<u64, EngineError> {
            let v = m.get(&ix, 0).map_err(map_error("COUNTERS"))?;
            Ok(v.iter().sum())
        };
        Ok((sum(counter::FLOOR_HITS)?, sum(counter::FLOOR_NS)?))
    }

    /// Names of attach points currently used by tracepoint slots.
    pub fn tracepoint_points(&self) -> Vec<String> {
        self.tp_points.iter().flatten().cloned().collect()
    }
}

/// The error of a failed operation on map `name`, for `map_err`.
fn map_error(name: &'static str) -> impl Fn(aya::maps::MapError) -> EngineError {
    move |source| EngineError::Map { name, source }
}

/// Threads that close links at the end of a run.
const DETACH_THREADS: usize = 8;

/// Detach and unload one program (NotLoaded is fine: a slot may have failed before loading).
fn unload(prog: &mut aya::programs::Program) {
    use aya::programs::Program;
    let _ = match prog {
        Program::KProbe(p) => p.unload(),
        Program::FEntry(p) => p.unload(),
        Program::FExit(p) => p.unload(),
        Program::TracePoint(p) => p.unload(),
        Program::UProbe(p) => p.unload(),
        Program::PerfEvent(p) => p.unload(),
        _ => Ok(()),
    };
}

/// Merge per-CPU span statistics. CPUs that only counted untimed calls (or none) carry no
/// meaningful min.
/// Stack kinds whose kernel stacks come from the sampler's own stack map.
fn is_sampled_kind(kind: u32) -> bool {
    kind == STACK_ONCPU || kind == STACK_PROFILE
}

pub fn merge_stats<'a>(per_cpu: impl Iterator<Item = &'a SpanStats>) -> SpanStats {
    let mut out = SpanStats::default();
    let mut have_timed = false;
    for s in per_cpu {
        out.calls += s.calls;
        out.untimed += s.untimed;
        if s.calls > s.untimed {
            out.wall_sum += s.wall_sum;
            out.oncpu_sum += s.oncpu_sum;
            out.wall_max = out.wall_max.max(s.wall_max);
            out.oncpu_max = out.oncpu_max.max(s.oncpu_max);
            if !have_timed {
                out.wall_min = s.wall_min;
                out.oncpu_min = s.oncpu_min;
                have_timed = true;
            } else {
                out.wall_min = out.wall_min.min(s.wall_min);
                out.oncpu_min = out.oncpu_min.min(s.oncpu_min);
            }
        }
    }
    out
}

fn aya_obj_btf_func_kind() -> aya_obj::btf::BtfKind {
    aya_obj::btf::BtfKind::Func
}

/// Turn a load/attach error into the reason shown in plan reports.
fn classify(what: &str, e: &ProgramError) -> AttachFailure {
    // The full verifier log is long; keep it for -v.
    log::debug!("{what}: {e}");
    let text = error_chain(e);
    let lower = text.to_lowercase();
    if lower.contains("operation not permitted")
        || lower.contains("permission denied")
        || lower.contains("eperm")
    {
        let errno = if lower.contains("permission denied") {
            "EACCES"
        } else {
            "EPERM"
        };
        let stage = if lower.contains("bpf_prog_load") {
            "loading"
        } else {
            "attaching"
        };
        AttachFailure::Refused(format!("{what}: the kernel refused {stage} it ({errno})"))
    } else {
        AttachFailure::Failed(format!("{what}: {text}"))
    }
}

/// Flatten an error and its sources, dropping multi-kilobyte verifier logs to their last line.
pub fn error_chain(e: &dyn std::error::Error) -> String {
    let mut parts = vec![shorten(&e.to_string())];
    let mut cur = e.source();
    while let Some(s) = cur {
        let t = shorten(&s.to_string());
        if !parts.iter().any(|p| p.contains(&t)) {
            parts.push(t);
        }
        cur = s.source();
    }
    parts.join(": ")
}

fn shorten(s: &str) -> String {
    if let Some(idx) = s.find("Verifier output:") {
        let (head, log) = s.split_at(idx);
        let last = log
            .lines()
            .map(str::trim)
            .rev()
            .find(|l| !l.is_empty() && !l.starts_with("Verifier output:"))
            .unwrap_or("");
        if last.is_empty() {
            return head.trim_end_matches([' ', '.']).to_string();
        }
        return format!("{head}verifier: {last}");
    }
    s.to_string()
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

    #[test]
    fn merging_ignores_cpus_without_timed_calls() {
        let a = SpanStats {
            calls: 2,
            untimed: 0,
            wall_sum: 30,
            wall_min: 10,
            wall_max: 20,
            oncpu_sum: 6,
            oncpu_min: 2,
            oncpu_max: 4,
        };
        let empty = SpanStats::default();
        let untimed = SpanStats {
            calls: 3,
            untimed: 3,
            ..SpanStats::default()
        };
        let b = SpanStats {
            calls: 1,
            wall_sum: 5,
            wall_min: 5,
            wall_max: 5,
            ..SpanStats::default()
        };
        let m = merge_stats([empty, a, untimed, b].iter());
        assert_eq!(m.calls, 6);
        assert_eq!(m.untimed, 3);
        assert_eq!(m.wall_sum, 35);
        assert_eq!(m.wall_min, 5);
        assert_eq!(m.wall_max, 20);
        assert_eq!(m.oncpu_min, 0);
        assert_eq!(m.oncpu_max, 4);
    }

    #[test]
    fn verifier_logs_are_shortened() {
        let s = shorten(
            "BPF_PROG_LOAD failed. Verifier output: 0: r1 = 0\n1: exit\ninvalid mem access\n",
        );
        assert!(s.ends_with("verifier: invalid mem access"), "{s}");
    }
}
