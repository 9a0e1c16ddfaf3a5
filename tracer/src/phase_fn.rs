//! `--phase-fn BINARY:SYMBOL` (or `BINARY:0xADDR`): the command is measured only while inside
//! one of its own functions. A uprobe at the function's entry begins the phase and a
//! uretprobe at its return ends it, so setup and teardown outside it are left unphased.
//!
//! Resolving the location is a pure function of the binary's bytes ([`locate`]), checked
//! before anything is loaded, so a typo is a usage error (exit 2) and not a failed run.
use std::path::{Path, PathBuf};

use object::{Object, ObjectSegment, ObjectSymbol, SymbolKind};

/// A resolved phase function.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PhaseFn {
    pub binary: PathBuf,
    /// What the user wrote after the colon (for messages).
    pub what: String,
    /// Where the uprobe goes: the entry's offset in the file.
    pub file_offset: u64,
    /// Other functions at the same address (identical code folded into one body): their
    /// calls are in the phase too.
    pub aliases: Vec<String>,
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PhaseFnError {
    #[error("--phase-fn {0:?}: expected BINARY:SYMBOL or BINARY:0xADDR")]
    Syntax(String),
    #[error("--phase-fn: {0}: no such file (nor an executable of that name on PATH)")]
    Missing(String),
    #[error("--phase-fn: {path}: not an ELF file ({why})")]
    NotElf { path: String, why: String },
    #[error("--phase-fn: {path}: no function {symbol:?}{hint}")]
    NoSymbol {
        path: String,
        symbol: String,
        hint: String,
    },
    #[error(
        "--phase-fn: {path}: {addr:#x} is outside every executable segment (give a function's address as `nm` or `objdump -d` show it)"
    )]
    OutsideText { path: String, addr: u64 },
}

/// Parse `BINARY:SYMBOL|0xADDR`, find the binary (as a path, else on PATH) and resolve the
/// function's file offset.
pub fn resolve(arg: &str) -> Result<PhaseFn, PhaseFnError> {
    let (bin, what) = arg
        .rsplit_once(':')
        .filter(|(b, w)| !b.is_empty() && !w.is_empty())
        .ok_or_else(|| PhaseFnError::Syntax(arg.to_string()))?;
    let path = if Path::new(bin).is_file() {
        PathBuf::from(bin)
    } else if !bin.contains('/') {
        crate::exec_path::find_executable(bin).ok_or_else(|| PhaseFnError::Missing(bin.into()))?
    } else {
        return Err(PhaseFnError::Missing(bin.into()));
    };
    let path = path.canonicalize().unwrap_or(path);
    let data = std::fs::read(&path).map_err(|e| PhaseFnError::NotElf {
        path: path.display().to_string(),
        why: e.to_string(),
    })?;
    let file_offset = locate(&data, what).map_err(|e| e.with_path(&path))?;
    Ok(PhaseFn {
        binary: path,
        what: what.to_string(),
        file_offset,
        aliases: aliases(&data, what),
    })
}

impl PhaseFnError {
    fn with_path(self, path: &Path) -> Self {
        let p = path.display().to_string();
        match self {
            PhaseFnError::NotElf { why, .. } => PhaseFnError::NotElf { path: p, why },
            PhaseFnError::NoSymbol { symbol, hint, .. } => PhaseFnError::NoSymbol {
                path: p,
                symbol,
                hint,
            },
            PhaseFnError::OutsideText { addr, .. } => PhaseFnError::OutsideText { path: p, addr },
            other => other,
        }
    }
}

/// Other function names at the address of `what` (a name), deduplicated.
pub fn aliases(elf: &[u8], what: &str) -> Vec<String> {
    let Ok(file) = object::File::parse(elf) else {
        return Vec::new();
    };
    let syms = || file.symbols().chain(file.dynamic_symbols());
    let Some(addr) = syms()
        .find(|s| s.kind() == SymbolKind::Text && s.address() != 0 && s.name() == Ok(what))
        .map(|s| s.address())
    else {
        return Vec::new();
    };
    let mut out: Vec<String> = syms()
        .filter(|s| s.kind() == SymbolKind::Text && s.address() == addr)
        .filter_map(|s| s.name().ok().map(str::to_string))
        .filter(|n| n != what && !n.is_empty())
        .collect();
    out.sort();
    out.dedup();
    out
}

