//! The exports (Perfetto trace, pprof profiles) decoded back and checked against the run they
//! came from. Decoding goes through the formats' descriptors with prost-reflect's dynamic
//! messages, not through the prost types the exporters encode with, and the gzip layer
//! through flate2's decoder.
//!
//! Synthetic run directories cover the layout exactly (nesting, phases, labels, sweeps, the
//! CLI and its errors); `a_real_recording_exports_every_call_and_stack` records a real
//! workload with tracepoints on this machine (root, like tests/native.rs).
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::io::Read;
use std::path::Path;

use prost_reflect::{DescriptorPool, DynamicMessage, ReflectMessage, Value};
use tracer::analysis::hist::from_values;
use tracer::render::ReportOptions;
use tracer::rundata::{
    PhaseRow, PlanUsed, Run, SpanRow, StackFile, StackKind, TargetReport, stack_file_path,
};

mod common;
use common::{file_tree, nothing_loaded, synthetic_run, tracer, workloads_bin};

// ---------------------------------------------------------------------------------------------
// Decoding

fn message(name: &str, bytes: &[u8]) -> DynamicMessage {
    let pool = DescriptorPool::decode(tracer::render::export::proto::DESCRIPTOR_SET)
        .expect("the descriptor set decodes");
    let desc = pool
        .get_message_by_name(name)
        .unwrap_or_else(|| panic!("{name} in the descriptor set"));
    let m = DynamicMessage::decode(desc, bytes).unwrap_or_else(|e| panic!("{name}: {e}"));
    assert_all_fields_known(&m);
    m
}

/// A field the schema does not know would be dropped or misread by a reader.
fn assert_all_fields_known(m: &DynamicMessage) {
    assert_eq!(
        m.unknown_fields().count(),
        0,
        "unknown fields in {}",
        m.descriptor().full_name()
    );
    for (_, v) in m.fields() {
        match v {
            Value::Message(inner) => assert_all_fields_known(inner),
            Value::List(items) => {
                for i in items {
                    if let Value::Message(inner) = i {
                        assert_all_fields_known(inner);
                    }
                }
            }
            _ => {}
        }
    }
}

fn has(m: &DynamicMessage, f: &str) -> bool {
    m.has_field_by_name(f)
}

fn int(m: &DynamicMessage, f: &str) -> i128 {
    match m
        .get_field_by_name(f)
        .unwrap_or_else(|| panic!("no field {f}"))
        .as_ref()
    {
        Value::U32(v) => i128::from(*v),
        Value::U64(v) => i128::from(*v),
        Value::I32(v) => i128::from(*v),
        Value::I64(v) => i128::from(*v),
        Value::EnumNumber(v) => i128::from(*v),
        other => panic!("{f} is not an integer: {other:?}"),
    }
}

fn string(m: &DynamicMessage, f: &str) -> String {
    m.get_field_by_name(f)
        .and_then(|v| v.as_str().map(str::to_string))
        .unwrap_or_else(|| panic!("no string field {f}"))
}

fn list(m: &DynamicMessage, f: &str) -> Vec<Value> {
    m.get_field_by_name(f)
        .and_then(|v| v.as_list().map(<[Value]>::to_vec))
        .unwrap_or_default()
}

fn sub(m: &DynamicMessage, f: &str) -> DynamicMessage {
    m.get_field_by_name(f)
        .and_then(|v| v.as_message().cloned())
        .unwrap_or_else(|| panic!("no message field {f}"))
}

#[derive(Debug, Default, Clone)]
struct Track {
    parent: Option<u64>,
    name: Option<String>,
    /// (pid, tid) of a thread track; pid of a process track.
    thread: Option<(i128, i128)>,
    process: Option<i128>,
    counter: bool,
}

/// A slice's arguments (debug annotations), as text.
type Args = BTreeMap<String, String>;

#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
struct Slice {
    track: u64,
    start: u64,
    end: u64,
    name: String,
    args: Args,
}

#[derive(Debug, Default)]
struct Trace {
    tracks: BTreeMap<u64, Track>,
    slices: Vec<Slice>,
    /// (track, timestamp, value)
    counters: Vec<(u64, u64, i128)>,
}

impl Trace {
    fn slices_on(&self, pred: impl Fn(&Track) -> bool) -> Vec<&Slice> {
        self.slices
            .iter()
            .filter(|s| pred(&self.tracks[&s.track]))
            .collect()
    }

    fn process_of(&self, track: u64) -> i128 {
        let t = &self.tracks[&track];
        match (t.thread, t.process, t.parent) {
            (Some((pid, _)), ..) => pid,
            (_, Some(pid), _) => pid,
            (.., Some(p)) => self.process_of(p),
            _ => panic!("track {track} belongs to no process"),
        }
    }
}

