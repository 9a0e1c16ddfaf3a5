//! The attach-plan table: for each traced target, the ordered ways to measure it. This is data:
//! adding a target is one more `Target` entry (and, if no existing calibration exercises it,
//! a calibration kind). The entry also names the frames of the target's loop, which the
//! offline root-cause analysis reads; this module is plain data with no imports, so analysis
//! can use it without pulling in the attach code.
//!
//! Plans are tried in order and the first that attaches (and, with verification, fires as
//! often as its calibration says it must) is used:
//!
//! | plan kind | mechanism | works on | may fail because |
//! | --- | --- | --- | --- |
//! | `fentry` | fentry/fexit trampolines | 5.5+ with BTF (`/sys/kernel/btf/vmlinux`) | function inlined (absent from BTF), tracing programs refused (EPERM: lockdown, restricted BPF), notrace function |
//! | `kprobe` | kprobe/kretprobe | any kernel with CONFIG_KPROBES | no kprobe PMU / kprobes disabled, symbol absent (inlined), blacklisted |
//! | `callers-*` / `callees-*` | fentry or kprobe on the nearest out-of-line callers or callees | as above | same; measures a superset or part of the target, said in the plan note |
//! | `syscall-bracket` | `syscalls:sys_enter_X`/`sys_exit_X` tracepoints | CONFIG_FTRACE_SYSCALLS (all distro kernels) | measures the whole syscall, not just the function |
//! | `*-count` | one tracepoint, counted | any kernel with the event | counts only: no durations |
//!
//! A symbol being present does not prove a probe on it sees the calls: the compiler may have
//! inlined copies into the hot callers and kept one out-of-line copy for cold ones
//! (`get_task_policy` on Debian 5.10/6.1/6.12 fires 0 times for 1000 page faults). That is
//! why plans are verified by calibration (see `calibrate.rs`).

mod builtin;

pub use builtin::*;

/// A kernel function mechanism.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum FnMech {
    Fentry,
    Kprobe,
}

impl FnMech {
    pub fn label(self) -> &'static str {
        match self {
            FnMech::Fentry => "fentry/fexit",
            FnMech::Kprobe => "kprobe/kretprobe",
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Method {
    /// Time calls of every present function in `symbols` (at least one must be present).
    Functions {
        mech: FnMech,
        symbols: &'static [&'static str],
    },
    /// Time syscalls: enter/exit tracepoints of every syscall in `syscalls` that exists.
    /// With `fd_prefix`, only calls on file descriptors opened from a path with that prefix
    /// (the first argument of the syscall must be the fd).
    Syscalls {
        syscalls: &'static [&'static str],
        fd_prefix: Option<&'static str>,
    },
    /// Count one tracepoint for the traced processes (no durations).
    Count {
        category: &'static str,
        event: &'static str,
    },
    /// Time the calls of `callee` from its callers' side: kprobes on each direct call of it in
    /// the code of `callers` and on the instruction after, for a callee that cannot be probed
    /// itself (`kernel::callsites`). Calls from elsewhere are not seen.
    CallSites {
        callers: &'static [&'static str],
        callee: &'static str,
    },
}

/// How [`Method::CallSites`] is labelled.
pub const CALL_SITES_LABEL: &str = "kprobes on its call sites";

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Plan {
    /// Short name, unique within the target; used by `--plan TARGET=NAME`.
    pub name: &'static str,
    pub method: Method,
    /// What the plan measures relative to the target.
    pub note: &'static str,
}

/// What a calibration does, so a plan can be checked against a known number of calls.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Calibration {
    /// fork() `count` children that _exit(0) at once, waitpid() each.
    ForkWait { count: u32 },
    /// Create `segments` SysV shm segments and read /proc/sysvipc/shm fully `reads` times.
    SysvipcRead { segments: u32, reads: u32 },
    /// Touch `pages` fresh anonymous pages.
    TouchPages { pages: u32 },
    /// Call the raw getpid syscall `count` times.
    Getpid { count: u32 },
    /// No known workload makes a known number of calls (a function the user named): the
    /// plan is checked after the run instead, by whether it saw calls at all.
    None,
}

impl Calibration {
    pub fn describe(self) -> String {
        match self {
            Calibration::ForkWait { count } => format!("fork+exit+waitpid x{count}"),
            Calibration::SysvipcRead { segments, reads } => {
                format!("{reads} full reads of /proc/sysvipc/shm with {segments} segments")
            }
            Calibration::TouchPages { pages } => format!("write to {pages} fresh anonymous pages"),
            Calibration::Getpid { count } => format!("{count} raw getpid() syscalls"),
            Calibration::None => "none (a function without a known calibration)".into(),
        }
    }
}

