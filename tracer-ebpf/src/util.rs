//! Small helpers every program uses: masked array indices, the clock, the configuration,
//! counters and atomic adds.

use aya_ebpf::helpers::bpf_ktime_get_ns;
use tracer_ebpf::*;

use crate::maps::{CONFIG, COUNTERS};

// Array indices are masked after their range checks: older verifiers (5.10, 6.1) do not carry
// bounds from a 32-bit compare over to the 64-bit register used for the address, and reject
// "math between map_value pointer and register with unbounded min value". A mask bounds the
// register on every kernel. The sizes are powers of two (asserted below).
const _: () = assert!(MAX_TARGETS.is_power_of_two());
const _: () = assert!(MAX_NEST.is_power_of_two());

/// Hide a value's known range from LLVM, so the mask that follows is not optimised away
/// (LLVM knows the range from the earlier check; the verifier may not).
#[inline(always)]
pub(crate) fn opaque(mut v: u64) -> u64 {
    unsafe { core::arch::asm!("{0} = {0}", inout(reg) v) };
    v
}

#[inline(always)]
pub(crate) fn target_ix(t: u32) -> usize {
    (opaque(t as u64) & (MAX_TARGETS as u64 - 1)) as usize
}

#[inline(always)]
pub(crate) fn nest_ix(a: u32) -> usize {
    (opaque(a as u64) & (MAX_NEST as u64 - 1)) as usize
}

#[inline(always)]
pub(crate) fn now() -> u64 {
    unsafe { bpf_ktime_get_ns() }
}

#[inline(always)]
pub(crate) fn config() -> Option<&'static Config> {
    CONFIG.get(0)
}

#[inline(always)]
pub(crate) fn bump(idx: u32) {
    if let Some(c) = COUNTERS.get_ptr_mut(idx) {
        unsafe { *c += 1 };
    }
}

#[inline(always)]
pub(crate) fn atomic_add(p: *mut u64, v: u64) {
    // A plain BPF_XADD (no BPF_FETCH): kernels older than 5.12 accept only this form, and
    // core's atomics are not available on the BPF target.
    unsafe {
        core::arch::asm!("lock *(u64 *)({p} + 0) += {v}", p = in(reg) p, v = in(reg) v);
    }
}