/// Decode a trace and replay its slices: BEGIN/END pairs per track, which must nest.
fn decode_trace(bytes: &[u8]) -> Trace {
    let m = message("perfetto.protos.Trace", bytes);
    let mut t = Trace::default();
    let mut open: HashMap<u64, Vec<(u64, String, Args)>> = HashMap::new();
    let mut last_ts = 0u64;
    for (i, p) in list(&m, "packet").iter().enumerate() {
        let p = p.as_message().expect("packets are messages");
        assert_eq!(int(p, "trusted_packet_sequence_id"), 1, "packet {i}");
        if has(p, "track_descriptor") {
            let d = sub(p, "track_descriptor");
            let uuid = int(&d, "uuid") as u64;
            assert!(uuid != 0, "uuid 0 is the implicit global track");
            let track = Track {
                parent: has(&d, "parent_uuid").then(|| int(&d, "parent_uuid") as u64),
                name: has(&d, "name").then(|| string(&d, "name")),
                thread: has(&d, "thread").then(|| {
                    let th = sub(&d, "thread");
                    (int(&th, "pid"), int(&th, "tid"))
                }),
                process: has(&d, "process").then(|| int(&sub(&d, "process"), "pid")),
                counter: has(&d, "counter"),
            };
            if let Some(parent) = track.parent {
                assert!(t.tracks.contains_key(&parent), "parent described first");
            }
            assert!(
                t.tracks.insert(uuid, track).is_none(),
                "track {uuid} described twice"
            );
        } else {
            assert!(
                has(p, "track_event"),
                "packet {i} is a descriptor or an event"
            );
            let e = sub(p, "track_event");
            let ts = int(p, "timestamp") as u64;
            assert!(
                ts >= last_ts,
                "packets in timestamp order: {ts} after {last_ts}"
            );
            last_ts = ts;
            let track = int(&e, "track_uuid") as u64;
            assert!(
                t.tracks.contains_key(&track),
                "event on undescribed track {track}"
            );
            match int(&e, "type") {
                1 => {
                    let args = list(&e, "debug_annotations")
                        .iter()
                        .map(|a| {
                            let a = a.as_message().unwrap();
                            let v = if has(a, "string_value") {
                                string(a, "string_value")
                            } else if has(a, "uint_value") {
                                int(a, "uint_value").to_string()
                            } else {
                                panic!("unexpected annotation {a:?}")
                            };
                            (string(a, "name"), v)
                        })
                        .collect();
                    open.entry(track)
                        .or_default()
                        .push((ts, string(&e, "name"), args));
                }
                2 => {
                    let (start, name, args) = open
                        .get_mut(&track)
                        .and_then(Vec::pop)
                        .unwrap_or_else(|| panic!("END without BEGIN on track {track}"));
                    t.slices.push(Slice {
                        track,
                        start,
                        end: ts,
                        name,
                        args,
                    });
                }
                4 => {
                    assert!(t.tracks[&track].counter, "counter value on a slice track");
                    t.counters.push((track, ts, int(&e, "counter_value")));
                }
                other => panic!("unexpected event type {other}"),
            }
        }
    }
    for (track, stack) in open {
        assert!(stack.is_empty(), "unterminated slices on track {track}");
    }
    t
}

#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
struct Sample {
    /// Root first, like folded stacks.
    stack: Vec<String>,
    value: i128,
    labels: BTreeMap<String, String>,
}

#[derive(Debug)]
struct Profile {
    sample_type: Vec<(String, String)>,
    period: i128,
    samples: Vec<Sample>,
    comments: Vec<String>,
}

fn decode_profile(gz: &[u8]) -> Profile {
    let mut raw = Vec::new();
    flate2::read::GzDecoder::new(gz)
        .read_to_end(&mut raw)
        .expect("the profile is valid gzip");
    let m = message("perftools.profiles.Profile", &raw);
    let strings: Vec<String> = list(&m, "string_table")
        .iter()
        .map(|v| v.as_str().unwrap().to_string())
        .collect();
    assert_eq!(
        strings.first().map(String::as_str),
        Some(""),
        "string_table[0]"
    );
    let s = |i: i128| strings[usize::try_from(i).unwrap()].clone();
    let functions: HashMap<i128, String> = list(&m, "function")
        .iter()
        .map(|f| {
            let f = f.as_message().unwrap();
            (int(f, "id"), s(int(f, "name")))
        })
        .collect();
    let locations: HashMap<i128, String> = list(&m, "location")
        .iter()
        .map(|l| {
            let l = l.as_message().unwrap();
            let lines = list(l, "line");
            assert_eq!(lines.len(), 1, "one function per location");
            let f = int(lines[0].as_message().unwrap(), "function_id");
            (int(l, "id"), functions[&f].clone())
        })
        .collect();
    let samples = list(&m, "sample")
        .iter()
        .map(|x| {
            let x = x.as_message().unwrap();
            let mut stack: Vec<String> = list(x, "location_id")
                .iter()
                .map(|id| locations[&i128::from(id.as_u64().unwrap())].clone())
                .collect();
            stack.reverse();
            let values = list(x, "value");
            assert_eq!(values.len(), 1, "one value per sample type");
            let labels = list(x, "label")
                .iter()
                .map(|l| {
                    let l = l.as_message().unwrap();
                    let v = if int(l, "str") != 0 {
                        s(int(l, "str"))
                    } else {
                        int(l, "num").to_string()
                    };
                    (s(int(l, "key")), v)
                })
                .collect();
            Sample {
                stack,
                value: i128::from(values[0].as_i64().unwrap()),
                labels,
            }
        })
        .collect();
    Profile {
        sample_type: list(&m, "sample_type")
            .iter()
            .map(|v| {
                let v = v.as_message().unwrap();
                (s(int(v, "type")), s(int(v, "unit")))
            })
            .collect(),
        period: int(&m, "period"),
        samples,
        comments: list(&m, "comment")
            .iter()
            .map(|c| s(i128::from(c.as_i64().unwrap())))
            .collect(),
    }
}

