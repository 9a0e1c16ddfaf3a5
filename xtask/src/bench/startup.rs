//! Start-up and shut-down: the tracer's own attach/verify/detach times from run.json, and
//! for the tracer and bpftrace alike, measured from outside with the same method: the traced
//! command is `date +%s%N`, which runs only once every probe is attached (both tools hold
//! the command until then), so "launch -> command starts" is the time to attached and
//! "command starts -> tool exits" the time to detach, read the maps and exit.

use anyhow::{Context, Result, anyhow};
use serde::{Deserialize, Serialize};

use super::exec::{Cmd, Output, argv, path_str};
use super::measure::{Attach, PERF_EVENTS_ENV, Tools, TracerRun, run_bpftrace};
use super::stats::Summary;

/// One tool configuration over the repetitions.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct StartupResult {
    pub name: String,
    pub command: String,
    /// Launch -> traced command starts (ms).
    pub to_attached_ms: Option<Summary>,
    /// Traced command starts -> tool exits (ms).
    pub to_exit_ms: Option<Summary>,
    pub wall_ms: Option<Summary>,
    /// The tracer's own figures (run.json resources), None for bpftrace.
    pub attach_ms: Option<Summary>,
    pub verify_ms: Option<Summary>,
    pub detach_ms: Option<Summary>,
    /// Probes the tool attached (bpftrace's "Attaching N probes"); None when unknown.
    pub probes: Option<u64>,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Startup {
    pub reps: usize,
    pub results: Vec<StartupResult>,
}

const DATE: &str = "/usr/bin/date";

#[derive(Default)]
struct Acc {
    to_attached: Vec<f64>,
    to_exit: Vec<f64>,
    wall: Vec<f64>,
    attach: Vec<f64>,
    verify: Vec<f64>,
    detach: Vec<f64>,
    probes: Option<u64>,
}

/// A tool run to time: the tracer with some targets and options, or bpftrace with a script.
enum Tool {
    Tracer {
        targets: Option<String>,
        verify: bool,
        /// One perf event per tracepoint instead of raw tracepoints.
        perf_events: bool,
    },
    Bpftrace {
        script: String,
    },
}

pub fn measure(tools: &Tools, getpid: &Attach, reps: usize) -> Result<Startup> {
    let cases = cases(tools, getpid)?;
    let mut acc: Vec<Acc> = cases.iter().map(|_| Acc::default()).collect();
    let dir = tools.scratch.join("startup");
    std::fs::create_dir_all(&dir)?;
    for r in 0..reps {
        for (i, (name, tool)) in cases.iter().enumerate() {
            eprintln!("xtask bench: start-up: {}/{reps}: {name}", r + 1);
            let tag = format!("startup-{i}-r{r}");
            let a = &mut acc[i];
            let out: Output = match tool {
                Tool::Tracer {
                    targets,
                    verify,
                    perf_events,
                } => startup_run(
                    tools,
                    targets.as_deref(),
                    *verify,
                    *perf_events,
                    (&dir, &tag),
                    a,
                )?,
                Tool::Bpftrace { script } => {
                    let bt = tools.bpftrace.as_ref().expect("checked");
                    let out = run_bpftrace(bt, script, &argv([DATE, "+%s%N"]), &dir, &tag)?;
                    a.probes = attaching_probes(&out.stdout);
                    out
                }
            };
            let started = command_timestamp(&out.stdout)
                .ok_or_else(|| anyhow!("{tag}: the traced `date` printed no timestamp"))?;
            let launched = out.launched_unix_ns as f64;
            let ended = launched + out.wall.as_nanos() as f64;
            a.to_attached.push((started - launched) / 1e6);
            a.to_exit.push((ended - started) / 1e6);
            a.wall.push(out.wall.as_secs_f64() * 1e3);
        }
    }
    let results = cases
        .iter()
        .zip(acc)
        .map(|((name, tool), a)| StartupResult {
            name: name.clone(),
            command: match tool {
                Tool::Tracer { .. } => format!("{name} -o DIR -- {DATE} +%s%N"),
                Tool::Bpftrace { .. } => format!("bpftrace -e SCRIPT -c '{DATE} +%s%N'"),
            },
            to_attached_ms: Summary::of(&a.to_attached),
            to_exit_ms: Summary::of(&a.to_exit),
            wall_ms: Summary::of(&a.wall),
            attach_ms: Summary::of(&a.attach),
            verify_ms: Summary::of(&a.verify),
            detach_ms: Summary::of(&a.detach),
            probes: a.probes,
        })
        .collect();
    Ok(Startup { reps, results })
}

