//! The probe's own cost in a real run (native eBPF: this kernel's syscall tracepoints). Needs
//! root; run through `cargo xtask test`. Both tests load programs and check that none stays
//! loaded, so they run one at a time.
use std::path::Path;

use serde_json::Value;

mod common;
use common::{nothing_loaded, read_json, record_targets, serial, tracer, workloads_bin};

/// The sentence the renderers write for a flagged table.
const FLAG: &str = "the probe's cost is a third or more of what is measured";

/// Record `target` over `workloads ARGS` into `dir`/run and report it (with
/// `--subtract-probe-cost`) into `dir`/rep; returns run.json.
fn record_and_report(dir: &Path, target: &str, args: &[&str]) -> Value {
    let run = dir.join("run");
    let st = record_targets(tracer(), target)
        .arg("-o")
        .arg(&run)
        .arg("--")
        .arg(workloads_bin())
        .args(args)
        .status()
        .unwrap();
    assert!(st.success(), "tracer record failed: {st}");
    let st = tracer()
        .arg("report")
        .arg(&run)
        .args([
            "--no-flamegraphs",
            "--no-exports",
            "--subtract-probe-cost",
            "-o",
        ])
        .arg(dir.join("rep"))
        .status()
        .unwrap();
    assert!(st.success(), "tracer report failed: {st}");
    read_json(&run.join("run.json"))
}

/// The probe cost recorded for `target`, checked to be a real figure.
fn probe_cost_ns(run: &Value, target: &str) -> f64 {
    let t = run["targets"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["name"] == target)
        .unwrap_or_else(|| panic!("no target {target}"));
    let c = &t["probe_cost"];
    assert_eq!(
        c["mechanism"], "tracepoint (syscall enter/exit)",
        "the plan's own kind of probe was measured: {c}"
    );
    let ns = c["probe_cost_ns"]
        .as_f64()
        .unwrap_or_else(|| panic!("probe_cost_ns missing: {c}"));
    assert!(ns > 0.0, "{c}");
    // A syscall tracepoint pair with the run's programs costs tens to thousands of ns per
    // call; anything else is a broken measurement.
    assert!((10.0..20_000.0).contains(&ns), "{c}");
    ns
}

#[test]
fn getpid_calls_are_flagged_as_cheaper_than_three_times_the_probe() {
    let _g = serial();
    let tmp = tempfile::tempdir().unwrap();
    let run = record_and_report(
        tmp.path(),
        "getpid",
        &[
            "getpid",
            "--variant",
            "getpid-syscall",
            "--n",
            "1000,5000",
            "--iterations",
            "3",
            "--warmup",
            "0",
        ],
    );
    let cost = probe_cost_ns(&run, "getpid");
    // Measured within attach (how long it takes is a benchmark's business: on this 2-core
    // machine shared with VM tests it ranged 60 ms to over 0.5 s).
    let res = &run["resources"];
    let ms = res["probe_cost_ms"].as_f64().expect("probe_cost_ms");
    assert!(ms > 0.0, "{res}");
    assert!(ms < res["attach_ms"].as_f64().unwrap(), "{res}");
    // The calibration's own calls (2000 per batch) are not the run's: every getpid span is
    // the workload's (3 iterations of 1000 and of 5000 calls, and a few unphased calls).
    let calls: u64 = run["spans"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|s| s["target"] == "getpid")
        .map(|s| s["calls"].as_u64().unwrap())
        .sum();
    assert!((18_000..18_100).contains(&calls), "{calls} getpid calls");

    let rep = tmp.path().join("rep");
    let tables = read_json(&rep.join("tables/getpid.json"));
    let table = &tables[0]["table"];
    let check = &table["probe_cost"];
    assert_eq!(check["probe_cost_ns"].as_f64(), Some(cost));
    // A getpid call is ~100 ns of on-CPU time here, the probe several hundred: every size is
    // flagged, and each row says so with its share.
    assert_eq!(
        check["flagged_n"],
        serde_json::json!([1000, 5000]),
        "{check}"
    );
    for r in table["rows"].as_array().unwrap() {
        let t = r["time_per_call_ns"].as_f64().unwrap();
        assert!(t <= 3.0 * cost, "row {r} with a {cost} ns probe");
        assert_eq!(r["probe_flagged"], true, "{r}");
        // Both times kept: the measured one, and the corrected one beside it.
        let corrected = r["corrected_time_per_call_ns"].as_f64().unwrap();
        assert_eq!(corrected, (t - cost).max(0.0), "{r}");
    }
    let text = std::fs::read_to_string(rep.join("report.txt")).unwrap();
    assert!(
        text.lines()
            .any(|l| l.contains("getpid [getpid-syscall]") && l.contains(FLAG)),
        "{text}"
    );
    let summary = read_json(&rep.join("summary.json"));
    assert_eq!(
        summary["runs"][0]["targets"][0]["probe_cost"]["probe_cost_ns"].as_f64(),
        Some(cost)
    );
    let flags = &summary["probe_costs"][0];
    assert_eq!(flags["target"], "getpid", "{flags}");
    assert_eq!(
        flags["flagged_n"],
        serde_json::json!([1000, 5000]),
        "{flags}"
    );
    let md = std::fs::read_to_string(rep.join("tables/getpid.md")).unwrap();
    assert!(md.contains("- probe cost: ") && md.contains(FLAG), "{md}");
    assert!(nothing_loaded(), "programs left loaded");
}

#[test]
fn long_calls_are_not_flagged() {
    let _g = serial();
    let tmp = tempfile::tempdir().unwrap();
    // fork + waitpid(child): each do_wait call (the wait4 bracket here) spends microseconds
    // on the CPU and blocks for the child.
    let run = record_and_report(
        tmp.path(),
        "do_wait",
        &[
            "waitpid",
            "--variant",
            "waitpid-pid",
            "--n",
            "1,100",
            "--iterations",
            "30",
            "--warmup",
            "0",
        ],
    );
    let cost = probe_cost_ns(&run, "do_wait");
    let rep = tmp.path().join("rep");
    let tables = read_json(&rep.join("tables/do_wait.json"));
    let table = &tables[0]["table"];
    for r in table["rows"].as_array().unwrap() {
        let t = r["time_per_call_ns"].as_f64().unwrap();
        assert!(
            t > 3.0 * cost,
            "precondition: calls longer than 3x the {cost} ns probe: {r}"
        );
        assert_eq!(r["probe_flagged"], false, "{r}");
    }
    assert_eq!(
        table["probe_cost"]["flagged_n"],
        serde_json::json!([]),
        "{table}"
    );
    let text = std::fs::read_to_string(rep.join("report.txt")).unwrap();
    assert!(text.contains("Probe's own cost"), "{text}");
    assert!(!text.contains(FLAG), "{text}");
    let summary = read_json(&rep.join("summary.json"));
    let checks = summary["probe_costs"].as_array().unwrap();
    assert!(!checks.is_empty(), "{summary}");
    assert!(
        checks
            .iter()
            .all(|c| c["flagged_n"] == serde_json::json!([])),
        "{summary}"
    );
    assert!(nothing_loaded(), "programs left loaded");
}
