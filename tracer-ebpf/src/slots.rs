//! Attach slots: the fentry/fexit, kprobe/kretprobe, uprobe/uretprobe, call-site and tracepoint
//! programs that userspace points at targets at run time (`SLOTS`), all sharing the span
//! handlers.

use aya_ebpf::{
    EbpfContext,
    helpers::bpf_get_current_pid_tgid,
    macros::{fentry, fexit, kprobe, kretprobe, raw_tracepoint, tracepoint, uprobe, uretprobe},
    programs::{
        FEntryContext, FExitContext, ProbeContext, RawTracePointContext, RetProbeContext,
        TracePointContext,
    },
};
use tracer_ebpf::*;

use crate::{
    maps::{SLOTS, TRACKED_FD},
    spans::{on_enter, on_exit, on_point},
};

const FN_SLOT_BASE_FENTRY: u32 = SLOT_BASE_FENTRY;
const FN_SLOT_BASE_KPROBE: u32 = SLOT_BASE_KPROBE;
const TP_SLOT_BASE: u32 = SLOT_BASE_TP;

// ---------------------------------------------------------------------------------------------
// Function slots: fentry/fexit and kprobe/kretprobe pairs.

macro_rules! fn_slot {
    ($i:literal, $fentry:ident, $fexit:ident, $kprobe:ident, $kretprobe:ident) => {
        #[fentry]
        pub fn $fentry(_ctx: FEntryContext) -> i32 {
            on_enter(FN_SLOT_BASE_FENTRY + $i);
            0
        }
        #[fexit]
        pub fn $fexit(ctx: FExitContext) -> i32 {
            on_exit(&ctx, FN_SLOT_BASE_FENTRY + $i, true);
            0
        }
        #[kprobe]
        pub fn $kprobe(_ctx: ProbeContext) -> u32 {
            on_enter(FN_SLOT_BASE_KPROBE + $i);
            0
        }
        #[kretprobe]
        pub fn $kretprobe(ctx: RetProbeContext) -> u32 {
            on_exit(&ctx, FN_SLOT_BASE_KPROBE + $i, true);
            0
        }
    };
}

fn_slot!(0, fentry_0, fexit_0, kprobe_0, kretprobe_0);
fn_slot!(1, fentry_1, fexit_1, kprobe_1, kretprobe_1);
fn_slot!(2, fentry_2, fexit_2, kprobe_2, kretprobe_2);
fn_slot!(3, fentry_3, fexit_3, kprobe_3, kretprobe_3);
fn_slot!(4, fentry_4, fexit_4, kprobe_4, kretprobe_4);
fn_slot!(5, fentry_5, fexit_5, kprobe_5, kretprobe_5);
fn_slot!(6, fentry_6, fexit_6, kprobe_6, kretprobe_6);
fn_slot!(7, fentry_7, fexit_7, kprobe_7, kretprobe_7);
fn_slot!(8, fentry_8, fexit_8, kprobe_8, kretprobe_8);
fn_slot!(9, fentry_9, fexit_9, kprobe_9, kretprobe_9);
fn_slot!(10, fentry_10, fexit_10, kprobe_10, kretprobe_10);
fn_slot!(11, fentry_11, fexit_11, kprobe_11, kretprobe_11);

// ---------------------------------------------------------------------------------------------
// User-function slots: uprobe/uretprobe pairs (user-space targets, and the pairing tests).

macro_rules! uprobe_slot {
    ($i:literal, $entry:ident, $exit:ident) => {
        #[uprobe]
        pub fn $entry(_ctx: ProbeContext) -> u32 {
            on_enter(SLOT_BASE_UPROBE + $i);
            0
        }
        #[uretprobe]
        pub fn $exit(ctx: RetProbeContext) -> u32 {
            on_exit(&ctx, SLOT_BASE_UPROBE + $i, true);
            0
        }
    };
}

uprobe_slot!(0, uprobe_0, uretprobe_0);
uprobe_slot!(1, uprobe_1, uretprobe_1);
uprobe_slot!(2, uprobe_2, uretprobe_2);
uprobe_slot!(3, uprobe_3, uretprobe_3);

// ---------------------------------------------------------------------------------------------
// Call-site slots: kprobes on a call instruction and on the one after it. At the second the
// callee has returned (its value in the return register, as at a kretprobe).

