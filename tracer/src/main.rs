//! `tracer`: find which kernel loop is O(n). The CLI layer only parses and reports; the work
//! lives in the library modules.
use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Args, CommandFactory, Parser, Subcommand};

use tracer::error::{EXIT_CODES_HELP, TracerError, exit};
use tracer::{calibrate, cli, engine::EngineOptions, plan, record, resolve::ResolveOptions};

/// Print to stdout, ignoring a closed pipe (`tracer ... | head`): the run is written by then,
/// and the exit status must say how the run went, not that the reader went away.
macro_rules! out {
    ($($t:tt)*) => {{
        use std::io::Write as _;
        let _ = writeln!(std::io::stdout(), $($t)*);
    }};
}
macro_rules! outp {
    ($($t:tt)*) => {{
        use std::io::Write as _;
        let _ = write!(std::io::stdout(), $($t)*);
    }};
}

const ABOUT: &str = "Time kernel functions with eBPF while a workload sweeps N, and show which \
kernel loop grows with N.";

const LONG_ABOUT: &str = "\
Time kernel functions with eBPF while a workload sweeps a size N (children, VMAs, SysV \
segments, pages), and show which kernel loop grows with N.

Targets: the built-in do_wait, dup_mmap, sysvipc_find_ipc, get_task_policy (each resolved \
per kernel: fentry -> kprobe -> out-of-line callers -> syscall tracepoints, and verified by a \
short calibration), or any kernel function by name (fentry -> kprobe -> its compiler clone). \
`tracer probes` shows what this kernel allows and why.

Do not know which function to suspect? `--discover` samples the kernel stacks of the whole \
process tree at every N and ranks the functions whose time grows with N; it needs no \
function probe, so it works on kernels that refuse them.

Sweep your own benchmark: `tracer sweep --n 10,100,1000 -- ./bench {N}` runs it once per N \
({N}, or its lower-case form, replaced; TRACER_N set), each run one phase.

Needs root, or CAP_BPF + CAP_PERFMON (5.8+) and a kernel with BTF for fentry. When the host \
kernel forbids function probes (no kprobes, fentry refused), run inside a VM: \
`cargo xtask vm --kernel 6.1 -- tracer ...`.";

#[derive(Parser)]
#[command(name = "tracer", version, about = ABOUT, long_about = LONG_ABOUT, after_help = EXIT_CODES_HELP)]
struct Cli {
    /// Show the probes' own log messages and debug output.
    #[arg(short, long, global = true)]
    verbose: bool,
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Trace while a command (or processes) runs, then write the run data to a directory.
    #[command(after_help = RECORD_HELP)]
    Record(RecordArgs),
    /// Run workloads over their N lists under tracing; one run directory per workload.
    #[command(after_help = SWEEP_HELP)]
    Sweep(SweepArgs),
    /// Show how each target is measured on this kernel, and why better plans were rejected.
    Probes(ProbesArgs),
    /// Render tables, scaling verdicts, root causes, plots and flamegraphs from a run or
    /// sweep directory (no root needed).
    #[command(after_help = REPORT_HELP)]
    Report(ReportArgs),
    /// Compare two runs or sweeps (e.g. two kernels) per target, case and N.
    Compare(CompareArgs),
    /// Print a shell completion script, e.g. `tracer completions bash >
    /// ~/.local/share/bash-completion/completions/tracer`.
    Completions(CompletionsArgs),
    /// Write one export of a run directory: a Perfetto trace or pprof profiles (no root
    /// needed; `tracer report` writes both).
    #[command(after_help = EXPORT_HELP)]
    Export(ExportArgs),
}

#[derive(Args)]
struct CompletionsArgs {
    /// The shell to complete for.
    #[arg(value_enum)]
    shell: clap_complete::Shell,
}

const EXPORT_HELP: &str = "\
Formats:
  perfetto  the raw per-call spans (record --raw-events) as a Perfetto trace: a slice per
            call on its thread, the workload's phases and an N counter per process.
            Default output RUN/trace.pftrace; open it in ui.perfetto.dev (Open trace file).
  pprof     the folded stacks as gzipped pprof profiles, one per kind and target
            (<kind>-<target>.pb.gz), samples labelled target, case and n. Default output
            directory RUN/profiles (replaced as a whole); open a profile with
            `go tool pprof -http=: FILE`, or in Perfetto, Parca, Pyroscope, Grafana.

Examples:
  tracer export perfetto tracer-run-*/
  tracer export pprof sweep/waitpid -o /tmp/waitpid-profiles";

