//! fd tracking for syscall brackets on particular files (read() of /proc/sysvipc/*): which
//! fds of the traced processes were opened under `Config::path_prefix`. The openat/close
//! syscalls reach these either through their own tracepoints (the programs here) or through
//! the `raw_syscalls` routes (`raw_syscalls.rs`), which pass the same values.

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

/// openat() entered with user pointer `fname`: remember the thread if the path matches.
#[inline(always)]
pub(crate) fn openat_entered(fname: u64) {
    let Some(cfg) = config() else { return };
    if !filter_pass(cfg) {
        return;
    }
    let mut buf = [0u8; 32];
    let Ok(s) = (unsafe { bpf_probe_read_user_str_bytes(fname as *const u8, &mut buf) }) else {
        return;
    };
    let len = cfg.path_prefix_len as usize;
    if len == 0 || len > 32 || s.len() < len {
        return;
    }
    let mut i = 0;
    while i < 32 {
        if i >= len {
            break;
        }
        if buf[i] != cfg.path_prefix[i] {
            return;
        }
        i += 1;
    }
    let tid = bpf_get_current_pid_tgid() as u32;
    let _ = PENDING_OPEN.insert(&tid, &1u8, 0);
}

/// openat() returned `ret`: a matching open's fd is tracked.
#[inline(always)]
pub(crate) fn openat_returned(ret: i64) {
    let pid_tgid = bpf_get_current_pid_tgid();
    let tid = pid_tgid as u32;
    if unsafe { PENDING_OPEN.get(&tid) }.is_none() {
        return;
    }
    let _ = PENDING_OPEN.remove(&tid);
    if ret >= 0 {
        let key = (pid_tgid & 0xffff_ffff_0000_0000) | (ret as u64 & 0xffff_ffff);
        let _ = TRACKED_FD.insert(&key, &1u8, 0);
    }
}

/// close(fd): the fd is no longer tracked.
#[inline(always)]
pub(crate) fn close_entered(fd: u64) {
    let key = (bpf_get_current_pid_tgid() & 0xffff_ffff_0000_0000) | (fd & 0xffff_ffff);
    let _ = TRACKED_FD.remove(&key);
}

#[tracepoint]
pub fn openat_enter(ctx: TracePointContext) -> u32 {
    let Some(cfg) = config() else { return 0 };
    if let Ok(fname) = unsafe { ctx.read_at::<u64>(cfg.openat_filename_off as usize) } {
        openat_entered(fname);
    }
    0
}

#[tracepoint]
pub fn openat_exit(ctx: TracePointContext) -> u32 {
    let tid = bpf_get_current_pid_tgid() as u32;
    // Most opens are not pending: answer them before reading the record.
    if unsafe { PENDING_OPEN.get(&tid) }.is_none() {
        return 0;
    }
    let Some(cfg) = config() else { return 0 };
    if let Ok(ret) = unsafe { ctx.read_at::<i64>(cfg.openat_ret_off as usize) } {
        openat_returned(ret);
    }
    0
}

#[tracepoint]
pub fn close_enter(ctx: TracePointContext) -> u32 {
    let Some(cfg) = config() else { return 0 };
    if let Ok(fd) = unsafe { ctx.read_at::<u64>(cfg.close_fd_off as usize) } {
        close_entered(fd);
    }
    0
}
