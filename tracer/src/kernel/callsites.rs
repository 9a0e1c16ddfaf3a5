//! The call instructions inside one kernel function that call another: where a callee that
//! cannot be probed itself (built without ftrace, as lib/'s `idr_find` on Debian's kernels,
//! which both fentry and kprobe refuse) can still be counted, from its caller's side. The
//! caller's code is read from /proc/kcore, its extent from /proc/kallsyms.
//!
//! x86-64 only: a direct near call is `e8` and a 32-bit displacement from the next
//! instruction. A byte sequence that only looks like one (inside another instruction) is not
//! an instruction boundary: the kernel refuses a kprobe there (EILSEQ), so a candidate that
//! attaches is a call.
use std::fs::File;
use std::io;
use std::os::unix::fs::FileExt;
use std::path::Path;

use super::kallsyms::Kallsyms;

/// Length of a direct near call (`e8 rel32`), and of a direct near jump (`e9 rel32`).
pub const CALL_LEN: u64 = 5;
/// The most code read of a function called from the caller to see whether it tail-calls the
/// callee: such a function is a small wrapper (`idr_find` is 20-odd bytes).
const MAX_WRAPPER_BYTES: u64 = 1024;
/// How many tail calls deep a callee is looked for: 5.10's `idr_find` jumps to
/// `radix_tree_lookup`, which jumps to `__radix_tree_lookup`.
const MAX_TAIL_DEPTH: usize = 2;
/// The most code read of one caller: a function longer than this is not scanned.
const MAX_FUNCTION_BYTES: u64 = 64 * 1024;

#[derive(Debug, thiserror::Error)]
pub enum CallSiteError {
    #[error("{0} is not a kernel function here (not in /proc/kallsyms)")]
    NoSymbol(String),
    #[error("{name} is {len} bytes long: more than the {MAX_FUNCTION_BYTES} scanned")]
    TooLong { name: String, len: u64 },
    #[error("the kernel's code could not be read from /proc/kcore: {0}")]
    Kcore(io::Error),
    #[error("/proc/kcore holds no part of {0}'s code")]
    NotMapped(String),
    #[error("call sites are found on x86-64 only")]
    Arch,
}

/// The (offset from the start of `code`, loaded at `base`; target address) of every
/// `opcode rel32` byte sequence in it: direct calls for `e8`, direct jumps for `e9`.
fn branches(code: &[u8], base: u64, opcode: u8) -> impl Iterator<Item = (u64, u64)> + '_ {
    code.windows(CALL_LEN as usize)
        .enumerate()
        .filter(move |(_, w)| w[0] == opcode)
        .map(move |(i, w)| {
            let rel = i32::from_le_bytes([w[1], w[2], w[3], w[4]]);
            let next = base.wrapping_add(i as u64 + CALL_LEN);
            (i as u64, next.wrapping_add(rel as i64 as u64))
        })
}

/// The offsets, from the start of `code` (loaded at `base`), of every direct call to
/// `callee`.
pub fn calls_to(code: &[u8], base: u64, callee: u64) -> Vec<u64> {
    branches(code, base, 0xe8)
        .filter(|&(_, to)| to == callee)
        .map(|(i, _)| i)
        .collect()
}

/// Whether the function whose code is `code` (at `base`) jumps to `callee`: a tail call,
/// `return f(x)` compiled to `jmp f`.
pub fn jumps_to(code: &[u8], base: u64, callee: u64) -> bool {
    branches(code, base, 0xe9).any(|(_, to)| to == callee)
}

