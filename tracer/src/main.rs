//! `tracer`: find which kernel loop is O(n). The CLI layer only parses and reports; the work
//! lives in the library modules.
use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Args, CommandFactory, Parser, Subcommand};

use tracer::error::{EXIT_CODES_HELP, TracerError, exit};
use tracer::{
    calibrate, cli, commands, engine::EngineOptions, gate, help, record, resolve::ResolveOptions,
};

#[derive(Parser)]
#[command(name = "tracer", version, about = help::ABOUT, long_about = help::LONG_ABOUT, after_help = EXIT_CODES_HELP)]
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
struct FloorArgs {
    #[arg(long)]
    timed: bool,
    /// tracepoint, kprobe or fentry.
    mech: String,
    /// POINT[,POINT...]
    points: String,
    #[arg(last = true, required = true, value_name = "COMMAND")]
    command: Vec<String>,
}

#[derive(Args)]
struct ManArgs {
    dir: PathBuf,
}

#[derive(Args)]
struct CompletionsArgs {
    /// The shell to complete for.
    #[arg(value_enum)]
    shell: clap_complete::Shell,
}

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

/// The gate of `report` and `sweep`.
#[derive(Args)]
struct ExpectArgs {
    /// Exit 9 unless the fitted class set of each verdict of TARGET (or of its CASE only)
    /// holds CLASS: O(1), O(log n), O(n), O(n log n) or O(n^2) (O(n²) too), e.g. do_wait:O(1)
    /// or do_wait/waitpid-pid:O(n); "O(n) by loop count" is O(n). Comma-separated or
    /// repeated. Exit 10 when TARGET or CASE has no verdict, or one with no fitted class.
    #[arg(long, value_delimiter = ',', value_parser = gate::Expect::parse, value_name = "TARGET[/CASE]:CLASS")]
    expect: Vec<gate::Expect>,
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
    expect: ExpectArgs,
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
    /// Exit 9 when a verdict's outcome is one of these: grew, shrank, same, inconclusive, or
    /// changed (grew or shrank); comma-separated or repeated. The comparison is written
    /// first. Exit 10 when the compare has no verdict (no traced target on either side).
    #[arg(long, value_delimiter = ',', value_parser = gate::FailOn::parse, value_name = "OUTCOME")]
    fail_on: Vec<gate::FailOn>,
    #[command(flatten)]
    render: RenderArgs,
}

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
    /// Follow these processes and their descendants (comma-separated, repeatable). Inside a
    /// container (a PID namespace with its own /proc), the pids as seen there.
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
    /// inside targets), and count their syscalls and page faults: the data `--discover`
    /// reports rank functions and find kernel loops by. No probe needed.
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
    #[command(flatten)]
    expect: ExpectArgs,
    /// Sample every kernel stack of the traced process tree, count its syscalls and page
    /// faults, and name the kernel loops (syscalls whose time per call grows with N) apart
    /// from the more calls (no function probe needed; no other target unless --targets).
    #[arg(long)]
    discover: bool,
    /// Runs per N of your command or of each workload (default 3): each run is its own point
    /// in the fits, the median of the runs is a size's value, the spread between them its
    /// error. Each round runs the sizes in its own shuffled order, each run setting up its N
    /// afresh.
    #[arg(long, value_name = "R")]
    repeat: Option<u32>,
    /// After the R rounds, a size runs again while a verdict could still change by more runs
    /// (the fit of the runs so far differs from the same runs' at M per size; for a
    /// workload's case, the target it exists for), the noisiest size of that verdict first,
    /// up to M runs in all (default 2R; M = R: no extra runs). Needs R of 2 or more. With
    /// --discover, a size short of samples to decide a "kernel loop undecided" frame runs
    /// again until it should have them: up to M when given, else within --extra-time only.
    #[arg(long, value_name = "M")]
    max_repeat: Option<u32>,
    /// Most wall time for those extra runs together (e.g. 30s, 5m; default: half the time
    /// the R rounds took).
    #[arg(long, value_parser = cli::parse_duration, value_name = "DURATION")]
    extra_time: Option<std::time::Duration>,
    /// The sweep's wall time (e.g. 10m): cut, in this order, extra runs, rounds after the
    /// first, then the loop-count or confirmation pass; a run's first round always runs.
    /// Each cut gets a line and is kept in sweep.json (budget_cuts). Default: no limit.
    #[arg(long, value_parser = cli::parse_duration, value_name = "DURATION")]
    budget: Option<std::time::Duration>,
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
    /// With --discover and your command: time the top K ranked functions and the root cause
    /// exactly in a second pass (run <NAME>-confirm), where the kernel allows function
    /// probes, with each one's caller, so that the kernel counts its calls per call of the
    /// caller (the loop's trips); 0 = off.
    #[arg(long, default_value_t = 3, value_name = "K")]
    confirm: usize,
    /// Built-in workloads: skip the loop-count pass (run <WORKLOAD>-loops), which runs each
    /// workload once more per N with its target's per-trip function traced (do_wait's
    /// wait_consider_task, dup_mmap's vm_area_dup, sysvipc_find_ipc's idr_find), where the
    /// kernel allows function probes, so that the verdicts' classes rest on exact trip counts.
    #[arg(long)]
    no_loop_count: bool,
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

