//! The tracer's command line as clap parses it: the subcommands and their options. `main.rs`
//! dispatches on them; the values clap does not know are parsed by the library's `cli`.
use std::path::PathBuf;

use clap::{Args, Parser, Subcommand};

use tracer::error::EXIT_CODES_HELP;
use tracer::{cli, gate, help};

#[derive(Parser)]
#[command(name = "tracer", version, about = help::ABOUT, long_about = help::LONG_ABOUT, after_help = EXIT_CODES_HELP)]
pub(crate) struct Cli {
    /// Show the probes' own log messages and debug output.
    #[arg(short, long, global = true)]
    pub(crate) verbose: bool,
    #[command(subcommand)]
    pub(crate) command: Command,
}

#[derive(Subcommand)]
pub(crate) enum Command {
    /// Trace while a command (or processes) runs, then write the run data to a directory.
    #[command(after_help = help::RECORD_HELP)]
    Record(RecordArgs),
    /// Run workloads over their N lists under tracing; one run directory per workload.
    #[command(after_help = help::SWEEP_HELP.as_str())]
    Sweep(SweepArgs),
    /// Show how each target is measured on this kernel, and why better plans were rejected.
    Probes(ProbesArgs),
    /// Render tables, scaling verdicts, root causes, plots and flamegraphs from a run or
    /// sweep directory (no root needed).
    #[command(after_help = help::REPORT_HELP)]
    Report(ReportArgs),
    /// Compare two runs or sweeps (e.g. two kernels) per target, case and N.
    #[command(after_help = help::COMPARE_HELP)]
    Compare(CompareArgs),
    /// Print a shell completion script, e.g. `tracer completions bash >
    /// ~/.local/share/bash-completion/completions/tracer`.
    Completions(CompletionsArgs),
    /// Write one export of a run directory: a Perfetto trace or pprof profiles (no root
    /// needed; `tracer report` writes both).
    #[command(after_help = help::EXPORT_HELP)]
    Export(ExportArgs),
    /// Run COMMAND with only the cheapest probe of a mechanism attached (a counter; with
    /// --timed also two clock reads and the entry time kept per CPU), and print
    /// {"hits": N, "ns": T}: the floor the benchmarks compare the real probes' cost with.
    #[command(name = "__floor", hide = true)]
    Floor(FloorArgs),
    /// Write the man pages (tracer.1, tracer-record.1, ...) into DIR; `cargo xtask man` runs it.
    #[command(name = "__man", hide = true)]
    Man(ManArgs),
}

#[derive(Args)]
pub(crate) struct FloorArgs {
    #[arg(long)]
    pub(crate) timed: bool,
    /// tracepoint, kprobe or fentry.
    pub(crate) mech: String,
    /// POINT[,POINT...]
    pub(crate) points: String,
    #[arg(last = true, required = true, value_name = "COMMAND")]
    pub(crate) command: Vec<String>,
}

#[derive(Args)]
pub(crate) struct ManArgs {
    pub(crate) dir: PathBuf,
}

#[derive(Args)]
pub(crate) struct CompletionsArgs {
    /// The shell to complete for.
    #[arg(value_enum)]
    pub(crate) shell: clap_complete::Shell,
}

#[derive(Args)]
pub(crate) struct ExportArgs {
    /// perfetto or pprof.
    #[arg(value_parser = ["perfetto", "pprof"])]
    pub(crate) format: String,
    /// A run directory (from `tracer record`, or one run of a sweep).
    pub(crate) run: PathBuf,
    /// Where to write: the trace file (perfetto) or the profiles' directory (pprof).
    #[arg(short, long)]
    pub(crate) output: Option<PathBuf>,
}

