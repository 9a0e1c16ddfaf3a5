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
}

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

pub const DO_WAIT: Target = Target {
    name: "do_wait",
    why: "waitpid() with N children walked the whole children list before 5.13; \
          waitpid(-1)/P_ALL/P_PGID still do",
    plans: &[
        f("fentry", FnMech::Fentry, &["do_wait"], "do_wait itself"),
        f("kprobe", FnMech::Kprobe, &["do_wait"], "do_wait itself"),
        f(
            "callers-fentry",
            FnMech::Fentry,
            &["kernel_wait4", "kernel_waitid"],
            "the out-of-line callers of an inlined do_wait (wait4/waitid bodies)",
        ),
        f(
            "callers-kprobe",
            FnMech::Kprobe,
            &["kernel_wait4", "kernel_waitid"],
            "the out-of-line callers of an inlined do_wait (wait4/waitid bodies)",
        ),
        Plan {
            name: "syscall-bracket",
            method: Method::Syscalls {
                syscalls: &["wait4", "waitid"],
                fd_prefix: None,
            },
            note: "the whole wait4/waitid syscall around do_wait",
        },
    ],
    calibration: Calibration::ForkWait { count: 16 },
    expect: expect_fork_wait,
    default: true,
    loops: &[
        ("wait_consider_task", "the walk over the children list"),
        ("do_wait_thread", "the walk over the children list"),
        ("ptrace_do_wait", "the walk over the ptraced children list"),
        ("__do_wait", "the walk over the children list"),
        ("do_wait", "the walk over the children list"),
    ],
    trips_of: &["wait_consider_task"],
};

pub const DUP_MMAP: Target = Target {
    name: "dup_mmap",
    why: "fork cost grows with the number of VMAs; maple-tree __mt_dup (6.8) made it ~1.5x \
          cheaper at 6400 VMAs",
    plans: &[
        f("fentry", FnMech::Fentry, &["dup_mmap"], "dup_mmap itself"),
        f("kprobe", FnMech::Kprobe, &["dup_mmap"], "dup_mmap itself"),
        f(
            "caller-dup_mm-fentry",
            FnMech::Fentry,
            &["dup_mm"],
            "dup_mm: dup_mmap plus mm allocation",
        ),
        f(
            "caller-dup_mm-kprobe",
            FnMech::Kprobe,
            &["dup_mm"],
            "dup_mm: dup_mmap plus mm allocation",
        ),
        f(
            "caller-copy_process-fentry",
            FnMech::Fentry,
            &["copy_process"],
            "copy_process: all of fork's copying, of which dup_mmap is the per-VMA part",
        ),
        f(
            "caller-copy_process-kprobe",
            FnMech::Kprobe,
            &["copy_process"],
            "copy_process: all of fork's copying, of which dup_mmap is the per-VMA part",
        ),
        Plan {
            name: "syscall-bracket",
            method: Method::Syscalls {
                syscalls: &["clone", "clone3", "fork", "vfork"],
                fd_prefix: None,
            },
            note: "the whole fork/clone syscall in the parent",
        },
    ],
    calibration: Calibration::ForkWait { count: 16 },
    expect: expect_fork_wait,
    default: true,
    loops: &[
        (
            "__mt_dup",
            "the maple-tree copy of the VMA tree in dup_mmap",
        ),
        ("mas_*", "maple-tree work per VMA in dup_mmap"),
        ("mt_*", "maple-tree work per VMA in dup_mmap"),
        ("mtree_*", "maple-tree work per VMA in dup_mmap"),
        ("vma_iter_*", "maple-tree work per VMA in dup_mmap"),
        (
            "vm_area_dup",
            "copying each vm_area_struct, per VMA in dup_mmap",
        ),
        (
            "anon_vma_fork",
            "cloning each VMA's anon_vma chain, per VMA in dup_mmap",
        ),
        (
            "copy_page_range",
            "copying each VMA's page tables, per VMA in dup_mmap",
        ),
        ("dup_mmap", "the per-VMA loop in dup_mmap"),
        ("dup_mm", "the per-VMA loop in dup_mmap"),
    ],
    trips_of: &["vm_area_dup"],
};

