//! `tracer sweep`: run workloads over their N lists under one tracing session and collect one
//! run directory per workload in a sweep directory, ready for `tracer report`.
//!
//! ```text
//! OUT/
//!   sweep.json        what was swept, on which kernel, and whether it completed
//!   <workload>/       one run directory per workload (see rundata/)
//! ```
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};

use crate::analysis::LoadedRun;
use crate::dir_writer::DirWriter;
use crate::engine::EngineOptions;
use crate::error::{TracerError, exit};
use crate::kernel;
use crate::plan::Target;
use crate::record::{self, Session};
use crate::resolve::ResolveOptions;
use crate::rundata::{KernelInfo, RunStatus};
use workloads::catalog;

pub mod budget;
mod confirm;
mod jobs;
mod loops;

use jobs::Job;
pub use jobs::find_workloads_bin;

pub use crate::rundata::SWEEP_FILE;
pub const SWEEP_FORMAT: &str = "tracer-sweep/1";

/// Runs of an external sweep's command per N unless `--repeat` says otherwise: with three,
/// the spread between runs measures each size's error and one disturbed run cannot move the
/// size's value (the median of the runs is fitted).
pub const DEFAULT_REPEAT: u32 = 3;

#[derive(Clone, Debug)]
pub struct SweepOptions {
    /// What runs once per N: the built-in workloads, or a command.
    pub mode: SweepMode,
    /// N list for every workload (default: each workload's `sweep_n` in the workloads crate);
    /// required for a command.
    pub n: Option<String>,
    pub out: PathBuf,
    pub force: bool,
    pub workloads_bin: Option<PathBuf>,
    pub targets: Vec<String>,
    pub resolve: ResolveOptions,
    pub engine: EngineOptions,
    pub progress: bool,
    /// Runs per N; None: [`DEFAULT_REPEAT`].
    pub repeat: Option<u32>,
    /// Most runs of one N, extra runs for open verdicts included; None:
    /// twice the repeat.
    pub max_repeat: Option<u32>,
    /// Most wall time for those extra runs; None: half the planned runs' time.
    pub extra_budget: Option<std::time::Duration>,
    /// Count the loops of the targets in a pass of their own (`loops`), where the kernel
    /// allows function probes: a built-in workload's known per-trip function, a command's
    /// from its root causes.
    pub loop_count: bool,
    /// `--budget`: the sweep's wall time (see [`budget`]).
    pub budget: Option<std::time::Duration>,
}

/// The two things a sweep can run once per N. Each holds only its own flags, so one that
/// cannot apply cannot be set ([`SweepMode::of`] refuses it by name).
#[derive(Clone, Debug)]
pub enum SweepMode {
    /// Built-in workloads (never empty).
    Workloads(WorkloadSweep),
    /// The user's command, `{n}` in its arguments replaced by each N.
    Command(CommandSweep),
}

#[derive(Clone, Debug)]
pub struct WorkloadSweep {
    pub workloads: Vec<String>,
    /// N lists for particular workloads (workload -> list), over `n` and the defaults.
    pub n_for: Vec<(String, String)>,
    /// Extra arguments for every workload (after its subcommand), e.g. `--iterations 50`.
    pub extra_args: Vec<String>,
}

#[derive(Clone, Debug, Default)]
pub struct CommandSweep {
    /// The command, never empty.
    pub command: Vec<String>,
    /// Operations per run of the command, for per-op columns; with `phase_fn`, per call of
    /// the function.
    pub ops: Option<crate::cli::OpsExpr>,
    /// `--phase-fn BINARY:SYMBOL|0xADDR`: only calls inside it count.
    pub phase_fn: Option<String>,
    /// Name of the command's run directory (default: the command's file name).
    pub name: Option<String>,
    /// With discover: time this many of the top-ranked functions exactly in a second pass,
    /// where the kernel allows function probes (0 = no second pass).
    pub confirm: usize,
}

