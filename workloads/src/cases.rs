//! Workload case ids, shared with the tracer: a phase marker carries the id, the tracer's
//! tables carry the name. Ids are stable (saved runs refer to them); add, never renumber.

// The case names, each typed once: the workloads' `--variant` values, their `case()` and the
// table below all use these.
pub const WAITPID_PID: &str = "waitpid-pid";
pub const WAITPID_ANY: &str = "waitpid-any";
pub const WAITID_PIDFD: &str = "waitid-pidfd";
pub const WAITPID_WNOHANG: &str = "waitpid-wnohang";
pub const SPAWN: &str = "spawn";
pub const SPAWN_WIPEONFORK: &str = "spawn-wipeonfork";
pub const SYSVIPC_SHM: &str = "sysvipc-shm";
pub const SYSVIPC_MSG: &str = "sysvipc-msg";
pub const SYSVIPC_SHM_SPARSE: &str = "sysvipc-shm-sparse";
pub const MEMPOLICY_PAGE: &str = "mempolicy-page";
pub const MEMPOLICY_BRK: &str = "mempolicy-brk";
pub const MEMPOLICY_FORK: &str = "mempolicy-fork";
pub const MEMPOLICY_EXEC: &str = "mempolicy-exec";
pub const GETPID_SYSCALL: &str = "getpid-syscall";
pub const GETPID_CACHED: &str = "getpid-cached";
pub const PIPE_READ: &str = "pipe-read";

/// One workload case.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Case {
    pub id: u32,
    pub name: &'static str,
    /// What one phase of the case measures.
    pub what: &'static str,
    /// The tracer target the case exists for (the mailing-list thread it reproduces): its
    /// findings lead a report, other targets traced during the case are incidental. None
    /// when every traced target is the point (the user's own command).
    pub target: Option<&'static str>,
}

const fn case(
    id: u32,
    name: &'static str,
    what: &'static str,
    target: Option<&'static str>,
) -> Case {
    Case {
        id,
        name,
        what,
        target,
    }
}

pub const CASES: &[Case] = &[
    case(
        1,
        WAITPID_PID,
        "fork a child and waitpid() it, with N idle children alive",
        Some("do_wait"),
    ),
    case(
        2,
        WAITPID_ANY,
        "fork a child and waitpid(-1), with N idle children alive",
        Some("do_wait"),
    ),
    case(
        3,
        WAITID_PIDFD,
        "fork a child and waitid(P_PIDFD), with N idle children alive",
        Some("do_wait"),
    ),
    case(
        4,
        WAITPID_WNOHANG,
        "waitpid(-1, WNOHANG) with nothing to reap, N idle children alive",
        Some("do_wait"),
    ),
    case(
        10,
        SPAWN,
        "fork+exit+wait with N extra VMAs mapped",
        Some("dup_mmap"),
    ),
    case(
        11,
        SPAWN_WIPEONFORK,
        "fork+exit+wait with N extra MADV_WIPEONFORK VMAs mapped",
        Some("dup_mmap"),
    ),
    case(
        20,
        SYSVIPC_SHM,
        "read /proc/sysvipc/shm with N shm segments",
        Some("sysvipc_find_ipc"),
    ),
    case(
        21,
        SYSVIPC_MSG,
        "read /proc/sysvipc/msg with N message queues",
        Some("sysvipc_find_ipc"),
    ),
    case(
        22,
        SYSVIPC_SHM_SPARSE,
        "read /proc/sysvipc/shm with N shm segments at sparse ids",
        Some("sysvipc_find_ipc"),
    ),
    case(
        30,
        MEMPOLICY_PAGE,
        "touch N fresh anonymous pages",
        Some("get_task_policy"),
    ),
    case(
        31,
        MEMPOLICY_BRK,
        "grow and shrink the heap by N pages",
        Some("get_task_policy"),
    ),
    case(
        32,
        MEMPOLICY_FORK,
        "fork+exit+wait after touching N pages",
        Some("get_task_policy"),
    ),
    case(
        33,
        MEMPOLICY_EXEC,
        "fork+exec+wait after touching N pages",
        Some("get_task_policy"),
    ),
    case(
        40,
        GETPID_SYSCALL,
        "N raw getpid() syscalls",
        Some("getpid"),
    ),
    case(
        41,
        GETPID_CACHED,
        "N getpid() from a MADV_WIPEONFORK cache",
        Some("getpid"),
    ),
    case(
        42,
        PIPE_READ,
        "N one-byte read()s from a pipe kept full",
        None,
    ),
    case(
        90,
        "calibration",
        "the tracer's own calibration workload",
        None,
    ),
    case(
        CASE_COMMAND,
        "command",
        "one run of the user's command at N (tracer sweep -- CMD {n})",
        None,
    ),
];

/// The case of an external sweep: each run of the user's command is a phase of this case.
pub const CASE_COMMAND: u32 = 100;

/// Name of a case id; unknown ids (another program's) get a stable generic name.
pub fn case_name(id: u32) -> String {
    if id == 0 {
        return "unphased".to_string();
    }
    CASES
        .iter()
        .find(|c| c.id == id)
        .map(|c| c.name.to_string())
        .unwrap_or_else(|| format!("case{id}"))
}

/// Id of a case name.
pub fn case_id(name: &str) -> Option<u32> {
    CASES.iter().find(|c| c.name == name).map(|c| c.id)
}

/// Is `target` what case `name` exists for? True for a case that declares no target (the
/// user's command, another program's case ids, spans outside any phase): there every traced
/// target is the point.
pub fn is_thread_target(name: &str, target: &str) -> bool {
    match CASES.iter().find(|c| c.name == name).and_then(|c| c.target) {
        Some(t) => t == target,
        None => true,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_and_names_are_unique() {
        for (i, c) in CASES.iter().enumerate() {
            assert_ne!(c.id, 0, "0 is reserved for 'unphased'");
            for c2 in &CASES[i + 1..] {
                assert_ne!(c.id, c2.id);
                assert_ne!(c.name, c2.name);
            }
            assert_eq!(case_id(c.name), Some(c.id));
            assert_eq!(case_name(c.id), c.name);
        }
        assert_eq!(case_name(0), "unphased");
        assert_eq!(case_name(12345), "case12345");
    }

    #[test]
    fn each_case_names_the_target_it_exists_for() {
        assert!(is_thread_target("waitpid-pid", "do_wait"));
        assert!(!is_thread_target("waitpid-pid", "dup_mmap"));
        assert!(is_thread_target("spawn", "dup_mmap"));
        assert!(!is_thread_target("spawn", "do_wait"));
        assert!(is_thread_target("sysvipc-msg", "sysvipc_find_ipc"));
        // The user's command: every target they named is the point.
        assert!(is_thread_target("command", "copy_process"));
        assert!(is_thread_target("unphased", "do_wait"));
        assert!(is_thread_target("case12345", "do_wait"));
    }
}
