//! `raw_syscalls:sys_enter` and `sys_exit` as raw tracepoints: one pair of programs feeds
//! every syscall bracket's tracepoint slot (and fd tracking) through `SYSCALL_ROUTES`,
//! instead of one perf event per `syscalls:sys_{enter,exit}_*` tracepoint. Raw tracepoints
//! cost less per call (no perf record is built) and detach without the RCU grace period the
//! kernel waits for, under a global mutex, each time a tracepoint's last perf event closes.
//!
//! The programs run for every syscall on the machine, so they return after one array lookup
//! when the syscall has no route. x86_64 only: the number and arguments are read from
//! `struct pt_regs` at the offsets in `PT_REGS_*`, and 32-bit processes' syscalls are
//! skipped (see [`route`]).

use aya_ebpf::{
    helpers::bpf_probe_read_kernel, macros::raw_tracepoint, programs::RawTracePointContext,
};
use tracer_ebpf::*;

use crate::{
    fds::{close_entered, openat_entered, openat_returned},
    maps::SYSCALL_ROUTES,
    slots::on_tp_slot,
    util::opaque,
};

/// The register at `off` in the `struct pt_regs` at `regs`.
#[inline(always)]
pub(crate) fn reg(regs: u64, off: u32) -> Option<u64> {
    // The offset is userspace's configuration: bounded so the read stays inside pt_regs.
    let off = opaque(off as u64) & 0xff;
    unsafe { bpf_probe_read_kernel((regs + off) as *const u64) }.ok()
}

/// The route of syscall `nr` made with the registers at `regs`, if it has one. The routes
/// are x86_64's table: a 32-bit process's syscalls (ia32 numbers) have none, as in the
/// kernel's own `syscalls:*` events, which skip them. The code segment tells them apart,
/// checked only once a route matched; a 64-bit process that uses `int $0x80` keeps its
/// 64-bit code segment and is not told apart.
#[inline(always)]
fn route(regs: u64, nr: u64) -> Option<&'static SyscallRoute> {
    if nr >= MAX_SYSCALL_NR as u64 {
        return None;
    }
    let r = SYSCALL_ROUTES.get(nr as u32)?;
    if r.enter == [0; ROUTE_SLOTS] && r.exit == [0; ROUTE_SLOTS] && r.fd == 0 {
        return None;
    }
    if reg(regs, PT_REGS_CS)? & 0xffff == USER32_CS {
        return None;
    }
    Some(r)
}

/// `sys_enter(struct pt_regs *regs, long id)`.
#[raw_tracepoint(tracepoint = "sys_enter")]
pub fn raw_sys_enter(ctx: RawTracePointContext) -> u32 {
    let regs: u64 = ctx.arg(0);
    let nr: u64 = ctx.arg(1);
    let Some(r) = route(regs, nr) else { return 0 };
    let r = *r;
    if r.fd & ROUTE_FD_OPENAT != 0 {
        // openat(dfd, filename, flags, mode), openat2(dfd, filename, how, size)
        if let Some(fname) = reg(regs, PT_REGS_ARGS[1]) {
            openat_entered(fname);
        }
    }
    if r.fd & ROUTE_FD_OPEN != 0 {
        // open(filename, flags, mode)
        if let Some(fname) = reg(regs, PT_REGS_ARGS[0]) {
            openat_entered(fname);
        }
    }
    if r.fd & ROUTE_FD_CLOSE != 0 {
        if let Some(fd) = reg(regs, PT_REGS_ARGS[0]) {
            close_entered(fd);
        }
    }
    let mut i = 0;
    while i < ROUTE_SLOTS {
        let s = r.enter[i];
        if s != 0 && s <= TP_SLOTS as u32 {
            on_tp_slot(&ctx, s - 1, |off| reg(regs, off));
        }
        i += 1;
    }
    0
}

/// `sys_exit(struct pt_regs *regs, long ret)`: the syscall number is `orig_ax`.
#[raw_tracepoint(tracepoint = "sys_exit")]
pub fn raw_sys_exit(ctx: RawTracePointContext) -> u32 {
    let regs: u64 = ctx.arg(0);
    let ret: i64 = ctx.arg(1);
    let Some(nr) = reg(regs, PT_REGS_ORIG_AX) else {
        return 0;
    };
    let Some(r) = route(regs, nr) else { return 0 };
    let r = *r;
    if r.fd & (ROUTE_FD_OPENAT | ROUTE_FD_OPEN) != 0 {
        openat_returned(ret);
    }
    let mut i = 0;
    while i < ROUTE_SLOTS {
        let s = r.exit[i];
        if s != 0 && s <= TP_SLOTS as u32 {
            on_tp_slot(&ctx, s - 1, |off| reg(regs, off));
        }
        i += 1;
    }
    0
}