// ---------------------------------------------------------------------------------------------
// A synthetic run

/// One `events.csv` row.
#[derive(Clone, Debug)]
struct Ev {
    start: u64,
    end: u64,
    tgid: u32,
    tid: u32,
    target: String,
    case: u32,
    n: u64,
    oncpu: u64,
}

const CASES: [(u32, &str); 2] = [(1, "waitpid-pid"), (2, "waitpid-any")];

fn case_name(id: u32) -> &'static str {
    CASES
        .iter()
        .find(|(i, _)| *i == id)
        .map_or("unphased", |(_, n)| n)
}

/// Calls laid out so the phases are known: process 1000 (threads 1000, 1001) runs case 1 at
/// N=10, N=100, then N=10 again; process 2000 (threads 2000, 2001) runs case 2 at N=10 and
/// N=100. Nesting on one thread: a call inside another, two calls with the same bounds, a
/// zero-length call at the instant its sibling ends, adjacent calls; one call outside phases.
fn synthetic_events() -> Vec<Ev> {
    // A third of each call on a CPU.
    let ev = |start: u64, end: u64, tgid, tid, target: &str, case, n| Ev {
        start,
        end,
        tgid,
        tid,
        target: target.to_string(),
        case,
        n,
        oncpu: (end - start) / 3,
    };
    vec![
        ev(1_000_000, 1_005_000, 1000, 1000, "do_wait", 1, 10),
        ev(1_001_000, 1_002_000, 1000, 1000, "dup_mmap", 1, 10),
        ev(1_002_000, 1_002_000, 1000, 1000, "dup_mmap", 1, 10),
        ev(1_000_500, 1_003_000, 1000, 1001, "do_wait", 1, 10),
        ev(2_000_000, 2_010_000, 1000, 1000, "do_wait", 1, 100),
        ev(2_000_000, 2_010_000, 1000, 1000, "dup_mmap", 1, 100),
        ev(2_010_000, 2_020_000, 1000, 1000, "do_wait", 1, 100),
        ev(2_500_000, 2_500_100, 1000, 1000, "do_wait", 0, 0),
        ev(3_000_000, 3_001_000, 1000, 1001, "do_wait", 1, 10),
        ev(1_500_000, 1_600_000, 2000, 2000, "do_wait", 2, 10),
        ev(1_700_000, 1_800_000, 2000, 2001, "do_wait", 2, 100),
    ]
}

/// Expected phase slices: (tgid, name, start, end).
fn synthetic_phases() -> Vec<(i128, String, u64, u64)> {
    vec![
        (1000, "waitpid-pid N=10".into(), 1_000_000, 1_005_000),
        (1000, "waitpid-pid N=100".into(), 2_000_000, 2_020_000),
        (1000, "waitpid-pid N=10".into(), 3_000_000, 3_001_000),
        (2000, "waitpid-any N=10".into(), 1_500_000, 1_600_000),
        (2000, "waitpid-any N=100".into(), 1_700_000, 1_800_000),
    ]
}

/// Folded stacks of do_wait for one kind, case and N: the deeper frame grows with N.
fn folded(kind: StackKind, n: u64) -> Vec<(String, u64)> {
    match kind {
        StackKind::Oncpu => vec![
            ("do_syscall_64;__do_sys_wait4;do_wait".into(), 3_000_000),
            (
                "do_syscall_64;__do_sys_wait4;do_wait;wait_consider_task".into(),
                1_000_000 * n,
            ),
        ],
        _ => vec![(
            "main;waitpid;entry_SYSCALL_64;do_syscall_64;do_wait".into(),
            7_000 * (n + 1),
        )],
    }
}

