//! The workloads the `workloads` binary runs and `tracer sweep` knows, one row each: name,
//! target, what one phase does, and the N lists used when none is given.

/// One workload (a subcommand of the `workloads` binary).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Workload {
    pub name: &'static str,
    /// The tracer target whose mailing-list thread it reproduces; None for getpid, which
    /// calibrates the probes' cost rather than reproducing a thread.
    pub target: Option<&'static str>,
    /// What it does, in a few words (`tracer sweep --help`).
    pub about: &'static str,
    /// `workloads NAME` without --n.
    pub default_n: &'static str,
    /// `tracer sweep NAME` without --n. Kept apart from `default_n` rather than merged,
    /// because both lists are relied on as they are: the standalone ones reach the limits
    /// `workloads --help` names (64000 VMAs, 65536 pages), while `cargo xtask run`, the
    /// README and the VM tests expect the sweep's shorter lists. Merging would change one.
    pub sweep_n: &'static str,
}

pub const WAITPID: Workload = Workload {
    name: "waitpid",
    target: Some("do_wait"),
    about: "fork+wait with N idle children",
    default_n: "1,10,100,1000,5000,8000",
    sweep_n: "1,10,100,1000,5000,8000",
};

pub const SPAWN: Workload = Workload {
    name: "spawn",
    target: Some("dup_mmap"),
    about: "fork+exit+wait with N extra VMAs",
    default_n: "1,10,100,1000,4000,16000,64000",
    sweep_n: "1,10,100,1000,4000,16000",
};

pub const SYSVIPC: Workload = Workload {
    name: "sysvipc",
    target: Some("sysvipc_find_ipc"),
    about: "read /proc/sysvipc/* with N segments",
    default_n: "1,10,100,1000,4000",
    sweep_n: "1,10,100,1000,4000",
};

pub const MEMPOLICY: Workload = Workload {
    name: "mempolicy",
    target: Some("get_task_policy"),
    about: "touch N fresh pages (aim9 page)",
    default_n: "1..65536*16",
    sweep_n: "1,10,100,1000,10000",
};

pub const GETPID: Workload = Workload {
    name: "getpid",
    target: None,
    about: "N getpid() calls",
    default_n: "1,10,100,1000,10000",
    sweep_n: "1000,10000,100000",
};

/// In the order `tracer sweep --all` runs them.
pub const WORKLOADS: &[Workload] = &[WAITPID, SPAWN, SYSVIPC, MEMPOLICY, GETPID];

pub fn by_name(name: &str) -> Option<&'static Workload> {
    WORKLOADS.iter().find(|w| w.name == name)
}

/// The names, comma-separated, for messages.
pub fn names() -> String {
    WORKLOADS
        .iter()
        .map(|w| w.name)
        .collect::<Vec<_>>()
        .join(", ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lists_parse_and_ascend() {
        for w in WORKLOADS {
            for list in [w.default_n, w.sweep_n] {
                let v = crate::nlist::parse(list).unwrap_or_else(|e| panic!("{}: {e}", w.name));
                assert!(v.windows(2).all(|p| p[0] < p[1]), "{}: {list}", w.name);
            }
        }
        assert_eq!(by_name("spawn"), Some(&SPAWN));
        assert_eq!(by_name("nope"), None);
    }

    #[test]
    fn each_target_has_cases() {
        for w in WORKLOADS {
            let ours = crate::cases::CASES
                .iter()
                .filter(|c| c.name.starts_with(w.name))
                .count();
            assert!(ours > 0, "{}: no case", w.name);
            if let Some(t) = w.target {
                assert!(
                    crate::cases::CASES
                        .iter()
                        .filter(|c| c.name.starts_with(w.name))
                        .all(|c| c.target == Some(t)),
                    "{}",
                    w.name
                );
            }
        }
    }
}
