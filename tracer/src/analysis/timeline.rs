//! The timeline of a run: every traced call of `events.csv` (`record --raw-events`) as an
//! interval on its thread, and the workload's phases as intervals on their process.
//!
//! `events.csv` has each call's end and wall time, so a call is `[end - wall, end]`. The
//! phase markers are counted and timed per (case, N) in `run.json`, but their begin and end
//! times are not recorded, so a phase's extent is derived here from the calls made in it:
//! the kernel keys the current phase by process (tgid), so per process, the calls in time
//! order fall into runs of one (case, N), and each run becomes a phase interval from its first
//! call's start to its last call's end. A phase with no traced call does not appear, and the
//! setup inside a phase before its first traced call is not covered.

use std::collections::BTreeMap;
use std::path::Path;

use super::raw::{self, RawError};
use crate::rundata::EVENTS_CSV;

/// One traced call.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Call {
    pub start_ns: u64,
    pub end_ns: u64,
    pub tid: u32,
    pub tgid: u32,
    /// Index into [`Timeline::targets`].
    pub target: u16,
    pub case: u32,
    pub n: u64,
    pub oncpu_ns: u64,
}

impl Call {
    pub fn wall_ns(&self) -> u64 {
        self.end_ns - self.start_ns
    }
}

/// A stretch of time one process spent in one (case, N) phase.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PhaseSpan {
    pub tgid: u32,
    pub case: u32,
    pub n: u64,
    pub start_ns: u64,
    pub end_ns: u64,
    /// Calls in it.
    pub calls: u64,
}

/// A run's calls and phases, ordered for drawing.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Timeline {
    /// Target names, in order of first appearance in `events.csv`.
    pub targets: Vec<String>,
    /// Sorted by thread (tgid, tid), then start time, longer calls first on equal starts (so an
    /// enclosing call precedes the calls it contains).
    pub calls: Vec<Call>,
    /// Sorted by process, then time; the spans of one process never overlap.
    pub phases: Vec<PhaseSpan>,
}

/// Too many distinct targets to index with a u16: no run has more than a handful.
const MAX_TARGETS: usize = u16::MAX as usize;

impl Timeline {
    /// Build from calls in any order.
    pub fn from_calls(targets: Vec<String>, mut calls: Vec<Call>) -> Timeline {
        calls.sort_unstable_by(|a, b| {
            (
                a.tgid,
                a.tid,
                a.start_ns,
                std::cmp::Reverse(a.end_ns),
                a.target,
            )
                .cmp(&(
                    b.tgid,
                    b.tid,
                    b.start_ns,
                    std::cmp::Reverse(b.end_ns),
                    b.target,
                ))
        });
        let phases = phase_spans(&calls);
        Timeline {
            targets,
            calls,
            phases,
        }
    }

    /// Threads as (tgid, tid), in the order of [`Timeline::calls`].
    pub fn threads(&self) -> Vec<(u32, u32)> {
        let mut v: Vec<(u32, u32)> = self.calls.iter().map(|c| (c.tgid, c.tid)).collect();
        v.dedup();
        v
    }

    /// Processes (tgids), ascending.
    pub fn processes(&self) -> Vec<u32> {
        let mut v: Vec<u32> = self.calls.iter().map(|c| c.tgid).collect();
        v.dedup();
        v
    }

    /// The calls of each thread: slices of [`Timeline::calls`].
    pub fn by_thread(&self) -> impl Iterator<Item = &[Call]> {
        self.calls
            .chunk_by(|a, b| (a.tgid, a.tid) == (b.tgid, b.tid))
    }
}

/// Phase spans of calls sorted by thread: per process, the phased calls by start time, cut
/// wherever the (case, N) changes. Calls outside phases (case 0) neither make nor cut spans.
/// Threads of a process may overlap a boundary by a call still running when the next phase
/// began; the earlier span is then cut at the later one's start so that a process's spans
/// never overlap (the UI draws them as one row).
fn phase_spans(calls: &[Call]) -> Vec<PhaseSpan> {
    let mut by_process: BTreeMap<u32, Vec<&Call>> = BTreeMap::new();
    for c in calls {
        if c.case != tracer_ebpf::CASE_UNPHASED {
            by_process.entry(c.tgid).or_default().push(c);
        }
    }
    let mut out = Vec::new();
    for (tgid, mut cs) in by_process {
        cs.sort_by_key(|c| (c.start_ns, c.end_ns));
        let first = out.len();
        for c in cs {
            let last: Option<&mut PhaseSpan> = out[first..].last_mut();
            match last {
                Some(p) if p.case == c.case && p.n == c.n => {
                    p.end_ns = p.end_ns.max(c.end_ns);
                    p.calls += 1;
                }
                _ => out.push(PhaseSpan {
                    tgid,
                    case: c.case,
                    n: c.n,
                    start_ns: c.start_ns,
                    end_ns: c.end_ns,
                    calls: 1,
                }),
            }
        }
        for i in first + 1..out.len() {
            let next_start = out[i].start_ns;
            let prev = &mut out[i - 1];
            prev.end_ns = prev.end_ns.min(next_start);
        }
    }
    out
}

