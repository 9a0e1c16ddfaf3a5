//! User-space symbolization: ELF symbol tables and /proc/PID/maps, so caller stacks show
//! `main;run_phase;waitpid` instead of addresses. Processes often exit before the run ends,
//! so their maps are cached while they are alive (see `UserSymbolizer::remember`).
//!
//! A frame is a function name when the binary's symbol table (.symtab, else .dynsym: static
//! musl binaries keep theirs, stripped ones only the dynamic one) covers the address,
//! `[binary+0xoffset]` when the mapping is known but no symbol covers it, and `[unknown]`
//! when no mapping is (a process gone before its maps were read, a broken frame-pointer
//! chain). A binary replaced on disk since it was mapped is not read for names.
use std::collections::HashMap;
use std::path::{Path, PathBuf};

use object::{Object, ObjectSegment, ObjectSymbol, SymbolKind};

use crate::kernel::symbolize::UNKNOWN;

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
    /// (file offset, file size, virtual address) of loadable segments, executable ones
    /// first: a page shared by a data and a code segment is code when we execute it.
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
        let mut segments: Vec<(bool, (u64, u64, u64))> = file
            .segments()
            .map(|seg| {
                let (off, size) = seg.file_range();
                let exec = match seg.flags() {
                    object::SegmentFlags::Elf { p_flags } => p_flags & object::elf::PF_X != 0,
                    _ => false,
                };
                (exec, (off, size, seg.address()))
            })
            .collect();
        segments.sort_by_key(|(exec, _)| !exec);
        let segments = segments.into_iter().map(|(_, s)| s).collect();
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
    /// A file path, or a pseudo-file such as `[vdso]`.
    pub path: PathBuf,
    /// The mapped file's device (major, minor) and inode: the file now at `path` is the one
    /// that was mapped only while they match.
    pub dev: (u64, u64),
    pub inode: u64,
}

/// Whether executable maps hold a file's code, not only pseudo-files such as `[vdso]`: an
/// image whose segments are mapped.
fn maps_file_code(maps: &[Mapping]) -> bool {
    maps.iter()
        .any(|m| !m.path.as_os_str().as_encoded_bytes().starts_with(b"["))
}

/// Parse the executable mappings of a maps file: file-backed ones and named pseudo-files
/// (`[vdso]`); anonymous executable memory (JIT code) has no name to give.
pub fn parse_maps(text: &str) -> Vec<Mapping> {
    let mut out = Vec::new();
    for line in text.lines() {
        let mut it = line.split_whitespace();
        let (Some(range), Some(perms), Some(offset)) = (it.next(), it.next(), it.next()) else {
            continue;
        };
        let dev = it.next().and_then(|d| {
            let (maj, min) = d.split_once(':')?;
            Some((
                u64::from_str_radix(maj, 16).ok()?,
                u64::from_str_radix(min, 16).ok()?,
            ))
        });
        let inode = it.next().and_then(|i| i.parse::<u64>().ok());
        let Some(path) = it.next() else { continue };
        if !perms.contains('x') || !(path.starts_with('/') || path.starts_with('[')) {
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
            dev: dev.unwrap_or_default(),
            inode: inode.unwrap_or(0),
        });
    }
    out
}

/// Symbolizes user addresses of the processes it was told about.
#[derive(Default)]
pub struct UserSymbolizer {
    /// pid -> (executable when the maps were read, executable mappings)
    maps: HashMap<u32, (PathBuf, Vec<Mapping>)>,
    /// (path, device, inode) -> symbols, None when unreadable or replaced since mapped.
    elves: HashMap<(PathBuf, (u64, u64), u64), Option<ElfSymbols>>,
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
            if maps_file_code(&maps) {
                self.maps.insert(pid, (exe, maps));
            } else {
                // Mid-exec: the kernel switches the executable before the ELF loader maps its
                // segments, so the new image's maps may hold only [vdso] for a moment (a
                // process read there under load kept those, and every frame of its 1.6 s
                // run read [unknown]). Read again next time; and the old image's maps name
                // none of the new one's code.
                self.maps.remove(&pid);
            }
        }
    }

    pub fn knows(&self, pid: u32) -> bool {
        self.maps.contains_key(&pid)
    }

    /// Frame name for a user address of `pid`. `return_address`: the address follows a call
    /// (every frame but the innermost), so it is looked up one byte earlier; a call ending a
    /// function would otherwise name the next one.
    pub fn frame_name(&mut self, pid: u32, ip: u64, return_address: bool) -> String {
        let Some(m) = self
            .maps
            .get(&pid)
            .and_then(|(_, ms)| ms.iter().find(|m| ip >= m.start && ip < m.end))
        else {
            return UNKNOWN.to_string();
        };
        let off = ip - m.start + m.offset;
        let lookup = if return_address && ip > m.start {
            off - 1
        } else {
            off
        };
        let base = m
            .path
            .file_name()
            .map(|f| f.to_string_lossy().into_owned())
            .unwrap_or_default();
        if m.path.as_os_str().as_encoded_bytes().starts_with(b"[") {
            // [vdso], [vsyscall]: no file to read symbols from.
            return format!("{}+{off:#x}]", base.trim_end_matches(']'));
        }
        let key = (m.path.clone(), m.dev, m.inode);
        let elf = self
            .elves
            .entry(key)
            .or_insert_with_key(|(path, dev, inode)| {
                same_file(path, *dev, *inode)
                    .then(|| ElfSymbols::load(path))
                    .flatten()
            });
        match elf.as_ref().and_then(|e| e.name_at_offset(lookup)) {
            Some(name) => name.to_string(),
            None => format!("[{base}+{off:#x}]"),
        }
    }
}