#[derive(Args)]
pub(crate) struct RenderArgs {
    /// Per-call time to fit: auto (on-CPU when measured), oncpu or wall.
    #[arg(long, default_value = "auto", value_parser = ["auto", "oncpu", "wall"])]
    pub(crate) metric: String,
    /// Also report spans outside the workload's measured phases.
    #[arg(long)]
    pub(crate) include_unphased: bool,
    /// Skip flamegraph SVGs (much faster).
    #[arg(long)]
    pub(crate) no_flamegraphs: bool,
    /// Skip the Perfetto trace and the pprof profiles.
    #[arg(long)]
    pub(crate) no_exports: bool,
}

impl RenderArgs {
    pub(crate) fn options(&self) -> tracer::render::ReportOptions {
        use tracer::analysis::table::Metric;
        tracer::render::ReportOptions {
            metric: match self.metric.as_str() {
                "oncpu" => Metric::OncpuMean,
                "wall" => Metric::WallMean,
                _ => Metric::Auto,
            },
            include_unphased: self.include_unphased,
            flamegraphs: !self.no_flamegraphs,
            differential: !self.no_flamegraphs,
            flame_width: None,
            exports: !self.no_exports,
            ..Default::default()
        }
    }
}

/// The gate of `report` and `sweep`.
#[derive(Args)]
pub(crate) struct ExpectArgs {
    /// Exit 9 unless the fitted class set of each verdict of TARGET (or of its CASE only)
    /// holds CLASS: O(1), O(log n), O(n), O(n log n) or O(n^2) (O(n²) too), e.g. do_wait:O(1)
    /// or do_wait/waitpid-pid:O(n); "O(n) by loop count" is O(n). Comma-separated or
    /// repeated. Exit 10 when TARGET or CASE has no verdict, or one with no fitted class.
    #[arg(long, value_delimiter = ',', value_parser = gate::Expect::parse, value_name = "TARGET[/CASE]:CLASS")]
    pub(crate) expect: Vec<gate::Expect>,
}

#[derive(Args)]
pub(crate) struct ReportArgs {
    /// A run directory (from `tracer record`) or a sweep directory (from `tracer sweep`).
    pub(crate) dir: PathBuf,
    /// Where to write the report (default: DIR/report).
    #[arg(short, long)]
    pub(crate) output: Option<PathBuf>,
    /// Beside each time per call, show it minus the probe's own cost per call (measured at
    /// attach, `probe_cost_ns` in run.json); the measured times are kept.
    #[arg(long)]
    pub(crate) subtract_probe_cost: bool,
    #[command(flatten)]
    pub(crate) expect: ExpectArgs,
    #[command(flatten)]
    pub(crate) render: RenderArgs,
}

#[derive(Args)]
pub(crate) struct CompareArgs {
    /// Baseline run or sweep directory.
    pub(crate) a: PathBuf,
    /// Run or sweep directory to compare with the baseline.
    pub(crate) b: PathBuf,
    /// Where to write the comparison (default: compare-<A>-vs-<B>).
    #[arg(short, long)]
    pub(crate) output: Option<PathBuf>,
    /// Exit 9 when a verdict's outcome is one of these: grew, shrank, same, inconclusive, or
    /// changed (grew or shrank); comma-separated or repeated. The comparison is written
    /// first. Exit 10 when the compare has no verdict (no traced target on either side).
    #[arg(long, value_delimiter = ',', value_parser = gate::FailOn::parse, value_name = "OUTCOME")]
    pub(crate) fail_on: Vec<gate::FailOn>,
    #[command(flatten)]
    pub(crate) render: RenderArgs,
}

#[derive(Args, Clone)]
pub(crate) struct TargetArgs {
    /// Targets to trace (comma-separated; default: all).
    #[arg(short = 't', long, value_delimiter = ',', value_name = "TARGET")]
    pub(crate) targets: Vec<String>,
    /// Force a plan for a target, e.g. dup_mmap=kprobe (see `tracer probes` for plan names).
    #[arg(long, value_parser = cli::parse_plan, value_name = "TARGET=PLAN")]
    pub(crate) plan: Vec<(String, String)>,
    /// Trace a named kernel function even when it is called so often that its probe would
    /// cost more than 5% of a CPU (the rate is measured for 200 ms before the run).
    #[arg(long)]
    pub(crate) force_hot: bool,
}

