//! The confirmation pass of a discover sweep: the functions the sampled ranking named, timed
//! exactly as targets over the same N, where the kernel allows function probes.
use std::path::Path;

use crate::analysis::{Dataset, LoadedRun};
use crate::dir_writer::DirWriter;
use crate::engine::EngineOptions;
use crate::error::TracerError;
use crate::record::Session;

use super::jobs::Job;
use super::{SweepOptions, SweepRun};

/// Kernel loops whose frames a confirmation times: the first is the answer, and the second
/// the answer when exact timing refutes the first (a starved 5.10 guest's samples made a path
/// lookup in newfstatat the first loop, above the shell's wait walk).
const LOOPS_CONFIRMED: usize = 2;

/// The functions to confirm, their callers, and the function repeating inside the top loop's
/// frame with that frame.
type Chosen = (Vec<String>, Vec<String>, Option<(String, String)>);

/// The functions the confirmation times exactly (per discovery: the frames of the first
/// [`LOOPS_CONFIRMED`] kernel loops and the function repeating inside the first, the top `k`
/// and the root cause), and their
/// immediate callers: each caller is traced too (it is out of line: it has a frame), so the
/// kernel counts how many times per call of the caller the function runs, the trips of the
/// loop that calls it, exact where the times bend. With them, the function repeating inside
/// the loop frame and that frame: it is counted at its calls from there where it cannot be
/// probed itself (`plan::trip_target`).
fn to_confirm(a: &crate::analysis::Analysis, k: usize) -> Chosen {
    // Each with its caller chain in the heaviest stack.
    let mut chosen: Vec<(&String, &[String])> = Vec::new();
    let mut repeating = None;
    for d in a.discoveries() {
        // The top kernel loops' frames first: the first is the answer, unless its exact time
        // refutes it (`analysis::joins`); then what repeats in each.
        let loops = d
            .entries
            .loops
            .iter()
            .take(if k > 0 { LOOPS_CONFIRMED } else { 0 });
        for (l, g) in loops.filter_map(|l| Some((l, l.top()?))) {
            chosen.push((&g.function, g.callers.as_slice()));
            if let Some(c) = &l.cause
                && c.function != g.function
            {
                chosen.push((&c.function, c.callers.as_slice()));
                if let Some(caller) = c.callers.last() {
                    repeating.get_or_insert((c.function.clone(), caller.clone()));
                }
            }
        }
        chosen.extend(
            d.ranked
                .iter()
                .take(k)
                .map(|g| (&g.function, g.callers.as_slice())),
        );
        if k > 0
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
    let mut callers: Vec<String> = Vec::new();
    for c in chosen.iter().filter_map(|(_, callers)| callers.last()) {
        if crate::plan::valid_function_name(c) && !candidates.contains(c) && !callers.contains(c) {
            callers.push(c.clone());
        }
    }
    (candidates, callers, repeating)
}

/// The second pass of a discover sweep: the top-ranked functions timed exactly, as targets,
/// over the same N. Skipped, with the reason printed, when nothing grew or the kernel allows
/// no function probe on any of them (then the finding rests on samples, as the report says).
/// `first` is the discover run as recorded, in memory.
pub(super) async fn confirm_pass(
    opts: &SweepOptions,
    job: &Job,
    tmp_root: &Path,
    first: LoadedRun,
) -> Result<Option<SweepRun>, TracerError> {
    let ds = Dataset {
        root: first.dir.clone(),
        is_sweep: false,
        runs: vec![first],
        notes: Vec::new(),
    };
    let a = crate::analysis::analyze(&ds, &crate::analysis::AnalysisOptions::default());
    let confirm = opts.mode.command().map_or(0, |c| c.confirm);
    let (candidates, mut callers, repeating) = to_confirm(&a, confirm);
    if candidates.is_empty() {
        return Ok(None);
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
            .map(|(i, f)| {
                let target = match &repeating {
                    Some((inner, caller)) if inner == f => {
                        crate::plan::trip_target(f, crate::plan::arbitrary_target(caller))
                    }
                    _ => crate::plan::arbitrary_target(f),
                };
                (i as u32, target)
            })
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
    let name = crate::rundata::RunRole::Confirm.dir_name(&job.name);
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
    Ok(Some(SweepRun::pass(name, job, &outcome.run)))
}
