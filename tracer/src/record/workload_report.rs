//! The workload's own report (`--json`) of a run. A built-in workload swept by rounds runs once
//! per N and round, each run writing its report to the same temporary file; the run keeps
//! them as one report, each run's measurements further repeats of its (case, N).
use std::path::PathBuf;

use serde_json::Value;

/// The reports of a run's command runs, merged as they come.
pub(super) struct WorkloadReports {
    path: PathBuf,
    /// The file is the sweep's temporary: removed once read, so a run that writes none
    /// cannot pass off the previous run's as its own.
    temporary: bool,
    merged: Option<Value>,
}

impl WorkloadReports {
    pub(super) fn new(path: PathBuf, temporary: bool) -> Self {
        WorkloadReports {
            path,
            temporary,
            merged: None,
        }
    }

    /// Take the report the command run just ended wrote, if it wrote one that parses.
    pub(super) fn take_run(&mut self) {
        let report = std::fs::read_to_string(&self.path)
            .ok()
            .and_then(|t| serde_json::from_str::<Value>(&t).ok());
        if self.temporary {
            let _ = std::fs::remove_file(&self.path);
        }
        if let Some(r) = report {
            match self.merged.as_mut() {
                None => self.merged = Some(r),
                Some(m) => merge(m, r),
            }
        }
    }

    /// The run's report: every run's measurements in one.
    pub(super) fn into_value(self) -> Option<Value> {
        self.merged
    }
}

/// Add `next`'s measurements to `into`'s, each renumbered as the next repeat of its
/// (case, N); its sizes to the configured ones; a run that did not complete makes the whole
/// one incomplete; notes are kept once.
fn merge(into: &mut Value, next: Value) {
    let key = |r: &Value| (r.get("case").cloned(), r.get("n").cloned());
    if let Some(rows) = next.get("results").and_then(Value::as_array)
        && let Some(all) = into.get_mut("results").and_then(Value::as_array_mut)
    {
        for row in rows {
            let repeat = all.iter().filter(|r| key(r) == key(row)).count();
            let mut row = row.clone();
            if let Some(obj) = row.as_object_mut() {
                obj.insert("repeat".into(), Value::from(repeat));
            }
            all.push(row);
        }
    }
    // The sizes the runs measured, together.
    if let Some(ns) = next.pointer("/config/n").and_then(Value::as_array)
        && let Some(all) = into.pointer_mut("/config/n").and_then(Value::as_array_mut)
    {
        all.extend(ns.iter().cloned());
        all.sort_by_key(|v| v.as_u64());
        all.dedup();
    }
    if next.get("status") != into.get("status")
        && let Some(s) = next
            .get("status")
            .filter(|s| s.as_str() != Some("complete"))
    {
        into["status"] = s.clone();
    }
    if let Some(notes) = next.get("notes").and_then(Value::as_array)
        && let Some(all) = into.get_mut("notes").and_then(Value::as_array_mut)
    {
        for n in notes {
            if !all.contains(n) {
                all.push(n.clone());
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn report(n: u64, repeats: u32, status: &str, note: &str) -> Value {
        let results: Vec<Value> = (0..repeats)
            .flat_map(|r| {
                ["waitpid-pid", "waitpid-any"].map(|c| {
                    json!({"case": c, "case_id": 1, "n": n, "repeat": r, "time_ns_per_op": 10.0})
                })
            })
            .collect();
        json!({"workload": "waitpid", "status": status, "results": results, "notes": [note],
               "config": {"n": [n], "iterations": 5}})
    }

    #[test]
    fn rounds_of_one_size_become_its_repeats_and_any_incomplete_run_marks_the_whole() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("w.json");
        let mut w = WorkloadReports::new(path.clone(), true);
        for (n, status, note) in [
            (10, "complete", "a"),
            (100, "complete", "a"),
            (10, "interrupted", "b"),
        ] {
            std::fs::write(&path, report(n, 2, status, note).to_string()).unwrap();
            w.take_run();
            assert!(!path.exists(), "the temporary is removed once read");
        }
        // A run that wrote nothing adds nothing (the file is gone, not read again).
        w.take_run();
        let v = w.into_value().unwrap();
        let rows = v["results"].as_array().unwrap();
        assert_eq!(rows.len(), 12);
        let repeats = |case: &str, n: u64| -> Vec<u64> {
            rows.iter()
                .filter(|r| r["case"] == case && r["n"] == n)
                .map(|r| r["repeat"].as_u64().unwrap())
                .collect()
        };
        assert_eq!(repeats("waitpid-pid", 10), [0, 1, 2, 3]);
        assert_eq!(repeats("waitpid-any", 100), [0, 1]);
        assert_eq!(v["status"], "interrupted");
        assert_eq!(v["notes"], json!(["a", "b"]));
        assert_eq!(v["config"], json!({"n": [10, 100], "iterations": 5}));
    }

    #[test]
    fn a_user_file_is_read_and_left_in_place() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("w.json");
        std::fs::write(&path, report(1, 1, "complete", "x").to_string()).unwrap();
        let mut w = WorkloadReports::new(path.clone(), false);
        w.take_run();
        assert!(path.exists());
        assert_eq!(
            w.into_value().unwrap()["results"].as_array().unwrap().len(),
            2
        );
    }
}
