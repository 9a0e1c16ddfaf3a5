//! Reports on saved fixtures. `tests/fixtures/sweep-5.10` is a synthetic sweep directory as
//! `tracer sweep` writes it (one run directory per workload, each with run.json and folded
//! stacks; its on-CPU sample counts are as if sampled at 100 kHz): it guards the on-disk
//! format, so if run data written today stops reading, this fails. `native-6.18-waitpid` is a
//! real sweep on this project's 6.18 machine, reduced to do_wait's on-CPU stacks: it guards the
//! verdicts against the noise of real data.

use std::path::Path;

use tracer::analysis::fit::Complexity;
use tracer::analysis::{AnalysisOptions, analyze, load};
use tracer::render::{self, ReportOptions};

fn real() -> &'static Path {
    Path::new(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/fixtures/native-6.18-waitpid"
    ))
}

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

/// `tracer sweep waitpid --n 1,10,100,1000,4000 -- --iterations 100 --repeats 3 --cpu 1` on
/// 6.18 without kprobes or fentry: do_wait is measured by the wait4/waitid syscall bracket and
/// dup_mmap by the clone bracket. Since 5.13 waitpid(pid) and pidfd waits do not walk the
/// children; waitpid(-1) still does.
#[test]
fn real_waitpid_sweep_on_6_18() {
    let a = analyze(&load(real()).unwrap(), &AnalysisOptions::default()).unwrap();
    let verdict = |target: &str, case: &str| {
        a.verdicts
            .iter()
            .find(|v| v.target == target && v.case_name == case)
            .unwrap_or_else(|| panic!("no verdict for {target} [{case}]"))
    };
    for case in ["waitpid-pid", "waitid-pidfd"] {
        let v = verdict("do_wait", case);
        assert_eq!(v.class(), Some(Complexity::Constant), "{}", v.line);
    }
    let any = verdict("do_wait", "waitpid-any");
    assert_eq!(any.class(), Some(Complexity::Linear), "{}", any.line);
    assert!(
        any.line.ends_with("; via syscall-bracket (wait4, waitid)"),
        "{}",
        any.line
    );
    // waitpid(-1, WNOHANG) grows faster than linearly here: its per-child cost rises from
    // ~14 ns at 1000 children to ~57 ns at 4000 (the walk outgrows the caches).
    let wnohang = verdict("do_wait", "waitpid-wnohang");
    let s = wnohang.scaling.as_ref().unwrap();
    assert_ne!(s.class, Complexity::Constant, "{}", wnohang.line);
    assert!(
        s.slope_of_excess && (1.0..2.0).contains(&s.slope.slope),
        "{}",
        wnohang.line
    );
    // fork does not depend on the number of idle children.
    for case in ["waitpid-pid", "waitpid-any", "waitid-pidfd"] {
        let v = verdict("dup_mmap", case);
        assert_eq!(v.class(), Some(Complexity::Constant), "{}", v.line);
        assert!(
            v.line
                .contains("via syscall-bracket (clone, clone3, fork, vfork)")
        );
    }

    let rc = |case: &str| {
        &a.root_causes
            .iter()
            .find(|r| r.target == "do_wait" && r.case_name == case)
            .unwrap_or_else(|| panic!("no root cause for do_wait [{case}]"))
            .cause
    };
    let any = rc("waitpid-any");
    assert_eq!(any.culprit.as_ref().unwrap().frame(), "wait_consider_task");
    assert_eq!(any.sizes_used, vec![100, 1000, 4000]);
    assert!(
        any.line.starts_with("do_wait [waitpid-any] -> ")
            && any.line.ends_with(" [from samples at N=100..4000 only]"),
        "{}",
        any.line
    );
    // One or two samples per size: no root cause is claimed.
    let pidfd = rc("waitid-pidfd");
    assert!(pidfd.culprit.is_none() && pidfd.dominant.is_none());
    assert!(
        pidfd.line.contains("too few stack samples"),
        "{}",
        pidfd.line
    );
}
