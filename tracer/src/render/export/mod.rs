//! Exports for other tools, written by `tracer report` and by `tracer export`:
//!
//! | file | content | open with |
//! | --- | --- | --- |
//! | `trace.pftrace` | Perfetto trace of the raw per-call spans (`record --raw-events`): a slice per call on its thread, phases and N per process ([`perfetto`]) | ui.perfetto.dev |
//! | `profiles/<kind>-<target>.pb.gz` | pprof profile of one kind of folded stacks of one target, samples labelled with target, case and N ([`pprof`]) | `go tool pprof`, Perfetto, Parca, Pyroscope, Grafana |
//!
//! In a sweep's report each run gets its own: `traces/<run>.pftrace`,
//! `profiles/<run>/<kind>-<target>.pb.gz`.

pub mod perfetto;
pub mod pprof;
pub mod proto;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use super::ReportError;
use super::out::{self, OutDir};
use crate::analysis::load::LoadedRun;
use crate::analysis::{Analysis, Dataset, LoadError, load, timeline};
use crate::rundata::Folded;
use crate::rundata::{Run, StackFile, StackKind};

/// The trace's name in a run's report (and `tracer export perfetto`'s default).
pub const TRACE_FILE: &str = "trace.pftrace";
/// The profiles' directory in a run's report (and `tracer export pprof`'s default).
pub const PROFILES_DIR: &str = "profiles";
/// Largest `events.csv` a report turns into a trace by default (about 1.6 million calls, a
/// trace of about 190 MB): past it the trace costs more time and disk than the rest of the
/// report, and `tracer export perfetto` writes it on request.
pub const REPORT_TRACE_MAX_EVENTS_BYTES: u64 = 64 << 20;

/// The export formats of `tracer export`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Format {
    Perfetto,
    Pprof,
}

impl Format {
    /// Where `tracer export` writes by default, in the run directory.
    pub fn default_output(self, run_dir: &Path) -> PathBuf {
        match self {
            Format::Perfetto => run_dir.join(TRACE_FILE),
            Format::Pprof => run_dir.join(PROFILES_DIR),
        }
    }
}

/// File name of a profile.
pub fn profile_file(kind: StackKind, target: &str) -> String {
    format!("{}-{}.pb.gz", kind.as_str(), out::safe(target))
}

/// One file written by an export, with a line describing it.
#[derive(Clone, Debug, PartialEq)]
pub struct Exported {
    /// Under the output directory (a report's, or `tracer export pprof`'s); the file itself
    /// for `tracer export perfetto`.
    pub path: String,
    pub what: String,
}

/// What a report's exports wrote, and what they left out and why.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct ReportExports {
    pub files: Vec<Exported>,
    pub notes: Vec<String>,
}

/// The Perfetto trace of one run into `out` at `rel`; None when the run kept no raw events.
fn write_run_trace(
    lr: &LoadedRun,
    out: &mut OutDir,
    rel: &str,
) -> Result<Option<Exported>, ReportError> {
    let Some(t) = timeline::read(&lr.dir).map_err(LoadError::from)? else {
        return Ok(None);
    };
    let names = perfetto::Names {
        cases: &lr.run.cases,
    };
    let stats = out.write_with(rel, |w| perfetto::write_trace(&t, &names, w))?;
    Ok(Some(Exported {
        path: rel.to_string(),
        what: trace_line(&lr.label, &stats),
    }))
}

fn trace_line(label: &str, s: &perfetto::TraceStats) -> String {
    let mut line = format!(
        "Perfetto trace of {label}: {} calls on {} threads in {} processes, {} phases",
        s.slices, s.threads, s.processes, s.phase_slices
    );
    if s.clamped > 0 {
        line.push_str(&format!(
            " ({} calls overlapped their enclosing call and are drawn ending with it)",
            s.clamped
        ));
    }
    line
}

/// Comments a profile carries about its run.
fn profile_info<'a>(run: &Run, kind: StackKind, target: &'a str) -> pprof::ProfileInfo<'a> {
    let mut comments = vec![format!(
        "tracer {}: {} of {target} on Linux {} ({})",
        run.tracer_version,
        super::flamesvg::kind_label(kind),
        run.kernel.release,
        run.hostname
    )];
    if let Some(p) = crate::rundata::plan_of(&run.targets, target) {
        comments.push(format!("plan: {} ({})", p.plan, p.attach_points.join(", ")));
    }
    if !run.command.is_empty() {
        comments.push(format!("command: {}", run.command.join(" ")));
    }
    comments.push(
        "labels: target, case, n (one size: go tool pprof -tagfocus=n=1000 FILE)".to_string(),
    );
    pprof::ProfileInfo {
        kind,
        target,
        started_unix: run.started_unix,
        duration_s: run.duration_s,
        sample_freq_hz: run.sample_freq_hz,
        comments,
    }
}

/// One profile per (kind, target) of a run's stacks into `out` under `dir`.
fn write_run_profiles(
    run: &Run,
    stacks: &[(&StackFile, &Folded)],
    out: &mut OutDir,
    dir: &str,
) -> Result<Vec<Exported>, ReportError> {
    let mut groups: BTreeMap<(StackKind, &str), Vec<(&StackFile, &Folded)>> = BTreeMap::new();
    // The entry stacks are the profile's kernel samples again, filed by entry: the
    // profile's pprof has them all.
    for &(f, folded) in stacks.iter().filter(|(f, _)| f.kind != StackKind::Entry) {
        groups
            .entry((f.kind, f.target.as_str()))
            .or_default()
            .push((f, folded));
    }
    let mut written = Vec::new();
    for ((kind, target), mut files) in groups {
        files.sort_by_key(|(f, _)| (f.case, f.n));
        let p = pprof::profile(&profile_info(run, kind, target), &files);
        let rel = if dir.is_empty() {
            profile_file(kind, target)
        } else {
            format!("{dir}/{}", profile_file(kind, target))
        };
        out.write(&rel, &pprof::encode_gzip(&p))?;
        written.push(Exported {
            path: rel,
            what: format!(
                "pprof profile: {} of {target}, {} samples",
                super::flamesvg::kind_label(kind),
                p.sample.len()
            ),
        });
    }
    Ok(written)
}

