//! The machine-readable result of one workload run (`--json PATH`), as the tracer reads it.
//!
//! ```json
//! {"workload":"waitpid","kernel":"6.18.0","status":"complete",
//!  "results":[{"case":"waitpid-pid","case_id":1,"n":1000,"repeat":0,"iterations":200,
//!              "ops":200,"total_ns":123000,"time_ns_per_op":615.0,"cpu_ns_per_op":600.0}],
//!  "limits":{"kernel.pid_max":32768}}
//! ```
//!
//! Fields beyond these (`schema_version`, `command`, `config`, `notes`, `summary`, per-row
//! `cpu_total_ns` and `counters`) are extras a reader may ignore. The file is written to a
//! temporary name in the same directory and renamed, so a reader never sees half a file.

use std::collections::BTreeMap;
use std::fs;
use std::io::{self, Write};
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use serde_json::Value;

/// Bumped when a field changes meaning; new fields alone do not bump it.
pub const SCHEMA_VERSION: u32 = 1;

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Report {
    pub workload: String,
    /// `uname -r` of the kernel the run measured.
    pub kernel: String,
    pub results: Vec<Measurement>,
    /// Every limit the workload read before starting (sysctl name -> value; null = unknown).
    pub limits: BTreeMap<String, Value>,
    pub status: Status,
    #[serde(default)]
    pub schema_version: u32,
    /// argv of the run.
    #[serde(default)]
    pub command: Vec<String>,
    /// Options in effect (N list, iterations, min time, variants, workload parameters).
    #[serde(default)]
    pub config: BTreeMap<String, Value>,
    /// Human-readable remarks: degraded options, skipped variants, kernel caveats.
    #[serde(default)]
    pub notes: Vec<String>,
    /// Workload-level figures derived from the rows (e.g. getpid's break-even count).
    #[serde(default)]
    pub summary: BTreeMap<String, Value>,
}

/// One measured phase: one repeat of one case at one N.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Measurement {
    /// Case name from [`crate::cases::CASES`].
    pub case: String,
    pub case_id: u32,
    pub n: u64,
    /// 0-based repeat index; each repeat is its own phase-marker pair.
    pub repeat: u32,
    /// Loop iterations in the phase.
    pub iterations: u64,
    /// Operations the phase did (the `ops` passed to `tracer_phase_end`).
    pub ops: u64,
    /// Wall-clock duration of the phase.
    pub total_ns: u64,
    pub time_ns_per_op: f64,
    /// On-CPU time of the measuring thread (children and helper threads excluded).
    pub cpu_ns_per_op: f64,
    #[serde(default)]
    pub cpu_total_ns: u64,
    /// Extra per-row figures (`forks_per_second`, `vmas`, `bytes_per_read`, ...).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub counters: BTreeMap<String, f64>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Status {
    /// Every requested (case, N, repeat) was measured.
    Complete,
    /// A signal stopped the run; `results` holds the phases finished before it.
    Interrupted,
}

/// Raw totals of one phase, as the measuring loop counts them.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct PhaseTotals {
    pub iterations: u64,
    pub ops: u64,
    pub total_ns: u64,
    pub cpu_total_ns: u64,
}

impl Measurement {
    /// Builds a row from raw totals; per-op figures are derived here so they always agree.
    pub fn new(case: &str, case_id: u32, n: u64, repeat: u32, t: PhaseTotals) -> Self {
        let per = |x: u64| {
            if t.ops == 0 {
                0.0
            } else {
                x as f64 / t.ops as f64
            }
        };
        Measurement {
            case: case.to_string(),
            case_id,
            n,
            repeat,
            iterations: t.iterations,
            ops: t.ops,
            total_ns: t.total_ns,
            time_ns_per_op: per(t.total_ns),
            cpu_ns_per_op: per(t.cpu_total_ns),
            cpu_total_ns: t.cpu_total_ns,
            counters: BTreeMap::new(),
        }
    }
}

impl Report {
    pub fn new(workload: &str, kernel: &str) -> Self {
        Report {
            workload: workload.to_string(),
            kernel: kernel.to_string(),
            results: Vec::new(),
            limits: BTreeMap::new(),
            status: Status::Complete,
            schema_version: SCHEMA_VERSION,
            command: Vec::new(),
            config: BTreeMap::new(),
            notes: Vec::new(),
            summary: BTreeMap::new(),
        }
    }

    pub fn to_json(&self) -> String {
        serde_json::to_string_pretty(self).expect("a report always serializes")
    }