/// The offsets in kernel function `caller` of its direct calls to `callee` (each a candidate:
/// see the module's note).
pub fn find(ksyms: &Kallsyms, caller: &str, callee: &str) -> Result<Vec<u64>, CallSiteError> {
    if !cfg!(target_arch = "x86_64") {
        return Err(CallSiteError::Arch);
    }
    let (start, end) = ksyms
        .extent(caller)
        .ok_or_else(|| CallSiteError::NoSymbol(caller.into()))?;
    let (to, _) = ksyms
        .extent(callee)
        .ok_or_else(|| CallSiteError::NoSymbol(callee.into()))?;
    let len = end - start;
    if len > MAX_FUNCTION_BYTES {
        return Err(CallSiteError::TooLong {
            name: caller.into(),
            len,
        });
    }
    let code = read_kcore(Path::new("/proc/kcore"), start, len)?
        .ok_or_else(|| CallSiteError::NotMapped(caller.into()))?;
    let direct = calls_to(&code, start, to);
    if !direct.is_empty() {
        return Ok(direct);
    }
    // None: the caller may reach the callee through a wrapper's tail call, which leaves no
    // frame of its own, so a stack sampled in the callee names the caller right above it
    // (5.10's sysvipc_find_ipc calls idr_find, whose stacks read __radix_tree_lookup <-
    // sysvipc_find_ipc). Each call of such a wrapper is one call of the callee.
    let mut calls = Vec::new();
    let mut seen = Vec::new();
    for (_, target) in branches(&code, start, 0xe8) {
        if seen.contains(&target) {
            continue;
        }
        seen.push(target);
        if tail_calls(ksyms, target, to, MAX_TAIL_DEPTH)? {
            calls.extend(calls_to(&code, start, target));
        }
    }
    calls.sort_unstable();
    Ok(calls)
}

/// Whether the kernel function starting at `f` reaches `callee` by tail calls, at most
/// `depth` deep. False for an address no text symbol starts at.
fn tail_calls(ksyms: &Kallsyms, f: u64, callee: u64, depth: usize) -> Result<bool, CallSiteError> {
    let Some((start, end)) = ksyms.extent_at(f) else {
        return Ok(false);
    };
    let Some(code) = read_kcore(
        Path::new("/proc/kcore"),
        start,
        (end - start).min(MAX_WRAPPER_BYTES),
    )?
    else {
        return Ok(false);
    };
    if jumps_to(&code, start, callee) {
        return Ok(true);
    }
    if depth <= 1 {
        return Ok(false);
    }
    for (_, j) in branches(&code, start, 0xe9) {
        if j != start && tail_calls(ksyms, j, callee, depth - 1)? {
            return Ok(true);
        }
    }
    Ok(false)
}