impl SweepMode {
    /// The mode of `tracer sweep`'s arguments: the named workloads, with what follows `--`
    /// as their arguments; with none named, what follows `--` is the command (`command` then
    /// holds its flags). A command's flag given with workloads, or a workload's with a
    /// command, is a usage error naming it.
    pub fn of(
        workloads: Vec<String>,
        n_for: Vec<(String, String)>,
        after_dashes: Vec<String>,
        command: CommandSweep,
    ) -> Result<SweepMode, TracerError> {
        if workloads.is_empty() {
            if after_dashes.is_empty() {
                return Err(TracerError::Usage(format!(
                    "name the workloads to sweep, or --all (known: {}), or sweep your own \
                     command: tracer sweep --n 10,100,1000 -- ./bench {{n}}",
                    catalog::names()
                )));
            }
            if !n_for.is_empty() {
                return Err(TracerError::Usage(
                    "--n-for applies to built-in workloads; a command takes --n".into(),
                ));
            }
            return Ok(SweepMode::Command(CommandSweep {
                command: after_dashes,
                ..command
            }));
        }
        if command.ops.is_some() || command.name.is_some() || command.phase_fn.is_some() {
            return Err(TracerError::Usage(
                "--ops, --name and --phase-fn apply to a command swept with -- CMD {n}".into(),
            ));
        }
        Ok(SweepMode::Workloads(WorkloadSweep {
            workloads,
            n_for,
            extra_args: after_dashes,
        }))
    }

    /// The command's flags, for a command.
    pub fn command(&self) -> Option<&CommandSweep> {
        match self {
            SweepMode::Command(c) => Some(c),
            SweepMode::Workloads(_) => None,
        }
    }
}

#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct Sweep {
    pub format: String,
    pub status: RunStatus,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub partial_reason: Option<String>,
    pub kernel: KernelInfo,
    pub hostname: String,
    pub duration_s: f64,
    pub runs: Vec<SweepRun>,
    /// `--budget` in seconds, when one was set.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub budget_s: Option<f64>,
    /// What the budget cut, one line each (rounds of a run, a pass).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub budget_cuts: Vec<String>,
}

#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct SweepRun {
    pub workload: String,
    /// Run directory, relative to the sweep directory.
    pub dir: String,
    pub n: Vec<u64>,
    pub command: Vec<String>,
    pub command_exit: Option<i32>,
    pub status: RunStatus,
}

impl SweepRun {
    /// A pass's run `name` of `job` (the confirmation or the loop-count pass), as recorded.
    fn pass(name: String, job: &jobs::Job, run: &crate::rundata::Run) -> SweepRun {
        SweepRun {
            workload: name.clone(),
            dir: name,
            n: job.values.clone(),
            command: job.spec.command.clone(),
            command_exit: run.command_exit,
            status: run.status,
        }
    }
}

impl Sweep {
    pub fn read(dir: &Path) -> Result<Sweep, String> {
        let path = dir.join(SWEEP_FILE);
        let text =
            std::fs::read_to_string(&path).map_err(|e| format!("{}: {e}", path.display()))?;
        let s: Sweep =
            serde_json::from_str(&text).map_err(|e| format!("{}: {e}", path.display()))?;
        if s.format != SWEEP_FORMAT {
            return Err(format!(
                "{}: unsupported sweep format {:?}",
                path.display(),
                s.format
            ));
        }
        Ok(s)
    }
}

pub struct SweepOutcome {
    pub dir: PathBuf,
    pub sweep: Sweep,
    pub exit_code: i32,
}

/// The line said when a job's runs are done: complete or partial, its sizes, and how its
/// command failed.
fn job_done_line(job: &Job, run: &crate::rundata::Run) -> String {
    let failed: Vec<String> = run
        .invocations
        .iter()
        .filter(|i| job.spec.external.is_some() && i.failed())
        .map(|i| i.n.to_string())
        .collect();
    format!(
        "{}: {} ({} N values){}{}",
        job.name,
        if run.status == RunStatus::Complete {
            "done"
        } else {
            "partial"
        },
        job.values.len(),
        match run.command_exit {
            Some(c) if c != 0 && failed.is_empty() => format!(", exited {c}"),
            _ => String::new(),
        },
        if failed.is_empty() {
            String::new()
        } else {
            format!(", the command failed at N = {}", failed.join(", "))
        }
    )
}