/// How many calls a plan must count during its target's calibration.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Expect {
    /// Exactly this many (one call per operation).
    Exactly(u64),
    /// Between `min` and `max` (inclusive).
    Between { min: u64, max: u64 },
}

impl Expect {
    pub fn check(self, observed: u64) -> bool {
        match self {
            Expect::Exactly(n) => observed == n,
            Expect::Between { min, max } => (min..=max).contains(&observed),
        }
    }

    /// Did the probe see fewer calls than the calibration made?
    pub fn too_low(self, observed: u64) -> bool {
        match self {
            Expect::Exactly(n) => observed < n,
            Expect::Between { min, .. } => observed < min,
        }
    }

    pub fn describe(self) -> String {
        match self {
            Expect::Exactly(n) => format!("exactly {n}"),
            Expect::Between { min, max } if max == u64::MAX => format!("at least {min}"),
            Expect::Between { min, max } => format!("{min}..={max}"),
        }
    }
}

#[derive(Clone, Copy, Debug)]
pub struct Target {
    pub name: &'static str,
    /// The mailing-list case this target comes from.
    pub why: &'static str,
    pub plans: &'static [Plan],
    pub calibration: Calibration,
    /// How many calls each plan must count during the calibration.
    pub expect: fn(plan: &Plan, cal: Calibration) -> Expect,
    /// Traced when no targets are named (calibration-only targets are opt-in).
    pub default: bool,
    /// The frames of the target's kernel path that are (part of) the loop its time grows
    /// with, and what that loop is in plain words: `(frame, what)`, `frame` a function name
    /// or `prefix*`. Root cause names a culprit by these; the first match wins.
    pub loops: &'static [(&'static str, &'static str)],
    /// Functions the target's loop calls once per trip (a child considered, a VMA copied, an
    /// id looked up). A sweep of the target's workload counts their calls per target call in
    /// a loop-count pass (`sweep::loops`), where the kernel lets them be probed.
    pub trips_of: &'static [&'static str],
}

const fn f(
    name: &'static str,
    mech: FnMech,
    symbols: &'static [&'static str],
    note: &'static str,
) -> Plan {
    Plan {
        name,
        method: Method::Functions { mech, symbols },
        note,
    }
}

pub fn target_by_name(name: &str) -> Option<(usize, &'static Target)> {
    TARGETS.iter().enumerate().find(|(_, t)| t.name == name)
}

/// What the loop behind `frame` is, from the built-in targets' [`Target::loops`] (compiler
/// clone suffixes such as `.isra.0` ignored).
pub fn known_loop(frame: &str) -> Option<&'static str> {
    let base = frame.split('.').next().unwrap_or(frame);
    TARGETS
        .iter()
        .flat_map(|t| t.loops)
        .find_map(|(pat, what)| {
            let hit = match pat.strip_suffix('*') {
                Some(prefix) => base.starts_with(prefix),
                None => base == *pat,
            };
            hit.then_some(*what)
        })
}

/// Why a function the user named (not a built-in target) is traced.
pub const ARBITRARY_WHY: &str = "named on the command line";

/// Is `name` a kernel function name (or a compiler clone's, `foo.isra.0`)?
pub fn valid_function_name(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= 128
        && !name.starts_with(|c: char| c.is_ascii_digit() || c == '.')
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '.')
}

/// The plan ladder of any kernel function that is not a built-in target: fentry/fexit, then
/// kprobe/kretprobe (which also takes a compiler clone such as `name.isra.0` when the plain
/// name is absent). Built-in targets keep their calibrated ladders; this one is checked
/// after the run by whether it saw calls (`Calibration::None`).
///
/// The table is `'static` like the built-ins', so a named function is leaked once per
/// process: a handful of small allocations that live exactly as long as the run.
pub fn arbitrary_target(name: &str) -> &'static Target {
    let name: &'static str = Box::leak(name.to_string().into_boxed_str());
    let symbols: &'static [&'static str] = Box::leak(Box::new([name]));
    let plans: &'static [Plan] = Box::leak(Box::new([
        f("fentry", FnMech::Fentry, symbols, "the function itself"),
        f(
            "kprobe",
            FnMech::Kprobe,
            symbols,
            "the function itself (or its compiler clone)",
        ),
    ]));
    leaked_target(name, plans)
}