pub const SYSVIPC_FIND_IPC: Target = Target {
    name: "sysvipc_find_ipc",
    why: "reading /proc/sysvipc/* with N segments was O(N^2) before 5.15, O(N + highest id) \
          until 6.1",
    plans: &[
        f(
            "fentry",
            FnMech::Fentry,
            &["sysvipc_find_ipc"],
            "sysvipc_find_ipc itself",
        ),
        f(
            "kprobe",
            FnMech::Kprobe,
            &["sysvipc_find_ipc"],
            "sysvipc_find_ipc itself",
        ),
        f(
            "callers-fentry",
            FnMech::Fentry,
            &["sysvipc_proc_start", "sysvipc_proc_next"],
            "the seq_file start/next callbacks that contain the inlined sysvipc_find_ipc",
        ),
        f(
            "callers-kprobe",
            FnMech::Kprobe,
            &["sysvipc_proc_start", "sysvipc_proc_next"],
            "the seq_file start/next callbacks that contain the inlined sysvipc_find_ipc",
        ),
        Plan {
            name: "syscall-bracket",
            method: Method::Syscalls {
                syscalls: &["read"],
                fd_prefix: Some("/proc/sysvipc/"),
            },
            note: "read() syscalls on files opened under /proc/sysvipc/",
        },
    ],
    calibration: Calibration::SysvipcRead {
        segments: 8,
        reads: 4,
    },
    expect: expect_sysvipc,
    default: true,
    loops: &[
        (
            "idr_get_next",
            "the id scan in /proc/sysvipc (sysvipc_find_ipc)",
        ),
        (
            "idr_get_next_ul",
            "the id scan in /proc/sysvipc (sysvipc_find_ipc)",
        ),
        (
            "radix_tree_next_chunk",
            "the id scan in /proc/sysvipc (sysvipc_find_ipc)",
        ),
        (
            "idr_find",
            "the id scan in /proc/sysvipc (sysvipc_find_ipc)",
        ),
        ("sysvipc_find_ipc", "the id scan in /proc/sysvipc"),
        ("sysvipc_proc_start", "the id scan in /proc/sysvipc"),
        ("sysvipc_proc_next", "the id scan in /proc/sysvipc"),
    ],
    // Up to 5.15 each position up to the next id is looked up; since, one idr_get_next per
    // call (no loop to count).
    trips_of: &["idr_find"],
};

pub const GET_TASK_POLICY: Target = Target {
    name: "get_task_policy",
    why: "the mempolicy refcount change measured with aim9 page/brk/fork/exec tests, with and \
          without a /proc/PID/status reader",
    plans: &[
        f(
            "fentry",
            FnMech::Fentry,
            &["get_task_policy"],
            "get_task_policy itself",
        ),
        f(
            "kprobe",
            FnMech::Kprobe,
            &["get_task_policy"],
            "get_task_policy itself",
        ),
        f(
            "callers-6.10-fentry",
            FnMech::Fentry,
            &["vma_alloc_folio_noprof", "alloc_pages_noprof"],
            "the page allocators that inline get_task_policy (one call per page)",
        ),
        f(
            "callers-6.10-kprobe",
            FnMech::Kprobe,
            &["vma_alloc_folio_noprof", "alloc_pages_noprof"],
            "the page allocators that inline get_task_policy (one call per page)",
        ),
        f(
            "callers-6.1-fentry",
            FnMech::Fentry,
            &["vma_alloc_folio", "alloc_pages"],
            "the page allocators that inline get_task_policy (one call per page)",
        ),
        f(
            "callers-6.1-kprobe",
            FnMech::Kprobe,
            &["vma_alloc_folio", "alloc_pages"],
            "the page allocators that inline get_task_policy (one call per page)",
        ),
        f(
            "callers-5.10-fentry",
            FnMech::Fentry,
            &["alloc_pages_vma", "alloc_pages_current"],
            "the page allocators that inline get_task_policy (one call per page)",
        ),
        f(
            "callers-5.10-kprobe",
            FnMech::Kprobe,
            &["alloc_pages_vma", "alloc_pages_current"],
            "the page allocators that inline get_task_policy (one call per page)",
        ),
        Plan {
            name: "page-alloc-count",
            method: Method::Count {
                category: "kmem",
                event: "mm_page_alloc",
            },
            note: "counts page allocations of the traced processes (each consults the task \
                   policy); no durations",
        },
    ],
    calibration: Calibration::TouchPages { pages: 256 },
    expect: expect_pages,
    default: true,
    loops: &[],
    trips_of: &[],
};