/// Kernel map sizes shared by record and sweep.
#[derive(Args)]
pub(crate) struct MapArgs {
    /// Phases (distinct workload case and N) the kernel aggregates hold, plus one for calls
    /// outside phases. Each costs about 15.6 KiB of locked memory per target (two
    /// histograms), 23.4 KiB with two targets or more (a third: trips per call). Calls in
    /// phases beyond it are lost and warned about as aggregate_map_full.
    #[arg(long, default_value_t = tracer::engine::DEFAULT_MAX_PHASES, value_parser = cli::parse_phases, value_name = "N")]
    pub(crate) max_phases: u32,
}

#[derive(Args)]
pub(crate) struct RecordArgs {
    /// Follow these processes and their descendants (comma-separated, repeatable). Inside a
    /// container (a PID namespace with its own /proc), the pids as seen there.
    #[arg(short = 'p', long, value_name = "PID", value_delimiter = ',')]
    pub(crate) pid: Vec<u32>,
    /// Trace tasks with this command name.
    #[arg(long, value_name = "NAME")]
    pub(crate) comm: Option<String>,
    /// Trace tasks in this cgroup v2 directory.
    #[arg(long, value_name = "PATH")]
    pub(crate) cgroup: Option<PathBuf>,
    /// Trace every task on the system.
    #[arg(short = 'a', long)]
    pub(crate) system: bool,
    /// Stop after this long (e.g. 30s, 5m).
    #[arg(short = 'd', long, value_parser = cli::parse_duration)]
    pub(crate) duration: Option<std::time::Duration>,
    /// Output directory (default: tracer-run-<UTC time>).
    #[arg(short, long)]
    pub(crate) output: Option<PathBuf>,
    /// Replace the output directory if it exists.
    #[arg(long)]
    pub(crate) force: bool,
    #[command(flatten)]
    pub(crate) targets: TargetArgs,
    /// Skip the calibration that checks each plan sees the calls it should.
    #[arg(long)]
    pub(crate) no_verify: bool,
    /// On-CPU stack sampling frequency in Hz.
    #[arg(short = 'F', long, default_value = "999", value_parser = cli::parse_freq)]
    pub(crate) freq: u64,
    /// Do not sample on-CPU stacks.
    #[arg(long)]
    pub(crate) no_samples: bool,
    /// Do not record caller stacks at each call (cheaper probes).
    #[arg(long)]
    pub(crate) no_callers: bool,
    /// Do not record where calls block off-CPU.
    #[arg(long)]
    pub(crate) no_offcpu: bool,
    /// Also write every call to events.csv through a ring buffer of this size (e.g. 16M);
    /// drops are counted in run.json. `tracer report` then gives exact percentiles.
    #[arg(long, value_parser = cli::parse_size, value_name = "BYTES")]
    pub(crate) raw_events: Option<u32>,
    #[command(flatten)]
    pub(crate) maps: MapArgs,
    /// Embed this JSON file (e.g. the command's own benchmark report) in run.json.
    #[arg(long, value_name = "FILE")]
    pub(crate) attach_json: Option<PathBuf>,
    /// Also attach the phase markers (tracer_phase_begin/end functions, or
    /// tracer:phase_begin/phase_end USDT probes) in this binary, for when the command is a
    /// script that runs it (repeatable).
    #[arg(long, value_name = "BINARY")]
    pub(crate) markers: Vec<PathBuf>,
    /// Count only calls made while the command is inside this function of its own:
    /// BINARY:SYMBOL (e.g. ./bench:timed_loop) or BINARY:0xADDR (an address as `nm` shows
    /// it, for stripped binaries). A uprobe at the function's entry begins the phase and a
    /// uretprobe at its return ends it; setup and teardown outside it stay unphased. Each
    /// call is one phase: in a sweep at the current N, counting --ops operations (default
    /// 1); in a recording at N=1, counting 1.
    #[arg(long, value_name = "BINARY:SYMBOL")]
    pub(crate) phase_fn: Option<String>,
    /// Keep every sampled kernel stack of the traced tasks and where they block (not only
    /// inside targets), and count their syscalls and page faults: the data `--discover`
    /// reports rank functions and find kernel loops by. No probe needed.
    #[arg(long)]
    pub(crate) discover: bool,
    /// The command to run and trace (with its process tree), with its arguments: everything
    /// from the first word that is not an option of tracer's, as in `perf record ./bench -x`
    /// (a `--` before it is optional).
    #[arg(trailing_var_arg = true, value_name = "COMMAND")]
    pub(crate) command: Vec<String>,
}