/// Read a run directory's `events.csv` into a timeline; None when the run kept no raw events.
pub fn read(dir: &Path) -> Result<Option<Timeline>, RawError> {
    let path = dir.join(EVENTS_CSV);
    let file = match std::fs::File::open(&path) {
        Ok(f) => f,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(source) => return Err(RawError::Io { path, source }),
    };
    let mut targets: Vec<String> = Vec::new();
    let mut calls = Vec::new();
    let mut too_many = false;
    raw::for_each_event(file, &path, |ev| {
        let ti = match targets.iter().position(|t| t == ev.target) {
            Some(i) => i,
            None if targets.len() < MAX_TARGETS => {
                targets.push(ev.target.to_string());
                targets.len() - 1
            }
            None => {
                too_many = true;
                return;
            }
        };
        calls.push(Call {
            // A wall time longer than the clock reading is corrupt; the reader checked the
            // rest, and a call starting at 0 is drawn rather than refused.
            start_ns: ev.end_ns.saturating_sub(ev.wall_ns),
            end_ns: ev.end_ns,
            tid: ev.tid,
            tgid: ev.tgid,
            target: ti as u16,
            case: ev.case,
            n: ev.n,
            oncpu_ns: ev.oncpu_ns,
        });
    })?;
    if too_many {
        return Err(RawError::Corrupt {
            path,
            line: 0,
            what: format!("more than {MAX_TARGETS} distinct targets"),
        });
    }
    Ok(Some(Timeline::from_calls(targets, calls)))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn call(tgid: u32, tid: u32, start: u64, end: u64, case: u32, n: u64) -> Call {
        Call {
            start_ns: start,
            end_ns: end,
            tid,
            tgid,
            target: 0,
            case,
            n,
            oncpu_ns: 0,
        }
    }

    #[test]
    fn calls_are_ordered_per_thread_with_enclosing_calls_first() {
        let t = Timeline::from_calls(
            vec!["a".into()],
            vec![
                call(2, 3, 50, 60, 1, 1),
                call(1, 1, 10, 20, 1, 1),
                call(1, 1, 10, 40, 1, 1),
                call(1, 2, 5, 6, 1, 1),
            ],
        );
        let keys: Vec<(u32, u64, u64)> = t
            .calls
            .iter()
            .map(|c| (c.tid, c.start_ns, c.end_ns))
            .collect();
        assert_eq!(keys, [(1, 10, 40), (1, 10, 20), (2, 5, 6), (3, 50, 60)]);
        assert_eq!(t.threads(), [(1, 1), (1, 2), (2, 3)]);
        assert_eq!(t.processes(), [1, 2]);
        assert_eq!(
            t.by_thread().map(<[Call]>::len).collect::<Vec<_>>(),
            [2, 1, 1]
        );
    }

    #[test]
    fn phases_are_runs_of_one_case_and_n_per_process() {
        let t = Timeline::from_calls(
            vec!["a".into()],
            vec![
                // Process 1: N=10 twice (a repeat), with N=20 between; an unphased call
                // inside the second N=10 does not cut it.
                call(1, 1, 100, 110, 1, 10),
                call(1, 2, 105, 130, 1, 10),
                call(1, 1, 200, 210, 1, 20),
                call(1, 1, 300, 310, 1, 10),
                call(1, 1, 312, 315, 0, 0),
                call(1, 1, 320, 330, 1, 10),
                // Process 2: one phase, a call overlapping the next phase's first call.
                call(2, 7, 0, 50, 2, 5),
                call(2, 8, 40, 45, 2, 6),
            ],
        );
        let spans: Vec<(u32, u64, u64, u64, u64)> = t
            .phases
            .iter()
            .map(|p| (p.tgid, p.n, p.start_ns, p.end_ns, p.calls))
            .collect();
        assert_eq!(
            spans,
            [
                (1, 10, 100, 130, 2),
                (1, 20, 200, 210, 1),
                (1, 10, 300, 330, 2),
                // Cut at the next phase's start so the two never overlap.
                (2, 5, 0, 40, 1),
                (2, 6, 40, 45, 1),
            ]
        );
    }

    #[test]
    fn reads_events_csv_and_names_a_corrupt_line() {
        let dir = tempfile::tempdir().unwrap();
        assert_eq!(read(dir.path()).unwrap(), None);
        let header = crate::rundata::EVENTS_HEADER;
        std::fs::write(
            dir.path().join(EVENTS_CSV),
            format!("{header}1000,5,4,do_wait,1,10,300,100\n900,5,4,dup_mmap,1,10,50,50\n"),
        )
        .unwrap();
        let t = read(dir.path()).unwrap().unwrap();
        assert_eq!(t.targets, ["do_wait", "dup_mmap"]);
        assert_eq!(t.calls.len(), 2);
        let (outer, inner) = (t.calls[0], t.calls[1]);
        assert_eq!((outer.start_ns, outer.end_ns, outer.target), (700, 1000, 0));
        assert_eq!((inner.start_ns, inner.end_ns, inner.target), (850, 900, 1));
        assert_eq!(outer.wall_ns(), 300);
        assert_eq!(t.phases.len(), 1);
        std::fs::write(
            dir.path().join(EVENTS_CSV),
            format!("{header}1000,5,4,do_wait,1,10,300\n"),
        )
        .unwrap();
        let err = read(dir.path()).unwrap_err();
        assert!(matches!(err, RawError::Corrupt { line: 2, .. }), "{err}");
    }
}
