//! Comparing the kernel loops of two discover sweeps. Discover names a loop by the kernel
//! entry whose time per call grows (a syscall, a page fault) and the frame inside it that
//! carries the growth; two sweeps are matched by program (the run) and case, their loops by
//! entry. Each entry that is a loop on either side gets the compare's decision on its growth
//! ([`super::compare::growth_change_of`], the same rules as a traced target's), from its
//! sampled time per call on both sides: a loop that is gone on B is `shrank` when the data
//! shows it (5.10 -> 6.1 wait4), one that appears `grew`, a loop both sides have `same` when
//! its growth is equal within the margin.
//!
//! A sampled time per call carries the sampling error of its samples, and never less than the
//! spread between the command's runs of that size ([`super::spread::RunSpread`]), the scatter
//! of the side's sizes about the entry's fit, or the compare's point floors.

use std::collections::BTreeSet;

use super::analyze::Analysis;
use super::compare::{
    ClassChange, GrowthChange, MIN_POINT_ERROR, Side, SidePoint, UNMEASURED_POINT_ERROR, best_pair,
    growth_change_of, model_scatter,
};
use super::discover::Discovery;
use super::entries::KernelEntry;
use super::fit::Complexity;

/// Which loop a compared row is: the program (the discover run) and the kernel entry. Its
/// frame on each side is the row's ([`ClassChange::loop_frames`]).
#[derive(Clone, Debug, PartialEq)]
pub struct LoopSides {
    pub run: String,
    pub entry: String,
}

/// The two sides discovered in different programs: nothing to match.
#[derive(Clone, Debug, PartialEq)]
pub struct Unmatched {
    pub a: Vec<String>,
    pub b: Vec<String>,
}

/// The decisions on the loops the two sides' discoveries share a program for, as class
/// changes (target `<frame> in <entry>`), and the programs when no discovery matches.
pub fn loop_changes<'a>(
    a: &'a Analysis,
    b: &'a Analysis,
) -> (Vec<ClassChange<'a>>, Option<Unmatched>) {
    let key = |d: &Discovery| (d.run.clone(), d.case_name.clone());
    let mut out = Vec::new();
    let mut matched = false;
    for da in a.discoveries() {
        let Some(db) = b.discoveries().find(|d| key(d) == key(da)) else {
            continue;
        };
        matched = true;
        let entries: BTreeSet<&str> = da
            .entries
            .loops
            .iter()
            .chain(&db.entries.loops)
            .map(|e| e.entry.as_str())
            .collect();
        for entry in entries {
            out.push(one_loop(da, db, entry));
        }
    }
    let programs = |an: &Analysis| -> Vec<String> {
        an.discoveries()
            .map(|d| format!("{} [{}]", d.run, d.case_name))
            .collect()
    };
    let unmatched = (!matched
        && a.discoveries().next().is_some()
        && b.discoveries().next().is_some())
    .then(|| Unmatched {
        a: programs(a),
        b: programs(b),
    });
    (out, unmatched)
}

/// The entry on one side, wherever discover filed it.
fn find<'a>(d: &'a Discovery, entry: &str) -> Option<&'a KernelEntry> {
    let e = &d.entries;
    e.loops
        .iter()
        .chain(&e.undecided)
        .chain(&e.more_calls)
        .chain(&e.flat)
        .find(|k| k.entry == entry)
}

/// The entry on a side where it is a loop.
fn as_loop<'a>(d: &'a Discovery, entry: &str) -> Option<&'a KernelEntry> {
    d.entries.loops.iter().find(|k| k.entry == entry)
}

fn one_loop<'a>(da: &'a Discovery, db: &'a Discovery, entry: &str) -> ClassChange<'a> {
    let (ea, eb) = (find(da, entry), find(db, entry));
    let (la, lb) = (as_loop(da, entry), as_loop(db, entry));
    let (fa, fb) = (
        la.map(KernelEntry::loop_frame),
        lb.map(KernelEntry::loop_frame),
    );
    let growth = match (ea, eb) {
        (Some(ea), Some(eb)) => {
            let (pa, pb) = (points(da, ea), points(db, eb));
            let (pa, pb) = best_pair(&pa, &pb);
            growth_change_of(&pa, &pb)
        }
        (None, _) => GrowthChange::inconclusive(&format!("no {entry} call measured in A")),
        (_, None) => GrowthChange::inconclusive(&format!("no {entry} call measured in B")),
    };
    let name = fa.or(fb).unwrap_or_default();
    let classes = |d: &Discovery, e: Option<&KernelEntry>, f: Option<&str>| -> Vec<Complexity> {
        // A side's class: the count's where the confirmation pass counted the loop, else the
        // loop's frame's time's, else (no loop there) the entry's time per call's.
        if let Some(f) = f
            && let Some(c) = d.counted.get(f)
        {
            return vec![c.class];
        }
        let top = e.and_then(|k| k.top()).filter(|_| f.is_some());
        top.map(|g| &g.scaling)
            .or(e.and_then(|k| k.per_call.as_ref()))
            .map(|s| s.classes.clone())
            .unwrap_or_default()
    };
    let (ca, cb) = (classes(da, ea, fa), classes(db, eb, fb));
    ClassChange {
        side_a: la.map(Side::Loop),
        side_b: lb.map(Side::Loop),
        target: format!("{name} in {entry}"),
        case_name: da.case_name.clone(),
        classes_a: ca,
        classes_b: cb,
        in_a: ea.is_some(),
        in_b: eb.is_some(),
        growth,
        discovered: Some(LoopSides {
            run: da.run.clone(),
            entry: entry.to_string(),
        }),
    }
}

