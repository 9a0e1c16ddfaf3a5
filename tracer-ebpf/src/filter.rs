//! Which tasks are traced: the configured filter (all, a followed process tree, a comm, a
//! cgroup).

use aya_ebpf::helpers::{
    bpf_get_current_cgroup_id, bpf_get_current_comm, bpf_get_current_pid_tgid,
};
use tracer_ebpf::*;

use crate::maps::FOLLOW;

/// Does the current task pass the configured filter?
#[inline(always)]
pub(crate) fn filter_pass(cfg: &Config) -> bool {
    match cfg.filter {
        FILTER_ALL => true,
        FILTER_FOLLOW => {
            let tgid = (bpf_get_current_pid_tgid() >> 32) as u32;
            // The traced command itself, without a hash lookup.
            tgid == cfg.root_tgid || unsafe { FOLLOW.get(&tgid) }.is_some()
        }
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