/// The configurations timed: the tracer with one target and with the default ones, verified
/// or not (and on perf events), and bpftrace's same getpid probes when installed.
fn cases(tools: &Tools, getpid: &Attach) -> Result<Vec<(String, Tool)>> {
    let mut cases: Vec<(String, Tool)> = vec![
        (
            "tracer record --targets getpid --no-verify".into(),
            Tool::Tracer {
                targets: Some("getpid".into()),
                verify: false,
                perf_events: false,
            },
        ),
        (
            "tracer record --targets getpid".into(),
            Tool::Tracer {
                targets: Some("getpid".into()),
                verify: true,
                perf_events: false,
            },
        ),
        (
            "tracer record --no-verify (default targets)".into(),
            Tool::Tracer {
                targets: None,
                verify: false,
                perf_events: false,
            },
        ),
        (
            "tracer record (default targets, verified)".into(),
            Tool::Tracer {
                targets: None,
                verify: true,
                perf_events: false,
            },
        ),
        (
            format!("{PERF_EVENTS_ENV} tracer record (default targets, verified)"),
            Tool::Tracer {
                targets: None,
                verify: true,
                perf_events: true,
            },
        ),
    ];
    if tools.bpftrace.is_some() {
        cases.push((
            "bpftrace, same getpid probes".into(),
            Tool::Bpftrace {
                script: getpid.bpftrace_script(None)?,
            },
        ));
    }
    Ok(cases)
}

/// One `tracer record` of `date` (with `targets`, verified or not, on perf events or not):
/// its attach, verify and detach times go to `a`.
fn startup_run(
    tools: &Tools,
    targets: Option<&str>,
    verify: bool,
    perf_events: bool,
    (dir, tag): (&std::path::Path, &str),
    a: &mut Acc,
) -> Result<Output> {
    let run_dir = dir.join(tag);
    let mut args = if perf_events {
        argv(["/usr/bin/env", PERF_EVENTS_ENV])
    } else {
        Vec::new()
    };
    args.extend(argv([
        path_str(&tools.tracer).as_str(),
        "record",
        "--force",
        "-o",
        &path_str(&run_dir),
    ]));
    if let Some(t) = targets {
        args.extend(argv(["--targets", t]));
    }
    if !verify {
        args.push("--no-verify".into());
    }
    args.extend(argv(["--", DATE, "+%s%N"]));
    let out = Cmd::new(args, dir, tag).run()?;
    let run = TracerRun::read(&run_dir, targets.unwrap_or("do_wait"))?;
    let _ = std::fs::remove_dir_all(&run_dir);
    a.attach.push(run.attach_ms);
    a.verify.push(run.verify_ms);
    a.detach.push(run.detach_ms);
    Ok(out)
}

/// The nanosecond timestamp `date +%s%N` printed (a line of 19 digits).
pub fn command_timestamp(stdout: &str) -> Option<f64> {
    stdout
        .lines()
        .map(str::trim)
        .find(|l| l.len() >= 18 && l.bytes().all(|b| b.is_ascii_digit()))
        .and_then(|l| l.parse::<u128>().ok())
        .map(|v| v as f64)
}

/// N from bpftrace's "Attaching N probes...".
pub fn attaching_probes(stdout: &str) -> Option<u64> {
    stdout
        .lines()
        .find_map(|l| l.strip_prefix("Attaching "))
        .and_then(|r| r.split_whitespace().next())
        .and_then(|n| n.parse().ok())
}

/// Used by the summary: the figure the target is judged on.
pub fn find<'a>(s: &'a Startup, name: &str) -> Result<&'a StartupResult> {
    s.results
        .iter()
        .find(|r| r.name == name)
        .with_context(|| format!("no start-up result {name}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_timestamps_and_probe_counts() {
        let out = "Attaching 2 probes...\n1795988167223138961\n\n@calls: 0\n";
        assert_eq!(
            command_timestamp(out),
            Some(1_795_988_167_223_138_961u128 as f64)
        );
        assert_eq!(attaching_probes(out), Some(2));
        assert_eq!(command_timestamp("getpid 0 calls\n12345\n"), None);
        assert_eq!(attaching_probes("nothing"), None);
    }
}
