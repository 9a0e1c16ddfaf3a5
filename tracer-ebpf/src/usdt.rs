//! USDT phase probes (`DTRACE_PROBE2(tracer, phase_begin, case, n)`,
//! `DTRACE_PROBE3(tracer, phase_end, case, n, ops)`): one program copy per probe site, whose
//! arguments are decoded from the site's spec in `USDT_SPECS` (register, memory, constant).

use aya_ebpf::{
    helpers::{bpf_probe_read_kernel, bpf_probe_read_user},
    macros::uprobe,
    programs::ProbeContext,
};
use tracer_ebpf::*;

use crate::{
    maps::USDT_SPECS,
    phases::{begin_phase, end_phase},
};

/// 8 bytes of `struct pt_regs` at `off` (0 for an offset outside it).
#[inline(always)]
fn usdt_reg(ctx: &ProbeContext, off: u32) -> u64 {
    if off > PT_REGS_SIZE - 8 {
        return 0;
    }
    // The verifier allows no variable-offset context access: read it as kernel memory.
    let p = unsafe { (ctx.regs as *const u8).add(off as usize) } as *const u64;
    unsafe { bpf_probe_read_kernel(p) }.unwrap_or(0)
}

/// The value of one argument, narrowed to its size and sign- or zero-extended.
#[inline(always)]
fn usdt_arg(ctx: &ProbeContext, a: &UsdtArg) -> u64 {
    let raw = match a.kind {
        USDT_ARG_CONST => a.value as u64,
        USDT_ARG_REG => usdt_reg(ctx, a.reg_off),
        USDT_ARG_MEM => {
            let mut addr = usdt_reg(ctx, a.reg_off).wrapping_add(a.value as u64);
            if a.index_off != USDT_NO_INDEX {
                addr = addr.wrapping_add(usdt_reg(ctx, a.index_off).wrapping_mul(a.scale as u64));
            }
            // Eight bytes and narrowed below, as the value's size is only known at run time.
            unsafe { bpf_probe_read_user(addr as *const u64) }.unwrap_or(0)
        }
        _ => 0,
    };
    let size = if a.size >= 1 && a.size <= 8 {
        a.size
    } else {
        8
    };
    let shift = (64 - 8 * size) & 63;
    if a.signed != 0 {
        (((raw << shift) as i64) >> shift) as u64
    } else {
        (raw << shift) >> shift
    }
}

#[inline(always)]
fn on_usdt(ctx: &ProbeContext, slot: u32) {
    let Some(spec) = USDT_SPECS.get(slot) else {
        return;
    };
    match spec.role {
        USDT_ROLE_BEGIN => {
            let case = usdt_arg(ctx, &spec.args[0]);
            let n = usdt_arg(ctx, &spec.args[1]);
            begin_phase(case as u32, n);
        }
        USDT_ROLE_END => end_phase(usdt_arg(ctx, &spec.args[2])),
        _ => {}
    }
}

macro_rules! usdt_slot {
    ($i:literal, $name:ident) => {
        #[uprobe]
        pub fn $name(ctx: ProbeContext) -> u32 {
            on_usdt(&ctx, $i);
            0
        }
    };
}

usdt_slot!(0, usdt_0);
usdt_slot!(1, usdt_1);
usdt_slot!(2, usdt_2);
usdt_slot!(3, usdt_3);
usdt_slot!(4, usdt_4);
usdt_slot!(5, usdt_5);
usdt_slot!(6, usdt_6);
usdt_slot!(7, usdt_7);
usdt_slot!(8, usdt_8);
usdt_slot!(9, usdt_9);
usdt_slot!(10, usdt_10);
usdt_slot!(11, usdt_11);
