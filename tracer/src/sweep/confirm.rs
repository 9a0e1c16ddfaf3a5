//! The confirmation pass of a discover sweep: the functions the sampled ranking named, timed
//! exactly as targets over the same N, where the kernel allows function probes.
use std::collections::BTreeMap;
use std::path::Path;

use crate::analysis::growers::Grower;
use crate::analysis::stacks::StackData;
use crate::analysis::{Dataset, LoadedRun};
use crate::dir_writer::DirWriter;
use crate::engine::EngineOptions;
use crate::error::TracerError;
use crate::record::Session;
use crate::rundata::{Folded, StackKind};

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
/// the loop frame (the loop's cause, else [`growing_callee`] or [`heaviest_callee`]) and that
/// frame: it is counted at its calls from there where it cannot be probed itself
/// (`plan::trip_target`).
fn to_confirm(a: &crate::analysis::Analysis, k: usize) -> Chosen {
    // Each with its caller chain in the heaviest stack, most needed first: the answer's
    // frame, its caller and what repeats inside it come before the rest, so that what the
    // probes cannot all hold ([`tracer_ebpf::MAX_TARGETS`]) is the least needed.
    let mut chosen: Vec<(&String, &[String])> = Vec::new();
    let mut repeating = None;
    for r in &a.runs {
        for d in &r.discoveries {
            // The top kernel loops' frames first: the first is the answer, unless its exact time
            // refutes it (`analysis::joins`); then what repeats in each.
            let loops = d
                .entries
                .loops
                .iter()
                .take(if k > 0 { LOOPS_CONFIRMED } else { 0 });
            for (l, g) in loops.filter_map(|l| Some((l, l.top()?))) {
                chosen.push((&g.function, g.callers.as_slice()));
                let stacks = || entry_stacks(&r.stacks, &d.case_name, &l.entry);
                let inner = match l.cause.as_ref().filter(|c| c.function != g.function) {
                    Some(c) => Some((&c.function, c.callers.as_slice())),
                    None => growing_callee(l, g).or_else(|| heaviest_callee(stacks(), g)),
                };
                if let Some((f, callers)) = inner {
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
    }
    let mut candidates: Vec<String> = Vec::new();
    let mut callers: Vec<String> = Vec::new();
    let full = |a: &Vec<String>, b: &Vec<String>| a.len() + b.len() >= tracer_ebpf::MAX_TARGETS;
    for (f, chain) in chosen {
        if crate::plan::valid_function_name(f) && !candidates.contains(f) {
            // A caller chosen in its own right is timed as a candidate: it holds one slot.
            if let Some(i) = callers.iter().position(|c| c == f) {
                callers.remove(i);
            } else if full(&candidates, &callers) {
                break;
            }
            candidates.push(f.clone());
        }
        if let Some(c) = chain.last()
            && crate::plan::valid_function_name(c)
            && !candidates.contains(c)
            && !callers.contains(c)
            && !full(&candidates, &callers)
        {
            callers.push(c.clone());
        }
    }
    repeating = repeating.filter(|(f, _)| candidates.contains(f));
    (candidates, callers, repeating)
}

/// The growing frame loop `l`'s frame `g` calls directly, with its callers. A 5.10 guest's
/// samples put the sysvipc scan's self time in sysvipc_find_ipc itself, with idr_find
/// (growing too) right under it: the scan is counted at idr_find's calls from there.
fn growing_callee<'d>(
    l: &'d crate::analysis::entries::KernelEntry,
    g: &'d Grower,
) -> Option<(&'d String, &'d [String])> {
    l.frames
        .iter()
        .find(|h| h.callers.last() == Some(&g.function))
        .map(|h| (&h.function, h.callers.as_slice()))
}

/// Entry `entry`'s sampled stacks in case `case` at the largest N sampled.
fn entry_stacks<'s>(stacks: &'s [StackData], case: &str, entry: &str) -> Option<&'s Folded> {
    stacks
        .iter()
        .filter(|s| {
            s.file.kind == StackKind::Entry && s.file.target == entry && s.file.case_name == case
        })
        .max_by_key(|s| s.file.n)
        .map(|s| &s.folded)
}