/// The exports of every run of an analysed data set, into a report being written. A run whose
/// `events.csv` is larger than `max_events_bytes` gets a note instead of a trace.
pub fn write_report_exports(
    ds: &Dataset,
    a: &Analysis,
    out: &mut OutDir,
    max_events_bytes: u64,
) -> Result<ReportExports, ReportError> {
    let mut written = ReportExports::default();
    for lr in &ds.runs {
        let (trace, profiles) = if ds.is_sweep {
            let label = out::safe(&lr.label);
            (
                format!("traces/{label}.pftrace"),
                format!("{PROFILES_DIR}/{label}"),
            )
        } else {
            (TRACE_FILE.to_string(), PROFILES_DIR.to_string())
        };
        let events = lr.dir.join(crate::rundata::EVENTS_CSV);
        match std::fs::metadata(&events) {
            Ok(m) if m.len() > max_events_bytes => written.notes.push(format!(
                "{}: no Perfetto trace in the report: events.csv has {} bytes (more than {}); \
                 `tracer export perfetto {}` writes it",
                lr.label,
                m.len(),
                max_events_bytes,
                lr.dir.display()
            )),
            _ => written.files.extend(write_run_trace(lr, out, &trace)?),
        }
        // The analysed run's stacks: a failed size's are left out, as from its tables.
        let stacks: Vec<(&StackFile, &Folded)> = a
            .runs
            .iter()
            .filter(|r| r.label == lr.label)
            .flat_map(|r| &r.stacks)
            .map(|s| (&s.file, &s.folded))
            .collect();
        written
            .files
            .extend(write_run_profiles(&lr.run, &stacks, out, &profiles)?);
    }
    Ok(written)
}

/// `tracer export FORMAT RUN -o OUT`: one format of one run directory. A trace is one file;
/// profiles are a directory, replaced as a whole.
pub fn export(format: Format, run_dir: &Path, dest: &Path) -> Result<Vec<Exported>, ReportError> {
    let ds = load(run_dir)?;
    if ds.is_sweep {
        return Err(ReportError::Unexportable {
            path: run_dir.to_path_buf(),
            what: format!(
                "a sweep directory: export one of its runs ({}), or run `tracer report` for all",
                ds.runs
                    .iter()
                    .map(|r| r.dir.display().to_string())
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
        });
    }
    // A run directory loads as one run.
    let [lr] = ds.runs.as_slice() else {
        return Err(ReportError::Unexportable {
            path: run_dir.to_path_buf(),
            what: format!("{} runs where one was expected", ds.runs.len()),
        });
    };
    match format {
        Format::Perfetto => {
            let Some(t) = timeline::read(&lr.dir).map_err(LoadError::from)? else {
                return Err(ReportError::Unexportable {
                    path: run_dir.to_path_buf(),
                    what: "no events.csv: record with --raw-events to keep every call".into(),
                });
            };
            let names = perfetto::Names {
                cases: &lr.run.cases,
            };
            let stats = out::write_file_atomic(dest, |w| perfetto::write_trace(&t, &names, w))?;
            Ok(vec![Exported {
                path: dest.display().to_string(),
                what: trace_line(&lr.label, &stats),
            }])
        }
        Format::Pprof => {
            if lr.run.stack_files.is_empty() {
                return Err(ReportError::Unexportable {
                    path: run_dir.to_path_buf(),
                    what: "no folded stacks (recorded with --no-samples --no-offcpu \
                           --no-callers?)"
                        .into(),
                });
            }
            // In run.json's order, as the files were written.
            let stacks: Vec<(&StackFile, &Folded)> = lr
                .run
                .stack_files
                .iter()
                .filter_map(|f| lr.stacks.iter().find(|(g, _)| g == f))
                .map(|(f, s)| (f, s))
                .collect();
            refuse_foreign_dir(dest)?;
            let mut out = OutDir::create(dest)?;
            let written = write_run_profiles(&lr.run, &stacks, &mut out, "")?;
            out.commit()?;
            Ok(written)
        }
    }
}

/// `tracer export pprof` replaces its output directory as a whole: refuse one that holds
/// anything but profiles (a mistyped `-o .` must not delete a working directory).
fn refuse_foreign_dir(dest: &Path) -> Result<(), ReportError> {
    let refuse = |what: String| ReportError::Write {
        path: dest.to_path_buf(),
        source: std::io::Error::other(what),
    };
    let entries = match std::fs::read_dir(dest) {
        Ok(e) => e,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(()),
        Err(e) if e.kind() == std::io::ErrorKind::NotADirectory => {
            return Err(refuse("exists and is not a directory".into()));
        }
        Err(source) => {
            return Err(ReportError::Write {
                path: dest.to_path_buf(),
                source,
            });
        }
    };
    for e in entries {
        let name = e
            .map_err(|source| ReportError::Write {
                path: dest.to_path_buf(),
                source,
            })?
            .file_name();
        if !name.to_string_lossy().ends_with(".pb.gz") {
            return Err(refuse(format!(
                "exists and holds {name:?}, not only profiles (*.pb.gz); choose another -o"
            )));
        }
    }
    Ok(())
}
