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
            if let Some((f, callers)) = inside(l, g) {
                chosen.push((f, callers));
                if let Some(caller) = callers.last() {
                    repeating.get_or_insert((f.clone(), caller.clone()));
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

/// What repeats inside loop `l`'s frame `g`, with its callers: the frame that carries the
/// loop's added time when it is not `g` itself, else the growing frame `g` calls directly.
/// A 5.10 guest's samples put the sysvipc scan's self time in sysvipc_find_ipc itself, with
/// idr_find (growing too) right under it: the scan is counted at idr_find's calls from there.
fn inside<'d>(
    l: &'d crate::analysis::entries::KernelEntry,
    g: &'d crate::analysis::growers::Grower,
) -> Option<(&'d String, &'d [String])> {
    if let Some(c) = l.cause.as_ref().filter(|c| c.function != g.function) {
        return Some((&c.function, c.callers.as_slice()));
    }
    l.frames
        .iter()
        .find(|h| h.callers.last() == Some(&g.function))
        .map(|h| (&h.function, h.callers.as_slice()))
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::analysis::discover::tests::PERIOD;
    use crate::analysis::entries::tests::{discovered, entry_data, row, shell};
    use crate::analysis::stacks::StackData;
    use crate::rundata::EntryRow;

    /// A scan whose samples fall in the frame's own body (`own` periods per read at N) and
    /// in a lookup it calls once per element (`lookup`).
    fn scan(own: u64, lookup: u64) -> impl Fn(u64) -> (Vec<StackData>, Vec<EntryRow>) {
        move |n| {
            let (mut s, mut rows) = shell(n);
            let read = "e;do_syscall_64;ksys_read;seq_read_iter;sysvipc_find_ipc";
            let text = format!(
                "{read} {}\n{read};idr_find {}\n",
                own * n * PERIOD,
                lookup * n * PERIOD
            );
            s.retain(|x| x.file.target != "wait4");
            s.push(entry_data("read", n, &text));
            rows.retain(|r| r.entry != "wait4");
            rows.push(row("read", n, 1000));
            (s, rows)
        }
    }
    /// What repeats inside the loop's frame: the frame carrying its added time when that is
    /// another, else the growing callee of the frame (the scan's self time in
    /// sysvipc_find_ipc, idr_find under it); nothing when the frame calls no growing frame.
    #[test]
    fn what_repeats_inside_a_loop_is_its_cause_or_its_growing_callee() {
        let repeats = |d: &crate::analysis::discover::Discovery| {
            let l = &d.entries.loops[0];
            inside(l, l.top().unwrap()).map(|(f, c)| (f.clone(), c.last().cloned()))
        };
        let own = discovered(scan(3, 2));
        let l = &own.entries.loops[0];
        assert_eq!(l.top().unwrap().function, "sysvipc_find_ipc", "{l:#?}");
        assert_eq!(l.cause.as_ref().unwrap().function, "sysvipc_find_ipc");
        let inner = Some(("idr_find".to_string(), Some("sysvipc_find_ipc".to_string())));
        assert_eq!(repeats(&own), inner);
        let looked_up = discovered(scan(2, 3));
        assert_eq!(
            looked_up.entries.loops[0].top().unwrap().function,
            "sysvipc_find_ipc"
        );
        assert_eq!(
            looked_up.entries.loops[0].cause.as_ref().unwrap().function,
            "idr_find"
        );
        assert_eq!(repeats(&looked_up), inner);
        assert_eq!(repeats(&discovered(scan(3, 0))), None);
    }
}
