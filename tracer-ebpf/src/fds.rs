//! fd tracking for syscall brackets on particular files (read() of /proc/sysvipc/*): which
//! fds of the traced processes were opened under `Config::path_prefix`.

use aya_ebpf::{
    helpers::{bpf_get_current_pid_tgid, bpf_probe_read_user_str_bytes},
    macros::tracepoint,
    programs::TracePointContext,
};

use crate::{
    filter::filter_pass,
    maps::{PENDING_OPEN, TRACKED_FD},
    util::config,
};

#[tracepoint]
pub fn openat_enter(ctx: TracePointContext) -> u32 {
    let Some(cfg) = config() else { return 0 };
    if !filter_pass(cfg) {
        return 0;
    }
    let Ok(fname) = (unsafe { ctx.read_at::<u64>(cfg.openat_filename_off as usize) }) else {
        return 0;
    };
    let mut buf = [0u8; 32];
    let Ok(s) = (unsafe { bpf_probe_read_user_str_bytes(fname as *const u8, &mut buf) }) else {
        return 0;
    };
    let len = cfg.path_prefix_len as usize;
    if len == 0 || len > 32 || s.len() < len {
        return 0;
    }
    let mut i = 0;
    while i < 32 {
        if i >= len {
            break;
        }
        if buf[i] != cfg.path_prefix[i] {
            return 0;
        }
        i += 1;
    }
    let tid = bpf_get_current_pid_tgid() as u32;
    let _ = PENDING_OPEN.insert(&tid, &1u8, 0);
    0
}

#[tracepoint]
pub fn openat_exit(ctx: TracePointContext) -> u32 {
    let pid_tgid = bpf_get_current_pid_tgid();
    let tid = pid_tgid as u32;
    if unsafe { PENDING_OPEN.get(&tid) }.is_none() {
        return 0;
    }
    let _ = PENDING_OPEN.remove(&tid);
    let Some(cfg) = config() else { return 0 };
    let Ok(ret) = (unsafe { ctx.read_at::<i64>(cfg.openat_ret_off as usize) }) else {
        return 0;
    };
    if ret >= 0 {
        let key = (pid_tgid & 0xffff_ffff_0000_0000) | (ret as u64 & 0xffff_ffff);
        let _ = TRACKED_FD.insert(&key, &1u8, 0);
    }
    0
}

#[tracepoint]
pub fn close_enter(ctx: TracePointContext) -> u32 {
    let Some(cfg) = config() else { return 0 };
    let Ok(fd) = (unsafe { ctx.read_at::<u64>(cfg.close_fd_off as usize) }) else {
        return 0;
    };
    let key = (bpf_get_current_pid_tgid() & 0xffff_ffff_0000_0000) | (fd & 0xffff_ffff);
    let _ = TRACKED_FD.remove(&key);
    0
}