impl Job {
    /// Its command as sweep.json records it: the workload's report file was a temporary,
    /// which run.json embeds as `workload`.
    fn shown_command(&self) -> Vec<String> {
        self.spec
            .command
            .iter()
            .map(|a| match &self.json {
                Some(j) if *a == j.to_string_lossy() => "<run.json:workload>".into(),
                _ => a.clone(),
            })
            .collect()
    }
}

/// The sweep's exit status: interrupted, a run's command failed, or 0.
fn exit_code(sweep: &Sweep, interrupted: bool) -> i32 {
    if interrupted {
        exit::INTERRUPTED
    } else if sweep
        .runs
        .iter()
        .any(|r| r.command_exit.is_some_and(|c| c != 0))
    {
        exit::COMMAND_FAILED
    } else {
        exit::OK
    }
}

/// What the passes after a sweep's jobs start from.
struct AfterJobs<'a> {
    opts: &'a SweepOptions,
    jobs: &'a [Job],
    targets: &'a [(u32, &'static Target)],
    tmp_root: &'a Path,
    budget: Option<budget::Budget>,
    /// The first round of each job, together: what a pass is estimated to take.
    first_rounds: Duration,
}

impl AfterJobs<'_> {
    /// Every job ran: the loop-count pass (the built-in workloads' known loops, and what the
    /// command's root causes name, from its run `first`) or, for discover, the confirmation
    /// pass over `first`. They are runs more, not jobs; each takes about one round of what
    /// it runs, and is skipped (said in `cuts`) when that no longer fits the budget. Returns
    /// their runs and the signal that stopped them.
    async fn passes(
        &self,
        first: Option<LoadedRun>,
        cuts: &mut Vec<String>,
    ) -> Result<(Vec<SweepRun>, Option<&'static str>), TracerError> {
        let opts = self.opts;
        let fits = |what: &str, cuts: &mut Vec<String>| match &self.budget {
            Some(b) => match b.pass_cut(what, self.first_rounds) {
                Some(cut) => {
                    eprintln!("tracer: {cut}");
                    cuts.push(cut);
                    false
                }
                None => true,
            },
            None => true,
        };
        if opts.loop_count && !opts.engine.discover && fits("the loop-count pass", cuts) {
            let mut counts = loops::built_in(self.jobs, self.targets);
            if let Some(run) = first
                && let Some(job) = self.jobs.iter().find(|j| loops::by_root_cause(opts, j))
            {
                match loops::from_root_causes(job, run, self.targets) {
                    Some(count) => counts.push(count),
                    None => eprintln!(
                        "tracer: no loop count for {}: no growing target's root cause names a \
                         function below it",
                        job.name
                    ),
                }
            }
            return loops::loop_pass(opts, &counts, self.tmp_root).await;
        }
        if opts.engine.discover
            && fits("the confirmation pass", cuts)
            && let Some(first) = first
            && let Some(job) = self.jobs.iter().find(|j| j.is_command())
            && let Some(run) = confirm::confirm_pass(opts, job, self.tmp_root, first).await?
        {
            return Ok((vec![run], None));
        }
        Ok((Vec::new(), None))
    }
}

