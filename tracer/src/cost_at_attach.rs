//! The probe's own cost, measured at attach on this machine for every kind of probe the run
//! uses, so a report can say how much of a short call's measured time is the probe itself.
//!
//! Method: a known count of cheap syscalls traced through the same kind of probe, with the
//! run's own programs and options (the same eBPF object, configuration, sampler and stack
//! settings, the calls counted under one of the run's targets), compared with an untraced
//! syscall of similar cost, interleaved. A child process (this binary re-executed,
//! [`CHILD_SUBCOMMAND`]) runs rounds of `getgid()` ×K (the reference) and, for each kind of
//! probe, another credential syscall ×K (`getuid()`, `geteuid()`, ...), alternating the order.
//! Before the calibration probes are attached, the per-call difference from the reference is
//! the syscalls' own difference (≈0); after, the probe's added cost on top of it. The estimate
//! is the median over rounds after attaching minus the median before: robust to the rounds
//! another job on this 2-core machine slows, and to anything that slows both syscalls alike
//! (CPU frequency, the run's scheduler probes, the syscall slow path a syscall tracepoint turns
//! on for every task: that part is outside the measured span of a call). The probe must count
//! every traced call, or the figure is not recorded.
//!
//! Why not the kernel's BPF run-time statistics (as the hot-function guard uses): they time the
//! program bodies only, not the mechanism's own dispatch (the tracepoint's perf buffer setup,
//! the kprobe's breakpoint or ftrace entry, the trampoline), which is a large part of what a
//! call pays, and turning them on slows every program run. Measured on this host (6.18,
//! `--targets getpid`, syscall tracepoints, default options, 2 M traced getpid calls, three
//! runs each way): with statistics on, the enter and exit programs' run time summed to
//! 256-282 ns per call while this calibration read 346-363 ns, so statistics miss ~90 ns of
//! dispatch per call; with them off, this calibration read 258-291 ns (their own cost ~80 ns).
//!
//! Nothing stays attached: the calibration slots stop recording as soon as the rounds are done
//! and are closed with the run's probes (closing them at once would add an RCU grace period
//! to attach time); everything belongs to the engine, whose Drop detaches it on an error or
//! signal.
use std::io::{BufRead, BufReader, Write};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use crate::engine::{AttachFailure, Engine, EngineError, Slot, TpRole};
use crate::kernel::kallsyms::Kallsyms;
use crate::plan::{FnMech, Method};
use crate::resolve::Resolved;
use crate::rundata::ProbeCost;

/// Hidden subcommand of the calibration child.
pub const CHILD_SUBCOMMAND: &str = "__probe_cost";

/// Syscalls per batch and rounds per phase. On this host (syscall tracepoints, default
/// options, a machine shared with other jobs) batches of 4000 calls read 231-275 ns over four
/// runs and batches of 2000 read 225-264 ns over five (one more, under heavy load, 330 ns):
/// the median over rounds steadies it, not the batch length, and 2000 keeps a phase of 9
/// rounds within ~25 ms.
pub const CALLS: u32 = 2000;
pub const ROUNDS: u32 = 9;

/// Cheap syscalls that cannot fail, called with zero arguments (`getpgid(0)` and `getsid(0)`
/// ask about the caller): the first one the run does not trace is the untraced reference, the
/// next ones carry one kind of probe each. The last two are there for fentry: a kernel may
/// leave the argument-less syscalls' functions out of its BTF (Debian's 5.10, 6.1 and 6.12
/// have none of `__x64_sys_getuid`, `_geteuid`, `_getgid`, `_getegid`, `_getppid` there, but
/// have `__x64_sys_getpgid` and `__x64_sys_getsid`).
const SYSCALLS: [&str; 7] = [
    "getgid", "getuid", "geteuid", "getegid", "getppid", "getpgid", "getsid",
];

