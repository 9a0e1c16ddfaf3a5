//! Workload case ids, shared with the tracer: a phase marker carries the id, the tracer's
//! tables carry the name. Ids are stable (saved runs refer to them); add, never renumber.

/// (id, name, what it measures)
pub const CASES: &[(u32, &str, &str)] = &[
    (
        1,
        "waitpid-pid",
        "fork a child and waitpid() it, with N idle children alive",
    ),
    (
        2,
        "waitpid-any",
        "fork a child and waitpid(-1), with N idle children alive",
    ),
    (
        3,
        "waitid-pidfd",
        "fork a child and waitid(P_PIDFD), with N idle children alive",
    ),
    (
        4,
        "waitpid-wnohang",
        "waitpid(-1, WNOHANG) with nothing to reap, N idle children alive",
    ),
    (10, "spawn", "fork+exit+wait with N extra VMAs mapped"),
    (
        11,
        "spawn-wipeonfork",
        "fork+exit+wait with N extra MADV_WIPEONFORK VMAs mapped",
    ),
    (
        20,
        "sysvipc-shm",
        "read /proc/sysvipc/shm with N shm segments",
    ),
    (
        21,
        "sysvipc-msg",
        "read /proc/sysvipc/msg with N message queues",
    ),
    (
        22,
        "sysvipc-shm-sparse",
        "read /proc/sysvipc/shm with N shm segments at sparse ids",
    ),
    (30, "mempolicy-page", "touch N fresh anonymous pages"),
    (31, "mempolicy-brk", "grow and shrink the heap by N pages"),
    (
        32,
        "mempolicy-fork",
        "fork+exit+wait after touching N pages",
    ),
    (
        33,
        "mempolicy-exec",
        "fork+exec+wait after touching N pages",
    ),
    (40, "getpid-syscall", "N raw getpid() syscalls"),
    (
        41,
        "getpid-cached",
        "N getpid() from a MADV_WIPEONFORK cache",
    ),
    (90, "calibration", "the tracer's own calibration workload"),
    (
        CASE_COMMAND,
        "command",
        "one run of the user's command at N (tracer sweep -- CMD {n})",
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
        .find(|(i, _, _)| *i == id)
        .map(|(_, n, _)| n.to_string())
        .unwrap_or_else(|| format!("case{id}"))
}

/// Id of a case name.
pub fn case_id(name: &str) -> Option<u32> {
    CASES
        .iter()
        .find(|(_, n, _)| *n == name)
        .map(|(i, _, _)| *i)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_and_names_are_unique() {
        for (i, (id, name, _)) in CASES.iter().enumerate() {
            assert_ne!(*id, 0, "0 is reserved for 'unphased'");
            for (id2, name2, _) in &CASES[i + 1..] {
                assert_ne!(id, id2);
                assert_ne!(name, name2);
            }
            assert_eq!(case_id(name), Some(*id));
            assert_eq!(case_name(*id), *name);
        }
        assert_eq!(case_name(0), "unphased");
        assert_eq!(case_name(12345), "case12345");
    }
}