pub fn sweep(opts: SweepOptions) -> Result<SweepOutcome, TracerError> {
    let rounds = jobs::rounds(&opts)?;
    let (plan, external_job, bin) = match &opts.mode {
        SweepMode::Workloads(w) => (
            jobs::plan_workloads(w, opts.n.as_deref())?,
            None,
            Some(jobs::find_workloads_bin(opts.workloads_bin.as_deref())?),
        ),
        SweepMode::Command(c) => (Vec::new(), Some(jobs::external_spec(&opts, c)?), None),
    };
    let targets = record::select_targets(&opts.targets, opts.engine.discover)?;
    record::check_forced(&opts.resolve.forced)?;
    record::check_privileges()?;
    let writer = DirWriter::prepare(&opts.out, opts.force)?;
    let tmp_root = writer.path().to_path_buf();

    let mut jobs: Vec<Job> = external_job.into_iter().collect();
    if let Some(bin) = &bin {
        let extra_args = match &opts.mode {
            SweepMode::Workloads(w) => w.extra_args.as_slice(),
            SweepMode::Command(_) => &[],
        };
        jobs.extend(jobs::workload_jobs(
            extra_args,
            &plan,
            bin,
            &tmp_root,
            rounds.clone(),
        ));
    }

    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| TracerError::Other(format!("starting the runtime: {e}")))?;
    let started = Instant::now();
    let (runs, interrupted, all_ran, budget_cuts) = runtime.block_on(async {
        let mut session =
            Session::attach(opts.engine.clone(), &targets, &opts.resolve, opts.progress).await?;
        let passes = budget::passes_planned(&opts, &jobs, &targets);
        let counted = loops::counted_targets(
            session.resolved(),
            &session.tracefs_root(),
            passes && opts.loop_count && !opts.engine.discover,
        );
        let budget = opts
            .budget
            .map(|b| budget::Budget::new(started, b, rounds.0, passes));
        let TimedRounds {
            mut runs,
            first_pass,
            first_rounds,
        } = timed_rounds(
            &mut session,
            &opts,
            &jobs,
            &tmp_root,
            budget,
            &counted,
            passes,
        )
        .await?;
        let mut interrupted = session.interrupted;
        let mut cuts = std::mem::take(&mut session.budget_cuts);
        session.finish();
        let all_ran = runs.len() == jobs.len();
        if interrupted.is_none() && passes {
            let after = AfterJobs {
                opts: &opts,
                jobs: &jobs,
                targets: &targets,
                tmp_root: &tmp_root,
                budget,
                first_rounds,
            };
            let (more, stopped) = after.passes(first_pass, &mut cuts).await?;
            runs.extend(more);
            interrupted = stopped;
        }
        Ok::<_, TracerError>((runs, interrupted, all_ran, cuts))
    })?;

    let sweep = sweep_record(&opts, started, runs, interrupted, all_ran, budget_cuts);
    writer.write(
        SWEEP_FILE,
        serde_json::to_string_pretty(&sweep)
            .expect("sweep serializes")
            .as_bytes(),
    )?;
    let dir = writer.commit()?;
    let exit_code = exit_code(&sweep, interrupted.is_some());
    Ok(SweepOutcome {
        dir,
        sweep,
        exit_code,
    })
}

/// What the timed rounds of a sweep's jobs came to.
struct TimedRounds {
    runs: Vec<SweepRun>,
    /// The run the passes after the jobs start from (a discover run to confirm, or the
    /// command's run whose root causes name the loops to count), as recorded.
    first_pass: Option<LoadedRun>,
    /// The jobs' first rounds' time, for the passes' estimate.
    first_rounds: Duration,
}

/// Runs each job in the session, each given its share of `--budget` and the loops counted
/// in its rounds, until the last or a signal.
async fn timed_rounds(
    session: &mut Session,
    opts: &SweepOptions,
    jobs: &[Job],
    tmp_root: &Path,
    budget: Option<budget::Budget>,
    counted: &[String],
    passes: bool,
) -> Result<TimedRounds, TracerError> {
    let mut done = TimedRounds {
        runs: Vec::new(),
        first_pass: None,
        first_rounds: Duration::ZERO,
    };
    for (k, job) in jobs.iter().enumerate() {
        let run_writer = DirWriter::prepare(&tmp_root.join(&job.name), false)?;
        let mut spec = job.spec.clone();
        if let Some(ext) = spec.external.as_mut() {
            ext.extra.deadline = budget.map(|b| b.share(jobs.len() - k));
            ext.extra.counted = counted.to_vec();
        }
        let outcome = session.run(&spec, run_writer, false).await?;
        done.first_rounds += budget::first_round(&outcome.run.invocations, job.values.len());
        // The discover run the confirmation pass starts from, or the command's run whose
        // root causes name the loops to count, kept as recorded.
        let confirms = opts.engine.discover
            && opts.mode.command().is_some_and(|c| c.confirm > 0)
            && job.is_command();
        if confirms || (passes && loops::by_root_cause(opts, job)) {
            let loaded = LoadedRun::recorded(
                job.name.clone(),
                outcome.dir.clone(),
                outcome.run.clone(),
                outcome.stacks.clone(),
            );
            done.first_pass = Some(loaded);
        }
        if let Some(json) = &job.json {
            let _ = std::fs::remove_file(json);
        }
        session.println(&job_done_line(job, &outcome.run));
        done.runs.push(SweepRun {
            workload: job.name.clone(),
            dir: job.name.clone(),
            n: job.values.clone(),
            command: job.shown_command(),
            command_exit: outcome.run.command_exit,
            status: outcome.run.status,
        });
        if session.interrupted.is_some() {
            break;
        }
    }
    Ok(done)
}