/// An entry's sampled times per call as compare points (module docs).
fn points(d: &Discovery, e: &KernelEntry) -> Vec<SidePoint> {
    let scatter = e
        .per_call
        .as_ref()
        .map_or(0.0, |s| model_scatter(s, &s.model));
    e.points
        .iter()
        .filter(|p| p.n > 0 && p.per_call_ns > 0.0 && p.samples > 0)
        .map(|p| {
            let measured = d.spread.runs_at(p.n) >= 2;
            let floor = if measured {
                MIN_POINT_ERROR
            } else {
                UNMEASURED_POINT_ERROR
            };
            SidePoint {
                n: p.n,
                t: p.per_call_ns,
                err: (p.per_call_se_ns / p.per_call_ns)
                    .max(d.spread.floor(p.n as f64))
                    .max(scatter)
                    .max(floor),
                measured,
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::analysis::compare::{Change, compare};
    use crate::analysis::entries::tests::{discovered, discovered_at, entry_data, shell};

    /// One side, its command run twice at each size (each run as long as the other).
    fn analysis(mut d: Discovery) -> Analysis {
        let runs: Vec<crate::rundata::Invocation> =
            d.ns.iter()
                .flat_map(|&n| [n, n])
                .map(|n| crate::rundata::Invocation {
                    n,
                    exit: Some(0),
                    sys_s: 1.0,
                    ..Default::default()
                })
                .collect();
        d.spread = crate::analysis::spread::RunSpread::of(&runs, &Default::default());
        let label = d.kernel.clone();
        crate::analysis::testdata::analysis_of_discoveries(&label, vec![d])
    }

    /// The shell of the entries' tests on a kernel whose wait4 finds its child without a
    /// walk: the same calls, each as dear at every N (its samples grow with its calls).
    fn no_walk(
        n: u64,
    ) -> (
        Vec<crate::analysis::StackData>,
        Vec<crate::rundata::EntryRow>,
    ) {
        let (mut s, rows) = shell(n);
        let wait4 = "e;do_syscall_64;kernel_wait4;do_wait;__do_wait";
        let text = format!(
            "{wait4};wait_consider_task {}\n{wait4};queued_read_lock_slowpath {}\n",
            (300 + n) / 2 * crate::analysis::discover::tests::PERIOD,
            (300 + n) / 2 * crate::analysis::discover::tests::PERIOD
        );
        s.retain(|x| x.file.target != "wait4");
        s.push(entry_data("wait4", n, &text));
        (s, rows)
    }

    fn wait4<'a>(c: &'a crate::analysis::Comparison) -> &'a ClassChange<'a> {
        c.classes
            .iter()
            .find(|cl| cl.discovered.as_ref().is_some_and(|d| d.entry == "wait4"))
            .unwrap_or_else(|| panic!("no wait4 loop compared: {:?}", c.classes))
    }

    /// The same discovery on both sides: `same`. The walk gone on B: `shrank`, B's side no
    /// loop. One size in common: inconclusive, saying so.
    #[test]
    fn a_discovered_loop_is_same_shrank_or_undecided_by_its_entrys_growth() {
        let walks = analysis(discovered(shell));
        let aa = compare(&walks, &walks);
        assert_eq!(wait4(&aa).growth.change, Change::Same, "{:?}", wait4(&aa));
        assert!(aa.unmatched.is_none());

        let fixed = analysis(discovered(no_walk));
        let ab = compare(&walks, &fixed);
        let w = wait4(&ab);
        assert_eq!(w.growth.change, Change::Shrank, "{w:?}");
        let (fa, fb) = w.loop_frames();
        assert!(fa.is_some() && fb.is_none(), "{w:?}");
        assert!(w.target.ends_with(" in wait4"), "{}", w.target);

        let apart = analysis(discovered_at(&[5, 3000], shell));
        let w = compare(&walks, &apart);
        let g = &wait4(&w).growth;
        assert_eq!(g.change, Change::Inconclusive);
        assert!(
            g.reason
                .as_deref()
                .is_some_and(|r| r.contains("one size in common")),
            "{g:?}"
        );
    }

    /// Different programs: nothing matched, both named.
    #[test]
    fn discoveries_of_different_programs_are_not_compared() {
        let a = analysis(discovered(shell));
        let mut other = discovered(shell);
        other.run = "make".into();
        let other = analysis(other);
        let c = compare(&a, &other);
        assert!(c.classes.iter().all(|cl| cl.discovered.is_none()));
        let u = c.unmatched.expect("unmatched");
        assert_eq!(u.b, ["make [command]"]);
        assert_eq!(u.a.len(), 1);
    }
}
