//! User-space symbolization: ELF symbol tables and /proc/PID/maps, so caller stacks show
//! `main;run_phase;waitpid` instead of addresses. Processes often exit before the run ends,
//! so their maps are cached while they are alive (see `UserSymbolizer::remember`).
use std::collections::HashMap;
use std::path::{Path, PathBuf};

use object::{Object, ObjectSegment, ObjectSymbol, SymbolKind};

/// Does the ELF file define all of these (text) symbols?
pub fn elf_has_symbols(path: &Path, names: &[&str]) -> bool {
    let Ok(data) = std::fs::read(path) else {
        return false;
    };
    let Ok(file) = object::File::parse(&*data) else {
        return false;
    };
    names.iter().all(|n| {
        file.symbols()
            .chain(file.dynamic_symbols())
            .any(|s| s.kind() == SymbolKind::Text && s.name() == Ok(*n) && s.address() != 0)
    })
}

/// Text symbols and load segments of one ELF file.
#[derive(Debug, Default)]
pub struct ElfSymbols {
    /// (start, size, demangled name), sorted by start.
    syms: Vec<(u64, u64, String)>,
    /// (file offset, file size, virtual address) of loadable segments.
    segments: Vec<(u64, u64, u64)>,
}

impl ElfSymbols {
    pub fn load(path: &Path) -> Option<ElfSymbols> {
        let data = std::fs::read(path).ok()?;
        let file = object::File::parse(&*data).ok()?;
        let mut syms: Vec<(u64, u64, String)> = file
            .symbols()
            .chain(file.dynamic_symbols())
            .filter(|s| s.kind() == SymbolKind::Text && s.address() != 0)
            .filter_map(|s| {
                let name = s.name().ok()?;
                Some((
                    s.address(),
                    s.size(),
                    format!("{:#}", rustc_demangle::demangle(name)),
                ))
            })
            .collect();
        syms.sort_by_key(|s| s.0);
        syms.dedup_by_key(|s| s.0);
        let segments = file
            .segments()
            .map(|seg| {
                let (off, size) = seg.file_range();
                (off, size, seg.address())
            })
            .collect();
        Some(ElfSymbols { syms, segments })
    }

    /// Name of the function at file offset `off`.
    pub fn name_at_offset(&self, off: u64) -> Option<&str> {
        let (seg_off, _, seg_addr) = self
            .segments
            .iter()
            .find(|(o, sz, _)| off >= *o && off < o + sz)?;
        self.name_at_vaddr(off - seg_off + seg_addr)
    }

    pub fn name_at_vaddr(&self, addr: u64) -> Option<&str> {
        let i = self.syms.partition_point(|s| s.0 <= addr);
        let (start, size, name) = self.syms.get(i.checked_sub(1)?)?;
        // Size 0 symbols (hand-written asm) cover up to the next symbol.
        if *size == 0 || addr < start + size {
            Some(name)
        } else {
            None
        }
    }
}

/// One executable mapping from /proc/PID/maps.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Mapping {
    pub start: u64,
    pub end: u64,
    pub offset: u64,
    pub path: PathBuf,
}

/// Parse the executable, file-backed mappings of a maps file.
pub fn parse_maps(text: &str) -> Vec<Mapping> {
    let mut out = Vec::new();
    for line in text.lines() {
        let mut it = line.split_whitespace();
        let (Some(range), Some(perms), Some(offset)) = (it.next(), it.next(), it.next()) else {
            continue;
        };
        let (_dev, _inode) = (it.next(), it.next());
        let Some(path) = it.next() else { continue };
        if !perms.contains('x') || !path.starts_with('/') {
            continue;
        }
        let Some((s, e)) = range.split_once('-') else {
            continue;
        };
        let (Ok(start), Ok(end), Ok(offset)) = (
            u64::from_str_radix(s, 16),
            u64::from_str_radix(e, 16),
            u64::from_str_radix(offset, 16),
        ) else {
            continue;
        };
        out.push(Mapping {
            start,
            end,
            offset,
            path: PathBuf::from(path),
        });
    }
    out
}

/// Symbolizes user addresses of the processes it was told about.
#[derive(Default)]
pub struct UserSymbolizer {
    /// pid -> (executable when the maps were read, executable mappings)
    maps: HashMap<u32, (PathBuf, Vec<Mapping>)>,
    elves: HashMap<PathBuf, Option<ElfSymbols>>,
}

impl UserSymbolizer {
    /// Cache the maps of a live process. Re-reads them when the process has exec'd since
    /// (a readlink per call, so calling this often is cheap).
    pub fn remember(&mut self, pid: u32) {
        let Ok(exe) = std::fs::read_link(format!("/proc/{pid}/exe")) else {
            return;
        };
        if self.maps.get(&pid).is_some_and(|(e, _)| *e == exe) {
            return;
        }
        if let Ok(text) = std::fs::read_to_string(format!("/proc/{pid}/maps")) {
            let maps = parse_maps(&text);
            if !maps.is_empty() {
                self.maps.insert(pid, (exe, maps));
            }
        }
    }

    pub fn knows(&self, pid: u32) -> bool {
        self.maps.contains_key(&pid)
    }

    /// Frame name for a user address of `pid`.
    pub fn frame_name(&mut self, pid: u32, ip: u64) -> String {
        let Some(m) = self
            .maps
            .get(&pid)
            .and_then(|(_, ms)| ms.iter().find(|m| ip >= m.start && ip < m.end))
        else {
            return format!("[unknown-{ip:#x}]");
        };
        let off = ip - m.start + m.offset;
        let path = m.path.clone();
        let elf = self
            .elves
            .entry(path.clone())
            .or_insert_with(|| ElfSymbols::load(&path));
        match elf.as_ref().and_then(|e| e.name_at_offset(off)) {
            Some(name) => name.to_string(),
            None => format!(
                "[{}+{off:#x}]",
                path.file_name()
                    .map(|f| f.to_string_lossy().into_owned())
                    .unwrap_or_default()
            ),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_executable_file_mappings() {
        let text = "\
55d0c0a00000-55d0c0a20000 r--p 00000000 08:01 123 /usr/bin/x
55d0c0a20000-55d0c0a80000 r-xp 00020000 08:01 123 /usr/bin/x
7f0000000000-7f0000001000 r-xp 00000000 00:00 0 [vdso]
7f0000002000-7f0000003000 rw-p 00000000 00:00 0
";
        let m = parse_maps(text);
        assert_eq!(m.len(), 1);
        assert_eq!(m[0].start, 0x55d0c0a20000);
        assert_eq!(m[0].offset, 0x20000);
        assert_eq!(m[0].path, PathBuf::from("/usr/bin/x"));
    }

    #[test]
    fn symbolizes_our_own_code() {
        // This test binary is an ELF with symbols; find a function of ours through its maps.
        let pid = std::process::id();
        let mut s = UserSymbolizer::default();
        s.remember(pid);
        assert!(s.knows(pid));
        let ip = symbolizes_our_own_code as *const () as u64;
        let name = s.frame_name(pid, ip);
        assert!(name.contains("symbolizes_our_own_code"), "got {name}");
        assert!(s.frame_name(pid, 8).starts_with("[unknown"));
    }

    #[test]
    fn finds_marker_symbols_only_where_they_exist() {
        let me = std::env::current_exe().unwrap();
        assert!(!elf_has_symbols(&me, &["definitely_not_a_symbol_here"]));
        assert!(!elf_has_symbols(Path::new("/nonexistent"), &["main"]));
    }
}
