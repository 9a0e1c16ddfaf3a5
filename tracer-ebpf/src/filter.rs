//! Which tasks are traced: the configured filter (all, a followed process tree, a comm, a
//! cgroup).

use aya_ebpf::{
    bindings::bpf_pidns_info,
    helpers::{
        bpf_get_current_cgroup_id, bpf_get_current_comm, bpf_get_current_pid_tgid,
        generated::bpf_get_ns_current_pid_tgid,
    },
};
use tracer_ebpf::*;

use crate::maps::{FOLLOW, NS_SEEDS};

/// Does the current task pass the configured filter?
#[inline(always)]
pub(crate) fn filter_pass(cfg: &Config) -> bool {
    match cfg.filter {
        FILTER_ALL => true,
        FILTER_FOLLOW => is_followed(cfg, (bpf_get_current_pid_tgid() >> 32) as u32),
        FILTER_COMM => match bpf_get_current_comm() {
            Ok(comm) => {
                let mut i = 0;
                while i < 16 {
                    if comm[i] != cfg.comm[i] {
                        return false;
                    }
                    if comm[i] == 0 {
                        break;
                    }
                    i += 1;
                }
                true
            }
            Err(_) => false,
        },
        FILTER_CGROUP => (unsafe { bpf_get_current_cgroup_id() }) == cfg.cgroup_id,
        _ => false,
    }
}

/// Is process `tgid` (the current task's, by its kernel pid) in the followed tree?
#[inline(always)]
pub(crate) fn is_followed(cfg: &Config, tgid: u32) -> bool {
    // The traced command itself, without a hash lookup (0: none, as inside a PID namespace;
    // never the idle task, whose tgid is 0).
    if (tgid == cfg.root_tgid && tgid != 0) || unsafe { FOLLOW.get(&tgid) }.is_some() {
        return true;
    }
    if cfg.pidns_ino == 0 {
        return false;
    }
    // Inside a PID namespace the seeds are known by their pids there: a process seen for the
    // first time is looked up by its namespace pid (one helper call and one lookup per event
    // of an unfollowed task, in this mode only), and followed from then on.
    let ns = current_ns_tgid(cfg);
    if ns == 0 {
        return false;
    }
    match NS_SEEDS.get_ptr_mut(&ns) {
        Some(kernel_pid) => {
            unsafe { *kernel_pid = tgid };
            let _ = FOLLOW.insert(&tgid, &1u8, 0);
            true
        }
        None => false,
    }
}

/// The current task's tgid in the tracer's PID namespace, or 0 when it has none there (a task
/// outside it, or in a namespace below it) or no namespace is configured.
#[inline(always)]
pub(crate) fn current_ns_tgid(cfg: &Config) -> u32 {
    if cfg.pidns_ino == 0 {
        return 0;
    }
    let mut info = bpf_pidns_info { pid: 0, tgid: 0 };
    let r = unsafe {
        bpf_get_ns_current_pid_tgid(
            cfg.pidns_dev,
            cfg.pidns_ino,
            &mut info,
            core::mem::size_of::<bpf_pidns_info>() as u32,
        )
    };
    if r == 0 { info.tgid } else { 0 }
}
