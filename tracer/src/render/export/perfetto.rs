//! A run's timeline as a Perfetto trace (`trace.pftrace`, open it in ui.perfetto.dev).
//!
//! Layout, in Perfetto's TrackEvent format:
//! - one process track per traced process (tgid), and under it one thread track per thread
//!   that made a traced call: a slice per call, named after the target, with the workload
//!   case, N, on-CPU and off-CPU time as arguments. Calls nest on their thread as they did in
//!   the kernel (a call inside another call is drawn under it);
//! - a `phases` track per process: a slice per stretch of one (case, N), as derived by
//!   [`crate::analysis::timeline`], named `<case> N=<n>`;
//! - an `N` counter track per process: N at the start of each phase.
//!
//! Timestamps are the kernel's monotonic clock in nanoseconds (`bpf_ktime_get_ns`), written in
//! Perfetto's default trace clock: a trace that holds one clock needs no conversion.
//!
//! Packets are written one at a time in timestamp order (per-track streams merged), so memory
//! stays at the timeline itself whatever the number of calls.

use std::cell::Cell;
use std::cmp::Reverse;
use std::collections::{BTreeMap, BinaryHeap};
use std::io::{self, Write};

use prost::Message;

use super::proto::perfetto::{
    CounterDescriptor, DebugAnnotation, ProcessDescriptor, ThreadDescriptor, TracePacket,
    TrackDescriptor, TrackEvent, debug_annotation, trace_packet, track_descriptor, track_event,
};
use crate::analysis::timeline::{Call, PhaseSpan, Timeline};

/// All packets are on one sequence (one writer).
const SEQUENCE_ID: u32 = 1;
/// Track uuids: a kind in the high bits, an index or tgid below; never 0 (the global track).
const PROCESS_TRACK: u64 = 1 << 40;
const THREAD_TRACK: u64 = 2 << 40;
const PHASE_TRACK: u64 = 3 << 40;
const COUNTER_TRACK: u64 = 4 << 40;
/// Category of every slice, for filtering in the UI.
const CATEGORY: &str = "tracer";
/// Name of the per-process phase and counter tracks.
pub const PHASES_TRACK_NAME: &str = "phases";
pub const N_TRACK_NAME: &str = "N";

/// What a trace holds, for the CLI's summary and the tests.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct TraceStats {
    pub processes: usize,
    pub threads: usize,
    /// Call slices (one per `events.csv` row).
    pub slices: u64,
    pub phase_slices: u64,
    pub counter_values: u64,
    /// Calls whose end was moved back to their enclosing call's end because the two
    /// overlapped without nesting (impossible for calls paired on one thread; counted so a
    /// broken input shows).
    pub clamped: u64,
    pub bytes: u64,
}

/// One step of one track, in the track's own order.
enum Step<'a> {
    CallBegin(&'a Call),
    CallEnd,
    PhaseBegin(&'a PhaseSpan),
    PhaseEnd,
    Counter(u64),
}

/// A track's steps, each with its timestamp.
type Stream<'a> = Box<dyn Iterator<Item = (u64, Step<'a>)> + 'a>;

/// Slices of one thread's calls (sorted by start, enclosing first): BEGIN at each start, END
/// when a later call starts at or after it ends, innermost first.
struct ThreadSteps<'a> {
    calls: &'a [Call],
    next: usize,
    /// End times of the open calls, innermost last.
    open: Vec<u64>,
    /// Shared by every thread's steps.
    clamped: &'a Cell<u64>,
}

impl<'a> Iterator for ThreadSteps<'a> {
    type Item = (u64, Step<'a>);

    fn next(&mut self) -> Option<Self::Item> {
        let top = self.open.last().copied();
        match (self.calls.get(self.next), top) {
            (Some(c), Some(end)) if end <= c.start_ns => {
                self.open.pop();
                Some((end, Step::CallEnd))
            }
            (Some(c), _) => {
                self.next += 1;
                let end = match top {
                    Some(outer) if c.end_ns > outer => {
                        self.clamped.set(self.clamped.get() + 1);
                        outer
                    }
                    _ => c.end_ns,
                };
                self.open.push(end);
                Some((c.start_ns, Step::CallBegin(c)))
            }
            (None, Some(end)) => {
                self.open.pop();
                Some((end, Step::CallEnd))
            }
            (None, None) => None,
        }
    }
}

/// Names and arguments the trace shows.
pub struct Names<'a> {
    /// Case names by id (`run.json`'s `cases`); unknown ids fall back to the workloads' table.
    pub cases: &'a BTreeMap<u32, String>,
}

impl Names<'_> {
    fn case(&self, id: u32) -> String {
        self.cases
            .get(&id)
            .cloned()
            .unwrap_or_else(|| workloads::cases::case_name(id))
    }
}