/// Write a run directory holding the synthetic events, span rows that agree with them,
/// and on-CPU and caller stacks of do_wait for every (case, N), the unphased one included.
fn write_synthetic_run(dir: &Path, raw_events: bool) -> Run {
    let events = synthetic_events();
    let targets = ["do_wait", "dup_mmap"]
        .iter()
        .map(|t| TargetReport {
            name: t.to_string(),
            plan: Some(PlanUsed {
                plan: "fentry".into(),
                mechanism: "fentry/fexit".into(),
                attach_points: vec![t.to_string()],
                timed: true,
                note: "times the function itself".into(),
            }),
            rejected: vec![],
            verification: None,
            probe_cost: None,
        })
        .collect();
    let mut run = Run {
        started_unix: 1_700_000_000.5,
        duration_s: 2.0,
        command: vec!["workloads".into(), "waitpid".into()],
        sample_freq_hz: 999,
        cases: CASES.iter().map(|(i, n)| (*i, n.to_string())).collect(),
        ..synthetic_run("6.1.0-test", targets)
    };
    let mut rows: BTreeMap<(&str, u32, u64), Vec<&Ev>> = BTreeMap::new();
    for e in &events {
        rows.entry((&e.target, e.case, e.n)).or_default().push(e);
    }
    for ((target, case, n), evs) in &rows {
        run.spans.push(SpanRow {
            target: target.to_string(),
            case: *case,
            case_name: case_name(*case).into(),
            n: *n,
            calls: evs.len() as u64,
            untimed: 0,
            wall: from_values(&evs.iter().map(|e| e.end - e.start).collect::<Vec<_>>()),
            oncpu: from_values(&evs.iter().map(|e| e.oncpu).collect::<Vec<_>>()),
            within: Default::default(),
            trips: Vec::new(),
        });
    }
    for (case, n) in [(1, 10), (1, 100), (2, 10), (2, 100)] {
        run.phases.push(PhaseRow {
            case,
            case_name: case_name(case).into(),
            n,
            phases: 1,
            ops: 10,
            wall_ns: 1_000_000,
        });
    }
    for kind in [StackKind::Oncpu, StackKind::Callers] {
        for (case, n) in [(0, 0), (1, 10), (1, 100), (2, 10), (2, 100)] {
            let lines = folded(kind, n);
            let path = stack_file_path(kind, "do_wait", case_name(case), n);
            let text: String = lines.iter().map(|(s, w)| format!("{s} {w}\n")).collect();
            std::fs::create_dir_all(dir.join(&path).parent().unwrap()).unwrap();
            std::fs::write(dir.join(&path), text).unwrap();
            run.stack_files.push(StackFile {
                kind,
                target: "do_wait".into(),
                case,
                case_name: case_name(case).into(),
                n,
                path,
                total_ns: lines.iter().map(|(_, w)| w).sum(),
                count: lines.len() as u64,
            });
        }
    }
    run.validate().expect("a valid synthetic run");
    std::fs::create_dir_all(dir).unwrap();
    std::fs::write(dir.join("run.json"), run.to_json()).unwrap();
    if raw_events {
        // Rows in order of their end, as the ring buffer delivers them.
        let mut evs = events.clone();
        evs.sort_by_key(|e| e.end);
        let mut csv = String::from("end_ns,tid,tgid,target,case,n,wall_ns,oncpu_ns\n");
        for e in &evs {
            csv.push_str(&format!(
                "{},{},{},{},{},{},{},{}\n",
                e.end,
                e.tid,
                e.tgid,
                e.target,
                e.case,
                e.n,
                e.end - e.start,
                e.oncpu
            ));
        }
        std::fs::write(dir.join("events.csv"), csv).unwrap();
    }
    run
}

fn no_flamegraphs() -> ReportOptions {
    ReportOptions {
        flamegraphs: false,
        differential: false,
        ..ReportOptions::default()
    }
}

// ---------------------------------------------------------------------------------------------
// Checks shared by the synthetic and the real runs

