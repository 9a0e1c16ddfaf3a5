//! Reports on the saved fixture `tests/fixtures/sweep-5.10` (a sweep directory as `tracer
//! sweep` writes it: one run directory per workload, each with run.json and folded stacks).
//! It guards the on-disk format: if run data written today stops reading, this fails.

use std::path::Path;

use tracer::analysis::fit::Complexity;
use tracer::analysis::{AnalysisOptions, analyze, load};
use tracer::render::{self, ReportOptions};

fn fixture() -> &'static Path {
    Path::new(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/fixtures/sweep-5.10"
    ))
}

#[test]
fn saved_sweep_loads_and_analyses() {
    let ds = load(fixture()).unwrap();
    assert!(ds.is_sweep);
    let labels: Vec<&str> = ds.runs.iter().map(|r| r.label.as_str()).collect();
    assert_eq!(labels, ["spawn", "waitpid"]);
    assert_eq!(ds.label(), "5.10.0-28-cloud-amd64");
    let a = analyze(&ds, &AnalysisOptions::default()).unwrap();
    let class = |target: &str| {
        a.verdicts
            .iter()
            .find(|v| v.target == target)
            .and_then(|v| v.class())
    };
    assert_eq!(class("do_wait"), Some(Complexity::Linear));
    assert_eq!(class("dup_mmap"), Some(Complexity::Linear));
    assert_eq!(
        class("get_task_policy"),
        None,
        "count-only target has no fit"
    );
    let rc = a
        .root_causes
        .iter()
        .find(|r| r.target == "do_wait")
        .unwrap();
    assert_eq!(
        rc.cause.culprit.as_ref().unwrap().frame(),
        "wait_consider_task"
    );
    // Every stack file listed was read and matched its recorded total.
    let listed: usize = ds.runs.iter().map(|r| r.run.stack_files.len()).sum();
    assert_eq!(a.stacks.len(), listed);
    assert!(a.warnings.is_empty(), "{:?}", a.warnings);
}

#[test]
fn saved_sweep_renders_without_flamegraphs() {
    let tmp = tempfile::tempdir().unwrap();
    let opts = ReportOptions {
        flamegraphs: false,
        ..ReportOptions::default()
    };
    let s = render::report(fixture(), tmp.path(), &opts).unwrap();
    assert!(
        s.root_causes
            .iter()
            .any(|l| l.contains("wait_consider_task")),
        "{:?}",
        s.root_causes
    );
    let names: Vec<String> = s
        .files
        .iter()
        .map(|f| {
            f.strip_prefix(tmp.path())
                .unwrap()
                .to_string_lossy()
                .into_owned()
        })
        .collect();
    assert!(
        !names.iter().any(|n| n.starts_with("flamegraphs/")),
        "{names:?}"
    );
    for n in [
        "index.html",
        "README.md",
        "summary.json",
        "report.txt",
        "plots/do_wait.svg",
    ] {
        assert!(names.iter().any(|x| x == n), "{n} not written: {names:?}");
    }
    let md = std::fs::read_to_string(tmp.path().join("README.md")).unwrap();
    assert!(
        !md.contains("flamegraphs/"),
        "index links flamegraphs that were not rendered"
    );
}
