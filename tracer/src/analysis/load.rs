//! Loading saved run data: a run directory (with `run.json`) or a sweep directory holding one
//! run directory per workload, plus the folded-stack files and raw spans they hold. This is
//! the one place that reads a run directory; analysis and rendering work on what it loaded.

use std::path::{Path, PathBuf};

use crate::rundata::{self, ReadError, Run, StackFile, StackKind};

use super::warnings::Warning;
use crate::rundata::Folded;

pub use crate::rundata::SWEEP_FILE;

/// Errors reading saved run data. Each names the file and what was wrong with it.
#[derive(Debug, thiserror::Error)]
pub enum LoadError {
    #[error("{path}: no such directory")]
    NotFound { path: PathBuf },
    #[error(
        "{path} is neither a run directory (no {}) nor a sweep directory (no subdirectory holds one)",
        rundata::RUN_FILE
    )]
    NotARun { path: PathBuf },
    #[error(transparent)]
    Run(#[from] ReadError),
    #[error(
        "{path}: stack file listed in run.json is missing (truncated or incomplete run directory)"
    )]
    StackMissing { path: PathBuf },
    #[error("{path}: corrupt folded stacks: {what}")]
    StackCorrupt { path: PathBuf, what: String },
    #[error(
        "{path}: folded stacks sum to {found} ns but run.json says {expected} ns (truncated file?)"
    )]
    StackTruncated {
        path: PathBuf,
        expected: u64,
        found: u64,
    },
    /// A corrupt `events.csv`: the exact percentiles cannot be trusted, and reporting from
    /// the histograms instead would hide that.
    #[error("{0} (move events.csv out of the run directory to report from the histograms)")]
    Raw(#[from] super::raw::RawError),
    #[error("{path}: {source}")]
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
}

/// One run directory, read whole: its run.json, every folded-stack file it lists (checked
/// against run.json) and its raw spans, when it kept them.
#[derive(Clone, Debug)]
pub struct LoadedRun {
    /// Short name: the run directory's name.
    pub label: String,
    pub dir: PathBuf,
    pub run: Run,
    /// The stack files of `run.stack_files`, ordered by (kind, target, case, N, path).
    pub stacks: Vec<(StackFile, Folded)>,
    /// Exact percentiles from `events.csv` (runs recorded with `--raw-events`).
    pub raw: Option<super::raw::RawPercentiles>,
}

impl LoadedRun {
    /// Read the stack files and raw spans `run` lists from `dir`.
    pub fn read(label: String, dir: PathBuf, run: Run) -> Result<LoadedRun, LoadError> {
        let mut files: Vec<&StackFile> = run.stack_files.iter().collect();
        files.sort_by(|x, y| stack_order(x).cmp(&stack_order(y)));
        let stacks = files
            .into_iter()
            .map(|f| Ok((f.clone(), read_stack_file(&dir, f)?)))
            .collect::<Result<Vec<_>, LoadError>>()?;
        let raw = super::raw::read(&dir)?;
        Ok(LoadedRun {
            label,
            dir,
            run,
            stacks,
            raw,
        })
    }
}

impl LoadedRun {
    /// A run just recorded into `dir`, from what the recording holds in memory: its stacks
    /// as the collector folded them, nothing read back from disk. Without the raw spans
    /// (`--raw-events`): what uses a run recorded a moment ago (a discover sweep's
    /// confirmation pass) needs its stacks and entries, not exact percentiles.
    pub fn recorded(
        label: String,
        dir: PathBuf,
        run: Run,
        stacks: Vec<(StackFile, Folded)>,
    ) -> LoadedRun {
        let mut stacks = stacks;
        stacks.sort_by(|(x, _), (y, _)| stack_order(x).cmp(&stack_order(y)));
        LoadedRun {
            label,
            dir,
            run,
            stacks,
            raw: None,
        }
    }
}

/// The order of a run's stack files: by kind, target, case, N, then path.
fn stack_order(f: &StackFile) -> (StackKind, &str, u32, u64, &str) {
    (f.kind, &f.target, f.case, f.n, &f.path)
}

/// A run or a sweep of runs.
#[derive(Clone, Debug)]
pub struct Dataset {
    pub root: PathBuf,
    pub is_sweep: bool,
    pub runs: Vec<LoadedRun>,
    /// Things found while loading that a reader should know (e.g. a partial sweep).
    pub notes: Vec<Warning>,
}

