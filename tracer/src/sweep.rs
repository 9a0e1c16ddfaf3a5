//! `tracer sweep`: run workloads over their N lists under one tracing session and collect one
//! run directory per workload in a sweep directory, ready for `tracer report`.
//!
//! ```text
//! OUT/
//!   sweep.json        what was swept, on which kernel, and whether it completed
//!   <workload>/       one run directory per workload (see rundata/)
//! ```
use std::path::{Path, PathBuf};
use std::time::Instant;

use serde::{Deserialize, Serialize};

use crate::dir_writer::DirWriter;
use crate::engine::EngineOptions;
use crate::error::{TracerError, exit};
use crate::kernel;
use crate::record::{self, FilterSpec, RunSpec, Session};
use crate::resolve::ResolveOptions;
use crate::rundata::{KernelInfo, RunStatus};
use workloads::catalog;

pub const SWEEP_FILE: &str = "sweep.json";
pub const SWEEP_FORMAT: &str = "tracer-sweep/1";

/// Runs of an external sweep's command per N unless `--repeat` says otherwise: with three,
/// the spread between runs measures each size's error and one disturbed run cannot move the
/// size's value (the median of the runs is fitted).
pub const DEFAULT_REPEAT: u32 = 3;

#[derive(Clone, Debug)]
pub struct SweepOptions {
    pub workloads: Vec<String>,
    /// N list for every workload (default: each workload's `sweep_n` in the workloads crate).
    pub n: Option<String>,
    /// N lists for particular workloads (workload -> list), over `n` and the defaults.
    pub n_for: Vec<(String, String)>,
    /// Extra arguments for every workload (after its subcommand), e.g. `--iterations 50`.
    pub extra_args: Vec<String>,
    pub out: PathBuf,
    pub force: bool,
    pub workloads_bin: Option<PathBuf>,
    pub targets: Vec<String>,
    pub resolve: ResolveOptions,
    pub engine: EngineOptions,
    pub progress: bool,
    /// An external sweep: run this command (with `{n}` replaced) once per N instead of
    /// the workloads; `n` is then required.
    pub command: Vec<String>,
    /// Runs of the command per N (external sweeps); None: [`DEFAULT_REPEAT`].
    pub repeat: Option<u32>,
    /// Most runs of one N, extra runs of unsettled sizes included (external sweeps); None:
    /// twice the repeat.
    pub max_repeat: Option<u32>,
    /// Most wall time for those extra runs; None: half the planned runs' time.
    pub extra_budget: Option<std::time::Duration>,
    /// Operations per run of the command (external sweeps), for per-op columns; with
    /// `phase_fn`, per call of the function.
    pub ops: Option<crate::cli::OpsExpr>,
    /// `--phase-fn BINARY:SYMBOL|0xADDR` (external sweeps): only calls inside it count.
    pub phase_fn: Option<String>,
    /// Name of the external command's run directory (default: the command's file name).
    pub name: Option<String>,
    /// With discover on an external command: time this many of the top-ranked functions
    /// exactly in a second pass, where the kernel allows function probes (0 = no second pass).
    pub confirm: usize,
}