/// The sweep's own record (`sweep.json`): complete only when every job ran and no signal
/// stopped it.
fn sweep_record(
    opts: &SweepOptions,
    started: Instant,
    runs: Vec<SweepRun>,
    interrupted: Option<&'static str>,
    all_ran: bool,
    budget_cuts: Vec<String>,
) -> Sweep {
    Sweep {
        format: SWEEP_FORMAT.into(),
        status: if interrupted.is_none() && all_ran {
            RunStatus::Complete
        } else {
            RunStatus::Partial
        },
        partial_reason: interrupted.map(|s| format!("interrupted by {s}")),
        kernel: kernel::kernel_info(),
        hostname: kernel::hostname(),
        duration_s: started.elapsed().as_secs_f64(),
        runs,
        budget_s: opts.budget.map(|b| b.as_secs_f64()),
        budget_cuts,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unknown_workloads_and_bad_lists_are_usage_errors() {
        let workloads = |names: &[&str]| {
            SweepMode::of(
                names.iter().map(|n| n.to_string()).collect(),
                vec![],
                vec![],
                CommandSweep::default(),
            )
        };
        let base = SweepOptions {
            mode: workloads(&["nope"]).unwrap(),
            n: None,
            out: PathBuf::from("/nonexistent/x"),
            force: false,
            workloads_bin: None,
            targets: vec![],
            resolve: ResolveOptions::default(),
            engine: EngineOptions::default(),
            progress: false,
            repeat: None,
            max_repeat: None,
            extra_budget: None,
            loop_count: true,
            budget: None,
        };
        let e = sweep(base.clone()).err().unwrap();
        assert!(matches!(e, TracerError::Usage(_)), "{e}");
        let e = sweep(SweepOptions {
            mode: workloads(&["waitpid"]).unwrap(),
            n: Some("1,,2".into()),
            ..base
        })
        .err()
        .unwrap();
        assert!(e.to_string().contains("--n"), "{e}");
        let e = workloads(&[]).err().unwrap();
        assert!(e.to_string().contains("--all"), "{e}");
    }

    /// A flag of one mode given to the other is refused by name, before anything runs.
    #[test]
    fn a_flag_of_the_other_mode_is_a_usage_error() {
        let named = CommandSweep {
            name: Some("bench".into()),
            ..CommandSweep::default()
        };
        let e = SweepMode::of(vec!["waitpid".into()], vec![], vec![], named.clone())
            .err()
            .unwrap();
        assert!(
            e.to_string().contains("--ops, --name and --phase-fn"),
            "{e}"
        );
        let n_for = vec![("waitpid".to_string(), "1,10".to_string())];
        let e = SweepMode::of(vec![], n_for, vec!["./bench".into()], named.clone())
            .err()
            .unwrap();
        assert!(
            e.to_string()
                .contains("--n-for applies to built-in workloads"),
            "{e}"
        );
        let m = SweepMode::of(vec![], vec![], vec!["./bench".into(), "{n}".into()], named).unwrap();
        let c = m.command().expect("a command");
        assert_eq!(c.command, ["./bench", "{n}"]);
        assert_eq!(c.name.as_deref(), Some("bench"));
        let m = SweepMode::of(
            vec!["spawn".into()],
            vec![],
            vec!["--iterations".into()],
            CommandSweep::default(),
        )
        .unwrap();
        assert!(m.command().is_none());
    }
}
