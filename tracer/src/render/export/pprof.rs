//! Folded stacks as pprof profiles (`profiles/<kind>-<target>.pb.gz`): one profile per stack
//! kind and target, every (case, N) in it, told apart by labels. Read by `go tool pprof`,
//! Perfetto, Parca, Pyroscope and Grafana.
//!
//! Each folded line of each (case, N) file becomes one sample: its frames as locations (leaf
//! first), its weight in nanoseconds as the value, and the labels `target`, `case` (strings)
//! and `n` (a number), so `go tool pprof -tagfocus n=1000` shows one size. Frames are kernel
//! and user symbol names without addresses: each distinct name is one function and one
//! location, and the profile has no mappings.

use std::collections::HashMap;
use std::io::Write;

use flate2::Compression;
use flate2::write::GzEncoder;
use prost::Message;

use super::proto::pprof::{Function, Label, Line, Location, Profile, Sample, ValueType};
use crate::rundata::Folded;
use crate::rundata::{StackFile, StackKind};

/// Label keys of every sample.
pub const LABEL_TARGET: &str = "target";
pub const LABEL_CASE: &str = "case";
pub const LABEL_N: &str = "n";

/// (type, unit) of a kind's single sample value: pprof's names where they exist ("cpu" for
/// sampled on-CPU time, "wall" for whole calls).
pub fn sample_type(kind: StackKind) -> (&'static str, &'static str) {
    match kind {
        StackKind::Oncpu | StackKind::Profile | StackKind::Entry => ("cpu", "nanoseconds"),
        StackKind::Offcpu | StackKind::ProfileOffcpu => ("offcpu", "nanoseconds"),
        StackKind::Callers => ("wall", "nanoseconds"),
    }
}

/// What the profile says about where it came from.
pub struct ProfileInfo<'a> {
    pub kind: StackKind,
    pub target: &'a str,
    /// Run start, seconds since the Unix epoch, and its length.
    pub started_unix: f64,
    pub duration_s: f64,
    /// cpu-clock sampling frequency (0: not sampled); sets the period of on-CPU profiles.
    pub sample_freq_hz: u64,
    /// Free-form lines (`go tool pprof -comments`): kernel, plan, run.
    pub comments: Vec<String>,
}

/// The string table: index 0 is "", every string once.
#[derive(Default)]
struct Strings {
    index: HashMap<String, i64>,
    table: Vec<String>,
}

impl Strings {
    fn new() -> Strings {
        let mut s = Strings::default();
        s.get("");
        s
    }

    fn get(&mut self, v: &str) -> i64 {
        if let Some(&i) = self.index.get(v) {
            return i;
        }
        let i = self.table.len() as i64;
        self.table.push(v.to_string());
        self.index.insert(v.to_string(), i);
        i
    }
}

/// Build the profile of one kind and target from its folded files.
pub fn profile(info: &ProfileInfo, files: &[(&StackFile, &Folded)]) -> Profile {
    let mut strings = Strings::new();
    let (ty, unit) = sample_type(info.kind);
    let value_type = ValueType {
        r#type: strings.get(ty),
        unit: strings.get(unit),
    };
    let mut functions: Vec<Function> = Vec::new();
    let mut function_ids: HashMap<&str, u64> = HashMap::new();
    let mut samples = Vec::new();
    let (k_target, k_case, k_n) = (
        strings.get(LABEL_TARGET),
        strings.get(LABEL_CASE),
        strings.get(LABEL_N),
    );
    let target = strings.get(info.target);
    for (file, folded) in files {
        let case = strings.get(&file.case_name);
        let labels = vec![
            Label {
                key: k_target,
                str: target,
                ..Default::default()
            },
            Label {
                key: k_case,
                str: case,
                ..Default::default()
            },
            Label {
                key: k_n,
                num: i64::try_from(file.n).unwrap_or(i64::MAX),
                ..Default::default()
            },
        ];
        for (frames, weight) in folded.iter() {
            let location_id = frames
                .iter()
                .rev()
                .map(|f| {
                    *function_ids.entry(f.as_str()).or_insert_with(|| {
                        let id = functions.len() as u64 + 1;
                        let name = strings.get(f);
                        functions.push(Function {
                            id,
                            name,
                            system_name: name,
                            ..Default::default()
                        });
                        id
                    })
                })
                .collect();
            samples.push(Sample {
                location_id,
                value: vec![i64::try_from(weight).unwrap_or(i64::MAX)],
                label: labels.clone(),
            });
        }
    }
    // One location per function, with the same id.
    let location = functions
        .iter()
        .map(|f| Location {
            id: f.id,
            line: vec![Line {
                function_id: f.id,
                line: 0,
            }],
            ..Default::default()
        })
        .collect();
    let period = match info.kind {
        StackKind::Oncpu | StackKind::Profile if info.sample_freq_hz > 0 => {
            1_000_000_000 / info.sample_freq_hz as i64
        }
        _ => 0,
    };
    let comment = info.comments.iter().map(|c| strings.get(c)).collect();
    let default_sample_type = value_type.r#type;
    Profile {
        sample_type: vec![value_type],
        sample: samples,
        location,
        function: functions,
        time_nanos: (info.started_unix * 1e9) as i64,
        duration_nanos: (info.duration_s * 1e9) as i64,
        period_type: Some(value_type),
        period,
        comment,
        default_sample_type,
        string_table: strings.table,
        ..Default::default()
    }
}

/// The profile as pprof stores it on disk: the encoded message, gzipped.
pub fn encode_gzip(p: &Profile) -> Vec<u8> {
    let mut gz = GzEncoder::new(Vec::new(), Compression::default());
    gz.write_all(&p.encode_to_vec())
        .expect("writing to a Vec cannot fail");
    gz.finish().expect("writing to a Vec cannot fail")
}
