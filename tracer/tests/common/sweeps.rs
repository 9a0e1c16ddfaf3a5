//! External sweeps for the native tests: the C benchmarks of `tests/c/`, built once per test
//! process, and `tracer sweep` run into a temporary directory with its summary read back.
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

use serde_json::Value;

/// The C benchmarks, compiled once per test process into a temporary directory.
pub fn bench(name: &str) -> PathBuf {
    static DIR: OnceLock<tempfile::TempDir> = OnceLock::new();
    let dir = DIR.get_or_init(|| {
        let d = tempfile::tempdir().expect("tempdir");
        let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/c");
        for e in std::fs::read_dir(&src).expect("tests/c") {
            let p = e.expect("entry").path();
            if p.extension().is_some_and(|x| x == "c") {
                let out = d.path().join(p.file_stem().unwrap());
                let st = Command::new("cc")
                    .args(["-O2", "-static", "-o"])
                    .arg(&out)
                    .arg(&p)
                    .status()
                    .expect("precondition: a C compiler (cc) is installed");
                assert!(st.success(), "compiling {}", p.display());
            }
        }
        d
    });
    dir.path().join(name)
}

/// `tracer sweep ARGS`, then its summary.json and the sweep directory.
pub fn sweep(args: &[&str]) -> (Value, tempfile::TempDir, std::process::Output) {
    sweep_under(&[], args)
}

/// `WRAPPER... tracer sweep ARGS` (the tracer started by another program, such as `unshare`).
pub fn sweep_under(
    wrapper: &[&str],
    args: &[&str],
) -> (Value, tempfile::TempDir, std::process::Output) {
    let out = tempfile::tempdir().expect("tempdir");
    let dir = out.path().join("sweep");
    let tracer = env!("CARGO_BIN_EXE_tracer");
    let mut c = match wrapper.split_first() {
        Some((first, rest)) => {
            let mut c = Command::new(first);
            c.args(rest).arg(tracer);
            c
        }
        None => Command::new(tracer),
    };
    let o = c
        .arg("sweep")
        .arg("-o")
        .arg(&dir)
        .args(["--no-flamegraphs"])
        .args(args)
        .output()
        .expect("tracer runs");
    let summary = std::fs::read_to_string(dir.join("report/summary.json"))
        .map(|t| serde_json::from_str(&t).expect("summary.json parses"))
        .unwrap_or(Value::Null);
    (summary, out, o)
}

/// stdout and stderr, for assertion messages.
pub fn text(o: &std::process::Output) -> String {
    format!(
        "{}\n{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

/// The one discovery of a sweep's summary.json.
pub fn discovery(summary: &Value) -> &Value {
    let d = &summary["discoveries"];
    assert_eq!(
        d.as_array().map(Vec::len),
        Some(1),
        "one discovery: {summary}"
    );
    &d[0]
}
