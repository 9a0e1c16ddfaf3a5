//! Collection: turn the raw kernel aggregates (a `Snapshot`) into run data: span rows with
//! histograms, phase rows, counters, raw event rows, symbolized folded stacks (`stacks`), and
//! the whole `Run` written to disk (`run`).
use std::collections::BTreeMap;

use tracer_ebpf::{HIST_ONCPU, HIST_TRIPS, HIST_WALL};

use crate::engine::Snapshot;
use crate::rundata::{COUNTER_NAMES, Dist, InvocationSpan, PhaseRow, SpanRow};

mod entries;
mod run;
mod stacks;

pub use entries::{entry_name, entry_rows};
pub use run::{RunFacts, build_run};
pub use stacks::stack_files;

/// One `events.csv` row from a ring-buffer record; None if the record is malformed.
pub fn event_row(bytes: &[u8], target_names: &[String]) -> Option<String> {
    if bytes.len() < std::mem::size_of::<tracer_ebpf::SpanEvent>() {
        return None;
    }
    // SAFETY: length checked; SpanEvent is plain integers, read unaligned.
    let ev: tracer_ebpf::SpanEvent =
        unsafe { std::ptr::read_unaligned(bytes.as_ptr().cast::<tracer_ebpf::SpanEvent>()) };
    let target = target_names.get(ev.target as usize)?;
    Some(format!(
        "{},{},{},{},{},{},{},{}\n",
        ev.end_ns, ev.tid, ev.tgid, target, ev.case, ev.n, ev.wall_ns, ev.oncpu_ns
    ))
}

pub fn counters(snap: &Snapshot) -> BTreeMap<String, u64> {
    COUNTER_NAMES
        .iter()
        .zip(snap.counters.iter())
        .map(|(n, v)| (n.to_string(), *v))
        .collect()
}

/// Span rows for every (target, case, N) seen. `target_names[i]` names kernel target id i.
pub fn span_rows(snap: &Snapshot, target_names: &[String]) -> Vec<SpanRow> {
    let mut rows = Vec::new();
    for (key, s) in &snap.spans {
        let Some(name) = target_names.get(key.target as usize) else {
            continue;
        };
        let dist = |kind: u32, sum, min, max| Dist {
            sum_ns: sum,
            min_ns: min,
            max_ns: max,
            hist: snap
                .hist
                .get(&(*key, kind))
                .map(|h| h.iter().map(|(b, c)| (*b, *c)).collect())
                .unwrap_or_default(),
        };
        rows.push(SpanRow {
            target: name.clone(),
            case: key.case,
            case_name: workloads::cases::case_name(key.case),
            n: key.n,
            calls: s.calls,
            untimed: s.untimed,
            wall: dist(HIST_WALL, s.wall_sum, s.wall_min, s.wall_max),
            oncpu: dist(HIST_ONCPU, s.oncpu_sum, s.oncpu_min, s.oncpu_max),
            within: s
                .within
                .iter()
                .enumerate()
                .filter(|(_, c)| **c > 0)
                .filter_map(|(j, c)| Some((target_names.get(j)?.clone(), *c)))
                .collect(),
            trips: snap
                .hist
                .get(&(*key, HIST_TRIPS))
                .map(|h| h.iter().map(|(b, c)| (*b, *c)).collect())
                .unwrap_or_default(),
        });
    }
    rows.sort_by(|a, b| (&a.target, a.case, a.n).cmp(&(&b.target, b.case, b.n)));
    rows
}

/// The calls at size `n` between two span snapshots of one session, per target and case: one
/// run of a sweep's command (the user's, whose calls are all in its one phase, or a built-in
/// workload's at one N, in each case it announced). Targets without a call in between, and
/// calls outside every phase, are left out.
pub fn invocation_spans(
    before: &Snapshot,
    after: &Snapshot,
    n: u64,
    target_names: &[String],
) -> Vec<InvocationSpan> {
    let mut out = Vec::new();
    for (key, s) in &after.spans {
        if key.case == tracer_ebpf::CASE_UNPHASED || key.n != n {
            continue;
        }
        let Some(name) = target_names.get(key.target as usize) else {
            continue;
        };
        let old = before.spans.get(key).copied().unwrap_or_default();
        let calls = s.calls.saturating_sub(old.calls);
        if calls == 0 {
            continue;
        }
        let dist = |kind: u32, sum: u64, old_sum: u64| {
            let was = before.hist.get(&(*key, kind));
            Dist {
                sum_ns: sum.saturating_sub(old_sum),
                min_ns: 0,
                max_ns: 0,
                hist: after
                    .hist
                    .get(&(*key, kind))
                    .map(|h| {
                        h.iter()
                            .map(|(b, c)| {
                                let c0 = was.and_then(|w| w.get(b)).copied().unwrap_or(0);
                                (*b, c.saturating_sub(c0))
                            })
                            .filter(|(_, c)| *c > 0)
                            .collect()
                    })
                    .unwrap_or_default(),
            }
        };
        out.push(InvocationSpan {
            target: name.clone(),
            case: key.case,
            calls,
            untimed: s.untimed.saturating_sub(old.untimed),
            wall: dist(HIST_WALL, s.wall_sum, old.wall_sum),
            oncpu: dist(HIST_ONCPU, s.oncpu_sum, old.oncpu_sum),
        });
    }
    out.sort_by(|a, b| (&a.target, a.case).cmp(&(&b.target, b.case)));
    out
}

