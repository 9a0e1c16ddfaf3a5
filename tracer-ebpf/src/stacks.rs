//! The stack store: kernel and user stacks taken with `bpf_get_stack`, filed once each under
//! an id derived from their frames.

use aya_ebpf::{
    EbpfContext, bindings::BPF_NOEXIST, cty::c_void, helpers::bpf_get_stack, maps::HashMap,
};
use tracer_ebpf::*;

use crate::{
    maps::{STACK_NEST, STACK_NEST_MAX, STACK_SCRATCH, STACK_TRACES},
    util::bump,
};

/// No stack: the context had no frames of that kind (a user stack of a kernel thread, the
/// kernel stack of a sample taken in user mode).
const NO_STACK: i32 = -1;
/// A stack that could not be recorded (counted in `STACK_ERRORS` and its kind's counter).
const LOST_STACK: i32 = -2;

/// A caller or off-CPU stack (the current task's kernel stack, or its user stack with
/// `BPF_F_USER_STACK`), filed in `STACK_TRACES`.
#[inline(always)]
pub(crate) fn stack_id<C: EbpfContext>(ctx: &C, flags: u64, lost: u32) -> i32 {
    store_stack(ctx, &STACK_TRACES, flags, lost)
}

/// Take the current stack and file it in `store`; its id, `NO_STACK` or `LOST_STACK`.
#[inline(always)]
pub(crate) fn store_stack<C: EbpfContext>(
    ctx: &C,
    store: &HashMap<u32, StackBuf>,
    flags: u64,
    lost: u32,
) -> i32 {
    let Some(nest) = STACK_NEST.get_ptr_mut(0) else {
        return lose_stack(lost);
    };
    // A program that interrupts this one between the read and the write restores the
    // level before it returns, so a plain read-modify-write is enough on one CPU.
    let level = unsafe { *nest };
    if level >= STACK_NEST_MAX {
        return lose_stack(lost);
    }
    unsafe { *nest = level + 1 };
    let id = file_stack(ctx, store, flags, level, lost);
    unsafe { *nest = level };
    id
}

/// A stack lost before it was taken (counted as taken, then as lost).
#[inline(always)]
fn lose_stack(lost: u32) -> i32 {
    bump(counter::STACKS_TAKEN);
    lost_after_taken(lost)
}

#[inline(always)]
fn file_stack<C: EbpfContext>(
    ctx: &C,
    store: &HashMap<u32, StackBuf>,
    flags: u64,
    level: u32,
    lost: u32,
) -> i32 {
    let Some(buf) = STACK_SCRATCH.get_ptr_mut(level) else {
        return lose_stack(lost);
    };
    // The kernel zeroes the buffer past the frames it writes.
    let len = unsafe {
        bpf_get_stack(
            ctx.as_ptr(),
            buf as *mut c_void,
            core::mem::size_of::<StackBuf>() as u32,
            flags,
        )
    };
    if len == 0 {
        return NO_STACK;
    }
    if len < 0 {
        return lose_stack(lost);
    }
    bump(counter::STACKS_TAKEN);
    let buf = unsafe { &*buf };
    // Every word, frames and the zeros after them, without an early exit: one straight path
    // for the verifier (a loop that may stop at any of 64 frames, followed by another, made
    // it explore thousands of paths in every program and tripled the load time).
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for i in 0..STACK_DEPTH {
        h = (h ^ buf.ips[i]).wrapping_mul(0x9e37_79b9_7f4a_7c15);
        h ^= h >> 29;
    }
    let id = ((h ^ (h >> 32)) as u32) & 0x7fff_ffff;
    if let Some(old) = unsafe { store.get(&id) } {
        return if same_stack(old, buf) {
            id as i32
        } else {
            lost_after_taken(lost)
        };
    }
    if store.insert(&id, buf, BPF_NOEXIST as u64).is_ok() {
        return id as i32;
    }
    // Another CPU filed a stack under this id first, or the store is full.
    match unsafe { store.get(&id) } {
        Some(old) if same_stack(old, buf) => id as i32,
        _ => lost_after_taken(lost),
    }
}

/// A lost stack already counted as taken.
#[inline(always)]
fn lost_after_taken(lost: u32) -> i32 {
    bump(counter::STACK_ERRORS);
    bump(lost);
    LOST_STACK
}

/// Both buffers hold zeros after their last frame, so comparing every word compares the
/// stacks and their lengths; no early exit, for the verifier (see `file_stack`).
#[inline(always)]
fn same_stack(a: &StackBuf, b: &StackBuf) -> bool {
    let mut diff = 0u64;
    for i in 0..STACK_DEPTH {
        diff |= a.ips[i] ^ b.ips[i];
    }
    diff == 0
}