#[derive(Args)]
struct ExportArgs {
    /// perfetto or pprof.
    #[arg(value_parser = ["perfetto", "pprof"])]
    format: String,
    /// A run directory (from `tracer record`, or one run of a sweep).
    run: PathBuf,
    /// Where to write: the trace file (perfetto) or the profiles' directory (pprof).
    #[arg(short, long)]
    output: Option<PathBuf>,
}

const REPORT_HELP: &str = "\
Writes index.html (a summary table of every target and case first, then the scaling plots,
the findings, and per target its tables and embedded flamegraphs), README.md (verdicts and
root causes first), report.txt, summary.json,
tables/<target>.{md,csv,json}, plots/<target>.svg and flamegraphs/.../n<N>.svg with a
differential flamegraph between the smallest and largest N. Exports (skip with --no-exports):
trace.pftrace, a Perfetto trace of every call (runs recorded with --raw-events, events.csv
up to 64 MiB; open it in ui.perfetto.dev), and profiles/<kind>-<target>.pb.gz, pprof
profiles of the stacks (`go tool pprof -http=: FILE`); in a sweep, traces/<run>.pftrace and
profiles/<run>/. `tracer export` writes one of them for one run.

Verdict: a complexity class chosen by comparing fits of t = a + b*f(N) (O(1), O(log n),
O(n), O(n log n), O(n^2)), the log-log slope of the growth with its 95% interval, and the N
from which growth is visible. Root cause: the callee frame under the target whose share of
the target's time grows most with N.";

#[derive(Args)]
struct RenderArgs {
    /// Per-call time to fit: auto (on-CPU when measured), oncpu or wall.
    #[arg(long, default_value = "auto", value_parser = ["auto", "oncpu", "wall"])]
    metric: String,
    /// Also report spans outside the workload's measured phases.
    #[arg(long)]
    include_unphased: bool,
    /// Skip flamegraph SVGs (much faster).
    #[arg(long)]
    no_flamegraphs: bool,
    /// Skip the Perfetto trace and the pprof profiles.
    #[arg(long)]
    no_exports: bool,
}

