//! USDT probes (`<sys/sdt.h>`, `DTRACE_PROBE*`/`STAP_PROBE*`) read from an ELF file: where
//! each probe site is in the file, its semaphore, and how to find its arguments.
//!
//! Everything here is a pure function of the file's bytes, so it is unit-tested and fuzzed
//! (`tracer/fuzz`, target `stapsdt`) without a kernel. The tracer listens to two probes,
//! `tracer:phase_begin(case, n)` and `tracer:phase_end(case, n, ops)`: [`phase_sites`].
pub mod args;
pub mod note;
pub mod testelf;
#[cfg(test)]
mod tests;

use object::{Object, ObjectSection, ObjectSegment};
use tracer_ebpf::{
    USDT_ARG_CONST, USDT_ARG_MEM, USDT_ARG_REG, USDT_NO_INDEX, USDT_ROLE_BEGIN, USDT_ROLE_END,
    UsdtArg, UsdtSpec,
};

pub use args::{Arg, Operand};
pub use note::RawNote;

/// The provider and probe names of the tracer's phase protocol.
pub const PROVIDER: &str = "tracer";
pub const BEGIN: &str = "phase_begin";
pub const END: &str = "phase_end";

/// One probe site, ready to attach.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Probe {
    pub provider: String,
    pub name: String,
    /// The site's virtual address after the `.stapsdt.base` adjustment.
    pub addr: u64,
    /// Where the uprobe goes: the site's offset in the file.
    pub file_offset: u64,
    /// The semaphore's offset in the file (the kernel's uprobe `ref_ctr_offset`), if any.
    pub semaphore_offset: Option<u64>,
    pub args: Vec<Arg>,
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum UsdtError {
    #[error("not an ELF file ({0})")]
    NotElf(String),
    #[error("USDT probes are read from x86-64 ELF64 files only; this one is {0}")]
    Architecture(String),
    #[error("malformed .note.stapsdt: {0}")]
    Note(#[from] note::NoteError),
    #[error("malformed .note.stapsdt: probe {probe}: {why}")]
    Probe { probe: String, why: String },
}

/// Every USDT probe of an ELF file (none when it has no `.note.stapsdt`).
pub fn probes(elf: &[u8]) -> Result<Vec<Probe>, UsdtError> {
    probes_of(elf, |_| true)
}

/// The probes of an ELF file that `keep` selects: other programs' probes (libc's, a
/// runtime's) are not checked, so an argument form we cannot evaluate there is no error.
fn probes_of(elf: &[u8], keep: impl Fn(&RawNote) -> bool) -> Result<Vec<Probe>, UsdtError> {
    let file = object::File::parse(elf).map_err(|e| UsdtError::NotElf(e.to_string()))?;
    let Some(section) = file.section_by_name(".note.stapsdt") else {
        return Ok(Vec::new());
    };
    if file.format() != object::BinaryFormat::Elf
        || file.architecture() != object::Architecture::X86_64
        || !file.is_64()
        || !file.is_little_endian()
    {
        return Err(UsdtError::Architecture(format!(
            "{:?} {:?}",
            file.format(),
            file.architecture()
        )));
    }
    let data = section
        .data()
        .map_err(|e| UsdtError::NotElf(format!(".note.stapsdt cannot be read: {e}")))?;
    let notes = note::parse_notes(data)?;
    // Prelink may move the file after linking: the notes keep link-time addresses and
    // `.stapsdt.base`'s link-time address, so the move is the section's address now minus it.
    let base_now = file.section_by_name(".stapsdt.base").map(|s| s.address());
    // (vaddr, memsz, file offset, file size, executable)
    let segments: Vec<(u64, u64, u64, u64, bool)> = file
        .segments()
        .map(|s| {
            let (off, fsz) = s.file_range();
            let exec = matches!(s.flags(), object::SegmentFlags::Elf { p_flags } if p_flags & object::elf::PF_X != 0);
            (s.address(), s.size(), off, fsz, exec)
        })
        .collect();
    let mut out = Vec::with_capacity(notes.len());
    for n in notes.into_iter().filter(|n| keep(n)) {
        let probe = format!("{}:{}", n.provider, n.name);
        let bad = |why: String| UsdtError::Probe {
            probe: probe.clone(),
            why,
        };
        let adjust = |addr: u64| -> Result<u64, UsdtError> {
            match base_now {
                Some(now) if n.base != 0 => {
                    let moved = addr as i128 + now as i128 - n.base as i128;
                    u64::try_from(moved).map_err(|_| {
                        bad(format!(
                            "address {addr:#x} does not survive the .stapsdt.base adjustment"
                        ))
                    })
                }
                _ => Ok(addr),
            }
        };
        let addr = adjust(n.pc)?;
        let file_offset = offset_of(&segments, addr, true).ok_or_else(|| {
            bad(format!(
                "site {addr:#x} is outside every executable segment"
            ))
        })?;
        let semaphore_offset = match n.semaphore {
            0 => None,
            s => {
                let s = adjust(s)?;
                Some(offset_of(&segments, s, false).ok_or_else(|| {
                    bad(format!(
                        "semaphore {s:#x} is not in any file-backed segment"
                    ))
                })?)
            }
        };
        let args = args::parse_args(&n.args).map_err(|e| bad(e.to_string()))?;
        out.push(Probe {
            provider: n.provider,
            name: n.name,
            addr,
            file_offset,
            semaphore_offset,
            args,
        });
    }
    Ok(out)
}

/// The file offset of `addr`: inside a loadable segment's file-backed part (an executable
/// one for a probe site; any for a semaphore, which lives in initialised data).
fn offset_of(segments: &[(u64, u64, u64, u64, bool)], addr: u64, exec: bool) -> Option<u64> {
    segments
        .iter()
        .filter(|s| !exec || s.4)
        .find(|(va, _, _, fsz, _)| addr >= *va && addr - va < *fsz)
        .and_then(|(va, _, off, _, _)| off.checked_add(addr - va))
}

/// One site of the tracer's phase probes, with what its program copy decodes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PhaseSite {
    pub probe: Probe,
    pub spec: UsdtSpec,
}