/// Write `t` as a Perfetto trace to `w`.
pub fn write_trace<W: Write>(t: &Timeline, names: &Names, w: W) -> io::Result<TraceStats> {
    let mut out = PacketWriter {
        w: io::BufWriter::with_capacity(1 << 20, w),
        buf: Vec::with_capacity(256),
        bytes: 0,
        first: true,
    };
    let processes = t.processes();
    let threads = t.threads();
    let mut stats = TraceStats {
        processes: processes.len(),
        threads: threads.len(),
        ..TraceStats::default()
    };
    // Descriptors first: a track must be described before its first event.
    write_descriptors(&mut out, t, &processes, &threads)?;

    // One stream per track, merged by timestamp. A stream has one step in the heap at a time,
    // so each track keeps its own order at equal timestamps (an END before the next BEGIN).
    let clamped = Cell::new(0);
    let (uuids, mut streams) = track_streams(t, &clamped);
    let mut heads: Vec<Option<(u64, Step)>> = streams.iter_mut().map(|s| s.next()).collect();
    let mut heap: BinaryHeap<Reverse<(u64, usize)>> = heads
        .iter()
        .enumerate()
        .filter_map(|(i, h)| h.as_ref().map(|(ts, _)| Reverse((*ts, i))))
        .collect();
    while let Some(Reverse((ts, i))) = heap.pop() {
        let (_, step) = heads[i].take().expect("a queued stream has a head");
        let event = track_event(step, uuids[i], t, names, &mut stats);
        out.packet(Some(ts), trace_packet::Data::TrackEvent(event))?;
        heads[i] = streams[i].next();
        if let Some((next_ts, _)) = &heads[i] {
            heap.push(Reverse((*next_ts, i)));
        }
    }
    out.w.flush()?;
    drop(streams);
    stats.clamped = clamped.get();
    stats.bytes = out.bytes;
    Ok(stats)
}

/// The tracks: one per process, with its phases' track and N's counter track when it ran
/// phases, and one per thread.
fn write_descriptors<W: Write>(
    out: &mut PacketWriter<W>,
    t: &Timeline,
    processes: &[u32],
    threads: &[(u32, u32)],
) -> io::Result<()> {
    for &tgid in processes {
        let process = PROCESS_TRACK | u64::from(tgid);
        out.packet(
            None,
            trace_packet::Data::TrackDescriptor(TrackDescriptor {
                uuid: Some(process),
                process: Some(ProcessDescriptor {
                    pid: Some(tgid as i32),
                    ..Default::default()
                }),
                ..Default::default()
            }),
        )?;
        if t.phases.iter().any(|p| p.tgid == tgid) {
            for (uuid, name, counter) in [
                (PHASE_TRACK | u64::from(tgid), PHASES_TRACK_NAME, None),
                (
                    COUNTER_TRACK | u64::from(tgid),
                    N_TRACK_NAME,
                    Some(CounterDescriptor::default()),
                ),
            ] {
                out.packet(
                    None,
                    trace_packet::Data::TrackDescriptor(TrackDescriptor {
                        uuid: Some(uuid),
                        parent_uuid: Some(process),
                        static_or_dynamic_name: Some(track_descriptor::StaticOrDynamicName::Name(
                            name.to_string(),
                        )),
                        counter,
                        ..Default::default()
                    }),
                )?;
            }
        }
    }
    for (i, &(tgid, tid)) in threads.iter().enumerate() {
        out.packet(
            None,
            trace_packet::Data::TrackDescriptor(TrackDescriptor {
                uuid: Some(THREAD_TRACK | i as u64),
                parent_uuid: Some(PROCESS_TRACK | u64::from(tgid)),
                thread: Some(ThreadDescriptor {
                    pid: Some(tgid as i32),
                    tid: Some(tid as i32),
                    ..Default::default()
                }),
                ..Default::default()
            }),
        )?;
    }
    Ok(())
}

/// Each track's steps in time order, with the track's uuid: every thread's calls, and per
/// process with phases its phases and the N counter.
fn track_streams<'a>(t: &'a Timeline, clamped: &'a Cell<u64>) -> (Vec<u64>, Vec<Stream<'a>>) {
    let mut uuids: Vec<u64> = Vec::new();
    let mut streams: Vec<Stream> = Vec::new();
    for (i, calls) in t.by_thread().enumerate() {
        uuids.push(THREAD_TRACK | i as u64);
        streams.push(Box::new(ThreadSteps {
            calls,
            next: 0,
            open: Vec::new(),
            clamped,
        }));
    }
    for phases in t.phases.chunk_by(|a, b| a.tgid == b.tgid) {
        let tgid = u64::from(phases[0].tgid);
        uuids.push(PHASE_TRACK | tgid);
        streams.push(Box::new(phases.iter().flat_map(|p| {
            [
                (p.start_ns, Step::PhaseBegin(p)),
                (p.end_ns, Step::PhaseEnd),
            ]
        })));
        uuids.push(COUNTER_TRACK | tgid);
        streams.push(Box::new(
            phases.iter().map(|p| (p.start_ns, Step::Counter(p.n))),
        ));
    }
    (uuids, streams)
}