/// The trace against the calls it was made from: one slice per call on its thread's track,
/// with the call's bounds, target, case and N; one thread track per thread, under its process.
fn check_trace_against_calls(t: &Trace, calls: &[Ev], cases: &BTreeMap<u32, String>) {
    let thread_tracks: BTreeMap<(i128, i128), u64> = t
        .tracks
        .iter()
        .filter_map(|(u, tr)| tr.thread.map(|k| (k, *u)))
        .collect();
    let threads: BTreeSet<(i128, i128)> = calls
        .iter()
        .map(|e| (i128::from(e.tgid), i128::from(e.tid)))
        .collect();
    assert_eq!(
        thread_tracks.keys().copied().collect::<BTreeSet<_>>(),
        threads,
        "one track per thread that made a call"
    );
    for ((pid, _), uuid) in &thread_tracks {
        let parent = t.tracks[uuid]
            .parent
            .expect("thread tracks hang under a process");
        assert_eq!(t.tracks[&parent].process, Some(*pid));
    }
    let call_slices = t.slices_on(|tr| tr.thread.is_some());
    assert_eq!(call_slices.len(), calls.len(), "one slice per call");
    let mut got: Vec<Slice> = call_slices.into_iter().cloned().collect();
    let mut want: Vec<Slice> = calls
        .iter()
        .map(|e| Slice {
            track: thread_tracks[&(i128::from(e.tgid), i128::from(e.tid))],
            start: e.start,
            end: e.end,
            name: e.target.clone(),
            args: [
                (
                    "case",
                    cases
                        .get(&e.case)
                        .map_or("unphased", String::as_str)
                        .to_string(),
                ),
                ("n", e.n.to_string()),
                ("oncpu_ns", e.oncpu.to_string()),
                ("offcpu_ns", (e.end - e.start - e.oncpu).to_string()),
            ]
            .into_iter()
            .map(|(k, v)| (k.to_string(), v))
            .collect(),
        })
        .collect();
    got.sort();
    want.sort();
    assert_eq!(got, want);
}

