//! Planning a sweep: the options checked, and one typed job per run directory (a built-in
//! workload, or the user's command, each run once per N and round).
use std::path::{Path, PathBuf};

use crate::error::TracerError;
use crate::record::{self, FilterSpec, RunSpec};
use workloads::catalog;

use super::{CommandSweep, DEFAULT_REPEAT, SWEEP_FILE, SweepOptions, WorkloadSweep};

/// One run directory of a sweep: a workload over its N list, or the user's command.
pub(super) struct Job {
    pub(super) name: String,
    pub(super) values: Vec<u64>,
    pub(super) spec: RunSpec,
    /// The workload's own JSON report, a temporary embedded in run.json.
    pub(super) json: Option<PathBuf>,
}

impl Job {
    /// The user's command (not a built-in workload): what a discover sweep confirms.
    pub(super) fn is_command(&self) -> bool {
        self.spec
            .external
            .as_ref()
            .is_some_and(|e| !e.announces_phases)
    }
}

/// A built-in workload to sweep: its name and N list.
pub(super) struct WorkloadPlan {
    pub(super) name: String,
    pub(super) values: Vec<u64>,
}

/// The workloads `opts` names, with their N lists, checked: each known, named once, with a
/// list that parses (from --n-for, else --n, else the workload's default).
pub(super) fn plan_workloads(
    opts: &WorkloadSweep,
    n: Option<&str>,
) -> Result<Vec<WorkloadPlan>, TracerError> {
    for (w, _) in &opts.n_for {
        if catalog::by_name(w).is_none() {
            return Err(TracerError::Usage(format!(
                "--n-for {w}=...: unknown workload {w:?}"
            )));
        }
    }
    let mut plan: Vec<WorkloadPlan> = Vec::new();
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
            .or_else(|| n.map(str::to_string))
            .unwrap_or_else(|| known.sweep_n.to_string());
        let values = workloads::nlist::parse(&list)
            .map_err(|e| TracerError::Usage(format!("--n {list:?}: {e}")))?;
        plan.push(WorkloadPlan {
            name: w.clone(),
            values,
        });
    }
    Ok(plan)
}

/// The run of each planned workload: the workloads binary `bin` once per N and round (each
/// round's sizes in its own shuffled order, as for a command, each run setting up its N
/// afresh, so that the spread between runs is each size's error and a drift over the sweep
/// does not line up with N); its JSON reports through a temporary under `tmp_root` (run.json
/// embeds them, merged).
pub(super) fn workload_jobs(
    extra_args: &[String],
    plan: &[WorkloadPlan],
    bin: &Path,
    tmp_root: &Path,
    (repeat, extra): (u32, record::ExtraRuns),
) -> Vec<Job> {
    let mut jobs = Vec::new();
    for (i, WorkloadPlan { name, values }) in plan.iter().enumerate() {
        let json = tmp_root.join(format!(".{name}.workload.json"));
        let mut command = vec![bin.to_string_lossy().into_owned(), name.clone()];
        // Its table once per run would bury the sweep's progress; run.json keeps the rows.
        command.extend(["--n".into(), "{n}".into(), "--quiet".into()]);
        command.push("--json".into());
        command.push(json.to_string_lossy().into_owned());
        command.extend(extra_args.iter().cloned());
        jobs.push(Job {
            name: name.clone(),
            values: values.clone(),
            spec: RunSpec {
                command,
                exe: Some(bin.to_path_buf()),
                filter: FilterSpec::Follow(Vec::new()),
                duration: None,
                attach_json: Some(json.clone()),
                marker_binaries: Vec::new(),
                label: format!("{name} ({}/{})", i + 1, plan.len()),
                n_values: values.clone(),
                external: Some(record::ExternalSweep {
                    n_values: values.clone(),
                    repeat,
                    announces_phases: true,
                    ops: None,
                    extra: extra.clone(),
                    advice: &crate::analysis::advice::Analyst,
                }),
                phase_fn: None,
            },
            json: Some(json),
        });
    }
    jobs
}

/// The planned rounds (`--repeat`, default [`DEFAULT_REPEAT`]) and the limits on extra runs
/// (`--max-repeat`, `--extra-time`), checked.
pub(super) fn rounds(opts: &SweepOptions) -> Result<(u32, record::ExtraRuns), TracerError> {
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
        extra.max_given = true;
    }
    extra.budget = opts.extra_budget;
    Ok((repeat, extra))
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

/// The run of an external sweep: the user's command once per N (and repeat).
pub(super) fn external_spec(opts: &SweepOptions, c: &CommandSweep) -> Result<Job, TracerError> {
    let Some(list) = &opts.n else {
        return Err(TracerError::Usage(
            "sweeping a command needs --n LIST (e.g. --n 10,100,1000); {n} in its arguments \
             is replaced by each N"
                .into(),
        ));
    };
    let values = workloads::nlist::parse(list)
        .map_err(|e| TracerError::Usage(format!("--n {list:?}: {e}")))?;
    let (repeat, extra) = rounds(opts)?;
    let exe = crate::exec_path::find_executable(&c.command[0]).ok_or_else(|| {
        TracerError::Usage(format!(
            "command not found or not executable: {}",
            c.command[0]
        ))
    })?;
    let name = match &c.name {
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
    let phase_fn = record::resolve_phase_fn(c.phase_fn.as_deref())?;
    if !c.command.iter().any(|a| record::has_n_placeholder(a)) {
        eprintln!(
            "tracer: note: the command has no {{n}} in its arguments: every N runs the same \
             command line, which gets N only from the TRACER_N environment variable"
        );
    }
    Ok(Job {
        // The run's name labels its progress lines, as the confirmation pass's does.
        spec: RunSpec {
            command: c.command.clone(),
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
                announces_phases: false,
                ops: c.ops.clone(),
                extra,
                advice: &crate::analysis::advice::Analyst,
            }),
            phase_fn,
        },
        name,
        values,
        json: None,
    })
}