/// The kinds of probe a plan uses, each measured once per run.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum ProbeKind {
    Fentry,
    Kprobe,
    /// Enter and exit tracepoints of a syscall.
    SyscallBracket,
    /// One tracepoint, counted.
    TracepointCount,
}

impl ProbeKind {
    pub fn of(method: &Method) -> ProbeKind {
        match method {
            Method::Functions {
                mech: FnMech::Fentry,
                ..
            } => ProbeKind::Fentry,
            Method::Functions {
                mech: FnMech::Kprobe,
                ..
            } => ProbeKind::Kprobe,
            Method::Syscalls { .. } => ProbeKind::SyscallBracket,
            Method::Count { .. } => ProbeKind::TracepointCount,
            // A breakpoint kprobe (not ftrace-based, as at a function's entry), close to a
            // kprobe pair in cost.
            Method::CallSites { .. } => ProbeKind::Kprobe,
        }
    }

    pub fn label(self) -> &'static str {
        match self {
            ProbeKind::Fentry => FnMech::Fentry.label(),
            ProbeKind::Kprobe => FnMech::Kprobe.label(),
            ProbeKind::SyscallBracket => "tracepoint (syscall enter/exit)",
            ProbeKind::TracepointCount => "tracepoint (count only)",
        }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum ProbeCostError {
    #[error(transparent)]
    Engine(#[from] EngineError),
    #[error("probe-cost calibration child: {0}")]
    Child(String),
}

/// One kind of probe to measure: the target index its calls are counted under, the syscall
/// that carries it, and what became of it.
struct Probe {
    kind: ProbeKind,
    index: u32,
    syscall: &'static str,
    slots: Vec<Slot>,
    points: Vec<String>,
    refused: Option<String>,
}

/// Measure the cost of every kind of probe the resolved targets use and give each target with
/// an active plan its figure (or the reason there is none). Returns the time it took. Only an
/// engine failure is an error: a calibration that could not run is recorded with its reason.
///
/// Every kind is attached at once, each to its own syscall, so one child and one pair of
/// phases serve them all.
pub fn measure_all(
    engine: &mut Engine,
    ksyms: &Kallsyms,
    resolved: &mut [Resolved],
) -> Result<Duration, EngineError> {
    let t0 = Instant::now();
    let used: Vec<&String> = resolved
        .iter()
        .filter_map(|r| r.active.as_ref())
        .flat_map(|a| a.attach_points.iter())
        .collect();
    let mut free: Vec<&'static str> = SYSCALLS
        .iter()
        .copied()
        .filter(|sc| !used.iter().any(|p| names_syscall(p, sc)))
        .collect();
    let reference = (!free.is_empty()).then(|| free.remove(0));
    let mut probes: Vec<Probe> = Vec::new();
    let mut costs: Vec<(ProbeKind, ProbeCost)> = Vec::new();
    for r in resolved.iter() {
        let Some(a) = &r.active else { continue };
        let kind = ProbeKind::of(&a.plan.method);
        if probes.iter().any(|p| p.kind == kind) || costs.iter().any(|c| c.0 == kind) {
            continue;
        }
        // fentry needs the syscall's function in the kernel's BTF: the first free syscall
        // whose function is there, else the first (refused, with the reason, at attach).
        let pick = match kind {
            ProbeKind::Fentry => free
                .iter()
                .position(|sc| syscall_function(ksyms, sc).is_some_and(|f| engine.in_btf(&f))),
            _ => None,
        }
        .or((!free.is_empty()).then_some(0));
        match (reference, pick.map(|i| free.remove(i))) {
            (Some(_), Some(syscall)) => probes.push(Probe {
                kind,
                index: r.index,
                syscall,
                slots: Vec::new(),
                points: Vec::new(),
                refused: None,
            }),
            _ => costs.push((
                kind,
                unmeasured(
                    kind,
                    "the run traces the syscalls the calibration would use".into(),
                ),
            )),
        }
    }
    if let (Some(reference), false) = (reference, probes.is_empty()) {
        match measure(engine, ksyms, reference, &mut probes) {
            Ok(c) => costs.extend(c),
            Err(ProbeCostError::Engine(e)) => return Err(e),
            Err(e @ ProbeCostError::Child(_)) => costs.extend(
                probes
                    .iter()
                    .map(|p| (p.kind, unmeasured(p.kind, e.to_string()))),
            ),
        }
    }
    for r in resolved.iter_mut() {
        if let Some(a) = &r.active {
            let k = ProbeKind::of(&a.plan.method);
            r.probe_cost = costs.iter().find(|(x, _)| *x == k).map(|(_, c)| c.clone());
        }
    }
    // What the calibration probes counted is not the run's.
    engine.clear()?;
    Ok(t0.elapsed())
}

/// The kernel function of syscall `sc` (`__x64_sys_getuid` on x86_64), when kallsyms has it.
fn syscall_function(ksyms: &Kallsyms, sc: &str) -> Option<String> {
    ["__x64_sys_", "__arm64_sys_", "sys_"]
        .iter()
        .map(|pre| format!("{pre}{sc}"))
        .find(|s| ksyms.contains(s))
}

/// True when attach point `point` is syscall `sc` (its tracepoint or its kernel function).
fn names_syscall(point: &str, sc: &str) -> bool {
    point.ends_with(&format!("_sys_{sc}"))
        || point.ends_with(&format!("sys_enter_{sc}"))
        || point.ends_with(&format!("sys_exit_{sc}"))
}

fn unmeasured(kind: ProbeKind, why: String) -> ProbeCost {
    ProbeCost {
        mechanism: kind.label().to_string(),
        probe_cost_ns: None,
        spread_ns: None,
        method: String::new(),
        not_measured: Some(why),
    }
}

/// Attach the calibration probe `p` to its syscall; Ok(Err(why)) when this kernel refuses it.
fn attach(
    engine: &mut Engine,
    ksyms: &Kallsyms,
    p: &mut Probe,
) -> Result<Result<(), String>, EngineError> {
    let fail = |f: AttachFailure| f.message().to_string();
    match p.kind {
        ProbeKind::Fentry | ProbeKind::Kprobe => {
            let Some(sym) = syscall_function(ksyms, p.syscall) else {
                return Ok(Err(format!(
                    "no kernel function for {}() in kallsyms",
                    p.syscall
                )));
            };
            let mech = if p.kind == ProbeKind::Fentry {
                FnMech::Fentry
            } else {
                FnMech::Kprobe
            };
            match engine.attach_function(p.index, mech, &sym)? {
                Ok(s) => {
                    p.slots.push(s);
                    p.points.push(sym);
                    Ok(Ok(()))
                }
                Err(f) => Ok(Err(fail(f))),
            }
        }
        ProbeKind::SyscallBracket | ProbeKind::TracepointCount => {
            let roles = if p.kind == ProbeKind::SyscallBracket {
                // Exit first, as the plans attach them (see engine.rs).
                vec![(TpRole::Exit, "exit"), (TpRole::Enter, "enter")]
            } else {
                vec![(TpRole::Point, "enter")]
            };
            for (role, end) in roles {
                let name = format!("sys_{end}_{}", p.syscall);
                match engine.attach_tracepoint(p.index, role, "syscalls", &name, None)? {
                    Ok(s) => {
                        p.slots.push(s);
                        p.points.push(format!("syscalls:{name}"));
                    }
                    Err(f) => return Ok(Err(fail(f))),
                }
            }
            Ok(Ok(()))
        }
    }
}

/// Untraced rounds, attach every probe, traced rounds, release.
fn measure(
    engine: &mut Engine,
    ksyms: &Kallsyms,
    reference: &'static str,
    probes: &mut [Probe],
) -> Result<Vec<(ProbeKind, ProbeCost)>, ProbeCostError> {
    let syscalls: Vec<&str> = probes.iter().map(|p| p.syscall).collect();
    let mut child = ChildRounds::spawn(reference, &syscalls)?;
    engine.follow(child.pid())?;
    let result = (|| -> Result<Vec<(ProbeKind, ProbeCost)>, ProbeCostError> {
        let before = child.rounds(probes.len())?;
        for p in probes.iter_mut() {
            match attach(engine, ksyms, p) {
                Ok(Ok(())) => {}
                Ok(Err(why)) => p.refused = Some(format!("refused on this kernel: {why}")),
                // The run's own plans took every slot of this kind: it is still measured.
                Err(e @ EngineError::NoSlot { .. }) => p.refused = Some(e.to_string()),
                Err(e) => return Err(e.into()),
            }
        }
        engine.clear()?;
        let after = child.rounds(probes.len());
        let seen = engine.calls_per_target();
        let slots: Vec<Slot> = probes.iter().flat_map(|p| p.slots.clone()).collect();
        engine.retire(&slots);
        let (after, seen) = (after?, seen?);
        let expected = u64::from(CALLS) * u64::from(ROUNDS + 1);
        Ok(probes
            .iter()
            .zip(before.iter().zip(&after))
            .map(|(p, (b, a))| {
                if let Some(why) = &p.refused {
                    return (p.kind, unmeasured(p.kind, why.clone()));
                }
                let method = format!(
                    "{}() ×{CALLS} in {ROUNDS} rounds through {} on {}, each against {reference}() untraced; minus the same difference before attaching",
                    p.syscall,
                    p.kind.label(),
                    p.points.join(", ")
                );
                // The probe must have seen every traced call, or it did not measure what it
                // says.
                let got = seen.get(p.index as usize).copied().unwrap_or(0);
                if got < expected {
                    let why = format!("the calibration probe saw {got} of {expected} calls");
                    return (
                        p.kind,
                        ProbeCost {
                            method,
                            ..unmeasured(p.kind, why)
                        },
                    );
                }
                (p.kind, estimate(p.kind, method, b, a))
            })
            .collect())
    })();
    engine.unfollow(child.pid());
    child.finish();
    result
}

/// The added ns per call from per-round differences (traced − reference, ns per call)
/// before and after attaching.
pub fn estimate(kind: ProbeKind, method: String, before: &[f64], after: &[f64]) -> ProbeCost {
    let (Some(b), Some(a)) = (quantile(before, 0.5), quantile(after, 0.5)) else {
        return unmeasured(kind, "no calibration rounds".into());
    };
    let cost = a - b;
    let spread = quantile(after, 0.25)
        .zip(quantile(after, 0.75))
        .map(|(lo, hi)| (lo - b, hi - b));
    if cost <= 0.0 {
        return ProbeCost {
            method,
            ..unmeasured(
                kind,
                format!("no cost above the calibration's noise ({cost:.0} ns per call)"),
            )
        };
    }
    ProbeCost {
        mechanism: kind.label().to_string(),
        probe_cost_ns: Some(cost),
        spread_ns: spread,
        method,
        not_measured: None,
    }
}

/// Linear-interpolated quantile; None for no values.
fn quantile(v: &[f64], q: f64) -> Option<f64> {
    let mut s: Vec<f64> = v.iter().copied().filter(|x| x.is_finite()).collect();
    if s.is_empty() {
        return None;
    }
    s.sort_by(f64::total_cmp);
    let pos = q * (s.len() - 1) as f64;
    let (lo, hi) = (pos.floor() as usize, pos.ceil() as usize);
    Some(s[lo] + (s[hi] - s[lo]) * (pos - lo as f64))
}

/// The calibration child, driven over its stdio: each line on its stdin starts a phase (a
/// warm-up batch of every syscall, then [`ROUNDS`] rounds), answered by one line per traced
/// syscall of its per-round differences from the reference; it exits when stdin closes.
struct ChildRounds {
    child: Child,
    stdin: Option<std::process::ChildStdin>,
    stdout: BufReader<std::process::ChildStdout>,
}

impl ChildRounds {
    fn spawn(reference: &str, traced: &[&str]) -> Result<ChildRounds, ProbeCostError> {
        let exe = std::env::current_exe().map_err(|e| ProbeCostError::Child(e.to_string()))?;
        let mut child = Command::new(exe)
            .args([CHILD_SUBCOMMAND, &CALLS.to_string(), &ROUNDS.to_string()])
            .arg(reference)
            .args(traced)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .map_err(|e| ProbeCostError::Child(format!("spawning: {e}")))?;
        let stdin = child.stdin.take();
        let stdout = BufReader::new(child.stdout.take().expect("piped"));
        Ok(ChildRounds {
            child,
            stdin,
            stdout,
        })
    }

    fn pid(&self) -> u32 {
        self.child.id()
    }

    /// One phase: per traced syscall, its per-round differences (ns per call).
    fn rounds(&mut self, traced: usize) -> Result<Vec<Vec<f64>>, ProbeCostError> {
        let err = |e: std::io::Error| ProbeCostError::Child(e.to_string());
        let stdin = self.stdin.as_mut().expect("open until finish");
        writeln!(stdin, "go").map_err(err)?;
        stdin.flush().map_err(err)?;
        let mut out = Vec::new();
        for _ in 0..traced {
            let mut line = String::new();
            if self.stdout.read_line(&mut line).map_err(err)? == 0 {
                return Err(ProbeCostError::Child("exited before answering".into()));
            }
            out.push(parse_rounds(&line).map_err(ProbeCostError::Child)?);
        }
        Ok(out)
    }

    /// Close its stdin and reap it (killed if it does not exit within a second).
    fn finish(mut self) {
        drop(self.stdin.take());
        let deadline = Instant::now() + Duration::from_secs(1);
        loop {
            match self.child.try_wait() {
                Ok(Some(_)) => return,
                Ok(None) if Instant::now() < deadline => {
                    std::thread::sleep(Duration::from_millis(1))
                }
                _ => {
                    let _ = self.child.kill();
                    let _ = self.child.wait();
                    return;
                }
            }
        }
    }
}

fn parse_rounds(line: &str) -> Result<Vec<f64>, String> {
    let v: Vec<f64> = line
        .split_whitespace()
        .map(|w| w.parse::<f64>().map_err(|e| format!("said {line:?}: {e}")))
        .collect::<Result<_, _>>()?;
    if v.is_empty() {
        return Err(format!("said {line:?}, expected per-round differences"));
    }
    Ok(v)
}

/// A cheap syscall without arguments, by name (only [`SYSCALLS`]).
fn syscall_number(name: &str) -> Option<libc::c_long> {
    Some(match name {
        "getuid" => libc::SYS_getuid,
        "getgid" => libc::SYS_getgid,
        "geteuid" => libc::SYS_geteuid,
        "getegid" => libc::SYS_getegid,
        "getppid" => libc::SYS_getppid,
        "getpgid" => libc::SYS_getpgid,
        "getsid" => libc::SYS_getsid,
        _ => return None,
    })
}

/// ns per call of `count` raw calls of syscall `nr`.
fn batch(nr: libc::c_long, count: u32) -> f64 {
    let t = Instant::now();
    for _ in 0..count {
        // SAFETY: the calibration syscalls take no pointer and cannot fail (getpgid(0) and
        // getsid(0) ask about the caller; the others ignore the argument); the raw syscall,
        // since libc could cache them.
        unsafe { libc::syscall(nr, 0 as libc::c_long) };
    }
    t.elapsed().as_nanos() as f64 / f64::from(count.max(1))
}

/// The child side (runs in the re-executed binary): `CALLS ROUNDS REFERENCE TRACED...`.
pub fn child_main(args: &[String]) -> i32 {
    let parsed = (|| -> Option<(u32, u32, Vec<libc::c_long>)> {
        let calls = args.first()?.parse().ok()?;
        let rounds = args.get(1)?.parse().ok()?;
        let nrs: Option<Vec<_>> = args.get(2..)?.iter().map(|a| syscall_number(a)).collect();
        let nrs = nrs?;
        (nrs.len() >= 2).then_some((calls, rounds, nrs))
    })();
    let Some((calls, rounds, nrs)) = parsed else {
        eprintln!(
            "usage: tracer {CHILD_SUBCOMMAND} CALLS ROUNDS REFERENCE TRACED... (syscalls: {})",
            SYSCALLS.join(", ")
        );
        return 2;
    };
    let stdin = std::io::stdin();
    let mut line = String::new();
    while stdin.lock().read_line(&mut line).is_ok_and(|n| n > 0) {
        line.clear();
        for &nr in &nrs {
            batch(nr, calls);
        }
        let mut diffs: Vec<Vec<String>> = vec![Vec::new(); nrs.len() - 1];
        for r in 0..rounds {
            // Alternate the order, so a drift within a round cancels over rounds.
            let mut t = vec![0.0; nrs.len()];
            let order: Vec<usize> = if r % 2 == 0 {
                (0..nrs.len()).collect()
            } else {
                (0..nrs.len()).rev().collect()
            };
            for i in order {
                t[i] = batch(nrs[i], calls);
            }
            for (d, ti) in diffs.iter_mut().zip(&t[1..]) {
                d.push(format!("{:.3}", ti - t[0]));
            }
        }
        let mut out = std::io::stdout().lock();
        for d in &diffs {
            if writeln!(out, "{}", d.join(" ")).is_err() {
                return 1;
            }
        }
        if out.flush().is_err() {
            return 1;
        }
    }
    0
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_estimate_is_the_median_after_minus_the_median_before() {
        let c = estimate(
            ProbeKind::SyscallBracket,
            "m".into(),
            &[2.0, -1.0, 1.0, 50.0, 0.0],
            &[301.0, 299.0, 900.0, 300.0, 302.0],
        );
        // Medians 1 and 301: one slow round on either side moves nothing.
        assert_eq!(c.probe_cost_ns, Some(300.0));
        assert_eq!(c.spread_ns, Some((299.0, 301.0)));
        assert_eq!(c.mechanism, "tracepoint (syscall enter/exit)");
        assert!(c.not_measured.is_none());
    }

    #[test]
    fn no_positive_cost_is_not_a_number() {
        let c = estimate(ProbeKind::Kprobe, "m".into(), &[5.0, 5.0], &[4.0, 5.0]);
        assert_eq!(c.probe_cost_ns, None);
        assert!(c.not_measured.unwrap().contains("noise"), "says why");
        let c = estimate(ProbeKind::Kprobe, "m".into(), &[], &[4.0]);
        assert_eq!(c.probe_cost_ns, None);
    }

    #[test]
    fn attach_points_are_matched_to_syscalls_exactly() {
        assert!(names_syscall("syscalls:sys_enter_getuid", "getuid"));
        assert!(names_syscall("syscalls:sys_exit_getuid", "getuid"));
        assert!(names_syscall("__x64_sys_getuid", "getuid"));
        assert!(!names_syscall("syscalls:sys_enter_geteuid", "getuid"));
        assert!(!names_syscall("do_wait", "getuid"));
    }

    #[test]
    fn child_answers_are_parsed_or_refused() {
        assert_eq!(parse_rounds("1.5 -2 3\n").unwrap(), vec![1.5, -2.0, 3.0]);
        assert!(parse_rounds("\n").is_err());
        assert!(parse_rounds("ready\n").is_err());
    }

    #[test]
    fn every_kind_of_plan_has_a_probe_kind() {
        for t in crate::plan::TARGETS {
            for p in t.plans {
                let k = ProbeKind::of(&p.method);
                assert!(!k.label().is_empty());
            }
        }
    }
}
