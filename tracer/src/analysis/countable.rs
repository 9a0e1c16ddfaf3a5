//! What a loop-count pass counts inside a target whose loop the tool does not know in advance
//! (any `-t` function, a command's sweep): the functions its root cause names. A frame whose
//! share of the target's time grows with N is, in most kernels' loops, either the function
//! the loop calls once per trip (wait_consider_task in 5.10's do_wait) or one below it (the
//! radix-tree lookup of each id sysvipc_find_ipc probes). Counted per call of the target in
//! the kernel, its calls are the loop's trips, exactly, and give the verdict its class where
//! the time alone leaves several ([`super::trips::loop_class`]). A frame that is not a loop's
//! (called once per call at any N) counts flat and gives no class: counting it costs a probe
//! per call and misleads nothing.

use super::analyze::Analysis;
use super::rootcause::{FrameGrowth, SELF_FRAME};
use super::trips::shown_flat;

/// Most functions counted per target: the culprit's path and the frames that split the added
/// time with it are rarely more, and each costs a probe per call.
pub const MAX_PER_TARGET: usize = 4;

/// The functions to count per call of one target.
#[derive(Clone, Debug, PartialEq)]
pub struct ToCount {
    pub target: String,
    pub functions: Vec<String>,
}

/// For each target of `a` whose time per call (the headline's: a mixed table's growing
/// population) was not shown flat and has no loop count yet, the functions its root causes
/// name (every real frame of the culprit's path, then the frames beside it that carry the
/// added time, top first; where the calls mix populations and the root cause over all of
/// them names no growing frame, those of its per-op attribution; then, where no frame's share
/// grows because the loop is the target's own code, the other frames that clearly add time,
/// largest first), except the target itself,
/// its compiler clones and stand-in, and what `traced` already times (its calls inside the
/// target are counted in the same runs). Targets with nothing to count are left out.
pub fn to_count(a: &Analysis, traced: &[&str]) -> Vec<ToCount> {
    let mut out: Vec<ToCount> = Vec::new();
    for c in a.cases() {
        let v = &c.verdict;
        // The headline's fit: a mixed table's growing population, not the mean of all calls
        // (which an unsplit mix keeps: no population is fitted there).
        let growing = v
            .headline()
            .or(v.scaling.as_ref())
            .is_some_and(|s| !shown_flat(s));
        let Some(rc) = c
            .root_cause
            .as_ref()
            .filter(|_| growing && v.by_loop.is_none())
        else {
            continue;
        };
        // Calls that mix a fixed and an N-proportional population can leave every call's
        // time per call flat while the fixed ones walk: then the frames that add time per op
        // are counted, and the counts say which of them is a loop.
        let (cause, carries): (_, fn(&FrameGrowth) -> bool) = match &rc.per_op {
            Some(per_op) if !rc.cause.culprit.as_ref().is_some_and(FrameGrowth::grows) => {
                (per_op, |g| g.added.is_some_and(|a| a.clear()))
            }
            _ => (&rc.cause, FrameGrowth::grows),
        };
        let is_target = |f: &str| {
            f.split('.').next() == Some(c.table.target.as_str())
                || cause.stand_in.as_deref() == Some(f)
        };
        let frames = cause
            .culprit
            .iter()
            .filter(|g| carries(g))
            .flat_map(real_frames)
            .chain(
                cause
                    .split
                    .iter()
                    .chain(&cause.also)
                    .flat_map(|g| real_frames(g).take(1)),
            )
            // When the loop is the target's own code (5.10's do_poll, inlined into
            // do_sys_poll), every frame below it grows in step and none is a culprit or
            // splits the time: what each trip calls is among the frames adding the most
            // time, so they are counted too, an unprobeable one (_copy_from_user) leaving
            // the others to give the class.
            .chain(
                cause
                    .ranking
                    .iter()
                    .filter(|g| g.added.is_some_and(|a| a.clear()))
                    .flat_map(|g| real_frames(g).take(1)),
            );
        let entry = match out.iter_mut().position(|t| t.target == c.table.target) {
            Some(i) => &mut out[i],
            None => {
                out.push(ToCount {
                    target: c.table.target.clone(),
                    functions: Vec::new(),
                });
                out.last_mut().expect("just pushed")
            }
        };
        for f in frames {
            if entry.functions.len() >= MAX_PER_TARGET {
                break;
            }
            if !is_target(f)
                && !traced.contains(&f)
                && crate::plan::valid_function_name(f)
                && !entry.functions.iter().any(|g| g == f)
            {
                entry.functions.push(f.to_string());
            }
        }
    }
    out.retain(|t| !t.functions.is_empty());
    out
}