/// The callee of frame `g` under which the most samples of `stacks` fall, with its callers
/// (outermost first, `g` last) from the heaviest stack through it, when it holds at least
/// [`CALLEE_SHARE`] of the samples through `g`: where a loop whose self time the samples put
/// in the frame spends the rest, what each trip calls (5.10's scan in sysvipc_find_ipc: 37%
/// of it self, 34% under __radix_tree_lookup, whose lookups grew too little to rank as frames
/// of their own). A frame that is the trip itself (wait_consider_task) calls little.
fn heaviest_callee<'s>(
    stacks: Option<&'s Folded>,
    g: &Grower,
) -> Option<(&'s String, &'s [String])> {
    let mut through = 0;
    let mut under: BTreeMap<&String, (u64, &[String], u64)> = BTreeMap::new();
    for (frames, w) in stacks?.iter() {
        let Some(i) = frames.iter().position(|f| *f == g.function) else {
            continue;
        };
        through += w;
        let Some(callee) = frames.get(i + 1).filter(|f| **f != g.function) else {
            continue;
        };
        let e = under.entry(callee).or_insert((0, &frames[..=i], 0));
        e.0 += w;
        if w > e.2 {
            (e.1, e.2) = (&frames[..=i], w);
        }
    }
    under
        .into_iter()
        .max_by_key(|(_, (w, _, _))| *w)
        .filter(|(_, (w, _, _))| *w as f64 >= CALLEE_SHARE * through as f64)
        .map(|(f, (_, callers, _))| (f, callers))
}

/// The least share of a loop frame's samples its heaviest callee needs to be counted.
const CALLEE_SHARE: f64 = 0.25;

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
    /// sysvipc_find_ipc, idr_find under it), else the callee the most samples fall under.
    #[test]
    fn what_repeats_inside_a_loop_is_its_cause_or_a_callee() {
        let repeats = |d: &crate::analysis::discover::Discovery| {
            let a = crate::analysis::testdata::analysis_of_discoveries("x", vec![d.clone()]);
            to_confirm(&a, 3).2
        };
        let own = discovered(scan(3, 2));
        let l = &own.entries.loops[0];
        assert_eq!(l.top().unwrap().function, "sysvipc_find_ipc", "{l:#?}");
        assert_eq!(l.cause.as_ref().unwrap().function, "sysvipc_find_ipc");
        let inner = Some(("idr_find".to_string(), "sysvipc_find_ipc".to_string()));
        assert_eq!(repeats(&own), inner);
        let looked_up = discovered(scan(2, 3));
        let l = &looked_up.entries.loops[0];
        assert_eq!(l.top().unwrap().function, "sysvipc_find_ipc");
        assert_eq!(l.cause.as_ref().unwrap().function, "idr_find");
        assert_eq!(repeats(&looked_up), inner);
        // The answer's frame, its caller and what repeats inside it come first, whatever
        // else is ranked; what is kept fits the probes.
        let a = crate::analysis::testdata::analysis_of_discoveries("x", vec![own.clone()]);
        let (candidates, callers, _) = to_confirm(&a, 3);
        assert_eq!(candidates[..2], ["sysvipc_find_ipc", "idr_find"]);
        assert_eq!(callers[0], "seq_read_iter");
        let mut many = own.clone();
        for i in 0..10 {
            let mut g = many.ranked[0].clone();
            g.function = format!("f{i}");
            g.callers = vec![format!("c{i}")];
            many.ranked.insert(0, g);
        }
        let a = crate::analysis::testdata::analysis_of_discoveries("x", vec![many]);
        let (candidates, callers, repeating) = to_confirm(&a, 12);
        assert_eq!(candidates.len() + callers.len(), tracer_ebpf::MAX_TARGETS);
        assert_eq!(candidates[..2], ["sysvipc_find_ipc", "idr_find"]);
        assert_eq!(callers[0], "seq_read_iter");
        assert_eq!(repeating, inner);

        let alone = discovered(scan(3, 0));
        assert_eq!(repeats(&alone), None);

        // No growing frame under it: the callee the most samples fall under, in the heaviest
        // stack through it.
        let g = alone.entries.loops[0].top().unwrap();
        let read = "e;ksys_read;sysvipc_find_ipc";
        let folded = Folded::parse(&format!(
            "{read} 2\n{read};idr_find 3\n{read};idr_find;radix 1\n\
             {read};__radix_tree_lookup 3\ne;sysvipc_find_ipc;__radix_tree_lookup 2\n\
             {read};sysvipc_find_ipc 9"
        ))
        .unwrap();
        let (f, callers) = heaviest_callee(Some(&folded), g).unwrap();
        assert_eq!(f, "__radix_tree_lookup");
        assert_eq!(callers.join(";"), read);
        assert_eq!(heaviest_callee(None, g), None);
        let flat = Folded::parse(&format!("{read} 10\ne;other;idr_find 5")).unwrap();
        assert_eq!(heaviest_callee(Some(&flat), g), None);
        let light = Folded::parse(&format!("{read} 40\n{read};idr_find 9")).unwrap();
        assert_eq!(heaviest_callee(Some(&light), g), None);
    }
}