    pub fn from_json(text: &str) -> Result<Self, serde_json::Error> {
        serde_json::from_str(text)
    }

    pub fn read(path: &Path) -> io::Result<Self> {
        let text = fs::read_to_string(path)?;
        Self::from_json(&text).map_err(|e| io::Error::new(io::ErrorKind::InvalidData, e))
    }

    /// Writes to `.NAME.tmp.PID` beside `path`, syncs, then renames over `path`.
    pub fn write_atomic(&self, path: &Path) -> io::Result<()> {
        let tmp = temp_path_for(path);
        let result = (|| {
            let mut f = fs::File::create(&tmp)?;
            f.write_all(self.to_json().as_bytes())?;
            f.write_all(b"\n")?;
            f.sync_all()?;
            fs::rename(&tmp, path)
        })();
        if result.is_err() {
            let _ = fs::remove_file(&tmp);
        }
        result
    }
}

/// The temporary file [`Report::write_atomic`] uses for `path`.
pub fn temp_path_for(path: &Path) -> PathBuf {
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|| "report.json".into());
    path.with_file_name(format!(".{name}.tmp.{}", std::process::id()))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn totals(iterations: u64, ops: u64, total_ns: u64, cpu_total_ns: u64) -> PhaseTotals {
        PhaseTotals {
            iterations,
            ops,
            total_ns,
            cpu_total_ns,
        }
    }

    fn sample() -> Report {
        let mut r = Report::new("waitpid", "6.18.0-test");
        let mut m = Measurement::new(
            "waitpid-pid",
            1,
            1000,
            0,
            totals(200, 200, 123_000, 120_000),
        );
        m.counters.insert("waits_per_second".into(), 1626016.0);
        r.results.push(m);
        r.results.push(Measurement::new(
            "waitpid-wnohang",
            4,
            1000,
            1,
            totals(10, 10, 5_000, 4_000),
        ));
        r.limits
            .insert("kernel.pid_max".into(), Value::from(32768u64));
        r.limits.insert("kernel.shm_next_id".into(), Value::Null);
        r.status = Status::Interrupted;
        r.notes.push("a note".into());
        r
    }

    #[test]
    fn round_trips_through_json() {
        let r = sample();
        let back = Report::from_json(&r.to_json()).expect("parses");
        assert_eq!(back, r);
    }

    #[test]
    fn uses_the_documented_field_names() {
        let v: Value = serde_json::from_str(&sample().to_json()).expect("valid json");
        for key in ["workload", "kernel", "results", "limits", "status"] {
            assert!(v.get(key).is_some(), "missing top-level {key}");
        }
        assert_eq!(v["status"], "interrupted");
        // Every row field of the binary's real output is checked in tests/cli.rs.
        let row = &v["results"][0];
        assert_eq!(row["case"], "waitpid-pid");
        assert_eq!(row["time_ns_per_op"], 615.0);
        assert_eq!(row["cpu_ns_per_op"], 600.0);
    }

    #[test]
    fn reads_the_minimal_schema_without_extras() {
        let text = r#"{"workload":"spawn","kernel":"5.10","results":[{"case":"spawn","case_id":10,"n":1,
            "repeat":0,"iterations":3,"ops":3,"total_ns":30,"time_ns_per_op":10.0,"cpu_ns_per_op":9.0}],
            "limits":{},"status":"complete"}"#;
        let r = Report::from_json(text).expect("minimal schema parses");
        assert_eq!(r.status, Status::Complete);
        assert_eq!(r.results[0].ops, 3);
        assert!(
            Report::from_json(
                r#"{"workload":"x","kernel":"y","results":[],"limits":{},"status":"half"}"#
            )
            .is_err()
        );
    }

    #[test]
    fn atomic_write_leaves_only_the_final_file() {
        let dir =
            std::env::temp_dir().join(format!("workloads-report-test-{}", std::process::id()));
        fs::create_dir_all(&dir).expect("temp dir");
        let path = dir.join("out.json");
        let r = sample();
        r.write_atomic(&path).expect("write");
        assert_eq!(Report::read(&path).expect("read back"), r);
        let names: Vec<_> = fs::read_dir(&dir)
            .expect("list")
            .map(|e| e.expect("entry").file_name())
            .collect();
        assert_eq!(names, vec![std::ffi::OsString::from("out.json")]);
        fs::remove_dir_all(&dir).expect("cleanup");
    }
}