/// Is the file at `path` still the one that was mapped? Inode 0 (not reported): trust the path.
fn same_file(path: &Path, dev: (u64, u64), inode: u64) -> bool {
    use std::os::unix::fs::MetadataExt;
    if inode == 0 {
        return true;
    }
    std::fs::metadata(path).is_ok_and(|m| {
        let d = m.dev();
        m.ino() == inode && (libc::major(d) as u64, libc::minor(d) as u64) == dev
    })
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
        assert_eq!(m.len(), 2);
        assert_eq!(m[0].start, 0x55d0c0a20000);
        assert_eq!(m[0].offset, 0x20000);
        assert_eq!(m[0].path, PathBuf::from("/usr/bin/x"));
        assert_eq!((m[0].dev, m[0].inode), ((8, 1), 123));
        assert_eq!(m[1].path, PathBuf::from("[vdso]"));
    }

    /// Maps read mid-exec (only the vDSO mapped yet) are not an image's: not kept.
    #[test]
    fn maps_without_file_code_are_incomplete() {
        let mid_exec = "7ffd1000-7ffd3000 r-xp 00000000 00:00 0 [vdso]\n";
        assert!(!maps_file_code(&parse_maps(mid_exec)));
        let loaded = format!("00401000-00405000 r-xp 00001000 08:01 77 /tmp/waiter\n{mid_exec}");
        assert!(maps_file_code(&parse_maps(&loaded)));
    }

    #[test]
    fn symbolizes_our_own_code() {
        // This test binary is an ELF with symbols; find a function of ours through its maps.
        let pid = std::process::id();
        let mut s = UserSymbolizer::default();
        s.remember(pid);
        assert!(s.knows(pid));
        let ip = symbolizes_our_own_code as *const () as u64;
        let name = s.frame_name(pid, ip, false);
        assert!(name.contains("symbolizes_our_own_code"), "got {name}");
        // As a return address (one past a call) the lookup is one byte earlier.
        assert!(
            s.frame_name(pid, ip + 1, true)
                .contains("symbolizes_our_own_code")
        );
        assert_eq!(s.frame_name(pid, 8, false), UNKNOWN);
        assert_eq!(s.frame_name(pid + 1_000_000, ip, false), UNKNOWN);
    }

    /// A symbolizer that knows one process: our own executable's mappings, with `inode`
    /// standing in for the inode the kernel reported.
    fn with_own_maps(inode: impl Fn(u64) -> u64) -> (UserSymbolizer, u32) {
        let pid = std::process::id();
        let text = std::fs::read_to_string(format!("/proc/{pid}/maps")).unwrap();
        let me = std::fs::canonicalize(std::env::current_exe().unwrap()).unwrap();
        let maps: Vec<Mapping> = parse_maps(&text)
            .into_iter()
            .filter(|m| m.path == me)
            .map(|m| Mapping {
                inode: inode(m.inode),
                ..m
            })
            .collect();
        assert!(!maps.is_empty(), "precondition: our executable is mapped");
        let mut s = UserSymbolizer::default();
        s.maps.insert(pid, (me, maps));
        (s, pid)
    }

    #[test]
    fn a_binary_replaced_since_it_was_mapped_gives_offsets_not_names() {
        let ip = a_binary_replaced_since_it_was_mapped_gives_offsets_not_names as *const () as u64;
        let (mut same, pid) = with_own_maps(|i| i);
        assert!(
            same.frame_name(pid, ip, false)
                .contains("a_binary_replaced_since_it_was_mapped"),
        );
        let (mut replaced, pid) = with_own_maps(|i| i + 1);
        let name = replaced.frame_name(pid, ip, false);
        let exe = std::env::current_exe().unwrap();
        let base = exe.file_name().unwrap().to_string_lossy();
        assert!(name.starts_with(&format!("[{base}+0x")), "got {name}");
        assert!(name.ends_with(']'), "got {name}");
    }

    #[test]
    fn pseudo_file_mappings_are_named_by_offset() {
        let mut s = UserSymbolizer::default();
        let maps = parse_maps("7ffd1000-7ffd3000 r-xp 00000000 00:00 0 [vdso]\n");
        s.maps.insert(1, (PathBuf::from("/x"), maps));
        assert_eq!(s.frame_name(1, 0x7ffd1010, false), "[vdso+0x10]");
    }

    #[test]
    fn finds_marker_symbols_only_where_they_exist() {
        let me = std::env::current_exe().unwrap();
        assert!(!elf_has_symbols(&me, &["definitely_not_a_symbol_here"]));
        assert!(!elf_has_symbols(Path::new("/nonexistent"), &["main"]));
    }
}