/// A function counted per call of `outer` (a loop's trips): the ladder of
/// [`arbitrary_target`], then, for a function that cannot be probed itself, its calls from
/// the code of `outer`'s functions ([`Method::CallSites`]).
pub fn trip_target(name: &str, outer: &Target) -> &'static Target {
    let base = arbitrary_target(name);
    let mut callers: Vec<&'static str> = Vec::new();
    for p in outer.plans {
        if let Method::Functions { symbols, .. } = p.method {
            for s in symbols {
                if !callers.contains(s) {
                    callers.push(s);
                }
            }
        }
    }
    if callers.is_empty() {
        return base;
    }
    let callers: &'static [&'static str] = Box::leak(callers.into_boxed_slice());
    let mut plans = base.plans.to_vec();
    plans.push(Plan {
        name: "call-sites",
        method: Method::CallSites {
            callers,
            callee: base.name,
        },
        note: "its calls from the loop's function, timed at each call instruction",
    });
    leaked_target(base.name, Box::leak(plans.into_boxed_slice()))
}

fn leaked_target(name: &'static str, plans: &'static [Plan]) -> &'static Target {
    Box::leak(Box::new(Target {
        name,
        why: ARBITRARY_WHY,
        plans,
        calibration: Calibration::None,
        expect: |_, _| Expect::Between {
            min: 1,
            max: u64::MAX,
        },
        default: false,
        loops: &[],
        trips_of: &[],
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plan_names_are_unique_per_target_and_fallbacks_end_in_tracepoints() {
        for t in TARGETS {
            for (i, p) in t.plans.iter().enumerate() {
                assert!(
                    t.plans[i + 1..].iter().all(|q| q.name != p.name),
                    "{} {}",
                    t.name,
                    p.name
                );
            }
            let last = t.plans.last().unwrap();
            assert!(
                !matches!(last.method, Method::Functions { .. }),
                "{}: the last resort must not need function probes",
                t.name
            );
            if t.default {
                // Mission targets try the best mechanism first.
                assert!(matches!(
                    t.plans[0].method,
                    Method::Functions {
                        mech: FnMech::Fentry,
                        ..
                    }
                ));
            }
        }
    }

    /// A per-trip function is probed itself where it can be, else at its calls in the code of
    /// the loop's function (every function the outer target's plans probe).
    #[test]
    fn a_trip_function_falls_back_to_its_call_sites_in_the_loops_function() {
        let t = trip_target("idr_find", &SYSVIPC_FIND_IPC);
        assert_eq!(t.name, "idr_find");
        let names: Vec<&str> = t.plans.iter().map(|p| p.name).collect();
        assert_eq!(names, ["fentry", "kprobe", "call-sites"]);
        let Method::CallSites { callers, callee } = t.plans[2].method else {
            panic!("{:?}", t.plans[2]);
        };
        assert_eq!(callee, "idr_find");
        assert!(callers.contains(&"sysvipc_find_ipc"), "{callers:?}");
        assert_eq!(
            callers.len(),
            callers
                .iter()
                .collect::<std::collections::BTreeSet<_>>()
                .len()
        );
        // An outer target probed by tracepoints only has no code of its own to look in.
        let only_syscalls = Target {
            plans: &SYSVIPC_FIND_IPC.plans[SYSVIPC_FIND_IPC.plans.len() - 1..],
            ..*arbitrary_target("x")
        };
        assert_eq!(trip_target("idr_find", &only_syscalls).plans.len(), 2);
    }

    #[test]
    fn known_loop_table() {
        assert_eq!(
            known_loop("mas_store_gfp"),
            Some("maple-tree work per VMA in dup_mmap")
        );
        assert_eq!(
            known_loop("wait_consider_task.isra.0"),
            Some("the walk over the children list")
        );
        assert_eq!(known_loop("schedule"), None);
    }

    #[test]
    fn expectations_follow_the_calibration() {
        let cal = DO_WAIT.calibration;
        let e = (DO_WAIT.expect)(&DO_WAIT.plans[0], cal);
        assert!(e.check(16) && !e.check(15) && !e.check(17));
        let cal = GET_TASK_POLICY.calibration;
        let e = (GET_TASK_POLICY.expect)(&GET_TASK_POLICY.plans[1], cal);
        assert!(
            !e.check(0),
            "a probe that never fires must fail verification"
        );
        assert!(e.check(256) && e.check(300));
        let cal = SYSVIPC_FIND_IPC.calibration;
        let e = (SYSVIPC_FIND_IPC.expect)(&SYSVIPC_FIND_IPC.plans[4], cal);
        assert!(e.check(8) && !e.check(1));
    }

    #[test]
    fn targets_fit_the_kernel_side_limits() {
        assert!(TARGETS.len() <= tracer_ebpf::MAX_TARGETS);
        for t in TARGETS {
            for p in t.plans {
                if let Method::Functions { symbols, .. } = p.method {
                    assert!(symbols.len() <= tracer_ebpf::FN_SLOTS);
                }
            }
        }
    }
}
