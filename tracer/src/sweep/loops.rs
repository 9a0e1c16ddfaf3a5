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
/// function is traceable on this kernel (`idr_find` is not on Debian's: nothing counts the
/// sysvipc scan there, and its class stays the time's).
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
            by_function
                && r.target
                    .trips_of
                    .iter()
                    .any(|f| counted_by(f) && traceable(f))
        })
        .map(|r| r.target.name.to_string())
        .collect()
}

/// Whether a pass would run anything: a swept built-in workload exists for a target with a
/// per-trip function (whether it attaches here is found when the pass attaches).
pub(super) fn planned(jobs: &[Job], targets: &[(u32, &'static Target)]) -> bool {
    let names: Vec<&str> = counted(targets).iter().map(|(t, _)| t.name).collect();
    !jobs_for(jobs, &names).is_empty()
}

/// Runs the pass: one session with the counted targets and their per-trip functions (no
/// stacks, no samples: only counts are wanted), each chosen workload once per N, into
/// `<workload>-loops`. Prints why and returns nothing when no per-trip function attaches
/// here (no function probes, or the function is outside ftrace on this kernel). With the
/// runs, the signal that stopped the pass, if one did.
pub(super) async fn loop_pass(
    opts: &SweepOptions,
    jobs: &[Job],
    targets: &[(u32, &'static Target)],
    tmp_root: &Path,
) -> Result<(Vec<SweepRun>, Option<&'static str>), TracerError> {
    let mut counted = counted(targets);
    let names: Vec<&str> = counted.iter().map(|(t, _)| t.name).collect();
    let chosen = jobs_for(jobs, &names);
    // Only the loops of the workloads swept.
    counted.retain(|(t, _)| chosen.iter().any(|j| target_of(j) == Some(t.name)));
    if chosen.is_empty() {
        return Ok((Vec::new(), None));
    }
    let mut pass: Vec<(u32, &'static Target)> = Vec::new();
    for (t, _) in &counted {
        pass.push((pass.len() as u32, *t));
    }
    for f in counted.iter().flat_map(|(_, fs)| fs) {
        if pass.len() < tracer_ebpf::MAX_TARGETS {
            pass.push((pass.len() as u32, crate::plan::arbitrary_target(f)));
        }
    }
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
    for job in chosen {
        let Some((target, fns)) = counted.iter().find(|(t, _)| target_of(job) == Some(t.name))
        else {
            continue;
        };
        // The workload runs again only if its target and a per-trip function attached.
        let of: Vec<&str> = fns.iter().copied().filter(|f| active(f)).collect();
        if !active(target.name) || of.is_empty() {
            session.println(&format!(
                "tracer: no loop count for {}: {} cannot be probed here; its verdicts rest on \
                 time",
                target.name,
                fns.join(", ")
            ));
            continue;
        }
        let name = format!("{}{}", job.name, crate::rundata::LOOPS_SUFFIX);
        session.println(&format!(
            "counting {} per call of {} once per N ({name})",
            of.join(", "),
            target.name
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
