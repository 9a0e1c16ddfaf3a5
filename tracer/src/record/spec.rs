//! What one run traces: the command or processes, the filter, the duration, and the command
//! runs it consists of (one, or one per N and repeat for an external sweep).
use std::path::{Path, PathBuf};
use std::time::Duration;

use super::RecordOptions;
use super::targets::{check_usdt, resolve_phase_fn};
use crate::error::TracerError;
use crate::exec_path::find_executable;

/// What one traced run consists of (one command, or one set of processes).
#[derive(Clone, Debug)]
pub struct RunSpec {
    pub command: Vec<String>,
    /// The command's executable, resolved through PATH.
    pub exe: Option<PathBuf>,
    pub filter: FilterSpec,
    pub duration: Option<Duration>,
    pub attach_json: Option<PathBuf>,
    pub marker_binaries: Vec<PathBuf>,
    /// Label for progress messages (e.g. the workload name).
    pub label: String,
    /// The N values the command will sweep, when known (for the progress display).
    pub n_values: Vec<u64>,
    /// An external sweep: run `command` once per N (and repeat), `{n}` replaced.
    pub external: Option<ExternalSweep>,
    /// Only calls inside this function are in a phase (`--phase-fn`).
    pub phase_fn: Option<crate::phase_fn::PhaseFn>,
}

/// How a sweep runs its command once per N and round: the user's command, or the workloads
/// binary at one N.
#[derive(Clone, Debug)]
pub struct ExternalSweep {
    pub n_values: Vec<u64>,
    pub repeat: u32,
    /// The command announces its own phases (a built-in workload marks each case at N); a
    /// user's command's runs are each one phase, (command, N), set for its whole tree.
    pub announces_phases: bool,
    /// Operations per run, when the user knows them (`--ops`).
    pub ops: Option<crate::cli::OpsExpr>,
    /// More runs for the sizes of verdicts that could still change after the planned rounds.
    pub extra: super::ExtraRuns,
    /// What the extra runs consult for the verdicts so far (`analysis::advice::Analyst`).
    pub advice: &'static dyn super::advice::Advice,
}

#[derive(Clone, Debug)]
pub enum FilterSpec {
    /// The command's process tree plus these pids' trees.
    Follow(Vec<u32>),
    Comm(String),
    Cgroup(PathBuf, u64),
    System,
}

/// Validate the user's choice of what to trace and build the run spec.
pub fn run_spec(opts: &RecordOptions) -> Result<RunSpec, TracerError> {
    let filter_count = usize::from(!opts.pids.is_empty())
        + usize::from(opts.comm.is_some())
        + usize::from(opts.cgroup.is_some())
        + usize::from(opts.system);
    if filter_count > 1 {
        return Err(TracerError::Usage(
            "choose one of --pid, --comm, --cgroup and --system".into(),
        ));
    }
    if opts.command.is_empty() && filter_count == 0 {
        return Err(TracerError::Usage(
            "say what to trace: -- COMMAND..., --pid PID, --comm NAME, --cgroup PATH or --system"
                .into(),
        ));
    }
    let exe = match opts.command.first() {
        Some(c) => Some(find_executable(c).ok_or_else(|| {
            TracerError::Usage(format!("command not found or not executable: {c}"))
        })?),
        None => None,
    };
    for m in &opts.marker_binaries {
        if !m.is_file() {
            return Err(TracerError::Usage(format!(
                "--markers {}: no such file",
                m.display()
            )));
        }
    }
    check_usdt(opts.marker_binaries.iter().chain(exe.iter()))?;
    let phase_fn = resolve_phase_fn(opts.phase_fn.as_deref())?;
    for pid in &opts.pids {
        if !Path::new(&format!("/proc/{pid}")).exists() {
            return Err(TracerError::Usage(format!("no process with pid {pid}")));
        }
    }
    let filter = if opts.system {
        FilterSpec::System
    } else if let Some(c) = &opts.comm {
        if c.is_empty() || c.len() > 15 {
            return Err(TracerError::Usage(format!(
                "--comm {c:?}: a task name is 1 to 15 bytes (the kernel truncates longer names)"
            )));
        }
        FilterSpec::Comm(c.clone())
    } else if let Some(p) = &opts.cgroup {
        use std::os::unix::fs::MetadataExt;
        let md = std::fs::metadata(p)
            .map_err(|e| TracerError::Usage(format!("cgroup {}: {e}", p.display())))?;
        if !md.is_dir() {
            return Err(TracerError::Usage(format!(
                "cgroup {}: not a directory",
                p.display()
            )));
        }
        FilterSpec::Cgroup(p.clone(), md.ino())
    } else {
        FilterSpec::Follow(opts.pids.clone())
    };
    Ok(RunSpec {
        command: opts.command.clone(),
        exe,
        filter,
        duration: opts.duration,
        attach_json: opts.attach_json.clone(),
        marker_binaries: opts.marker_binaries.clone(),
        phase_fn,
        label: String::new(),
        n_values: Vec::new(),
        external: None,
    })
}

/// One command run within a run: what to run, with what environment, in which phase.
#[derive(Clone, Debug)]
pub struct Invocation {
    pub command: Vec<String>,
    pub env: Vec<(String, String)>,
    /// The N of a sweep's run (0 for a plain recording).
    pub n: u64,
    /// The case every process of this run that announces no phase itself is in, at `n`.
    pub case: Option<u32>,
}