#[derive(Args)]
pub(crate) struct SweepArgs {
    /// Workloads to sweep.
    #[arg(value_name = "WORKLOAD")]
    pub(crate) workloads: Vec<String>,
    /// Sweep every workload.
    #[arg(long, conflicts_with = "workloads")]
    pub(crate) all: bool,
    /// N list for every workload (default: each workload's own list).
    #[arg(long, value_name = "LIST")]
    pub(crate) n: Option<String>,
    /// N list for one workload, e.g. --n-for spawn=1,100,1000 (repeatable).
    #[arg(long, value_name = "WORKLOAD=LIST", value_parser = cli::parse_n_for)]
    pub(crate) n_for: Vec<(String, String)>,
    /// Output directory (default: tracer-sweep-<UTC time>).
    #[arg(short, long)]
    pub(crate) output: Option<PathBuf>,
    /// Replace the output directory if it exists.
    #[arg(long)]
    pub(crate) force: bool,
    /// The workloads binary (default: next to tracer, else on PATH).
    #[arg(long, value_name = "PATH")]
    pub(crate) workloads_bin: Option<PathBuf>,
    #[command(flatten)]
    pub(crate) targets: TargetArgs,
    /// Skip the calibration that checks each plan sees the calls it should.
    #[arg(long)]
    pub(crate) no_verify: bool,
    /// On-CPU stack sampling frequency in Hz (higher than record's default: the root cause
    /// needs samples at small N too, where calls are short).
    #[arg(short = 'F', long, default_value = "4999", value_parser = cli::parse_freq)]
    pub(crate) freq: u64,
    /// Do not sample on-CPU stacks.
    #[arg(long)]
    pub(crate) no_samples: bool,
    #[command(flatten)]
    pub(crate) maps: MapArgs,
    /// Skip flamegraph SVGs in the report rendered after the sweep.
    #[arg(long)]
    pub(crate) no_flamegraphs: bool,
    /// In the report rendered after the sweep, show each time per call minus the probe's
    /// own cost per call beside it (as `tracer report --subtract-probe-cost`).
    #[arg(long)]
    pub(crate) subtract_probe_cost: bool,
    /// Do not render the report after the sweep (render it later with `tracer report`).
    #[arg(long)]
    pub(crate) no_report: bool,
    #[command(flatten)]
    pub(crate) expect: ExpectArgs,
    /// Sample every kernel stack of the traced process tree, count its syscalls and page
    /// faults, and name the kernel loops (syscalls whose time per call grows with N) apart
    /// from the more calls (no function probe needed; no other target unless --targets).
    #[arg(long)]
    pub(crate) discover: bool,
    /// Runs per N of your command or of each workload (default 3): each run is its own point
    /// in the fits, the median of the runs is a size's value, the spread between them its
    /// error. Each round runs the sizes in its own shuffled order, each run setting up its N
    /// afresh.
    #[arg(long, value_name = "R")]
    pub(crate) repeat: Option<u32>,
    /// After the R rounds, a size runs again while a verdict could still change by more runs
    /// (the fit of the runs so far differs from the same runs' at M per size; for a
    /// workload's case, the target it exists for), the noisiest size of that verdict first,
    /// up to M runs in all (default 2R; M = R: no extra runs). Needs R of 2 or more. With
    /// --discover, a size short of samples to decide a "kernel loop undecided" frame runs
    /// again until it should have them: up to M when given, else within --extra-time only
    /// (M = R: the runs are not read for it either).
    #[arg(long, value_name = "M")]
    pub(crate) max_repeat: Option<u32>,
    /// Most wall time for those extra runs together (e.g. 30s, 5m; default: half the time
    /// the R rounds took).
    #[arg(long, value_parser = cli::parse_duration, value_name = "DURATION")]
    pub(crate) extra_time: Option<std::time::Duration>,
    /// The sweep's wall time (e.g. 10m): cut, in this order, extra runs, rounds after the
    /// first, then the loop-count or confirmation pass; a run's first round always runs.
    /// Each cut gets a line and is kept in sweep.json (budget_cuts). Default: no limit.
    #[arg(long, value_parser = cli::parse_duration, value_name = "DURATION")]
    pub(crate) budget: Option<std::time::Duration>,
    /// Operations per run of your command, e.g. 100 or {N}*10: gives per-op columns.
    #[arg(long, value_parser = cli::parse_ops, value_name = "EXPR")]
    pub(crate) ops: Option<cli::OpsExpr>,
    /// Count only calls made while the command is inside this function of its own:
    /// BINARY:SYMBOL (e.g. ./bench:timed_loop) or BINARY:0xADDR (an address as `nm` shows
    /// it, for stripped binaries). A uprobe at the function's entry begins the phase and a
    /// uretprobe at its return ends it; setup and teardown outside it stay unphased. Each
    /// call is one phase: in a sweep at the current N, counting --ops operations (default
    /// 1); in a recording at N=1, counting 1.
    #[arg(long, value_name = "BINARY:SYMBOL")]
    pub(crate) phase_fn: Option<String>,
    /// Name of your command's run directory in the sweep (default: its file name).
    #[arg(long, value_name = "NAME")]
    pub(crate) name: Option<String>,
    /// With --discover and your command: time the kernel loop's frame, the function
    /// repeating inside it, the top K ranked functions and the root cause exactly in a second
    /// pass (run <NAME>-confirm), where the kernel allows function probes, with each one's
    /// caller, so that the kernel counts its calls per call of the caller (the loop's trips;
    /// the repeating function at its calls from the frame where it cannot be probed itself);
    /// 0 = off.
    #[arg(long, default_value_t = 3, value_name = "K")]
    pub(crate) confirm: usize,
    /// Skip the loop-count pass (run <WORKLOAD>-loops), which runs each workload once more
    /// per N with its target's per-trip function traced (do_wait's wait_consider_task,
    /// dup_mmap's vm_area_dup, sysvipc_find_ipc's idr_find), and a command once more per N
    /// with the functions its growing targets' root causes name, where the kernel allows
    /// function probes, so that the verdicts' classes rest on exact trip counts.
    #[arg(long)]
    pub(crate) no_loop_count: bool,
    /// With no workload named: the command to run once per N ({N} replaced by N).
    /// With workloads: extra arguments passed to every workload, e.g. -- --iterations 50.
    #[arg(last = true, value_name = "COMMAND | WORKLOAD ARGS")]
    pub(crate) extra: Vec<String>,
}

#[derive(Args)]
pub(crate) struct ProbesArgs {
    #[command(flatten)]
    pub(crate) targets: TargetArgs,
    /// Calibrate each plan: run a known workload and check the count.
    #[arg(long)]
    pub(crate) verify: bool,
    /// Machine-readable output.
    #[arg(long)]
    pub(crate) json: bool,
}