/// The frames of a growing frame's path, from just below the target down (its self-time
/// marker left out).
fn real_frames(g: &FrameGrowth) -> impl Iterator<Item = &str> {
    g.path
        .iter()
        .map(String::as_str)
        .filter(|f| *f != SELF_FRAME)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::analysis::load::{Dataset, LoadedRun};
    use crate::analysis::testdata;
    use crate::rundata::{Folded, StackFile, StackKind};

    /// do_wait's on-CPU samples at each N: `walk` ns per call in wait_consider_task below it
    /// (through do_wait_thread), 1000 ns in its own code.
    fn analysed(oncpu: impl Fn(u64) -> u64, walk: impl Fn(u64) -> u64) -> Analysis {
        analysed_stacks(oncpu, |n| {
            vec![
                ("do_wait;do_wait_thread;wait_consider_task", walk(n)),
                ("do_wait", 1000),
            ]
        })
    }

    /// do_wait's on-CPU samples at each N: each of `stacks(N)`'s paths (from do_wait down)
    /// with its ns per call, 4000 samples per size.
    fn analysed_stacks(
        oncpu: impl Fn(u64) -> u64,
        stacks: impl Fn(u64) -> Vec<(&'static str, u64)>,
    ) -> Analysis {
        let run = testdata::waitpid_run(&[10, 100, 1000, 4000], &oncpu);
        testdata::analysis_with_stacks(run, stacks)
    }

    /// A walk whose share of the target grows: its path below the target is counted; nothing
    /// is when the time per call is flat, or when the walk's function is timed in the same
    /// runs already.
    #[test]
    fn the_frames_a_growing_targets_root_cause_names_are_counted() {
        let grows = analysed(|n| 1000 + 5 * n, |n| 5 * n);
        let c = &grows.runs[0].cases[0];
        assert!(c.root_cause.is_some(), "{c:?}");
        assert_eq!(
            to_count(&grows, &["do_wait"]),
            [ToCount {
                target: "do_wait".into(),
                functions: vec!["do_wait_thread".into(), "wait_consider_task".into()],
            }]
        );
        assert_eq!(
            to_count(&grows, &["do_wait", "wait_consider_task"])[0].functions,
            ["do_wait_thread"]
        );
        let flat = analysed(|_| 2000, |_| 1000);
        assert_eq!(to_count(&flat, &["do_wait"]), []);
    }

    /// A loop in the target's own code (5.10's do_poll, inlined into do_sys_poll): every
    /// frame below grows in step with the whole, so none is a culprit, and the split names
    /// only the two largest (its own code and a copy of the input). What each trip calls is
    /// among the smaller frames that add time: they are counted too, largest first, up to
    /// [`MAX_PER_TARGET`].
    #[test]
    fn a_loop_in_the_targets_own_code_gets_the_frames_adding_time_counted() {
        let a = analysed_stacks(
            |n| 166 * (10 + n) + 5,
            |n| {
                let trips = 10 + n;
                vec![
                    ("do_wait", 80 * trips),
                    ("do_wait;_copy_from_user", 28 * trips),
                    ("do_wait;pipe_poll", 16 * trips),
                    ("do_wait;__fget_light", 15 * trips),
                    ("do_wait;__fdget", 14 * trips),
                    ("do_wait;fput", 13 * trips),
                    ("do_wait;poll_freewait", 5),
                ]
            },
        );
        let rc = &a.runs[0].cases[0]
            .root_cause
            .as_ref()
            .expect("a root cause")
            .cause;
        assert!(
            !rc.culprit.as_ref().is_some_and(FrameGrowth::grows),
            "{:?}",
            rc.culprit
        );
        assert_eq!(
            rc.split
                .iter()
                .map(|g| g.path.join(";"))
                .collect::<Vec<_>>(),
            [SELF_FRAME, "_copy_from_user"],
        );
        assert_eq!(
            to_count(&a, &["do_wait"])[0].functions,
            ["_copy_from_user", "pipe_poll", "__fget_light", "__fdget"]
        );
    }

    /// 300 waits per run that walk N children among N reaps (`testdata::command_mix_run`):
    /// the time per call of all calls stays flat (the reaps are most calls) while the waits'
    /// population grows, and is the headline; the root cause over all calls names no growing
    /// frame, per op the walk adds the time, and its path is counted. The reaps' own frame
    /// adds time per op too, and is counted beside it: its count, one per reap, says it is no
    /// loop.
    #[test]
    fn the_walk_of_a_fixed_population_among_reaps_is_counted() {
        let ns = [10, 1000, 3000, 10000];
        let mut run = testdata::command_mix_run(&ns);
        let stacks: Vec<(StackFile, Folded)> = ns
            .iter()
            .map(|&n| {
                let (walk, reaps, own) = (300 * 10 * n, n * 1800, 300 * 1900 + n * 200);
                let text = format!(
                    "entry;do_wait;do_wait_thread;wait_consider_task {walk}\n\
                     entry;do_wait;release_task {reaps}\nentry;do_wait {own}\n"
                );
                let file = StackFile {
                    kind: StackKind::Oncpu,
                    target: "do_wait".into(),
                    case: workloads::cases::CASE_COMMAND,
                    case_name: "bench".into(),
                    n,
                    path: format!("stacks/oncpu/do_wait/bench/n{n}.folded"),
                    total_ns: walk + reaps + own,
                    count: 20_000,
                };
                (file, Folded::parse(&text).unwrap())
            })
            .collect();
        run.stack_files = stacks.iter().map(|(f, _)| f.clone()).collect();
        let loaded = LoadedRun::recorded("bench".into(), "/x".into(), run, stacks);
        let a = crate::analysis::analyze(
            &Dataset {
                root: "/x".into(),
                is_sweep: true,
                runs: vec![loaded],
                notes: Vec::new(),
            },
            &Default::default(),
        );
        let c = &a.runs[0].cases[0];
        assert!(c.population.as_ref().is_some_and(|p| p.separated), "{c:?}");
        let rc = c.root_cause.as_ref().expect("a root cause");
        assert!(
            !rc.cause.culprit.as_ref().is_some_and(FrameGrowth::grows),
            "over all calls nothing grows: {:?}",
            rc.cause.culprit
        );
        let counted = to_count(&a, &["do_wait"]);
        assert_eq!(counted.len(), 1, "{counted:?}");
        assert_eq!(
            counted[0].functions,
            ["do_wait_thread", "wait_consider_task", "release_task"],
            "the walk's path, then the reaps' frame"
        );
    }
}