/// `len` bytes of kernel memory at `addr`, from the ELF core file at `path` (None: no segment
/// of it holds them).
pub fn read_kcore(path: &Path, addr: u64, len: u64) -> Result<Option<Vec<u8>>, CallSiteError> {
    let f = File::open(path).map_err(CallSiteError::Kcore)?;
    let read = |off: u64, n: usize| -> Result<Vec<u8>, CallSiteError> {
        let mut buf = vec![0; n];
        f.read_exact_at(&mut buf, off)
            .map_err(CallSiteError::Kcore)?;
        Ok(buf)
    };
    let head = read(0, 64)?;
    if &head[..4] != b"\x7fELF" || head[4] != 2 || head[5] != 1 {
        return Err(CallSiteError::Kcore(io::Error::other(
            "not a 64-bit little-endian ELF file",
        )));
    }
    let u64_at = |b: &[u8], o: usize| u64::from_le_bytes(b[o..o + 8].try_into().unwrap());
    let u16_at = |b: &[u8], o: usize| u16::from_le_bytes(b[o..o + 2].try_into().unwrap());
    let (phoff, phentsize, phnum) = (u64_at(&head, 32), u16_at(&head, 54), u16_at(&head, 56));
    if phentsize < 56 {
        return Err(CallSiteError::Kcore(io::Error::other(
            "program headers too short",
        )));
    }
    let table = read(phoff, phentsize as usize * phnum as usize)?;
    for ph in table.chunks_exact(phentsize as usize) {
        const PT_LOAD: u32 = 1;
        let kind = u32::from_le_bytes(ph[0..4].try_into().unwrap());
        let (offset, vaddr, filesz) = (u64_at(ph, 8), u64_at(ph, 16), u64_at(ph, 32));
        if kind == PT_LOAD && vaddr <= addr && addr + len <= vaddr.saturating_add(filesz) {
            return read(offset + (addr - vaddr), len as usize).map(Some);
        }
    }
    Ok(None)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A call's displacement counts from the instruction after it, backwards as well as
    /// forwards; other calls and `e8` bytes inside other instructions are not its.
    #[test]
    fn direct_calls_to_the_callee_are_found_by_their_displacement() {
        let base = 0xffff_ffff_8100_0000u64;
        let callee = 0xffff_ffff_8000_0010u64;
        let call = |at: u64, to: u64| {
            let rel = (to.wrapping_sub(base + at + CALL_LEN)) as i64 as i32;
            let mut v = vec![0xe8];
            v.extend(rel.to_le_bytes());
            v
        };
        let mut code = vec![0x55, 0x48, 0x89, 0xe5]; // push rbp; mov rbp, rsp
        code.extend(call(4, callee));
        code.extend([0x48, 0xc7, 0xc0, 0xe8, 0x00, 0x00, 0x00]); // mov rax, 0xe8
        code.extend(call(16, base + 0x100)); // another function
        code.extend(call(21, callee));
        code.push(0xc3);
        assert_eq!(calls_to(&code, base, callee), [4, 21]);
        assert_eq!(calls_to(&code, base, base + 0x100), [16]);
        assert!(calls_to(&code[..8], base, callee).is_empty());
    }

    /// A wrapper's tail call is a `jmp rel32` to the callee; a call of it, or a jump elsewhere,
    /// is not one.
    #[test]
    fn a_tail_call_is_a_direct_jump_to_the_callee() {
        let base = 0xffff_ffff_8100_0000u64;
        let callee = 0xffff_ffff_8120_0000u64;
        let branch = |op: u8, at: u64, to: u64| {
            let rel = (to.wrapping_sub(base + at + CALL_LEN)) as i64 as i32;
            let mut v = vec![op];
            v.extend(rel.to_le_bytes());
            v
        };
        let mut wrapper = vec![0x2b, 0x77, 0x10]; // sub esi, [rdi+0x10]
        wrapper.extend(branch(0xe9, 3, callee));
        assert!(jumps_to(&wrapper, base, callee));
        assert!(!jumps_to(&wrapper, base, callee + 1));
        let mut calls = vec![0x90];
        calls.extend(branch(0xe8, 1, callee));
        calls.push(0xc3);
        assert!(!jumps_to(&calls, base, callee));
        assert_eq!(calls_to(&calls, base, callee), [1]);
    }

    /// The kcore reader maps an address through the segment that holds it.
    #[test]
    fn kernel_code_is_read_through_its_segment() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("core");
        let vaddr = 0xffff_ffff_8100_0000u64;
        let mut f = vec![0u8; 64 + 56 + 32];
        f[..6].copy_from_slice(b"\x7fELF\x02\x01");
        f[32..40].copy_from_slice(&64u64.to_le_bytes()); // e_phoff
        f[54..56].copy_from_slice(&56u16.to_le_bytes()); // e_phentsize
        f[56..58].copy_from_slice(&1u16.to_le_bytes()); // e_phnum
        let ph = 64;
        f[ph..ph + 4].copy_from_slice(&1u32.to_le_bytes()); // PT_LOAD
        f[ph + 8..ph + 16].copy_from_slice(&120u64.to_le_bytes()); // p_offset
        f[ph + 16..ph + 24].copy_from_slice(&vaddr.to_le_bytes());
        f[ph + 32..ph + 40].copy_from_slice(&32u64.to_le_bytes()); // p_filesz
        for (i, b) in f[120..152].iter_mut().enumerate() {
            *b = i as u8;
        }
        std::fs::write(&path, &f).unwrap();
        assert_eq!(
            read_kcore(&path, vaddr + 4, 3).unwrap(),
            Some(vec![4, 5, 6])
        );
        assert_eq!(read_kcore(&path, vaddr + 30, 8).unwrap(), None);
        std::fs::write(
            &path,
            b"not an elf file at all, just text......................................",
        )
        .unwrap();
        assert!(read_kcore(&path, vaddr, 4).is_err());
    }
}
