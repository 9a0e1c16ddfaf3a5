//! run.json: any bytes read as a run or as an error; an accepted run validates, writes back
//! to JSON that reads again, and analyses without panicking (what `tracer report` does next).
#![no_main]

use std::path::{Path, PathBuf};

use libfuzzer_sys::fuzz_target;
use tracer::analysis::{AnalysisOptions, Dataset, analyze, load::LoadedRun};
use tracer::rundata::Run;

fuzz_target!(|data: &[u8]| {
    let text = String::from_utf8_lossy(data);
    let Ok(run) = Run::from_json(&text, Path::new("fuzz/run.json")) else {
        return;
    };
    assert!(
        run.validate().is_ok(),
        "accepted a run that does not validate"
    );
    Run::from_json(&run.to_json(), Path::new("fuzz/again.json")).expect("a written run reads back");
    let ds = Dataset {
        root: PathBuf::from("/nonexistent"),
        is_sweep: false,
        runs: vec![LoadedRun {
            label: "fuzz".into(),
            dir: PathBuf::from("/nonexistent"),
            run: Run {
                stack_files: Vec::new(),
                ..run
            },
        }],
        notes: Vec::new(),
    };
    let _ = analyze(&ds, &AnalysisOptions::default());
});