/// Per profile file: samples, values and labels against the folded files of the run.
fn check_profiles_against_stacks(profiles_dir: &Path, run_dir: &Path, run: &Run) {
    let mut by_profile: BTreeMap<String, Vec<&StackFile>> = BTreeMap::new();
    // The entry stacks are the profile's kernel samples again: no profile of their own.
    for f in run
        .stack_files
        .iter()
        .filter(|f| f.kind != StackKind::Entry)
    {
        by_profile
            .entry(format!("{}-{}.pb.gz", f.kind.as_str(), f.target))
            .or_default()
            .push(f);
    }
    let present: BTreeSet<String> = std::fs::read_dir(profiles_dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    assert_eq!(
        present,
        by_profile.keys().cloned().collect(),
        "one profile per kind and target"
    );
    for (name, files) in by_profile {
        let p = decode_profile(&std::fs::read(profiles_dir.join(&name)).unwrap());
        let kind = files[0].kind;
        let unit = "nanoseconds".to_string();
        let ty = match kind {
            StackKind::Oncpu | StackKind::Profile | StackKind::Entry => "cpu",
            StackKind::Offcpu | StackKind::ProfileOffcpu => "offcpu",
            StackKind::Callers => "wall",
        };
        assert_eq!(p.sample_type, [(ty.to_string(), unit)], "{name}");
        if kind == StackKind::Oncpu && run.sample_freq_hz > 0 {
            assert_eq!(p.period, 1_000_000_000 / i128::from(run.sample_freq_hz));
        }
        assert!(
            p.comments.iter().any(|c| c.contains(&run.kernel.release)),
            "{:?}",
            p.comments
        );
        // Every distinct folded stack of every (case, N) file is one sample with its weight.
        let mut want: Vec<Sample> = Vec::new();
        for f in &files {
            let text = std::fs::read_to_string(run_dir.join(&f.path)).unwrap();
            let mut merged: BTreeMap<String, u64> = BTreeMap::new();
            for line in text.lines().filter(|l| !l.is_empty()) {
                let (stack, w) = line.rsplit_once(' ').unwrap();
                *merged.entry(stack.to_string()).or_default() += w.parse::<u64>().unwrap();
            }
            // A stack of weight 0 carries nothing (the flamegraphs drop it too).
            for (stack, w) in merged.into_iter().filter(|(_, w)| *w > 0) {
                want.push(Sample {
                    stack: stack.split(';').map(str::to_string).collect(),
                    value: i128::from(w),
                    labels: [
                        ("target".to_string(), f.target.clone()),
                        ("case".to_string(), f.case_name.clone()),
                        ("n".to_string(), f.n.to_string()),
                    ]
                    .into(),
                });
            }
        }
        let mut got = p.samples.clone();
        got.sort();
        want.sort();
        assert_eq!(got.len(), want.len(), "{name}: sample count");
        assert_eq!(got, want, "{name}");
        // And the totals per (case, N) are the run's recorded totals.
        let total: i128 = p.samples.iter().map(|s| s.value).sum();
        let recorded: u64 = files.iter().map(|f| f.total_ns).sum();
        assert_eq!(total, i128::from(recorded), "{name}: total value");
        for f in &files {
            let sum: i128 = p
                .samples
                .iter()
                .filter(|s| s.labels["case"] == f.case_name && s.labels["n"] == f.n.to_string())
                .map(|s| s.value)
                .sum();
            assert_eq!(
                sum,
                i128::from(f.total_ns),
                "{name} {} n={}",
                f.case_name,
                f.n
            );
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Synthetic runs

#[test]
fn a_report_exports_a_trace_and_profiles_that_decode_to_the_run() {
    let tmp = tempfile::tempdir().unwrap();
    let run_dir = tmp.path().join("run");
    let run = write_synthetic_run(&run_dir, true);
    let out = tmp.path().join("report");
    let s = tracer::pipeline::report(&run_dir, &out, &no_flamegraphs()).unwrap();
    for f in [
        "trace.pftrace",
        "profiles/oncpu-do_wait.pb.gz",
        "profiles/callers-do_wait.pb.gz",
    ] {
        assert!(s.files.contains(&out.join(f)), "{f} in {:?}", s.files);
    }
    let index = std::fs::read_to_string(out.join("index.html")).unwrap();
    assert!(
        index.contains("href=\"trace.pftrace\""),
        "the index links the trace"
    );
    assert!(index.contains("href=\"profiles/oncpu-do_wait.pb.gz\""));

    let t = decode_trace(&std::fs::read(out.join("trace.pftrace")).unwrap());
    let events = synthetic_events();
    check_trace_against_calls(&t, &events, &run.cases);

    // Nesting as on the CPU: the zero-length call and the one inside the first do_wait are
    // drawn under it, not beside it (the replay in decode_trace checked the pairs nest).
    let outer = t
        .slices
        .iter()
        .find(|s| s.start == 1_000_000 && s.name == "do_wait")
        .unwrap();
    let inner: Vec<&Slice> = t
        .slices
        .iter()
        .filter(|s| s.track == outer.track && s.start > outer.start && s.end <= outer.end)
        .collect();
    assert_eq!(inner.len(), 2, "{inner:?}");

    // Processes, phases and N.
    let processes: BTreeSet<i128> = t.tracks.values().filter_map(|tr| tr.process).collect();
    assert_eq!(processes, BTreeSet::from([1000, 2000]));
    let mut phases: Vec<(i128, String, u64, u64)> = t
        .slices_on(|tr| tr.name.as_deref() == Some("phases"))
        .iter()
        .map(|s| (t.process_of(s.track), s.name.clone(), s.start, s.end))
        .collect();
    phases.sort();
    let mut want = synthetic_phases();
    want.sort();
    assert_eq!(phases, want);
    let mut n_values: BTreeMap<i128, Vec<(u64, i128)>> = BTreeMap::new();
    for &(track, ts, v) in &t.counters {
        assert_eq!(t.tracks[&track].name.as_deref(), Some("N"));
        n_values
            .entry(t.process_of(track))
            .or_default()
            .push((ts, v));
    }
    assert_eq!(
        n_values,
        BTreeMap::from([
            (
                1000,
                vec![(1_000_000, 10), (2_000_000, 100), (3_000_000, 10)]
            ),
            (2000, vec![(1_500_000, 10), (1_700_000, 100)]),
        ])
    );

    check_profiles_against_stacks(&out.join("profiles"), &run_dir, &run);
}

#[test]
fn a_sweep_report_exports_each_run_and_a_run_without_raw_events_gets_no_trace() {
    let tmp = tempfile::tempdir().unwrap();
    let sweep = tmp.path().join("sweep");
    let with = write_synthetic_run(&sweep.join("waitpid"), true);
    let without = write_synthetic_run(&sweep.join("spawn"), false);
    let out = tmp.path().join("report");
    tracer::pipeline::report(&sweep, &out, &no_flamegraphs()).unwrap();
    assert!(out.join("traces/waitpid.pftrace").is_file());
    assert!(!out.join("traces/spawn.pftrace").exists());
    let t = decode_trace(&std::fs::read(out.join("traces/waitpid.pftrace")).unwrap());
    check_trace_against_calls(&t, &synthetic_events(), &with.cases);
    check_profiles_against_stacks(&out.join("profiles/waitpid"), &sweep.join("waitpid"), &with);
    check_profiles_against_stacks(&out.join("profiles/spawn"), &sweep.join("spawn"), &without);

    // An events.csv past the report's limit gets a warning instead of a trace.
    let opts = ReportOptions {
        trace_max_events_bytes: std::fs::metadata(sweep.join("waitpid/events.csv"))
            .unwrap()
            .len()
            - 1,
        ..no_flamegraphs()
    };
    let s = tracer::pipeline::report(&sweep, &out, &opts).unwrap();
    assert!(!out.join("traces").exists());
    assert!(out.join("profiles/waitpid").is_dir());
    assert!(
        s.warnings
            .iter()
            .any(|w| w.contains("waitpid: no Perfetto trace")
                && w.contains("tracer export perfetto")),
        "{:?}",
        s.warnings
    );
    let index = std::fs::read_to_string(out.join("index.html")).unwrap();
    assert!(index.contains("no Perfetto trace"), "the index says so too");

    // --no-exports leaves them out.
    let opts = ReportOptions {
        exports: false,
        ..no_flamegraphs()
    };
    tracer::pipeline::report(&sweep, &out, &opts).unwrap();
    assert!(!out.join("traces").exists() && !out.join("profiles").exists());
}

#[test]
fn tracer_export_writes_what_the_report_writes() {
    let tmp = tempfile::tempdir().unwrap();
    let run_dir = tmp.path().join("run");
    let run = write_synthetic_run(&run_dir, true);
    let rep = tmp.path().join("rep");
    tracer::pipeline::report(&run_dir, &rep, &no_flamegraphs()).unwrap();

    // Default outputs: inside the run directory.
    let o = tracer()
        .args(["export", "perfetto"])
        .arg(&run_dir)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let stdout = String::from_utf8_lossy(&o.stdout);
    assert!(
        stdout.contains("11 calls on 4 threads in 2 processes, 5 phases"),
        "{stdout}"
    );
    assert_eq!(
        std::fs::read(run_dir.join("trace.pftrace")).unwrap(),
        std::fs::read(rep.join("trace.pftrace")).unwrap(),
        "the same bytes as the report's"
    );
    let o = tracer()
        .args(["export", "pprof"])
        .arg(&run_dir)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert_eq!(
        file_tree(&run_dir.join("profiles")),
        file_tree(&rep.join("profiles"))
    );
    check_profiles_against_stacks(&run_dir.join("profiles"), &run_dir, &run);

    // -o, and the report still reads the run with the exports inside it.
    let file = tmp.path().join("x/t.pftrace");
    let st = tracer()
        .args(["export", "perfetto"])
        .arg(&run_dir)
        .arg("-o")
        .arg(&file)
        .status()
        .unwrap();
    assert!(st.success());
    decode_trace(&std::fs::read(&file).unwrap());
    tracer::pipeline::report(&run_dir, &rep, &no_flamegraphs()).unwrap();
    // Nothing but the outputs was left next to them.
    let names: Vec<String> = std::fs::read_dir(tmp.path().join("x"))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    assert_eq!(names, ["t.pftrace"]);
}

#[test]
fn tracer_export_refuses_what_it_cannot_export_and_writes_nothing() {
    let tmp = tempfile::tempdir().unwrap();
    let sweep = tmp.path().join("sweep");
    write_synthetic_run(&sweep.join("a"), true);
    let no_events = tmp.path().join("no-events");
    write_synthetic_run(&no_events, false);
    let corrupt = tmp.path().join("corrupt");
    write_synthetic_run(&corrupt, true);
    let csv = std::fs::read_to_string(corrupt.join("events.csv")).unwrap();
    std::fs::write(
        corrupt.join("events.csv"),
        csv.replacen(",do_wait,", ",do_wait,x", 1),
    )
    .unwrap();
    let nope = tmp.path().join("nope");
    let foreign = tmp.path().join("work");
    std::fs::create_dir_all(&foreign).unwrap();
    std::fs::write(foreign.join("notes.txt"), "keep me").unwrap();

    let cases: Vec<(Vec<&std::ffi::OsStr>, i32, &str)> = vec![
        (
            vec!["perfetto".as_ref(), sweep.as_os_str()],
            6,
            "sweep directory",
        ),
        (
            vec!["pprof".as_ref(), sweep.as_os_str()],
            6,
            "sweep directory",
        ),
        (
            vec!["perfetto".as_ref(), no_events.as_os_str()],
            6,
            "--raw-events",
        ),
        (vec!["perfetto".as_ref(), corrupt.as_os_str()], 6, "line"),
        (
            vec!["perfetto".as_ref(), nope.as_os_str()],
            6,
            "no such run directory",
        ),
        (
            vec![
                "pprof".as_ref(),
                no_events.as_os_str(),
                "-o".as_ref(),
                foreign.as_os_str(),
            ],
            5,
            "notes.txt",
        ),
        (
            vec!["svg".as_ref(), no_events.as_os_str()],
            2,
            "invalid value",
        ),
    ];
    for (args, code, msg) in cases {
        let o = tracer().arg("export").args(&args).output().unwrap();
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(code), "{args:?}: {err}");
        assert!(err.contains(msg), "{args:?}: {err}");
    }
    assert!(!sweep.join("trace.pftrace").exists() && !sweep.join("profiles").exists());
    assert!(!no_events.join("trace.pftrace").exists());
    assert!(!corrupt.join("trace.pftrace").exists());
    assert_eq!(
        std::fs::read_to_string(foreign.join("notes.txt")).unwrap(),
        "keep me"
    );
    // No temporary files anywhere.
    for d in [&no_events, &corrupt, &foreign, &tmp.path().to_path_buf()] {
        for e in std::fs::read_dir(d).unwrap() {
            let name = e.unwrap().file_name().to_string_lossy().into_owned();
            assert!(
                !name.starts_with('.'),
                "left behind: {name} in {}",
                d.display()
            );
        }
    }
}

// ---------------------------------------------------------------------------------------------
// A real recording

/// Rows of a real `events.csv`, parsed here rather than by the tracer's reader.
fn read_events(path: &Path) -> Vec<Ev> {
    let text = std::fs::read_to_string(path).unwrap();
    text.lines()
        .skip(1)
        .map(|l| {
            let f: Vec<&str> = l.split(',').collect();
            let num = |i: usize| f[i].parse::<u64>().unwrap();
            Ev {
                start: num(0) - num(6),
                end: num(0),
                tid: num(1) as u32,
                tgid: num(2) as u32,
                target: f[3].to_string(),
                case: num(4) as u32,
                n: num(5),
                oncpu: num(7),
            }
        })
        .collect()
}

/// A waitpid sweep recorded with tracepoints on this machine (root), every call kept: the
/// trace has one slice per call of events.csv on its thread, the phases and N of the workload,
/// and the profiles hold every stack the run recorded, labelled with its case and N.
#[test]
fn a_real_recording_exports_every_call_and_stack() {
    assert!(
        nix::unistd::geteuid().is_root(),
        "this test records with eBPF and needs root (run it with sudo or `cargo xtask test`)"
    );
    let tmp = tempfile::tempdir().unwrap();
    let run_dir = tmp.path().join("run");
    let ns = [1u64, 30, 100];
    let st = tracer()
        .args([
            "record",
            "--no-verify",
            "--targets",
            "do_wait",
            "--freq",
            "4999",
        ])
        .args(["--raw-events", "4M", "-o"])
        .arg(&run_dir)
        .arg("--")
        .arg(workloads_bin())
        .args([
            "waitpid",
            "--variant",
            "waitpid-pid,waitpid-any",
            "--n",
            "1,30,100",
        ])
        .args(["--iterations", "20", "--warmup", "0", "--repeats", "2"])
        .status()
        .unwrap();
    assert!(st.success(), "tracer record: {st}");
    assert!(nothing_loaded(), "programs left loaded after the recording");
    let run = Run::read(&run_dir).unwrap();
    assert_eq!(
        run.counters.get("ringbuf_drops"),
        Some(&0),
        "precondition: no span lost"
    );
    let events = read_events(&run_dir.join("events.csv"));
    let timed: u64 = run.spans.iter().map(|r| r.calls - r.untimed).sum();
    assert_eq!(
        events.len() as u64,
        timed,
        "events.csv holds every timed call"
    );
    assert!(
        events.iter().any(|e| e.case != 0),
        "precondition: calls inside the workload's phases"
    );

    let rep = tmp.path().join("rep");
    let st = tracer()
        .arg("report")
        .arg(&run_dir)
        .args(["--no-flamegraphs", "-o"])
        .arg(&rep)
        .status()
        .unwrap();
    assert!(st.success());
    let bytes = std::fs::read(rep.join("trace.pftrace")).unwrap();
    let t = decode_trace(&bytes);
    check_trace_against_calls(&t, &events, &run.cases);

    // Every phased call lies inside a phase slice of its process with its case and N, and the
    // N counter of a process takes exactly the N values its phased calls had.
    let phase_slices = t.slices_on(|tr| tr.name.as_deref() == Some("phases"));
    assert!(!phase_slices.is_empty());
    for e in events.iter().filter(|e| e.case != 0) {
        let case = &run.cases[&e.case];
        assert!(
            phase_slices.iter().any(|p| {
                t.process_of(p.track) == i128::from(e.tgid)
                    && p.args["case"] == *case
                    && p.args["n"] == e.n.to_string()
                    && p.start <= e.start
                    && e.start <= p.end
            }),
            "{e:?} outside its phase"
        );
    }
    let mut counter_ns: BTreeMap<i128, BTreeSet<i128>> = BTreeMap::new();
    for &(track, _, v) in &t.counters {
        counter_ns.entry(t.process_of(track)).or_default().insert(v);
    }
    let mut call_ns: BTreeMap<i128, BTreeSet<i128>> = BTreeMap::new();
    for e in events.iter().filter(|e| e.case != 0) {
        call_ns
            .entry(i128::from(e.tgid))
            .or_default()
            .insert(i128::from(e.n));
    }
    assert_eq!(counter_ns, call_ns);
    let all: BTreeSet<i128> = counter_ns.values().flatten().copied().collect();
    assert!(
        all.iter().all(|n| ns.iter().any(|m| i128::from(*m) == *n)),
        "{all:?}"
    );

    assert!(
        !run.stack_files.is_empty(),
        "callers stacks are always taken"
    );
    check_profiles_against_stacks(&rep.join("profiles"), &run_dir, &run);

    // `tracer export` writes the same trace.
    let own = tmp.path().join("own.pftrace");
    let st = tracer()
        .args(["export", "perfetto"])
        .arg(&run_dir)
        .arg("-o")
        .arg(&own)
        .status()
        .unwrap();
    assert!(st.success());
    assert_eq!(std::fs::read(&own).unwrap(), bytes);
}