/// The file offset of a function given by name or by `0x` virtual address.
pub fn locate(elf: &[u8], what: &str) -> Result<u64, PhaseFnError> {
    let file = object::File::parse(elf).map_err(|e| PhaseFnError::NotElf {
        path: String::new(),
        why: e.to_string(),
    })?;
    let addr = match what.strip_prefix("0x").or_else(|| what.strip_prefix("0X")) {
        Some(hex) => u64::from_str_radix(hex, 16).map_err(|_| PhaseFnError::Syntax(what.into()))?,
        None => {
            let found = file
                .symbols()
                .chain(file.dynamic_symbols())
                .find(|s| s.kind() == SymbolKind::Text && s.address() != 0 && s.name() == Ok(what));
            match found {
                Some(s) => s.address(),
                None => {
                    let stripped = file.symbols().next().is_none();
                    let hint = if stripped {
                        " (the binary is stripped: it has no .symtab, and its dynamic symbols do \
                         not name it; give its address as BINARY:0xADDR, or use an unstripped \
                         build)"
                    } else {
                        " (not a defined function in its symbol tables: misspelled, static and \
                         inlined away, or in a shared library: name that library as BINARY)"
                    };
                    return Err(PhaseFnError::NoSymbol {
                        path: String::new(),
                        symbol: what.into(),
                        hint: hint.into(),
                    });
                }
            }
        }
    };
    file.segments()
        .filter(|s| {
            matches!(s.flags(), object::SegmentFlags::Elf { p_flags } if p_flags & object::elf::PF_X != 0)
        })
        .find_map(|s| {
            let (off, fsz) = s.file_range();
            let va = s.address();
            (addr >= va && addr - va < fsz).then(|| off + (addr - va))
        })
        .ok_or(PhaseFnError::OutsideText {
            path: String::new(),
            addr,
        })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::usdt::testelf::{TEXT_OFFSET, TEXT_VADDR, x86_64_elf};

    #[test]
    fn addresses_map_to_offsets_inside_executable_segments_only() {
        let elf = x86_64_elf(&[]);
        assert_eq!(
            locate(&elf, &format!("{:#x}", TEXT_VADDR + 0x20)),
            Ok(TEXT_OFFSET + 0x20)
        );
        for bad in ["0x10", "0x403010", "0xffffffffffffffff"] {
            assert!(
                matches!(locate(&elf, bad), Err(PhaseFnError::OutsideText { .. })),
                "{bad}"
            );
        }
        assert!(matches!(locate(&elf, "0xzz"), Err(PhaseFnError::Syntax(_))));
    }

    #[test]
    fn a_missing_symbol_in_a_file_without_symtab_says_stripped() {
        let e = locate(&x86_64_elf(&[]), "timed_loop").unwrap_err();
        assert!(e.to_string().contains("stripped"), "{e}");
        assert!(matches!(
            locate(b"not elf", "main"),
            Err(PhaseFnError::NotElf { .. })
        ));
    }

    #[test]
    fn the_argument_needs_a_binary_and_a_location() {
        for bad in ["", "bench", "bench:", ":main"] {
            assert!(
                matches!(resolve(bad), Err(PhaseFnError::Syntax(_))),
                "{bad:?}"
            );
        }
        let e = resolve("/nonexistent/bench:main").unwrap_err();
        assert!(matches!(e, PhaseFnError::Missing(_)), "{e}");
        let e = resolve("/etc/hostname:main").unwrap_err();
        assert!(
            e.to_string().contains("/etc/hostname: not an ELF file"),
            "{e}"
        );
    }
}
