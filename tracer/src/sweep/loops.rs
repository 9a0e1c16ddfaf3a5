//! The loop-count pass of a built-in sweep. A workload's target whose loop calls a known
//! function once per trip (`Target::trips_of`: a child considered, a VMA copied) runs once
//! more per N with that function traced beside it, so that the kernel counts the loop's trips
//! per target call, exactly. The counts give the target's verdict its class where the time
//! per trip creeps with N; the timed rounds stay free of the inner probes, whose cost (one
//! probe per trip) would otherwise be part of every timed call.
use std::path::Path;

use crate::dir_writer::DirWriter;
use crate::engine::EngineOptions;
use crate::error::TracerError;
use crate::guard::Guard;
use crate::plan::{FnMech, Method, Target};
use crate::record::{ExtraRuns, Session};
use crate::resolve::ResolveOptions;
use crate::resolve::Resolved;
use workloads::catalog;

use super::jobs::Job;
use super::{SweepOptions, SweepRun};

/// The targets a loop-count pass counts in: each traced target with a per-trip function,
/// unless the sweep already traces one of them beside it (then its own runs count the trips),
/// with the functions to count.
pub(super) fn counted(
    targets: &[(u32, &'static Target)],
) -> Vec<(&'static Target, Vec<&'static str>)> {
    targets
        .iter()
        .filter(|(_, t)| {
            !t.trips_of.is_empty()
                && !t
                    .trips_of
                    .iter()
                    .any(|f| targets.iter().any(|(_, o)| o.name == *f))
        })
        .map(|(_, t)| (*t, t.trips_of.to_vec()))
        .collect()
}

/// The target a built-in workload's job exists for (none for a command or `getpid`).
fn target_of(job: &Job) -> Option<&'static str> {
    if job.is_command() {
        return None;
    }
    catalog::by_name(&job.name).and_then(|w| w.target)
}

/// The jobs a pass over `counted` runs: the built-in workloads that exist for one of them.
fn jobs_for<'a>(jobs: &'a [Job], counted: &[&str]) -> Vec<&'a Job> {
    jobs.iter()
        .filter(|j| target_of(j).is_some_and(|t| counted.contains(&t)))
        .collect()
}

/// The targets whose verdict's class a loop count will give, so that extra runs need only
/// settle whether they grow: a target with a per-trip function that is traced beside it in
/// the same runs, or that the loop-count pass counts (`pass`), when the target itself is
/// measured by a function probe (the per-trip function attaches the same way) and a per-trip
/// function is traceable on this kernel, or, for the pass, can be counted at its calls in
/// the target's code (`idr_find`, outside ftrace on Debian's kernels, in sysvipc_find_ipc).
pub(super) fn counted_targets(resolved: &[Resolved], tracefs: &Path, pass: bool) -> Vec<String> {
    let traced: Vec<&str> = resolved
        .iter()
        .filter(|r| r.active.is_some())
        .map(|r| r.target.name)
        .collect();
    let guard = Guard::load(tracefs);
    resolved
        .iter()
        .filter(|r| {
            let by_function = r
                .active
                .as_ref()
                .is_some_and(|a| matches!(a.plan.method, Method::Functions { .. }));
            let counted_by = |f: &&str| pass || traced.contains(f);
            let traceable = |f: &&str| guard.refusal(f, FnMech::Fentry).is_none();
            let at_call_sites = pass
                && cfg!(target_arch = "x86_64")
                && guard.refusal(r.target.name, FnMech::Kprobe).is_none();
            by_function
                && r.target
                    .trips_of
                    .iter()
                    .any(|f| counted_by(f) && (traceable(f) || at_call_sites))
        })
        .map(|r| r.target.name.to_string())
        .collect()
}

