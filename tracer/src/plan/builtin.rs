//! The built-in targets: the kernel functions of the seed threads, getpid (the tracer's own
//! cost per call) and the page allocations counted beside get_task_policy, each with its
//! ladder of plans, its calibration and the frames of its loop.

use super::{Calibration, Expect, FnMech, Method, Plan, Target, f};

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