impl Dataset {
    /// Kernel releases of the runs, deduplicated, in run order.
    pub fn kernels(&self) -> Vec<String> {
        let mut out: Vec<String> = Vec::new();
        for r in &self.runs {
            if !out.contains(&r.run.kernel.release) {
                out.push(r.run.kernel.release.clone());
            }
        }
        out
    }

    /// A name for this data set in comparisons: its kernel release when all runs share one,
    /// else the directory name.
    pub fn label(&self) -> String {
        match self.kernels().as_slice() {
            [k] if !k.is_empty() => k.clone(),
            _ => dir_name(&self.root),
        }
    }
}

fn dir_name(p: &Path) -> String {
    p.file_name()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_else(|| p.display().to_string())
}

/// Load a run directory, or every run directory directly under a sweep directory (sorted by
/// name; hidden directories, where writers keep unfinished output, are skipped).
pub fn load(dir: &Path) -> Result<Dataset, LoadError> {
    if !dir.is_dir() {
        return Err(LoadError::NotFound {
            path: dir.to_path_buf(),
        });
    }
    if dir.join(rundata::RUN_FILE).exists() {
        let run = Run::read(dir)?;
        return Ok(Dataset {
            root: dir.to_path_buf(),
            is_sweep: false,
            runs: vec![LoadedRun::read(dir_name(dir), dir.to_path_buf(), run)?],
            notes: Vec::new(),
        });
    }
    let entries = std::fs::read_dir(dir).map_err(|source| LoadError::Io {
        path: dir.to_path_buf(),
        source,
    })?;
    let mut subdirs: Vec<PathBuf> = Vec::new();
    for e in entries {
        let e = e.map_err(|source| LoadError::Io {
            path: dir.to_path_buf(),
            source,
        })?;
        let p = e.path();
        let hidden = e.file_name().to_string_lossy().starts_with('.');
        if !hidden && p.is_dir() && p.join(rundata::RUN_FILE).exists() {
            subdirs.push(p);
        }
    }
    subdirs.sort();
    if subdirs.is_empty() {
        return Err(LoadError::NotARun {
            path: dir.to_path_buf(),
        });
    }
    let mut runs = Vec::new();
    for p in subdirs {
        let run = Run::read(&p)?;
        runs.push(LoadedRun::read(dir_name(&p), p, run)?);
    }
    Ok(Dataset {
        root: dir.to_path_buf(),
        is_sweep: true,
        runs,
        notes: sweep_notes(dir),
    })
}

/// The sweep writer's `sweep.json` says whether the whole sweep completed. Only its status is
/// read (leniently: the runs themselves are the data).
fn sweep_notes(dir: &Path) -> Vec<Warning> {
    let path = dir.join(SWEEP_FILE);
    let Ok(text) = std::fs::read_to_string(&path) else {
        return Vec::new();
    };
    let Ok(v) = serde_json::from_str::<serde_json::Value>(&text) else {
        return vec![Warning::SweepUnreadable { path }];
    };
    match v.get("status").and_then(|s| s.as_str()) {
        Some("partial") => {
            let reason = v
                .get("partial_reason")
                .and_then(|r| r.as_str())
                .map(String::from);
            vec![Warning::PartialSweep { reason }]
        }
        _ => Vec::new(),
    }
}