/// One run directory of a sweep: a workload over its N list, or the user's command.
struct Job {
    name: String,
    values: Vec<u64>,
    spec: RunSpec,
    /// The workload's own JSON report, a temporary embedded in run.json.
    json: Option<PathBuf>,
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

/// Find the workloads binary: next to this executable (an install or a cargo target dir),
/// else on PATH.
pub fn find_workloads_bin(explicit: Option<&Path>) -> Result<PathBuf, TracerError> {
    if let Some(p) = explicit {
        return crate::exec_path::find_executable(&p.to_string_lossy()).ok_or_else(|| {
            TracerError::Usage(format!(
                "--workloads-bin {}: not an executable",
                p.display()
            ))
        });
    }
    if let Ok(me) = std::env::current_exe()
        && let Some(dir) = me.parent()
    {
        for candidate in workloads_beside(dir) {
            if let Some(p) = crate::exec_path::find_executable(&candidate.to_string_lossy()) {
                return Ok(p);
            }
        }
    }
    crate::exec_path::find_executable("workloads").ok_or_else(|| {
        TracerError::Usage(
            "the workloads binary was not found next to tracer, in ../lib/tracer/, or on PATH \
             (build it with `cargo build -p workloads`, or pass --workloads-bin)"
                .into(),
        )
    })
}

/// Where `workloads` is looked for relative to the tracer's own directory, in order: beside it
/// (a build tree, the release directory) and in `../lib/tracer/` (the .deb's
/// `/usr/lib/tracer/workloads` for `/usr/bin/tracer`, since `workloads` is too generic a name
/// to put on PATH).
fn workloads_beside(exe_dir: &Path) -> [PathBuf; 2] {
    [
        exe_dir.join("workloads"),
        exe_dir.join("../lib/tracer/workloads"),
    ]
}

pub struct SweepOutcome {
    pub dir: PathBuf,
    pub sweep: Sweep,
    pub exit_code: i32,
}

pub fn sweep(opts: SweepOptions) -> Result<SweepOutcome, TracerError> {
    let external = !opts.command.is_empty();
    if external && !opts.workloads.is_empty() {
        return Err(TracerError::Usage(
            "name workloads or give a command after --, not both (workload arguments go \
             after -- only when a workload is named)"
                .into(),
        ));
    }
    if !external && opts.workloads.is_empty() {
        return Err(TracerError::Usage(format!(
            "name the workloads to sweep, or --all (known: {}), or sweep your own command: \
             tracer sweep --n 10,100,1000 -- ./bench {{n}}",
            catalog::names()
        )));
    }
    if !external
        && (opts.repeat.is_some()
            || opts.max_repeat.is_some()
            || opts.extra_budget.is_some()
            || opts.ops.is_some()
            || opts.name.is_some()
            || opts.phase_fn.is_some())
    {
        return Err(TracerError::Usage(
            "--repeat, --max-repeat, --extra-time, --ops, --name and --phase-fn apply to a \
             command swept with -- CMD {n}"
                .into(),
        ));
    }
    for (w, _) in &opts.n_for {
        if catalog::by_name(w).is_none() {
            return Err(TracerError::Usage(format!(
                "--n-for {w}=...: unknown workload {w:?}"
            )));
        }
    }
    let mut plan: Vec<(String, Vec<u64>, String)> = Vec::new();
    let mut seen: Vec<&String> = Vec::new();
    for w in &opts.workloads {
        if seen.contains(&w) {
            return Err(TracerError::Usage(format!("workload {w:?} is named twice")));
        }
        seen.push(w);
        let Some(known) = catalog::by_name(w) else {
            return Err(TracerError::Usage(format!(
                "unknown workload {w:?} (known: {})",
                catalog::names()
            )));
        };
        let list = opts
            .n_for
            .iter()
            .rev()
            .find(|(name, _)| name == w)
            .map(|(_, l)| l.clone())
            .or_else(|| opts.n.clone())
            .unwrap_or_else(|| known.sweep_n.to_string());
        let values = workloads::nlist::parse(&list)
            .map_err(|e| TracerError::Usage(format!("--n {list:?}: {e}")))?;
        plan.push((w.clone(), values, list));
    }
    let external_job = if external {
        Some(external_spec(&opts)?)
    } else {
        None
    };
    let bin = if external {
        None
    } else {
        Some(find_workloads_bin(opts.workloads_bin.as_deref())?)
    };
    let targets = record::select_targets(&opts.targets, opts.engine.discover)?;
    record::check_forced(&opts.resolve.forced)?;
    record::check_privileges()?;
    let writer = DirWriter::prepare(&opts.out, opts.force)?;
    let tmp_root = writer.path().to_path_buf();

    let mut jobs: Vec<Job> = Vec::new();
    if let Some(job) = external_job {
        jobs.push(job);
    }
    for (i, (name, values, list)) in plan.iter().enumerate() {
        let bin = bin
            .clone()
            .expect("workloads binary found when workloads are named");
        let json = tmp_root.join(format!(".{name}.workload.json"));
        let mut command = vec![
            bin.to_string_lossy().into_owned(),
            name.clone(),
            "--n".into(),
            list.clone(),
        ];
        command.push("--json".into());
        command.push(json.to_string_lossy().into_owned());
        command.extend(opts.extra_args.iter().cloned());
        jobs.push(Job {
            name: name.clone(),
            values: values.clone(),
            spec: RunSpec {
                command,
                exe: Some(bin.clone()),
                filter: FilterSpec::Follow(Vec::new()),
                duration: None,
                attach_json: Some(json.clone()),
                marker_binaries: Vec::new(),
                label: format!("{name} ({}/{})", i + 1, plan.len()),
                n_values: values.clone(),
                external: None,
                phase_fn: None,
            },
            json: Some(json),
        });
    }

    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| TracerError::Other(format!("starting the runtime: {e}")))?;
    let started = Instant::now();
    let (runs, interrupted, all_ran) = runtime.block_on(async {
        let mut session =
            Session::attach(opts.engine.clone(), &targets, &opts.resolve, opts.progress).await?;
        let mut runs = Vec::new();
        for job in &jobs {
            let run_writer = DirWriter::prepare(&tmp_root.join(&job.name), false)?;
            let outcome = session.run(&job.spec, run_writer, false).await?;
            if let Some(json) = &job.json {
                let _ = std::fs::remove_file(json);
            }
            let failed: Vec<u64> = outcome
                .run
                .invocations
                .iter()
                .filter(|i| job.spec.external.is_some() && i.failed())
                .map(|i| i.n)
                .collect();
            session.println(&format!(
                "{}: {} ({} N values){}{}",
                job.name,
                if outcome.run.status == RunStatus::Complete {
                    "done"
                } else {
                    "partial"
                },
                job.values.len(),
                match outcome.run.command_exit {
                    Some(c) if c != 0 && failed.is_empty() => format!(", exited {c}"),
                    _ => String::new(),
                },
                if failed.is_empty() {
                    String::new()
                } else {
                    format!(
                        ", the command failed at N = {}",
                        failed
                            .iter()
                            .map(u64::to_string)
                            .collect::<Vec<_>>()
                            .join(", ")
                    )
                }
            ));
            // The report file was a temporary; run.json embeds it as `workload`.
            let shown: Vec<String> = job
                .spec
                .command
                .iter()
                .map(|a| match &job.json {
                    Some(j) if *a == j.to_string_lossy() => "<run.json:workload>".into(),
                    _ => a.clone(),
                })
                .collect();
            runs.push(SweepRun {
                workload: job.name.clone(),
                dir: job.name.clone(),
                n: job.values.clone(),
                command: shown,
                command_exit: outcome.run.command_exit,
                status: outcome.run.status,
            });
            if session.interrupted.is_some() {
                break;
            }
        }
        let interrupted = session.interrupted;
        session.finish();
        // Every job ran; the confirmation pass below is one run more, not one of the jobs.
        let all_ran = runs.len() == jobs.len();
        if interrupted.is_none()
            && opts.engine.discover
            && opts.confirm > 0
            && let Some(job) = jobs.iter().find(|j| j.spec.external.is_some())
            && let Some(run) = confirm_pass(&opts, job, &tmp_root).await?
        {
            runs.push(run);
        }
        Ok::<_, TracerError>((runs, interrupted, all_ran))
    })?;