impl RenderArgs {
    fn options(&self) -> tracer::render::ReportOptions {
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

#[derive(Args)]
struct ReportArgs {
    /// A run directory (from `tracer record`) or a sweep directory (from `tracer sweep`).
    dir: PathBuf,
    /// Where to write the report (default: DIR/report).
    #[arg(short, long)]
    output: Option<PathBuf>,
    /// Beside each time per call, show it minus the probe's own cost per call (measured at
    /// attach, `probe_cost_ns` in run.json); the measured times are kept.
    #[arg(long)]
    subtract_probe_cost: bool,
    #[command(flatten)]
    render: RenderArgs,
}

#[derive(Args)]
struct CompareArgs {
    /// Baseline run or sweep directory.
    a: PathBuf,
    /// Run or sweep directory to compare with the baseline.
    b: PathBuf,
    /// Where to write the comparison (default: compare-<A>-vs-<B>).
    #[arg(short, long)]
    output: Option<PathBuf>,
    #[command(flatten)]
    render: RenderArgs,
}

const SWEEP_HELP: &str = "\
Your own command, once per N ({N} in its arguments replaced by N; the lower-case form works
too; TRACER_N=N in its environment; each run is one phase of case `command`):
  sudo tracer sweep --n 10,100,1000,3000 --targets do_wait -- ./bench {N} 100
  sudo tracer sweep --n 1..4000*4 --discover --repeat 3 --ops 20000 -- ./poll {N}
A run that fails is kept in run.json (invocations) and its N left out of the fits; the
sweep goes on with the other N and exits 8.

Workloads (from the `workloads` binary next to tracer, or --workloads-bin):
  waitpid    do_wait: fork+wait with N idle children          (default N 1,10,100,1000,5000,8000)
  spawn      dup_mmap: fork+exit+wait with N extra VMAs        (default N 1,10,100,1000,4000,16000)
  sysvipc    sysvipc_find_ipc: read /proc/sysvipc/* with N segments (default N 1,10,100,1000,4000)
  mempolicy  get_task_policy: touch N fresh pages (aim9 page)  (default N 1,10,100,1000,10000)
  getpid     calibration: N getpid() calls                     (default N 1000,10000,100000)

N lists: 1,10,100 or ranges 1..8000*4 (geometric) and 1k..4k+1k (linear).
Ctrl-C keeps the runs finished so far and marks the sweep partial. If the tracer is killed
(SIGKILL) or crashes, the workload gets SIGKILL and its children and SysV IPC objects go
with it; the output is not written, and the next tracer writing in that directory removes
the temporary one. A second sweep into an output another one is writing exits 5.

--discover: sample every kernel stack of the traced process tree (cpu-clock, --freq) and
where it blocks, then rank the kernel functions whose time per op grows with N; no function
probe needed. With --discover and no --targets, nothing else is traced.

Examples:
  sudo tracer sweep waitpid --n 1,10,100,1000,5000,8000
  sudo tracer sweep --all -o sweep-6.1
  sudo tracer sweep spawn -- --variant spawn,spawn-wipeonfork --iterations 50";

const RECORD_HELP: &str = "\
Output (read later without root by `tracer report`):
  run.json                       metadata, attach plans, counters, per-(target, case, N) spans
                                 with log-linear histograms, workload phases, and each
                                 target's probe_cost (probe_cost_ns: what its kind of probe
                                 adds to one call, measured at attach on this machine)
  spans.csv                      the span aggregates as a flat table
  stacks/<kind>/<target>/<case>/n<N>.folded
                                 folded stacks; kind = oncpu (sampled inside the target),
                                 offcpu (where it blocked), callers (who called it)
  events.csv                     with --raw-events: one row per call
                                 (end_ns,tid,tgid,target,case,n,wall_ns,oncpu_ns)
The directory appears only when complete; a run cut short by a signal says
\"status\": \"partial\" in run.json.

The command may follow the options directly, as with perf (`tracer record ./bench -x`: the
command's own options stay its own), or after `--`. After the run, each target's per-call
times are printed as a log2 histogram with p50/p90/p99, as bcc's funclatency does, with the
probe's own cost per call; a mean within 3x of it is flagged (the probe's cost is a third or
more of what is measured). `tracer report --subtract-probe-cost` shows corrected times.

If the tracer is killed (SIGKILL) or crashes, the command it started gets SIGKILL too
(PR_SET_PDEATHSIG; processes the command started themselves are not killed unless they
arrange the same, as the workloads binary's children do). Processes followed with --pid,
--comm, --cgroup or --system are never signalled. The temporary .NAME.partial-PID directory
such a death leaves is removed by the next tracer writing to the same directory.

Examples:
  sudo tracer record ./my-benchmark --size 1000
  sudo tracer record -- ./my-benchmark --size 1000
  sudo tracer record -p 4242,4243 -d 30s -o bench-run
  sudo tracer record -a -F 4999 -t do_wait -d 10s
  sudo tracer record --targets do_wait --plan do_wait=kprobe -- workloads waitpid --n 1,100,1000";

#[derive(Args, Clone)]
struct TargetArgs {
    /// Targets to trace (comma-separated; default: all).
    #[arg(short = 't', long, value_delimiter = ',', value_name = "TARGET")]
    targets: Vec<String>,
    /// Force a plan for a target, e.g. dup_mmap=kprobe (see `tracer probes` for plan names).
    #[arg(long, value_parser = cli::parse_plan, value_name = "TARGET=PLAN")]
    plan: Vec<(String, String)>,
    /// Trace a named kernel function even when it is called so often that its probe would
    /// cost more than 5% of a CPU (the rate is measured for 200 ms before the run).
    #[arg(long)]
    force_hot: bool,
}

/// Kernel map sizes shared by record and sweep.
#[derive(Args)]
struct MapArgs {
    /// Phases (distinct workload case and N) the kernel aggregates hold, plus one for calls
    /// outside phases. Each costs about 15.6 KiB of locked memory per target (two
    /// histograms). Calls in phases beyond it are lost and warned about as
    /// aggregate_map_full.
    #[arg(long, default_value_t = tracer::engine::DEFAULT_MAX_PHASES, value_parser = cli::parse_phases, value_name = "N")]
    max_phases: u32,
}

#[derive(Args)]
struct RecordArgs {
    /// Follow these processes and their descendants (comma-separated, repeatable).
    #[arg(short = 'p', long, value_name = "PID", value_delimiter = ',')]
    pid: Vec<u32>,
    /// Trace tasks with this command name.
    #[arg(long, value_name = "NAME")]
    comm: Option<String>,
    /// Trace tasks in this cgroup v2 directory.
    #[arg(long, value_name = "PATH")]
    cgroup: Option<PathBuf>,
    /// Trace every task on the system.
    #[arg(short = 'a', long)]
    system: bool,
    /// Stop after this long (e.g. 30s, 5m).
    #[arg(short = 'd', long, value_parser = cli::parse_duration)]
    duration: Option<std::time::Duration>,
    /// Output directory (default: tracer-run-<UTC time>).
    #[arg(short, long)]
    output: Option<PathBuf>,
    /// Replace the output directory if it exists.
    #[arg(long)]
    force: bool,
    #[command(flatten)]
    targets: TargetArgs,
    /// Skip the calibration that checks each plan sees the calls it should.
    #[arg(long)]
    no_verify: bool,
    /// On-CPU stack sampling frequency in Hz.
    #[arg(short = 'F', long, default_value = "999", value_parser = cli::parse_freq)]
    freq: u64,
    /// Do not sample on-CPU stacks.
    #[arg(long)]
    no_samples: bool,
    /// Do not record caller stacks at each call (cheaper probes).
    #[arg(long)]
    no_callers: bool,
    /// Do not record where calls block off-CPU.
    #[arg(long)]
    no_offcpu: bool,
    /// Also write every call to events.csv through a ring buffer of this size (e.g. 16M);
    /// drops are counted in run.json. `tracer report` then gives exact percentiles.
    #[arg(long, value_parser = cli::parse_size, value_name = "BYTES")]
    raw_events: Option<u32>,
    #[command(flatten)]
    maps: MapArgs,
    /// Embed this JSON file (e.g. the command's own benchmark report) in run.json.
    #[arg(long, value_name = "FILE")]
    attach_json: Option<PathBuf>,
    /// Also attach the phase markers (tracer_phase_begin/end functions, or
    /// tracer:phase_begin/phase_end USDT probes) in this binary, for when the command is a
    /// script that runs it (repeatable).
    #[arg(long, value_name = "BINARY")]
    markers: Vec<PathBuf>,
    /// Count only calls made while the command is inside this function of its own:
    /// BINARY:SYMBOL (e.g. ./bench:timed_loop) or BINARY:0xADDR (an address as `nm` shows
    /// it, for stripped binaries). A uprobe at the function's entry begins the phase and a
    /// uretprobe at its return ends it; setup and teardown outside it stay unphased. Each
    /// call is one phase: in a sweep at the current N, counting --ops operations (default
    /// 1); in a recording at N=1, counting 1.
    #[arg(long, value_name = "BINARY:SYMBOL")]
    phase_fn: Option<String>,
    /// Keep every sampled kernel stack of the traced tasks and where they block (not only
    /// inside targets): the data `--discover` reports rank functions by. No probe needed.
    #[arg(long)]
    discover: bool,
    /// The command to run and trace (with its process tree), with its arguments: everything
    /// from the first word that is not an option of tracer's, as in `perf record ./bench -x`
    /// (a `--` before it is optional).
    #[arg(trailing_var_arg = true, value_name = "COMMAND")]
    command: Vec<String>,
}

#[derive(Args)]
struct SweepArgs {
    /// Workloads to sweep.
    #[arg(value_name = "WORKLOAD")]
    workloads: Vec<String>,
    /// Sweep every workload.
    #[arg(long, conflicts_with = "workloads")]
    all: bool,
    /// N list for every workload (default: each workload's own list).
    #[arg(long, value_name = "LIST")]
    n: Option<String>,
    /// N list for one workload, e.g. --n-for spawn=1,100,1000 (repeatable).
    #[arg(long, value_name = "WORKLOAD=LIST", value_parser = cli::parse_n_for)]
    n_for: Vec<(String, String)>,
    /// Output directory (default: tracer-sweep-<UTC time>).
    #[arg(short, long)]
    output: Option<PathBuf>,
    /// Replace the output directory if it exists.
    #[arg(long)]
    force: bool,
    /// The workloads binary (default: next to tracer, else on PATH).
    #[arg(long, value_name = "PATH")]
    workloads_bin: Option<PathBuf>,
    #[command(flatten)]
    targets: TargetArgs,
    /// Skip the calibration that checks each plan sees the calls it should.
    #[arg(long)]
    no_verify: bool,
    /// On-CPU stack sampling frequency in Hz (higher than record's default: the root cause
    /// needs samples at small N too, where calls are short).
    #[arg(short = 'F', long, default_value = "4999", value_parser = cli::parse_freq)]
    freq: u64,
    /// Do not sample on-CPU stacks.
    #[arg(long)]
    no_samples: bool,
    #[command(flatten)]
    maps: MapArgs,
    /// Skip flamegraph SVGs in the report rendered after the sweep.
    #[arg(long)]
    no_flamegraphs: bool,
    /// In the report rendered after the sweep, show each time per call minus the probe's
    /// own cost per call beside it (as `tracer report --subtract-probe-cost`).
    #[arg(long)]
    subtract_probe_cost: bool,
    /// Do not render the report after the sweep (render it later with `tracer report`).
    #[arg(long)]
    no_report: bool,
    /// Sample every kernel stack of the traced process tree and rank the functions whose
    /// time grows with N (no function probe needed; no other target unless --targets).
    #[arg(long)]
    discover: bool,
    /// Runs of your command per N (with -- CMD): more runs, tighter intervals.
    #[arg(long, default_value_t = 1, value_name = "R")]
    repeat: u32,
    /// Operations per run of your command, e.g. 100 or {N}*10: gives per-op columns.
    #[arg(long, value_parser = cli::parse_ops, value_name = "EXPR")]
    ops: Option<cli::OpsExpr>,
    /// Count only calls made while the command is inside this function of its own:
    /// BINARY:SYMBOL (e.g. ./bench:timed_loop) or BINARY:0xADDR (an address as `nm` shows
    /// it, for stripped binaries). A uprobe at the function's entry begins the phase and a
    /// uretprobe at its return ends it; setup and teardown outside it stay unphased. Each
    /// call is one phase: in a sweep at the current N, counting --ops operations (default
    /// 1); in a recording at N=1, counting 1.
    #[arg(long, value_name = "BINARY:SYMBOL")]
    phase_fn: Option<String>,
    /// Name of your command's run directory in the sweep (default: its file name).
    #[arg(long, value_name = "NAME")]
    name: Option<String>,
    /// With --discover and your command: time the top K ranked functions exactly in a
    /// second pass (run <NAME>-confirm), where the kernel allows function probes; 0 = off.
    #[arg(long, default_value_t = 3, value_name = "K")]
    confirm: usize,
    /// With no workload named: the command to run once per N ({N} replaced by N).
    /// With workloads: extra arguments passed to every workload, e.g. -- --iterations 50.
    #[arg(last = true, value_name = "COMMAND | WORKLOAD ARGS")]
    extra: Vec<String>,
}

#[derive(Args)]
struct ProbesArgs {
    #[command(flatten)]
    targets: TargetArgs,
    /// Calibrate each plan: run a known workload and check the count.
    #[arg(long)]
    verify: bool,
    /// Machine-readable output.
    #[arg(long)]
    json: bool,
}

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().collect();
    // Hidden helpers that this binary re-executes itself as; not part of the CLI.
    match args.get(1).map(String::as_str) {
        Some(calibrate::CHILD_SUBCOMMAND) => return code(calibrate::child_main(&args[2..])),
        Some(tracer::probecost::CHILD_SUBCOMMAND) => {
            return code(tracer::probecost::child_main(&args[2..]));
        }
        Some(record::EXEC_HELD) => return code(record::exec_held_main(&args[2..])),
        Some("__floor") => return code(floor_main(&args[2..])),
        Some("__man") => return code(man_main(&args[2..])),
        _ => {}
    }
    let cli = Cli::parse();
    let level = if cli.verbose { "debug" } else { "warn" };
    env_logger::Builder::from_env(env_logger::Env::default().default_filter_or(level))
        .format_timestamp(None)
        .init();
    let result = match cli.command {
        Command::Record(a) => run_record(a, cli.verbose),
        Command::Sweep(a) => run_sweep(a, cli.verbose),
        Command::Probes(a) => run_probes(a, cli.verbose),
        Command::Report(a) => run_report(a),
        Command::Compare(a) => run_compare(a),
        Command::Completions(a) => run_completions(a),
        Command::Export(a) => run_export(a),
    };
    match result {
        Ok(c) => code(c),
        Err(e) => {
            eprintln!("tracer: {e}");
            code(e.exit_code())
        }
    }
}

/// `tracer __floor [--timed] MECH POINT[,POINT...] -- COMMAND...`: run COMMAND with only the
/// cheapest probe of a mechanism attached (a counter; with --timed also two clock reads and
/// the entry time kept per CPU), and print {"hits": N, "ns": T}. The benchmarks use it as
/// the floor that the real probes' cost is compared with; not part of the CLI.
fn floor_main(args: &[String]) -> i32 {
    let timed = args.first().map(String::as_str) == Some("--timed");
    let args = if timed { &args[1..] } else { args };
    let (Some(mech), Some(points), Some("--"), Some(cmd)) = (
        args.first(),
        args.get(1),
        args.get(2).map(String::as_str),
        args.get(3),
    ) else {
        eprintln!(
            "usage: tracer __floor [--timed] tracepoint|kprobe|fentry POINT[,POINT] -- COMMAND..."
        );
        return exit::USAGE;
    };
    let opts = EngineOptions {
        sample_freq_hz: 0,
        caller_stacks: false,
        offcpu_stacks: false,
        raw_events_bytes: 0,
        bpf_log: false,
        scheduler: false,
        ..EngineOptions::default()
    };
    let result = (|| -> Result<(u64, u64), TracerError> {
        record::check_privileges()?;
        let mut engine = tracer::engine::Engine::load(opts)?;
        for p in points.split(',') {
            engine.attach_floor(mech, p, timed)?;
        }
        let st = std::process::Command::new(cmd)
            .args(&args[4..])
            .status()
            .map_err(|e| TracerError::Usage(format!("{cmd}: {e}")))?;
        if !st.success() {
            return Err(TracerError::Other(format!("{cmd} failed: {st}")));
        }
        Ok(engine.floor_hits()?)
    })();
    match result {
        Ok((hits, ns)) => {
            out!("{}", serde_json::json!({ "hits": hits, "ns": ns }));
            exit::OK
        }
        Err(e) => {
            eprintln!("tracer __floor: {e}");
            e.exit_code()
        }
    }
}

/// `tracer __man DIR`: write the man pages (tracer.1, tracer-record.1, ...) generated from the
/// command line definition into DIR; `cargo xtask man` runs it. Not part of the CLI.
fn man_main(args: &[String]) -> i32 {
    let [dir] = args else {
        eprintln!("usage: tracer __man DIR");
        return exit::USAGE;
    };
    let result =
        std::fs::create_dir_all(dir).and_then(|()| clap_mangen::generate_to(Cli::command(), dir));
    match result {
        Ok(()) => exit::OK,
        Err(e) => {
            eprintln!("tracer __man: {dir}: {e}");
            exit::OUTPUT
        }
    }
}

/// `tracer completions SHELL`: the script goes to stdout whole or not at all (a closed pipe is
/// not an error, as for every other command).
fn run_completions(a: CompletionsArgs) -> Result<i32, TracerError> {
    let mut script = Vec::new();
    clap_complete::generate(a.shell, &mut Cli::command(), "tracer", &mut script);
    use std::io::Write as _;
    let _ = std::io::stdout().write_all(&script);
    Ok(exit::OK)
}

fn code(c: i32) -> ExitCode {
    ExitCode::from(c.clamp(0, 255) as u8)
}

fn resolve_opts(t: &TargetArgs, verify: bool) -> ResolveOptions {
    ResolveOptions {
        verify,
        forced: t.plan.iter().cloned().collect(),
        force_hot: t.force_hot,
    }
}

fn run_record(a: RecordArgs, verbose: bool) -> Result<i32, TracerError> {
    if a.discover && a.no_samples {
        return Err(TracerError::Usage(
            "--discover samples stacks: it cannot be combined with --no-samples".into(),
        ));
    }
    let out = a
        .output
        .clone()
        .unwrap_or_else(|| PathBuf::from(cli::default_run_name("tracer-run")));
    let opts = record::RecordOptions {
        command: a.command,
        pids: a.pid,
        comm: a.comm,
        cgroup: a.cgroup,
        system: a.system,
        duration: a.duration,
        out,
        force: a.force,
        targets: a.targets.targets.clone(),
        resolve: resolve_opts(&a.targets, !a.no_verify),
        engine: EngineOptions {
            sample_freq_hz: if a.no_samples { 0 } else { a.freq },
            caller_stacks: !a.no_callers,
            offcpu_stacks: !a.no_offcpu,
            raw_events_bytes: a.raw_events.unwrap_or(0),
            bpf_log: verbose,
            scheduler: true,
            max_phases: a.maps.max_phases,
            targets: tracer_ebpf::MAX_TARGETS as u32,
            discover: a.discover,
        },
        progress: true,
        attach_json: a.attach_json,
        marker_binaries: a.markers,
        phase_fn: a.phase_fn,
    };
    let outcome = record::record(opts)?;
    print_record_summary(&outcome);
    Ok(outcome.exit_code)
}

fn run_sweep(a: SweepArgs, verbose: bool) -> Result<i32, TracerError> {
    let a_no_flame = a.no_flamegraphs;
    let a_subtract = a.subtract_probe_cost;
    let a_no_report = a.no_report;
    if a.discover && a.no_samples {
        return Err(TracerError::Usage(
            "--discover samples stacks: it cannot be combined with --no-samples".into(),
        ));
    }
    let workloads: Vec<String> = if a.all {
        tracer::sweep::WORKLOADS
            .iter()
            .map(|w| w.0.to_string())
            .collect()
    } else {
        a.workloads
    };
    // No workload named: what follows `--` is the user's own command.
    let (command, extra) = if workloads.is_empty() {
        (a.extra, Vec::new())
    } else {
        (Vec::new(), a.extra)
    };
    let out = a
        .output
        .unwrap_or_else(|| PathBuf::from(cli::default_run_name("tracer-sweep")));
    let opts = tracer::sweep::SweepOptions {
        workloads,
        n: a.n,
        n_for: a.n_for,
        extra_args: extra,
        out,
        force: a.force,
        workloads_bin: a.workloads_bin,
        targets: a.targets.targets.clone(),
        resolve: resolve_opts(&a.targets, !a.no_verify),
        engine: EngineOptions {
            sample_freq_hz: if a.no_samples { 0 } else { a.freq },
            caller_stacks: true,
            offcpu_stacks: true,
            raw_events_bytes: 0,
            bpf_log: verbose,
            scheduler: true,
            max_phases: a.maps.max_phases,
            targets: tracer_ebpf::MAX_TARGETS as u32,
            discover: a.discover,
        },
        progress: true,
        command,
        repeat: a.repeat,
        ops: a.ops,
        phase_fn: a.phase_fn,
        name: a.name,
        confirm: a.confirm,
    };
    let outcome = tracer::sweep::sweep(opts)?;
    if let Some(p) = &outcome.sweep.partial_reason {
        eprintln!("tracer: partial sweep ({p})");
    }
    out!("sweep written to {}", outcome.dir.display());
    if !outcome.sweep.runs.is_empty() && !a_no_report {
        let ropts = tracer::render::ReportOptions {
            flamegraphs: !a_no_flame,
            subtract_probe_cost: a_subtract,
            ..Default::default()
        };
        tracer::render::out::catch_interrupts();
        let summary = tracer::render::report(&outcome.dir, &outcome.dir.join("report"), &ropts)?;
        print_summary(&summary);
    }
    Ok(outcome.exit_code)
}

fn run_report(a: ReportArgs) -> Result<i32, TracerError> {
    if !a.dir.is_dir() {
        return Err(TracerError::Input(format!(
            "{}: no such run or sweep directory",
            a.dir.display()
        )));
    }
    let out = a.output.unwrap_or_else(|| a.dir.join("report"));
    tracer::render::out::catch_interrupts();
    let opts = tracer::render::ReportOptions {
        subtract_probe_cost: a.subtract_probe_cost,
        ..a.render.options()
    };
    let summary = tracer::render::report(&a.dir, &out, &opts)?;
    print_summary(&summary);
    Ok(exit::OK)
}

fn run_compare(a: CompareArgs) -> Result<i32, TracerError> {
    for d in [&a.a, &a.b] {
        if !d.is_dir() {
            return Err(TracerError::Input(format!(
                "{}: no such run or sweep directory",
                d.display()
            )));
        }
    }
    let name = |p: &std::path::Path| {
        p.canonicalize()
            .ok()
            .and_then(|c| c.file_name().map(|f| f.to_string_lossy().into_owned()))
            .unwrap_or_else(|| "run".into())
    };
    let out = a
        .output
        .unwrap_or_else(|| PathBuf::from(format!("compare-{}-vs-{}", name(&a.a), name(&a.b))));
    tracer::render::out::catch_interrupts();
    let summary = tracer::render::compare_report(&a.a, &a.b, &out, &a.render.options())?;
    print_summary(&summary);
    Ok(exit::OK)
}

fn run_export(a: ExportArgs) -> Result<i32, TracerError> {
    use tracer::render::export::{Format, export};
    let format = match a.format.as_str() {
        "perfetto" => Format::Perfetto,
        _ => Format::Pprof,
    };
    if !a.run.is_dir() {
        return Err(TracerError::Input(format!(
            "{}: no such run directory",
            a.run.display()
        )));
    }
    let out = a.output.unwrap_or_else(|| format.default_output(&a.run));
    tracer::render::out::catch_interrupts();
    let written = export(format, &a.run, &out)?;
    for e in &written {
        match format {
            Format::Perfetto => out!("{}: {}", e.path, e.what),
            Format::Pprof => out!("{}: {}", out.join(&e.path).display(), e.what),
        }
    }
    Ok(exit::OK)
}

fn print_summary(s: &tracer::render::ReportSummary) {
    outp!("{}", s.terminal);
    if !s.terminal.ends_with('\n') {
        out!();
    }
    for w in &s.warnings {
        eprintln!("tracer: warning: {w}");
    }
    out!("report: {}", s.out_dir.join("index.html").display());
}

fn print_record_summary(o: &record::RecordOutcome) {
    let run = &o.run;
    for t in &run.targets {
        let rows: Vec<_> = run.spans.iter().filter(|r| r.target == t.name).collect();
        let calls: u64 = rows.iter().map(|r| r.calls).sum();
        let timed: u64 = rows.iter().map(|r| r.calls - r.untimed).sum();
        let wall: u64 = rows.iter().map(|r| r.wall.sum_ns).sum();
        let oncpu: u64 = rows.iter().map(|r| r.oncpu.sum_ns).sum();
        match &t.plan {
            Some(p) if timed > 0 => out!(
                "{:<18} {:>10} calls  mean {:>10.0} ns wall  {:>10.0} ns on-CPU   [{} via {}]",
                t.name,
                calls,
                wall as f64 / timed as f64,
                oncpu as f64 / timed as f64,
                p.plan,
                p.attach_points.join(",")
            ),
            Some(p) => out!(
                "{:<18} {:>10} calls  [{} via {}]{}",
                t.name,
                calls,
                p.plan,
                p.attach_points.join(","),
                if calls == 0 && plan::target_by_name(&t.name).is_none() {
                    "  attached, 0 calls: inlined at its hot call sites, or not on this path?"
                } else {
                    ""
                }
            ),
            None => out!("{:<18} not measurable on this kernel", t.name),
        }
        if let Some(c) = &t.probe_cost {
            // The on-CPU mean when measured (what the tables fit), else the wall mean.
            let per_call = if oncpu > 0 { oncpu } else { wall };
            let mean = (timed > 0).then(|| per_call as f64 / timed as f64);
            out!("{}", tracer::render::probecost::record_note(c, mean));
        }
        if let Some(h) = tracer::render::histogram::run_target(run, &t.name) {
            outp!("{h}");
        }
    }
    for (k, v) in &run.counters {
        let bad = matches!(
            k.as_str(),
            "ringbuf_drops" | "aggregate_map_full" | "thread_map_full" | "depth_overflow"
        );
        if bad && *v > 0 {
            let hint = tracer::collect::counter_meaning(k)
                .map(|m| format!(" ({m})"))
                .unwrap_or_default();
            eprintln!("tracer: warning: {k} = {v}{hint}");
        }
    }
    if let Some(r) = &run.partial_reason {
        eprintln!("tracer: partial run ({r})");
    }
    out!("run written to {}", o.dir.display());
}

fn run_probes(a: ProbesArgs, verbose: bool) -> Result<i32, TracerError> {
    let ropts = resolve_opts(&a.targets, a.verify);
    let (resolved, engine) = record::resolve_only(&a.targets.targets, &ropts, verbose)?;
    let kernel = tracer::kernel::kernel_info();
    let reports: Vec<_> = resolved.iter().map(|r| r.report()).collect();
    let facts = serde_json::json!({
        "btf": tracer::kernel::has_vmlinux_btf(),
        "btf_error": engine.btf_error(),
        "kprobe_pmu": tracer::kernel::has_kprobe_pmu(),
        "lockdown": tracer::kernel::privileges::lockdown(),
        "tracefs": engine.tracefs_root(),
    });
    drop(engine);
    if a.json {
        let doc = serde_json::json!({ "kernel": kernel, "facts": facts, "targets": reports });
        out!("{}", serde_json::to_string_pretty(&doc).expect("json"));
    } else {
        out!(
            "kernel {} ({}): BTF {}, kprobe PMU {}, lockdown {}",
            kernel.release,
            kernel.machine,
            if tracer::kernel::has_vmlinux_btf() {
                "yes"
            } else {
                "no"
            },
            if tracer::kernel::has_kprobe_pmu() {
                "yes"
            } else {
                "no"
            },
            tracer::kernel::privileges::lockdown().unwrap_or_else(|| "n/a".into())
        );
        for r in &reports {
            out!();
            match &r.plan {
                Some(p) => out!(
                    "{}: {} ({}) at {}{}",
                    r.name,
                    p.plan,
                    p.mechanism,
                    p.attach_points.join(", "),
                    if p.timed { "" } else { " [count only]" }
                ),
                None => out!("{}: NOT MEASURABLE on this kernel", r.name),
            }
            if let Some(p) = &r.plan {
                out!("  measures: {}", p.note);
            }
            if let Some(v) = &r.verification {
                out!(
                    "  verified: {} -> {} calls (expected {}) {}",
                    v.workload,
                    v.observed,
                    v.expected,
                    if v.passed { "ok" } else { "FAILED" }
                );
            }
            for rej in &r.rejected {
                out!("  rejected {}: {}", rej.plan, rej.reason);
            }
            let why = plan::target_by_name(&r.name)
                .map(|(_, t)| t.why)
                .unwrap_or(plan::ARBITRARY_WHY);
            out!("  why traced: {why}");
        }
    }
    Ok(if reports.iter().all(|r| r.plan.is_some()) {
        exit::OK
    } else {
        exit::UNSUPPORTED
    })
}

#[cfg(test)]
mod main_tests;