/// Set: parse the command line, exit 0 when it parses, and do nothing else.
const PARSE_ONLY_ENV: &str = "TRACER_PARSE_ONLY";

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().collect();
    // Hidden helpers that this binary re-executes itself as; not part of the CLI.
    match args.get(1).map(String::as_str) {
        Some(calibrate::CHILD_SUBCOMMAND) => return code(calibrate::child_main(&args[2..])),
        Some(tracer::cost_at_attach::CHILD_SUBCOMMAND) => {
            return code(tracer::cost_at_attach::child_main(&args[2..]));
        }
        Some(record::EXEC_HELD) => return code(record::exec_held_main(&args[2..])),
        _ => {}
    }
    let cli = Cli::parse();
    // The documentation's test (xtask/tests/docs.rs) checks that every command quoted in the
    // README and docs/ parses with this very CLI, without running any of them.
    if std::env::var_os(PARSE_ONLY_ENV).is_some() {
        return ExitCode::SUCCESS;
    }
    // The hidden helpers run without the logger, as they did before clap parsed them.
    let command = match cli.command {
        Command::Floor(a) => return code(commands::floor(a.timed, &a.mech, &a.points, &a.command)),
        Command::Man(a) => return code(write_man_pages(&a.dir)),
        c => c,
    };
    let level = if cli.verbose { "debug" } else { "warn" };
    env_logger::Builder::from_env(env_logger::Env::default().default_filter_or(level))
        .format_timestamp(None)
        .init();
    let result = match command {
        Command::Record(a) => run_record(a, cli.verbose),
        Command::Sweep(a) => run_sweep(a, cli.verbose),
        Command::Probes(a) => commands::probes(
            &a.targets.targets,
            &resolve_opts(&a.targets, a.verify),
            a.json,
            cli.verbose,
        ),
        Command::Report(a) => commands::report(
            &a.dir,
            a.output,
            &tracer::render::ReportOptions {
                subtract_probe_cost: a.subtract_probe_cost,
                ..a.render.options()
            },
            &a.expect.expect,
        ),
        Command::Compare(a) => {
            commands::compare(&a.a, &a.b, a.output, &a.render.options(), &a.fail_on)
        }
        Command::Completions(a) => run_completions(a),
        Command::Export(a) => {
            use tracer::render::export::Format;
            let format = match a.format.as_str() {
                "perfetto" => Format::Perfetto,
                _ => Format::Pprof,
            };
            commands::export(format, &a.run, a.output)
        }
        Command::Floor(_) | Command::Man(_) => unreachable!("dispatched above"),
    };
    match result {
        Ok(c) => code(c),
        Err(e) => {
            eprintln!("tracer: {e}");
            code(e.exit_code())
        }
    }
}

/// `tracer __man DIR`: the man pages generated from the command line definition.
fn write_man_pages(dir: &std::path::Path) -> i32 {
    let result =
        std::fs::create_dir_all(dir).and_then(|()| clap_mangen::generate_to(Cli::command(), dir));
    match result {
        Ok(()) => exit::OK,
        Err(e) => {
            eprintln!("tracer __man: {}: {e}", dir.display());
            exit::OUTPUT
        }
    }
}

/// `tracer completions SHELL`: the script goes to stdout whole or not at all (a closed pipe is
/// not an error, as for every other command).
fn run_completions(a: CompletionsArgs) -> Result<i32, TracerError> {
    let mut script = Vec::new();
    clap_complete::generate(a.shell, &mut visible_command(), "tracer", &mut script);
    use std::io::Write as _;
    let _ = std::io::stdout().write_all(&script);
    Ok(exit::OK)
}

/// The command line without its hidden helpers: clap_complete lists hidden subcommands too,
/// and clap cannot drop a subcommand, so the completions come from a copy built without them.
fn visible_command() -> clap::Command {
    let full = Cli::command();
    let mut cmd = clap::Command::new("tracer")
        .version(env!("CARGO_PKG_VERSION"))
        .about(help::ABOUT)
        .long_about(help::LONG_ABOUT)
        .after_help(EXIT_CODES_HELP)
        .subcommand_required(true)
        .arg_required_else_help(true);
    for a in full.get_arguments() {
        cmd = cmd.arg(a.clone());
    }
    for s in full.get_subcommands().filter(|s| !s.is_hide_set()) {
        cmd = cmd.subcommand(s.clone());
    }
    cmd
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
            max_phases: a.maps.max_phases,
            discover: a.discover,
            ..EngineOptions::default()
        },
        progress: true,
        attach_json: a.attach_json,
        marker_binaries: a.markers,
        phase_fn: a.phase_fn,
    };
    commands::record(opts)
}

fn run_sweep(a: SweepArgs, verbose: bool) -> Result<i32, TracerError> {
    let a_no_flame = a.no_flamegraphs;
    let a_subtract = a.subtract_probe_cost;
    let a_no_report = a.no_report;
    let expect = a.expect.expect.clone();
    if a.discover && a.no_samples {
        return Err(TracerError::Usage(
            "--discover samples stacks: it cannot be combined with --no-samples".into(),
        ));
    }
    let workloads: Vec<String> = if a.all {
        workloads::catalog::WORKLOADS
            .iter()
            .map(|w| w.name.to_string())
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
            bpf_log: verbose,
            max_phases: a.maps.max_phases,
            discover: a.discover,
            ..EngineOptions::default()
        },
        progress: true,
        command,
        repeat: a.repeat,
        max_repeat: a.max_repeat,
        extra_budget: a.extra_time,
        budget: a.budget,
        ops: a.ops,
        phase_fn: a.phase_fn,
        name: a.name,
        confirm: a.confirm,
        loop_count: !a.no_loop_count,
    };
    let report = (!a_no_report).then(|| tracer::render::ReportOptions {
        flamegraphs: !a_no_flame,
        subtract_probe_cost: a_subtract,
        ..Default::default()
    });
    commands::sweep(opts, report, &expect)
}

#[cfg(test)]
mod main_tests;
