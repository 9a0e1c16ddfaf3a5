//! `tracer`: find which kernel loop is O(n). The CLI layer only parses and reports; the work
//! lives in the library modules.
use std::path::PathBuf;
use std::process::ExitCode;

use clap::{CommandFactory, Parser};

use tracer::error::{EXIT_CODES_HELP, TracerError, exit};
use tracer::{
    calibrate, cli, commands, engine::EngineOptions, help, record, resolve::ResolveOptions,
};

mod main_args;

use main_args::*;

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
        quiet: false,
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
    let mode = tracer::sweep::SweepMode::of(
        workloads,
        a.n_for,
        a.extra,
        tracer::sweep::CommandSweep {
            command: Vec::new(),
            ops: a.ops,
            phase_fn: a.phase_fn,
            name: a.name,
            confirm: a.confirm,
        },
    )?;
    let out = a
        .output
        .unwrap_or_else(|| PathBuf::from(cli::default_run_name("tracer-sweep")));
    let opts = tracer::sweep::SweepOptions {
        mode,
        n: a.n,
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
        repeat: a.repeat,
        max_repeat: a.max_repeat,
        extra_budget: a.extra_time,
        budget: a.budget,
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