/// Not a mission target: the cheapest syscall, used to measure what a probe costs per call
/// (`--targets getpid` with `workloads getpid`). Also shows what adding a target takes.
pub const GETPID: Target = Target {
    name: "getpid",
    why: "calibration: the cheapest syscall, to measure the tracer's own cost per call",
    plans: &[
        f(
            "fentry",
            FnMech::Fentry,
            &["__x64_sys_getpid", "__arm64_sys_getpid"],
            "the getpid syscall body",
        ),
        f(
            "kprobe",
            FnMech::Kprobe,
            &["__x64_sys_getpid", "__arm64_sys_getpid"],
            "the getpid syscall body",
        ),
        Plan {
            name: "syscall-bracket",
            method: Method::Syscalls {
                syscalls: &["getpid"],
                fd_prefix: None,
            },
            note: "the getpid syscall at its tracepoints",
        },
    ],
    calibration: Calibration::Getpid { count: 1000 },
    expect: expect_getpid,
    default: false,
    loops: &[],
    trips_of: &[],
};

/// Not a mission target: page allocations of the traced processes, counted at the
/// `kmem:mm_page_alloc` tracepoint. Traced beside get_task_policy it checks that a stand-in
/// plan sees one call per page (`--targets get_task_policy,page_alloc`).
pub const PAGE_ALLOC: Target = Target {
    name: "page_alloc",
    why: "reference count for get_task_policy's stand-ins: one page allocation per fault",
    plans: &[Plan {
        name: "page-alloc-count",
        method: Method::Count {
            category: "kmem",
            event: "mm_page_alloc",
        },
        note: "page allocations of the traced processes",
    }],
    calibration: Calibration::TouchPages { pages: 256 },
    expect: expect_pages,
    default: false,
    loops: &[],
    trips_of: &[],
};

/// The built-in targets, in target-index order (the index is the kernel-side target id).
pub const TARGETS: &[Target] = &[
    DO_WAIT,
    DUP_MMAP,
    SYSVIPC_FIND_IPC,
    GET_TASK_POLICY,
    GETPID,
    PAGE_ALLOC,
];

fn expect_getpid(_plan: &Plan, cal: Calibration) -> Expect {
    match cal {
        Calibration::Getpid { count } => Expect::Exactly(count as u64),
        _ => Expect::Between {
            min: 1,
            max: u64::MAX,
        },
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

fn expect_fork_wait(_plan: &Plan, cal: Calibration) -> Expect {
    match cal {
        // One do_wait / one dup_mmap per fork+wait, whatever the plan.
        Calibration::ForkWait { count } => Expect::Exactly(count as u64),
        _ => Expect::Between {
            min: 1,
            max: u64::MAX,
        },
    }
}

fn expect_sysvipc(plan: &Plan, cal: Calibration) -> Expect {
    let Calibration::SysvipcRead { segments, reads } = cal else {
        return Expect::Between {
            min: 1,
            max: u64::MAX,
        };
    };
    let (segments, reads) = (segments as u64, reads as u64);
    match plan.method {
        // The id scan runs at least once per record read; start/next run per record too.
        // Other processes' segments may exist, hence no tight upper bound on records.
        Method::Functions { .. } => Expect::Between {
            min: reads * segments,
            max: u64::MAX,
        },
        // At least one read() returning data and one returning EOF per full read.
        _ => Expect::Between {
            min: 2 * reads,
            max: reads * (segments + 64),
        },
    }
}

fn expect_pages(_plan: &Plan, cal: Calibration) -> Expect {
    let Calibration::TouchPages { pages } = cal else {
        return Expect::Between {
            min: 1,
            max: u64::MAX,
        };
    };
    // One allocation per touched page, plus page tables and the process's own start-up; a
    // probe that fires far more often is not specific to the page path.
    let pages = pages as u64;
    Expect::Between {
        min: pages,
        max: pages * 4 + 512,
    }
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