    let complete = interrupted.is_none() && all_ran;
    let sweep = Sweep {
        format: SWEEP_FORMAT.into(),
        status: if complete {
            RunStatus::Complete
        } else {
            RunStatus::Partial
        },
        partial_reason: interrupted.map(|s| format!("interrupted by {s}")),
        kernel: kernel::kernel_info(),
        hostname: kernel::hostname(),
        duration_s: started.elapsed().as_secs_f64(),
        runs,
    };
    writer.write(
        SWEEP_FILE,
        serde_json::to_string_pretty(&sweep)
            .expect("sweep serializes")
            .as_bytes(),
    )?;
    let dir = writer.commit()?;
    let exit_code = if interrupted.is_some() {
        exit::INTERRUPTED
    } else if sweep
        .runs
        .iter()
        .any(|r| r.command_exit.is_some_and(|c| c != 0))
    {
        exit::COMMAND_FAILED
    } else {
        exit::OK
    };
    Ok(SweepOutcome {
        dir,
        sweep,
        exit_code,
    })
}

/// The second pass of a discover sweep: the top-ranked functions timed exactly, as targets,
/// over the same N. Skipped, with the reason printed, when nothing grew or the kernel allows
/// no function probe on any of them (then the finding rests on samples, as the report says).
async fn confirm_pass(
    opts: &SweepOptions,
    job: &Job,
    tmp_root: &Path,
) -> Result<Option<SweepRun>, TracerError> {
    // The run was just written by us: failing to read it back is an internal error.
    let internal = |e: crate::analysis::LoadError| {
        TracerError::Other(format!("reading the discover run back: {e}"))
    };
    let ds = crate::analysis::load(&tmp_root.join(&job.name)).map_err(internal)?;
    let a = crate::analysis::analyze(&ds, &crate::analysis::AnalysisOptions::default());
    // The top kernel loop's frame, the top K and the root cause (the frame whose own time
    // grows), each with its caller chain in the heaviest stack.
    let mut chosen: Vec<(&String, &[String])> = Vec::new();
    for d in &a.discoveries {
        // The top kernel loop's frame first: it is the answer.
        if opts.confirm > 0
            && let Some(g) = d.entries.loops.first().and_then(|l| l.top())
        {
            chosen.push((&g.function, g.callers.as_slice()));
        }
        chosen.extend(
            d.ranked
                .iter()
                .take(opts.confirm)
                .map(|g| (&g.function, g.callers.as_slice())),
        );
        if opts.confirm > 0
            && let Some(c) = &d.cause
        {
            chosen.push((&c.function, c.callers.as_slice()));
        }
    }
    let mut candidates: Vec<String> = Vec::new();
    for (f, _) in &chosen {
        if crate::plan::valid_function_name(f) && !candidates.contains(f) {
            candidates.push((*f).clone());
        }
    }
    if candidates.is_empty() {
        return Ok(None);
    }
    // Each one's immediate caller is traced too (it is out of line: it has a frame): the
    // kernel then counts how many times per call of the caller the function runs, the trips
    // of the loop that calls it, exact where the times bend.
    let mut callers: Vec<String> = Vec::new();
    for c in chosen.iter().filter_map(|(_, callers)| callers.last()) {
        if crate::plan::valid_function_name(c) && !candidates.contains(c) && !callers.contains(c) {
            callers.push(c.clone());
        }
    }
    let engine = EngineOptions {
        discover: false,
        ..opts.engine.clone()
    };
    // A caller the session refuses (too hot to probe, say) must not cost the confirmation:
    // then it runs without the callers, and without the trip counts.
    let mut with_callers = !callers.is_empty();
    let attached = loop {
        let targets: Vec<(u32, &'static crate::plan::Target)> = candidates
            .iter()
            .chain(callers.iter().filter(|_| with_callers))
            .take(tracer_ebpf::MAX_TARGETS)
            .enumerate()
            .map(|(i, f)| (i as u32, crate::plan::arbitrary_target(f)))
            .collect();
        let r = Session::attach(engine.clone(), &targets, &opts.resolve, opts.progress).await;
        if with_callers && matches!(r, Err(TracerError::Unsupported(_))) {
            with_callers = false;
            continue;
        }
        break r;
    };
    if !with_callers {
        callers.clear();
    }
    let mut session = match attached {
        Ok(s) => s,
        Err(TracerError::Unsupported(why)) => {
            eprintln!(
                "tracer: no exact confirmation of {}: no function probe attaches to them on \
                 this kernel; the finding rests on samples\n  ({})",
                candidates.join(", "),
                why.lines().nth(2).unwrap_or("").trim()
            );
            return Ok(None);
        }
        Err(e) => return Err(e),
    };
    let name = format!("{}{}", job.name, crate::rundata::CONFIRM_SUFFIX);
    let counting = if callers.is_empty() {
        String::new()
    } else {
        format!(", counting calls per call of {}", callers.join(", "))
    };
    session.println(&format!(
        "confirming {} with exact timing{counting} ({name})",
        candidates.join(", ")
    ));
    let writer = DirWriter::prepare(&tmp_root.join(&name), false)?;
    let mut spec = job.spec.clone();
    spec.label = name.clone();
    let outcome = session.run(&spec, writer, false).await?;
    session.finish();
    Ok(Some(SweepRun {
        workload: name.clone(),
        dir: name,
        n: job.values.clone(),
        command: job.spec.command.clone(),
        command_exit: outcome.run.command_exit,
        status: outcome.run.status,
    }))
}

/// The run of an external sweep: the user's command once per N (and repeat).
fn external_spec(opts: &SweepOptions) -> Result<Job, TracerError> {
    let Some(list) = &opts.n else {
        return Err(TracerError::Usage(
            "sweeping a command needs --n LIST (e.g. --n 10,100,1000); {n} in its arguments \
             is replaced by each N"
                .into(),
        ));
    };
    let values = workloads::nlist::parse(list)
        .map_err(|e| TracerError::Usage(format!("--n {list:?}: {e}")))?;
    let repeat = opts.repeat.unwrap_or(DEFAULT_REPEAT);
    if !(1..=1000).contains(&repeat) {
        return Err(TracerError::Usage(format!(
            "--repeat {repeat}: must be 1..=1000"
        )));
    }
    let mut extra = record::ExtraRuns::for_repeat(repeat);
    if let Some(m) = opts.max_repeat {
        if !(repeat..=10_000).contains(&m) {
            return Err(TracerError::Usage(format!(
                "--max-repeat {m}: must be at least --repeat ({repeat}) and at most 10000"
            )));
        }
        extra.max_runs = m;
    }
    extra.budget = opts.extra_budget;
    let exe = crate::exec_path::find_executable(&opts.command[0]).ok_or_else(|| {
        TracerError::Usage(format!(
            "command not found or not executable: {}",
            opts.command[0]
        ))
    })?;
    let name = match &opts.name {
        Some(n) => n.clone(),
        None => exe
            .file_name()
            .map(|f| f.to_string_lossy().into_owned())
            .unwrap_or_else(|| "command".into()),
    };
    if name.is_empty()
        || name.starts_with('.')
        || name.contains('/')
        || name == SWEEP_FILE
        || name == "report"
    {
        return Err(TracerError::Usage(format!(
            "--name {name:?}: a plain directory name, not report or {SWEEP_FILE}"
        )));
    }
    record::check_usdt(std::iter::once(&exe))?;
    let phase_fn = record::resolve_phase_fn(opts.phase_fn.as_deref())?;
    if !opts.command.iter().any(|a| record::has_n_placeholder(a)) {
        eprintln!(
            "tracer: note: the command has no {{n}} in its arguments: every N runs the same \
             command line, which gets N only from the TRACER_N environment variable"
        );
    }
    Ok(Job {
        // The run's name labels its progress lines, as the confirmation pass's does.
        spec: RunSpec {
            command: opts.command.clone(),
            exe: Some(exe),
            filter: FilterSpec::Follow(Vec::new()),
            duration: None,
            attach_json: None,
            marker_binaries: Vec::new(),
            label: name.clone(),
            n_values: values.clone(),
            external: Some(record::ExternalSweep {
                n_values: values.clone(),
                repeat,
                ops: opts.ops.clone(),
                extra,
            }),
            phase_fn,
        },
        name,
        values,
        json: None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unknown_workloads_and_bad_lists_are_usage_errors() {
        let base = SweepOptions {
            workloads: vec!["nope".into()],
            n: None,
            n_for: vec![],
            extra_args: vec![],
            out: PathBuf::from("/nonexistent/x"),
            force: false,
            workloads_bin: None,
            targets: vec![],
            resolve: ResolveOptions::default(),
            engine: EngineOptions::default(),
            progress: false,
            command: vec![],
            repeat: None,
            max_repeat: None,
            extra_budget: None,
            ops: None,
            phase_fn: None,
            name: None,
            confirm: 0,
        };
        let e = sweep(base.clone()).err().unwrap();
        assert!(matches!(e, TracerError::Usage(_)), "{e}");
        let e = sweep(SweepOptions {
            workloads: vec!["waitpid".into()],
            n: Some("1,,2".into()),
            ..base.clone()
        })
        .err()
        .unwrap();
        assert!(e.to_string().contains("--n"), "{e}");
        let e = sweep(SweepOptions {
            workloads: vec![],
            ..base
        })
        .err()
        .unwrap();
        assert!(e.to_string().contains("--all"), "{e}");
    }
}