/// Read one folded-stack file of a run and check it against its `run.json` entry.
pub fn read_stack_file(run_dir: &Path, file: &StackFile) -> Result<Folded, LoadError> {
    let path = run_dir.join(&file.path);
    let text = match std::fs::read_to_string(&path) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            return Err(LoadError::StackMissing { path });
        }
        Err(source) => return Err(LoadError::Io { path, source }),
    };
    let folded = Folded::parse(&text).map_err(|what| LoadError::StackCorrupt {
        path: path.clone(),
        what,
    })?;
    let found = folded.total();
    if found != file.total_ns {
        return Err(LoadError::StackTruncated {
            path,
            expected: file.total_ns,
            found,
        });
    }
    Ok(folded)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rundata::StackKind;

    /// The confirmation pass analyses the discover run from memory: the same stacks, in the
    /// same order, as reading it back would give.
    #[test]
    fn a_run_recorded_in_memory_loads_as_reading_it_back_would() {
        let dir = tempfile::tempdir().unwrap();
        let file = |target: &str, n: u64, text: &str| {
            let sf = StackFile {
                kind: StackKind::Entry,
                target: target.into(),
                case: 1,
                case_name: "command".into(),
                n,
                path: rundata::stack_file_path(StackKind::Entry, target, "command", n),
                total_ns: Folded::parse(text).unwrap().total(),
                count: 2,
            };
            let p = dir.path().join(&sf.path);
            std::fs::create_dir_all(p.parent().unwrap()).unwrap();
            std::fs::write(&p, text).unwrap();
            (sf, Folded::parse(text).unwrap())
        };
        // Listed as the collector might list them: not in load order.
        let stacks = vec![
            file("wait4", 100, "e;wait4;walk 30\ne;wait4 5\n"),
            file("clone", 10, "e;clone 7\n"),
            file("wait4", 10, "e;wait4;walk 3\n"),
        ];
        let mut run = crate::rundata::Run::empty(Default::default(), vec![]);
        run.stack_files = stacks.iter().map(|(f, _)| f.clone()).collect();
        let read = LoadedRun::read("r".into(), dir.path().to_path_buf(), run.clone()).unwrap();
        let kept = LoadedRun::recorded("r".into(), dir.path().to_path_buf(), run, stacks);
        assert_eq!(kept.stacks, read.stacks);
        assert_eq!(kept.stacks[0].0.target, "clone");
    }

    #[test]
    fn stack_file_checks() {
        let dir = tempfile::tempdir().unwrap();
        let mut sf = StackFile {
            kind: StackKind::Oncpu,
            target: "do_wait".into(),
            case: 1,
            case_name: "waitpid-pid".into(),
            n: 10,
            path: rundata::stack_file_path(StackKind::Oncpu, "do_wait", "waitpid-pid", 10),
            total_ns: 30,
            count: 2,
        };
        let err = read_stack_file(dir.path(), &sf).unwrap_err();
        assert!(matches!(err, LoadError::StackMissing { .. }), "{err}");
        assert!(err.to_string().contains("n10.folded"), "{err}");
        let p = dir.path().join(&sf.path);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(&p, "a;b 10\na;c 20\n").unwrap();
        assert_eq!(read_stack_file(dir.path(), &sf).unwrap().total(), 30);
        sf.total_ns = 40;
        let err = read_stack_file(dir.path(), &sf).unwrap_err();
        assert!(
            matches!(
                err,
                LoadError::StackTruncated {
                    expected: 40,
                    found: 30,
                    ..
                }
            ),
            "{err}"
        );
        std::fs::write(&p, "a;b 10\na;c").unwrap();
        let err = read_stack_file(dir.path(), &sf).unwrap_err();
        assert!(err.to_string().contains("line 2"), "{err}");
    }

    #[test]
    fn partial_sweeps_are_noted() {
        let dir = tempfile::tempdir().unwrap();
        let run = crate::analysis::testdata::waitpid_run(&[10, 100], |n| 1000 + n);
        std::fs::create_dir_all(dir.path().join("waitpid")).unwrap();
        std::fs::write(dir.path().join("waitpid/run.json"), run.to_json()).unwrap();
        // A hidden directory (a writer's unfinished output) is not a run.
        std::fs::create_dir_all(dir.path().join(".spawn.tmp")).unwrap();
        std::fs::write(dir.path().join(".spawn.tmp/run.json"), "{").unwrap();
        let ds = load(dir.path()).unwrap();
        assert!(ds.is_sweep && ds.runs.len() == 1 && ds.notes.is_empty());
        std::fs::write(
            dir.path().join(SWEEP_FILE),
            r#"{"format":"tracer-sweep/1","status":"partial","partial_reason":"interrupted (Ctrl-C)"}"#,
        )
        .unwrap();
        assert_eq!(
            load(dir.path()).unwrap().notes,
            vec![Warning::PartialSweep {
                reason: Some("interrupted (Ctrl-C)".into())
            }]
        );
    }

    #[test]
    fn not_a_run() {
        let dir = tempfile::tempdir().unwrap();
        assert!(matches!(
            load(dir.path()).unwrap_err(),
            LoadError::NotARun { .. }
        ));
        assert!(matches!(
            load(&dir.path().join("nope")).unwrap_err(),
            LoadError::NotFound { .. }
        ));
        std::fs::write(dir.path().join("run.json"), "{\"format\":").unwrap();
        let err = load(dir.path()).unwrap_err();
        assert!(err.to_string().contains("run.json"), "{err}");
    }
}