impl Invocation {
    /// The phase set for the run's processes: (case, N).
    pub fn phase(&self) -> Option<(u32, u64)> {
        self.case.map(|c| (c, self.n))
    }
}

/// The command runs a run consists of: one, or for a sweep one per N and repeat.
pub(super) fn invocation_plan(spec: &RunSpec) -> Vec<Invocation> {
    match &spec.external {
        None => vec![Invocation {
            command: spec.command.clone(),
            env: Vec::new(),
            n: 0,
            case: None,
        }],
        Some(ext) => sweep_order(&ext.n_values, ext.repeat)
            .into_iter()
            .map(|n| Invocation {
                command: substitute_n(&spec.command, n),
                env: vec![("TRACER_N".into(), n.to_string())],
                n,
                case: (!ext.announces_phases).then_some(workloads::cases::CASE_COMMAND),
            })
            .collect(),
    }
}

/// The order a sweep runs its sizes in: `repeat` rounds, each size once per round.
/// With one round, the sizes as given. With more, each round in its own shuffled order, so
/// that a drift over the sweep (a warming cache, a neighbour's load, the page cache filling)
/// does not line up with N and bend the fit; and no round starts with the size the round
/// before ended with, so that no two runs of a size are back to back in one slow spell of
/// the machine (a 6.1 guest's two runs of N = 1000 in a row took 33 and 35 s where other
/// sweeps' took 21 and 22, and every syscall's time per call seemed to double with N). The
/// shuffle is seeded by the round and the list, so the same command line runs in the same
/// order.
pub fn sweep_order(n_values: &[u64], repeat: u32) -> Vec<u64> {
    let repeat = repeat.max(1);
    if repeat == 1 {
        return n_values.to_vec();
    }
    let mut seed = n_values.iter().fold(0x9e37_79b9_7f4a_7c15_u64, |h, &n| {
        (h ^ n).wrapping_mul(0x100_0000_01b3)
    });
    let mut next = || {
        // splitmix64
        seed = seed.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = seed;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    };
    let mut out = Vec::with_capacity(n_values.len() * repeat as usize);
    for _ in 0..repeat {
        // Drawn again while it starts where the last round ended: uniform over the orders
        // that do not (with two sizes or more, three in four draws or better succeed).
        let round = loop {
            let mut round = n_values.to_vec();
            for i in (1..round.len()).rev() {
                round.swap(i, (next() % (i as u64 + 1)) as usize);
            }
            if round.len() < 2 || out.last() != round.first() {
                break round;
            }
        };
        out.extend(round);
    }
    out
}

/// The command line for one N: every `{n}` (or `{N}`) replaced by N. clap turns `{n}` in
/// help text into a line break, so the help spells it `{N}`; both work.
pub fn substitute_n(template: &[String], n: u64) -> Vec<String> {
    template
        .iter()
        .map(|a| {
            a.replace("{n}", &n.to_string())
                .replace("{N}", &n.to_string())
        })
        .collect()
}

/// Does an argument hold the N placeholder?
pub fn has_n_placeholder(arg: &str) -> bool {
    arg.contains("{n}") || arg.contains("{N}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rounds_run_every_size_once_each_in_its_own_order() {
        let ns = [1, 10, 100, 1000, 4000];
        assert_eq!(sweep_order(&ns, 1), ns);
        let order = sweep_order(&ns, 3);
        assert_eq!(order.len(), 15);
        let rounds: Vec<&[u64]> = order.chunks(5).collect();
        for r in &rounds {
            let mut sorted = r.to_vec();
            sorted.sort_unstable();
            assert_eq!(sorted, ns, "each round runs each size once: {order:?}");
        }
        assert!(
            !(rounds[0] == rounds[1] && rounds[1] == rounds[2]),
            "the rounds are shuffled: {order:?}"
        );
        assert_eq!(
            sweep_order(&ns, 3),
            order,
            "the same command line, the same order"
        );
        // No size runs twice in a row, whatever the list and the rounds.
        for len in 2..8u64 {
            for first in [1u64, 10, 250] {
                let ns: Vec<u64> = (0..len)
                    .map(|i| first * 10u64.pow(i as u32 % 4) + i)
                    .collect();
                for repeat in 2..6 {
                    let order = sweep_order(&ns, repeat);
                    assert!(
                        order.windows(2).all(|w| w[0] != w[1]),
                        "{ns:?} x{repeat}: {order:?}"
                    );
                    assert_eq!(order.len(), ns.len() * repeat as usize);
                }
            }
        }
        assert_eq!(sweep_order(&[7], 3), [7, 7, 7]);
    }

    #[test]
    fn both_spellings_of_the_n_placeholder_are_replaced() {
        let t: Vec<String> = ["./bench", "{n}", "--size={N}", "x{n}y"]
            .iter()
            .map(|s| s.to_string())
            .collect();
        assert_eq!(substitute_n(&t, 42), ["./bench", "42", "--size=42", "x42y"]);
        assert!(has_n_placeholder("{N}") && !has_n_placeholder("n"));
    }
}