/// The sites of `tracer:phase_begin` and `tracer:phase_end` in an ELF file. Other probes are
/// ignored; one of ours with too few arguments is an error (it would read garbage).
pub fn phase_sites(elf: &[u8]) -> Result<Vec<PhaseSite>, UsdtError> {
    let mut out = Vec::new();
    for p in probes_of(elf, |n| n.provider == PROVIDER)? {
        let (role, need) = match p.name.as_str() {
            BEGIN => (USDT_ROLE_BEGIN, 2),
            END => (USDT_ROLE_END, 3),
            _ => continue,
        };
        if p.args.len() < need {
            return Err(UsdtError::Probe {
                probe: format!("{}:{}", p.provider, p.name),
                why: format!(
                    "{} argument(s), the tracer's protocol passes {need} ({})",
                    p.args.len(),
                    if role == USDT_ROLE_BEGIN {
                        "case, n"
                    } else {
                        "case, n, ops"
                    }
                ),
            });
        }
        let mut spec = UsdtSpec {
            role,
            nargs: need as u32,
            ..UsdtSpec::default()
        };
        for (slot, a) in spec.args.iter_mut().zip(&p.args) {
            *slot = to_kernel(a);
        }
        out.push(PhaseSite { probe: p, spec });
    }
    Ok(out)
}

fn to_kernel(a: &Arg) -> UsdtArg {
    let mut k = UsdtArg {
        size: a.size,
        signed: u32::from(a.signed),
        index_off: USDT_NO_INDEX,
        scale: 1,
        ..UsdtArg::default()
    };
    match a.operand {
        Operand::Const(v) => {
            k.kind = USDT_ARG_CONST;
            k.value = v;
        }
        Operand::Reg(off) => {
            k.kind = USDT_ARG_REG;
            k.reg_off = off;
        }
        Operand::Mem { base, index, disp } => {
            k.kind = USDT_ARG_MEM;
            k.reg_off = base;
            k.value = disp;
            if let Some((i, s)) = index {
                k.index_off = i;
                k.scale = s;
            }
        }
    }
    k
}