pub fn phase_rows(snap: &Snapshot) -> Vec<PhaseRow> {
    let mut rows: Vec<PhaseRow> = snap
        .phases
        .iter()
        .map(|(k, v)| PhaseRow {
            case: k.case,
            case_name: workloads::cases::case_name(k.case),
            n: k.n,
            phases: v.phases,
            ops: v.ops,
            wall_ns: v.wall_ns,
        })
        .collect();
    rows.sort_by_key(|r| (r.case, r.n));
    rows
}

#[cfg(test)]
mod tests {
    use super::*;

    use tracer_ebpf::{AggKey, STACK_ONCPU, SpanStats, StackKey, StackVal};

    /// One run's calls are the difference of the aggregates around it: counts, sums and
    /// histogram buckets, per case at its N; other sizes, calls outside any phase and targets
    /// without new calls are left out.
    #[test]
    fn a_run_of_the_command_is_the_difference_around_it() {
        let before = snap();
        let mut after = snap();
        let k = AggKey {
            target: 0,
            case: 1,
            n: 100,
        };
        let s = after.spans.get_mut(&k).unwrap();
        s.calls += 2;
        s.wall_sum += 70;
        after.hist.insert(
            (k, HIST_WALL),
            [(5u32, 3u64), (9, 1), (12, 1)].into_iter().collect(),
        );
        // Another phase's calls are not this run's.
        after.spans.insert(
            AggKey { n: 200, ..k },
            SpanStats {
                calls: 9,
                ..Default::default()
            },
        );
        let names = vec!["do_wait".to_string()];
        let v = invocation_spans(&before, &after, 100, &names);
        assert_eq!(v.len(), 1);
        assert_eq!(
            (v[0].target.as_str(), v[0].case, v[0].calls),
            ("do_wait", 1, 2)
        );
        assert_eq!(v[0].wall.sum_ns, 70);
        assert_eq!(v[0].wall.hist, vec![(5, 1), (12, 1)]);
        assert!(invocation_spans(&after, &after, 100, &names).is_empty());
        assert_eq!(invocation_spans(&before, &after, 200, &names)[0].calls, 9);
        // A workload's second case at the same N is its own span; calls outside any phase
        // (case 0) are no run's.
        for case in [2, tracer_ebpf::CASE_UNPHASED] {
            after.spans.insert(
                AggKey { case, ..k },
                SpanStats {
                    calls: 4,
                    ..Default::default()
                },
            );
        }
        let v = invocation_spans(&before, &after, 100, &names);
        let cases: Vec<(u32, u64)> = v.iter().map(|s| (s.case, s.calls)).collect();
        assert_eq!(cases, [(1, 2), (2, 4)]);
    }

    pub(super) fn snap() -> Snapshot {
        let mut s = Snapshot::default();
        let k = AggKey {
            target: 0,
            case: 1,
            n: 100,
        };
        s.spans.insert(
            k,
            SpanStats {
                calls: 3,
                wall_sum: 30,
                wall_min: 5,
                wall_max: 20,
                ..Default::default()
            },
        );
        s.hist
            .insert((k, HIST_WALL), [(5u32, 2u64), (9, 1)].into_iter().collect());
        s.sampled.insert(7, vec![0xc010, 0x1010, 0x3010]);
        s.stacks.push((
            StackKey {
                agg: k,
                kind: STACK_ONCPU,
                kstack: 7,
                ustack: -1,
                tgid: 0,
            },
            StackVal { count: 2, ns: 2000 },
        ));
        s.stacks.push((
            StackKey {
                agg: k,
                kind: STACK_ONCPU,
                kstack: 99,
                ustack: -1,
                tgid: 0,
            },
            StackVal { count: 1, ns: 1000 },
        ));
        s
    }

    #[test]
    fn event_rows_decode_ring_buffer_records() {
        let ev = tracer_ebpf::SpanEvent {
            end_ns: 5,
            wall_ns: 7,
            oncpu_ns: 3,
            n: 100,
            case: 1,
            target: 0,
            tid: 11,
            tgid: 10,
        };
        // SAFETY: viewing a plain struct as bytes.
        let bytes = unsafe {
            std::slice::from_raw_parts(
                (&ev as *const tracer_ebpf::SpanEvent).cast::<u8>(),
                std::mem::size_of_val(&ev),
            )
        };
        let names = ["do_wait".to_string()];
        assert_eq!(
            event_row(bytes, &names).unwrap(),
            "5,11,10,do_wait,1,100,7,3\n"
        );
        assert!(event_row(&bytes[..10], &names).is_none());
        assert_eq!(crate::rundata::EVENTS_HEADER.split(',').count(), 8);
    }

    #[test]
    fn rows_carry_histograms_and_case_names() {
        let rows = span_rows(&snap(), &["do_wait".to_string()]);
        assert_eq!(rows.len(), 1);
        assert_eq!(rows[0].case_name, "waitpid-pid");
        assert_eq!(rows[0].wall.hist, vec![(5, 2), (9, 1)]);
        assert!(rows[0].oncpu.hist.is_empty());
    }
}