macro_rules! site_slot {
    ($i:literal, $entry:ident, $exit:ident) => {
        #[kprobe]
        pub fn $entry(_ctx: ProbeContext) -> u32 {
            on_enter(SLOT_BASE_SITE + $i);
            0
        }
        #[kprobe]
        pub fn $exit(ctx: ProbeContext) -> u32 {
            on_exit(&ctx, SLOT_BASE_SITE + $i, true);
            0
        }
    };
}

site_slot!(0, site_call_0, site_return_0);
site_slot!(1, site_call_1, site_return_1);
site_slot!(2, site_call_2, site_return_2);
site_slot!(3, site_call_3, site_return_3);

// ---------------------------------------------------------------------------------------------
// Tracepoint slots: role configured per slot (enter, exit or point).

#[inline(always)]
fn on_tp(ctx: &TracePointContext, j: u32) {
    on_tp_slot(ctx, j, |off| {
        unsafe { ctx.read_at::<u64>(off as usize) }.ok()
    });
}

/// Tracepoint slot `j` fired: its configured role. `fd_at` reads the tracked-fd argument at
/// the slot's `arg_off` (a record offset, or a `pt_regs` offset for raw syscall routes).
#[inline(always)]
pub(crate) fn on_tp_slot<C: EbpfContext>(ctx: &C, j: u32, fd_at: impl Fn(u32) -> Option<u64>) {
    let slot = TP_SLOT_BASE + j;
    let Some(conf) = SLOTS.get(slot) else { return };
    match conf.role {
        ROLE_ENTER => {
            if conf.flags & SLOT_FLAG_TRACKED_FD != 0 {
                let Some(fd) = fd_at(conf.arg_off) else {
                    return;
                };
                let tgid = bpf_get_current_pid_tgid() >> 32;
                let key = (tgid << 32) | (fd & 0xffff_ffff);
                if unsafe { TRACKED_FD.get(&key) }.is_none() {
                    return;
                }
            }
            on_enter(slot)
        }
        ROLE_EXIT => on_exit(ctx, slot, false),
        ROLE_POINT => on_point(slot),
        _ => {}
    }
}

macro_rules! tp_slot {
    ($i:literal, $name:ident) => {
        #[tracepoint]
        pub fn $name(ctx: TracePointContext) -> u32 {
            on_tp(&ctx, $i);
            0
        }
    };
}

tp_slot!(0, tp_0);
tp_slot!(1, tp_1);
tp_slot!(2, tp_2);
tp_slot!(3, tp_3);
tp_slot!(4, tp_4);
tp_slot!(5, tp_5);
tp_slot!(6, tp_6);
tp_slot!(7, tp_7);
tp_slot!(8, tp_8);
tp_slot!(9, tp_9);
tp_slot!(10, tp_10);
tp_slot!(11, tp_11);
tp_slot!(12, tp_12);
tp_slot!(13, tp_13);
tp_slot!(14, tp_14);
tp_slot!(15, tp_15);
tp_slot!(16, tp_16);
tp_slot!(17, tp_17);
tp_slot!(18, tp_18);
tp_slot!(19, tp_19);

// Raw tracepoint slots: the same slots (same `SLOTS` element as `tp_N`) attached as raw
// tracepoints by name, for tracepoints whose role reads no field of the event: cheaper per
// call and detached without a grace period per event (see `raw_syscalls`).
macro_rules! raw_tp_slot {
    ($i:literal, $name:ident) => {
        #[raw_tracepoint]
        pub fn $name(ctx: RawTracePointContext) -> u32 {
            on_tp_slot(&ctx, $i, |_| None);
            0
        }
    };
}

raw_tp_slot!(0, rtp_0);
raw_tp_slot!(1, rtp_1);
raw_tp_slot!(2, rtp_2);
raw_tp_slot!(3, rtp_3);
raw_tp_slot!(4, rtp_4);
raw_tp_slot!(5, rtp_5);
raw_tp_slot!(6, rtp_6);
raw_tp_slot!(7, rtp_7);
raw_tp_slot!(8, rtp_8);
raw_tp_slot!(9, rtp_9);
raw_tp_slot!(10, rtp_10);
raw_tp_slot!(11, rtp_11);
raw_tp_slot!(12, rtp_12);
raw_tp_slot!(13, rtp_13);
raw_tp_slot!(14, rtp_14);
raw_tp_slot!(15, rtp_15);
raw_tp_slot!(16, rtp_16);
raw_tp_slot!(17, rtp_17);
raw_tp_slot!(18, rtp_18);
raw_tp_slot!(19, rtp_19);