/// Whether a pass may run anything: a swept built-in workload exists for a target with a
/// per-trip function, or a command's root causes will be read for loops (whether anything
/// grows, and whether it attaches here, is found after the runs).
pub(super) fn planned(
    opts: &SweepOptions,
    jobs: &[Job],
    targets: &[(u32, &'static Target)],
) -> bool {
    !built_in(jobs, targets).is_empty() || jobs.iter().any(|j| by_root_cause(opts, j))
}

/// One job's part of a loop-count pass: the targets counted in its runs and, for each, the
/// functions whose calls per call of it are its loop's trips.
pub(super) struct Count<'a> {
    pub(super) job: &'a Job,
    pub(super) loops: Vec<(&'static Target, Vec<String>)>,
}

/// The built-in workloads' part: each swept workload that exists for a target with a known
/// per-trip function (`Target::trips_of`).
pub(super) fn built_in<'a>(jobs: &'a [Job], targets: &[(u32, &'static Target)]) -> Vec<Count<'a>> {
    let counted = counted(targets);
    let names: Vec<&str> = counted.iter().map(|(t, _)| t.name).collect();
    jobs_for(jobs, &names)
        .into_iter()
        .filter_map(|job| {
            let (t, fs) = counted
                .iter()
                .find(|(t, _)| target_of(job) == Some(t.name))?;
            Some(Count {
                job,
                loops: vec![(*t, fs.iter().map(|f| f.to_string()).collect())],
            })
        })
        .collect()
}

/// Whether `job`'s loops are found from its own root causes after its runs: a command's
/// sweep (whose targets' loops nothing names in advance) that samples stacks, where no
/// per-trip function is known for its targets.
pub(super) fn by_root_cause(opts: &SweepOptions, job: &Job) -> bool {
    job.is_command()
        && opts.loop_count
        && !opts.engine.discover
        && (opts.engine.sample_freq_hz > 0 || opts.engine.offcpu_stacks)
}

/// A command's part: the functions the root causes of its growing targets name, from its
/// run as recorded (`run`, analysed here, in memory). None when nothing is to be counted.
pub(super) fn from_root_causes<'a>(
    job: &'a Job,
    run: crate::analysis::LoadedRun,
    targets: &[(u32, &'static Target)],
) -> Option<Count<'a>> {
    let ds = crate::analysis::Dataset {
        root: run.dir.clone(),
        is_sweep: false,
        runs: vec![run],
        notes: Vec::new(),
    };
    let a = crate::analysis::analyze(&ds, &crate::analysis::AnalysisOptions::default());
    let traced: Vec<&str> = targets.iter().map(|(_, t)| t.name).collect();
    let loops: Vec<(&'static Target, Vec<String>)> =
        crate::analysis::countable::to_count(&a, &traced)
            .into_iter()
            .filter_map(|c| {
                let (_, t) = targets.iter().find(|(_, t)| t.name == c.target)?;
                Some((*t, c.functions))
            })
            .collect();
    (!loops.is_empty()).then_some(Count { job, loops })
}

/// The pass's targets, numbered: every counted target, then every function counted inside
/// one, each once, up to the kernel's limit of targets.
fn pass_targets(counts: &[Count<'_>]) -> Vec<(u32, &'static Target)> {
    let mut pass: Vec<(u32, &'static Target)> = Vec::new();
    let add = |t: &'static Target, pass: &mut Vec<(u32, &'static Target)>| {
        if pass.len() < tracer_ebpf::MAX_TARGETS && !pass.iter().any(|(_, p)| p.name == t.name) {
            pass.push((pass.len() as u32, t));
        }
    };
    for (t, _) in counts.iter().flat_map(|c| &c.loops) {
        add(t, &mut pass);
    }
    for (outer, fs) in counts.iter().flat_map(|c| &c.loops) {
        for f in fs {
            if !pass.iter().any(|(_, p)| p.name == f.as_str()) {
                add(crate::plan::trip_target(f, outer), &mut pass);
            }
        }
    }
    pass
}

/// Runs the pass: one session with the counted targets and the functions counted inside them
/// (no stacks, no samples: only counts are wanted), each job once per N, into
/// `<job>-loops`. Prints why and runs nothing for a job none of whose functions attaches
/// here (no function probes, or the function is outside ftrace on this kernel). With the
/// runs, the signal that stopped the pass, if one did.
pub(super) async fn loop_pass(
    opts: &SweepOptions,
    counts: &[Count<'_>],
    tmp_root: &Path,
) -> Result<(Vec<SweepRun>, Option<&'static str>), TracerError> {
    if counts.is_empty() {
        return Ok((Vec::new(), None));
    }
    let pass = pass_targets(counts);
    let engine = EngineOptions {
        sample_freq_hz: 0,
        caller_stacks: false,
        offcpu_stacks: false,
        raw_events_bytes: 0,
        discover: false,
        ..opts.engine.clone()
    };
    // The timed rounds verified the targets' plans; the per-trip functions are checked by
    // whether they saw calls, as any named function is.
    let resolve = ResolveOptions {
        verify: false,
        quiet: true,
        ..opts.resolve.clone()
    };
    let mut session = match Session::attach(engine, &pass, &resolve, opts.progress).await {
        Ok(s) => s,
        Err(TracerError::Interrupted(_)) => return Ok((Vec::new(), Some("a signal"))),
        Err(e) => {
            eprintln!("tracer: no loop-count pass: {e}");
            return Ok((Vec::new(), None));
        }
    };
    let attached: Vec<&'static str> = session
        .resolved()
        .iter()
        .filter(|r| r.active.is_some())
        .map(|r| r.target.name)
        .collect();
    let active = |name: &str| attached.contains(&name);
    let mut runs = Vec::new();
    for count in counts {
        // The job runs again only if one of its targets and a function inside it attached.
        let mut counting: Vec<String> = Vec::new();
        for (target, fns) in &count.loops {
            let of: Vec<&str> = fns
                .iter()
                .map(String::as_str)
                .filter(|f| active(f))
                .collect();
            if !active(target.name) || of.is_empty() {
                session.println(&format!(
                    "tracer: no loop count for {}: {} cannot be probed here; its verdicts rest \
                     on time",
                    target.name,
                    fns.join(", ")
                ));
            } else {
                counting.push(format!("{} per call of {}", of.join(", "), target.name));
            }
        }
        if counting.is_empty() {
            continue;
        }
        let job = count.job;
        let name = crate::rundata::RunRole::LoopCount.dir_name(&job.name);
        session.println(&format!(
            "counting {} once per N ({name})",
            counting.join("; ")
        ));
        let mut spec = job.spec.clone();
        spec.label = name.clone();
        if let Some(ext) = &mut spec.external {
            ext.repeat = 1;
            ext.extra = ExtraRuns::for_repeat(1);
        }
        let writer = DirWriter::prepare(&tmp_root.join(&name), false)?;
        let outcome = session.run(&spec, writer, false).await?;
        if let Some(json) = &job.json {
            let _ = std::fs::remove_file(json);
        }
        runs.push(SweepRun::pass(name, job, &outcome.run));
        if session.interrupted.is_some() {
            break;
        }
    }
    let interrupted = session.interrupted;
    session.finish();
    Ok((runs, interrupted))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::plan::{DO_WAIT, DUP_MMAP, GET_TASK_POLICY, arbitrary_target};

    #[test]
    fn a_pass_counts_each_looping_target_the_sweep_does_not_count_already() {
        let names = |c: Vec<(&'static Target, Vec<&str>)>| {
            c.into_iter()
                .map(|(t, fs)| format!("{}:{}", t.name, fs.join("+")))
                .collect::<Vec<_>>()
        };
        let all = [(0, &DO_WAIT), (1, &DUP_MMAP), (2, &GET_TASK_POLICY)];
        assert_eq!(
            names(counted(&all)),
            ["do_wait:wait_consider_task", "dup_mmap:vm_area_dup"]
        );
        // -t do_wait,wait_consider_task: the rounds count the walk themselves.
        let named = [(0, &DO_WAIT), (1, arbitrary_target("wait_consider_task"))];
        assert!(counted(&named).is_empty());
        assert!(counted(&[(0, &GET_TASK_POLICY)]).is_empty());
    }
}