/// The event of one step on `track`, counted in `stats`.
fn track_event(
    step: Step,
    track: u64,
    t: &Timeline,
    names: &Names,
    stats: &mut TraceStats,
) -> TrackEvent {
    match step {
        Step::CallBegin(c) => {
            stats.slices += 1;
            TrackEvent {
                r#type: Some(track_event::Type::SliceBegin as i32),
                track_uuid: Some(track),
                categories: vec![CATEGORY.to_string()],
                name_field: Some(track_event::NameField::Name(
                    t.targets[usize::from(c.target)].clone(),
                )),
                debug_annotations: vec![
                    arg_str("case", names.case(c.case)),
                    arg_uint("n", c.n),
                    arg_uint("oncpu_ns", c.oncpu_ns),
                    arg_uint("offcpu_ns", c.wall_ns().saturating_sub(c.oncpu_ns)),
                ],
                ..Default::default()
            }
        }
        Step::PhaseBegin(p) => {
            stats.phase_slices += 1;
            let case = names.case(p.case);
            TrackEvent {
                r#type: Some(track_event::Type::SliceBegin as i32),
                track_uuid: Some(track),
                categories: vec![CATEGORY.to_string()],
                name_field: Some(track_event::NameField::Name(format!("{case} N={}", p.n))),
                debug_annotations: vec![
                    arg_str("case", case),
                    arg_uint("n", p.n),
                    arg_uint("calls", p.calls),
                ],
                ..Default::default()
            }
        }
        Step::CallEnd | Step::PhaseEnd => TrackEvent {
            r#type: Some(track_event::Type::SliceEnd as i32),
            track_uuid: Some(track),
            ..Default::default()
        },
        Step::Counter(n) => {
            stats.counter_values += 1;
            TrackEvent {
                r#type: Some(track_event::Type::Counter as i32),
                track_uuid: Some(track),
                counter_value_field: Some(track_event::CounterValueField::CounterValue(
                    i64::try_from(n).unwrap_or(i64::MAX),
                )),
                ..Default::default()
            }
        }
    }
}

fn arg_str(name: &str, v: String) -> DebugAnnotation {
    DebugAnnotation {
        name_field: Some(debug_annotation::NameField::Name(name.to_string())),
        value: Some(debug_annotation::Value::StringValue(v)),
    }
}

fn arg_uint(name: &str, v: u64) -> DebugAnnotation {
    DebugAnnotation {
        name_field: Some(debug_annotation::NameField::Name(name.to_string())),
        value: Some(debug_annotation::Value::UintValue(v)),
    }
}

/// Writes `Trace.packet` entries one by one: a trace file is the concatenation of its packets,
/// each as field 1 of the `Trace` message.
struct PacketWriter<W: Write> {
    w: io::BufWriter<W>,
    buf: Vec<u8>,
    bytes: u64,
    first: bool,
}

impl<W: Write> PacketWriter<W> {
    fn packet(&mut self, ts: Option<u64>, data: trace_packet::Data) -> io::Result<()> {
        let p = TracePacket {
            timestamp: ts,
            data: Some(data),
            optional_trusted_packet_sequence_id: Some(
                trace_packet::OptionalTrustedPacketSequenceId::TrustedPacketSequenceId(SEQUENCE_ID),
            ),
            // The first packet starts the sequence's state, as a fresh writer's would.
            sequence_flags: self
                .first
                .then_some(trace_packet::SequenceFlags::SeqIncrementalStateCleared as u32),
            ..Default::default()
        };
        self.first = false;
        self.buf.clear();
        prost::encoding::encode_key(1, prost::encoding::WireType::LengthDelimited, &mut self.buf);
        p.encode_length_delimited(&mut self.buf)
            .expect("a Vec grows as needed");
        self.w.write_all(&self.buf)?;
        self.bytes += self.buf.len() as u64;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn call(start_ns: u64, end_ns: u64) -> Call {
        Call {
            start_ns,
            end_ns,
            tid: 1,
            tgid: 1,
            target: 0,
            case: 0,
            n: 0,
            oncpu_ns: 0,
        }
    }

    /// (timestamp, true for BEGIN) of one thread's calls.
    fn steps(calls: &[Call], clamped: &Cell<u64>) -> Vec<(u64, bool)> {
        ThreadSteps {
            calls,
            next: 0,
            open: Vec::new(),
            clamped,
        }
        .map(|(ts, s)| (ts, matches!(s, Step::CallBegin(_))))
        .collect()
    }

    #[test]
    fn calls_nest_and_an_overlap_is_cut_at_the_enclosing_end() {
        let clamped = Cell::new(0);
        // Nested, then adjacent: END before BEGIN at the shared instant.
        let nested = [call(0, 10), call(2, 4), call(10, 12)];
        assert_eq!(
            steps(&nested, &clamped),
            [
                (0, true),
                (2, true),
                (4, false),
                (10, false),
                (10, true),
                (12, false)
            ]
        );
        assert_eq!(clamped.get(), 0);
        // [5, 20] overlaps [0, 10] without nesting: drawn as ending with it, and counted.
        let overlapping = [call(0, 10), call(5, 20)];
        assert_eq!(
            steps(&overlapping, &clamped),
            [(0, true), (5, true), (10, false), (10, false)]
        );
        assert_eq!(clamped.get(), 1);
    }
}
