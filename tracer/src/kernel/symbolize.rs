//! Kernel stack addresses -> frame names, never the name of a neighbour.
//!
//! /proc/kallsyms lists where symbols start, not where they end. Naming an address after
//! "the symbol that precedes it" names the wrong function whenever the address lies in code
//! the table does not list: a BPF trampoline loaded after the table was read came out as the
//! last core kernel symbol before module space (on 6.1, `exit_amd_microcode`, an `__exit`
//! function freed at boot). So every symbol here also has an end: the next symbol of any kind,
//! and the end of its region (core text ends at `_etext`; a module at its /proc/modules extent;
//! a BPF program at its JIT image length; a trampoline or ftrace/kprobe page at one page).
//! Init text is freed after boot: nothing there is named. An address outside every range is
//! `[unknown]`.
//!
//! The table must be read after every probe is attached (trampolines and programs appear in
//! kallsyms only once loaded) and before any is detached (they leave it when freed): the
//! recorder reads it when a run ends, before detaching.
use std::collections::{BTreeSet, HashMap};
use std::io;

use super::kallsyms::{self, Line};

/// A symbol whose region has no known end (a module missing from /proc/modules, core text
/// without `_etext`) covers at most this much: larger kernel functions are rare, and an
/// address beyond is better `[unknown]` than a guess.
const UNBOUNDED_SPAN: u64 = 64 * 1024;

/// Frame name of an address that no known symbol covers.
pub const UNKNOWN: &str = "[unknown]";

/// Is this frame name a BPF program, trampoline or other BPF image (as `frame_name` names
/// them)? The tracer's own probes are BPF: such frames are never the traced work.
pub fn is_bpf_frame(name: &str) -> bool {
    name.starts_with("[bpf_prog") || name == "[bpf_trampoline]" || name.starts_with("[bpf ")
}

/// What bounds a symbol besides the next symbol: facts from outside /proc/kallsyms.
#[derive(Clone, Debug)]
pub struct Extents {
    /// /proc/modules: module name -> (base address, size in bytes).
    pub modules: HashMap<String, (u64, u64)>,
    /// Loaded BPF programs: tag -> JIT image length (the longest, if several share a tag).
    pub bpf_jited: HashMap<u64, u64>,
    /// A trampoline, ftrace trampoline or kprobe instruction slot page is at most one page.
    pub page_size: u64,
}

impl Default for Extents {
    fn default() -> Extents {
        Extents {
            modules: HashMap::new(),
            bpf_jited: HashMap::new(),
            page_size: 4096,
        }
    }
}

impl Extents {
    /// Read /proc/modules and the loaded BPF programs' JIT lengths. Either may be missing
    /// (no module support, no privileges): the affected symbols then get the fallback bound.
    pub fn load() -> Extents {
        let modules = std::fs::read_to_string("/proc/modules")
            .map(|t| parse_modules(&t))
            .unwrap_or_default();
        let mut bpf_jited: HashMap<u64, u64> = HashMap::new();
        for info in aya::programs::loaded_programs().filter_map(Result::ok) {
            let len = u64::from(info.size_jitted());
            let e = bpf_jited.entry(info.tag()).or_default();
            *e = (*e).max(len);
        }
        // SAFETY: sysconf has no preconditions.
        let page = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
        Extents {
            modules,
            bpf_jited,
            page_size: u64::try_from(page).ok().filter(|&p| p > 0).unwrap_or(4096),
        }
    }
}

/// /proc/modules lines: `name size refcount deps state address`. On 6.4+ the address is the
/// module's text and the size covers all of its memory, so base+size still bounds its text.
pub fn parse_modules(text: &str) -> HashMap<String, (u64, u64)> {
    text.lines()
        .filter_map(|line| {
            let f: Vec<&str> = line.split_whitespace().collect();
            let size = f.get(1)?.parse::<u64>().ok()?;
            let addr = u64::from_str_radix(f.get(5)?.trim_start_matches("0x"), 16).ok()?;
            (addr != 0 && size != 0).then(|| (f[0].to_string(), (addr, size)))
        })
        .collect()
}

/// Section markers of the core kernel image, from its kallsyms lines.
#[derive(Clone, Copy, Debug, Default)]
struct CoreLayout {
    /// `_stext.._etext`: the text that runs after boot.
    text: Option<(u64, u64)>,
    /// `_sinittext.._einittext` and `__init_begin..__init_end`: freed after boot (exit text
    /// of built-in code sits in the latter on x86).
    init: [Option<(u64, u64)>; 2],
    /// Start of the first init range: where running core text ends when `_etext` is not
    /// listed. (Built-in exit text after `_einittext` is caught by the text bound: without
    /// KALLSYMS_ALL kallsyms lists no `__init_end`.)
    init_start: Option<u64>,
}

impl CoreLayout {
    fn from_lines(lines: &[Line<'_>]) -> CoreLayout {
        let mut at: HashMap<&str, u64> = HashMap::new();
        for l in lines.iter().filter(|l| l.module.is_none()) {
            if matches!(
                l.name,
                "_text"
                    | "_stext"
                    | "_etext"
                    | "_sinittext"
                    | "_einittext"
                    | "__init_begin"
                    | "__init_end"
            ) {
                at.entry(l.name).or_insert(l.addr);
            }
        }
        let pair = |a: &str, b: &str| match (at.get(a), at.get(b)) {
            (Some(&s), Some(&e)) if s < e => Some((s, e)),
            _ => None,
        };
        let start = at.get("_stext").or_else(|| at.get("_text")).copied();
        let text = match (start, at.get("_etext")) {
            (Some(s), Some(&e)) if s < e => Some((s, e)),
            _ => None,
        };
        let init_start = ["_sinittext", "__init_begin"]
            .iter()
            .filter_map(|n| at.get(n).copied())
            .min();
        CoreLayout {
            text,
            init: [
                pair("_sinittext", "_einittext"),
                pair("__init_begin", "__init_end"),
            ],
            init_start,
        }
    }

    /// Can code at `addr` run after boot? Init ranges never; with known text bounds only
    /// inside them; without, anything below the init ranges.
    fn runs_after_boot(&self, addr: u64) -> bool {
        if self.in_init(addr) {
            return false;
        }
        match (self.text, self.init_start) {
            (Some((s, e)), _) => addr >= s && addr < e,
            (None, Some(i)) => addr < i,
            (None, None) => true,
        }
    }

    fn in_init(&self, addr: u64) -> bool {
        self.init
            .iter()
            .flatten()
            .any(|&(s, e)| addr >= s && addr < e)
    }

    /// Where core text that runs after boot ends, if known.
    fn text_end(&self) -> Option<u64> {
        self.text.map(|t| t.1).or(self.init_start)
    }
}

/// Symbols that mark section edges rather than name code (`_stext`, `__entry_text_start`,
/// `__hot_text_end`...): boundaries, never frame names. Functions can end in `_start` too
/// (`__hrtick_start`), hence the narrow patterns.
fn is_section_marker(name: &str) -> bool {
    matches!(
        name,
        "_text"
            | "_stext"
            | "_etext"
            | "_sinittext"
            | "_einittext"
            | "_end"
            | "__init_begin"
            | "__init_end"
    ) || (name.starts_with("__") && (name.ends_with("_text_start") || name.ends_with("_text_end")))
        || name.starts_with("__start_")
        || name.starts_with("__stop_")
}

fn is_text(kind: char) -> bool {
    matches!(kind, 't' | 'T' | 'w' | 'W')
}

/// Frame name of a `[bpf]` kallsyms entry: `bpf_prog_<tag>_<name>` -> `[bpf_prog name]`,
/// `bpf_trampoline_<key>` -> `[bpf_trampoline]`, anything else (dispatchers) -> `[bpf name]`.
fn bpf_frame(name: &str) -> (String, Option<u64>) {
    if let Some(rest) = name.strip_prefix("bpf_prog_") {
        let (tag, prog) = rest.split_at(rest.len().min(16));
        let tag = u64::from_str_radix(tag, 16)
            .ok()
            .filter(|_| tag.len() == 16);
        let prog = prog.trim_start_matches('_');
        let frame = if prog.is_empty() {
            "[bpf_prog]".to_string()
        } else {
            format!("[bpf_prog {prog}]")
        };
        return (frame, tag);
    }
    if name.starts_with("bpf_trampoline_") {
        return ("[bpf_trampoline]".to_string(), None);
    }
    (format!("[bpf {name}]"), None)
}

/// One named address range.
#[derive(Clone, Debug)]
struct Range {
    start: u64,
    end: u64,
    /// The frame name: `names[name.0..name.1]`.
    name: (usize, usize),
}

/// Named, bounded, non-overlapping address ranges of the running kernel's code.
#[derive(Clone, Debug, Default)]
pub struct KernelSymbolizer {
    ranges: Vec<Range>,
    /// All frame names, back to back: one allocation instead of one per symbol (~120k).
    names: String,
}

impl KernelSymbolizer {
    /// Read /proc/kallsyms, /proc/modules and the loaded BPF programs now. Call it while the
    /// probes are attached, so their BPF programs and trampolines are listed.
    pub fn load() -> io::Result<KernelSymbolizer> {
        let text = std::fs::read_to_string("/proc/kallsyms")?;
        Ok(KernelSymbolizer::build(&text, &Extents::load()))
    }

    /// Build from kallsyms text and what else bounds its symbols.
    pub fn build(kallsyms_text: &str, ext: &Extents) -> KernelSymbolizer {
        // Address 0 is what kptr_restrict shows instead of the address: no information.
        let mut lines: Vec<Line<'_>> = kallsyms::lines(kallsyms_text)
            .filter(|l| l.addr != 0)
            .collect();
        // Stable: aliases at one address keep their file order.
        lines.sort_by_key(|l| l.addr);
        let core = CoreLayout::from_lines(&lines);
        let mut ranges: Vec<Range> = Vec::new();
        let mut names = String::new();
        let mut i = 0;
        while i < lines.len() {
            let start = lines[i].addr;
            let mut j = i;
            while j < lines.len() && lines[j].addr == start {
                j += 1;
            }
            // Every symbol of any kind bounds the one before it: code does not overlap.
            let next = lines.get(j).map_or(u64::MAX, |l| l.addr);
            if let Some((frame, region_end)) = best_alias(&lines[i..j], &core, ext) {
                let end = next.min(region_end);
                if end > start {
                    let from = names.len();
                    match frame {
                        Frame::Symbol(n) => names.push_str(n),
                        Frame::Owned(n) => names.push_str(&n),
                    }
                    ranges.push(Range {
                        start,
                        end,
                        name: (from, names.len()),
                    });
                }
            }
            i = j;
        }
        KernelSymbolizer { ranges, names }
    }

    pub fn is_empty(&self) -> bool {
        self.ranges.is_empty()
    }

    /// Frame name for a kernel stack address. `return_address`: the address follows a call
    /// (every frame but the innermost), so the calling instruction is one byte before it; a
    /// call at the very end of a function (to a noreturn one) would otherwise name the next.
    pub fn frame_name(&self, addr: u64, return_address: bool) -> String {
        // A return address names its call site (addr - 1), except for the first byte of a
        // return trampoline (kretprobe_trampoline, rethook, ftrace's return_to_handler):
        // a probe put it in place of the real return address, and addr - 1 would be the
        // unrelated function before it (elfcorehdr_read on 5.10).
        if return_address && let Ok(i) = self.ranges.binary_search_by_key(&addr, |r| r.start) {
            let r = &self.ranges[i];
            let name = &self.names[r.name.0..r.name.1];
            if is_return_trampoline(name) {
                return name.to_string();
            }
        }
        let addr = if return_address {
            addr.saturating_sub(1)
        } else {
            addr
        };
        let i = self.ranges.partition_point(|r| r.start <= addr);
        match i.checked_sub(1).map(|i| &self.ranges[i]) {
            Some(r) if addr < r.end => self.names[r.name.0..r.name.1].to_string(),
            _ => UNKNOWN.to_string(),
        }
    }
}

/// Code a probe's return hook enters through a replaced return address.
pub fn is_return_trampoline(name: &str) -> bool {
    matches!(
        name,
        "kretprobe_trampoline"
            | "__kretprobe_trampoline"
            | "arch_rethook_trampoline"
            | "rethook_trampoline"
            | "return_to_handler"
    )
}

/// A frame name: the kallsyms name itself, or one made for a BPF entry.
enum Frame<'a> {
    Symbol(&'a str),
    Owned(String),
}

/// The frame name and region end of the best of several symbols at one address, or None when
/// none of them names code that runs (data, section markers, freed init text).
fn best_alias<'a>(
    aliases: &[Line<'a>],
    core: &CoreLayout,
    ext: &Extents,
) -> Option<(Frame<'a>, u64)> {
    // Position-independent `__pi_` copies lose to the real name; otherwise the alias that
    // kallsyms lists last wins (max_by_key keeps the last of equals), as it always has here.
    let best = aliases
        .iter()
        .filter(|l| is_text(l.kind) && !is_section_marker(l.name))
        .max_by_key(|l| !l.name.starts_with("__pi_"))?;
    let start = best.addr;
    let capped = |len: u64| start.saturating_add(len);
    match best.module {
        None => {
            if !core.runs_after_boot(start) {
                return None;
            }
            let end = core.text_end().unwrap_or(capped(UNBOUNDED_SPAN));
            Some((Frame::Symbol(best.name), end))
        }
        Some("bpf") => {
            let (frame, tag) = bpf_frame(best.name);
            let len = tag
                .and_then(|t| ext.bpf_jited.get(&t).copied())
                .filter(|&l| l > 0)
                .unwrap_or(ext.page_size);
            Some((Frame::Owned(frame), capped(len)))
        }
        Some(m) if m.starts_with("__builtin__") => {
            Some((Frame::Symbol(best.name), capped(ext.page_size)))
        }
        Some(m) => {
            let end = match ext.modules.get(m) {
                Some(&(base, size)) if start >= base && start < base.saturating_add(size) => {
                    base + size
                }
                // No extent known (or one this kernel reports differently): the fallback span.
                _ => capped(UNBOUNDED_SPAN),
            };
            Some((Frame::Symbol(best.name), end))
        }
    }
}

/// Names of core kernel functions that never run after boot: those in the init ranges or
/// beyond `_etext` (built-in `__exit` code), excluding names that also exist in running text
/// (a static `init` there and one here). A folded stack of a run must never name one.
pub fn init_only_symbols(kallsyms_text: &str) -> BTreeSet<String> {
    let lines: Vec<Line<'_>> = kallsyms::lines(kallsyms_text)
        .filter(|l| l.addr != 0 && is_text(l.kind) && !is_section_marker(l.name))
        .collect();
    let core = CoreLayout::from_lines(
        &kallsyms::lines(kallsyms_text)
            .filter(|l| l.addr != 0)
            .collect::<Vec<_>>(),
    );
    let mut runs: BTreeSet<&str> = BTreeSet::new();
    let mut freed: BTreeSet<&str> = BTreeSet::new();
    for l in &lines {
        if l.module.is_some() || core.runs_after_boot(l.addr) {
            runs.insert(l.name);
        } else {
            freed.insert(l.name);
        }
    }
    freed.difference(&runs).map(|s| s.to_string()).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A 6.1-like layout: core text, init text with built-in exit text after it, a module,
    /// and (once loaded) a BPF program and trampoline in module space.
    const CORE: &str = "\
ffffffff81000000 T _stext
ffffffff81000000 T _text
ffffffff81000000 T startup_64
ffffffff81000100 T __entry_text_start
ffffffff81000100 T entry_SYSCALL_64
ffffffff81000400 t do_wait
ffffffff81000600 T dup_mmap
ffffffff81000800 W abort
ffffffff81000900 T __pi_memset
ffffffff81000900 T memset
ffffffff81000a00 T kernel_clone
ffffffff81001000 T _etext
ffffffff81200000 D __start_rodata
ffffffff83000000 T _sinittext
ffffffff83000000 B __init_begin
ffffffff83000000 T start_kernel
ffffffff83000200 t init_amd_microcode
ffffffff83000300 t do_wait
ffffffff83000400 T _einittext
ffffffff83100000 t exit_amd_microcode
ffffffffc0001000 t xfs_foo\t[xfs]
ffffffffc0001100 t xfs_bar\t[xfs]
";
    const MODULES: &str = "xfs 8192 0 - Live 0xffffffffc0001000\n";
    const BPF: &str = "\
ffffffffc0100000 t bpf_prog_6deef7357e7b4530_fentry_do_wait\t[bpf]
ffffffffc0100800 t bpf_prog_0123456789abcdef\t[bpf]
ffffffffc0200000 t bpf_trampoline_6442474530\t[bpf]
ffffffffc0300000 t ftrace_trampoline\t[__builtin__ftrace]
";

    fn ext() -> Extents {
        Extents {
            modules: parse_modules(MODULES),
            bpf_jited: [(0x6deef7357e7b4530, 0x300)].into_iter().collect(),
            page_size: 4096,
        }
    }

    fn with_bpf() -> KernelSymbolizer {
        KernelSymbolizer::build(&format!("{CORE}{BPF}"), &ext())
    }

    #[test]
    fn names_functions_inside_their_bounds() {
        let k = with_bpf();
        assert_eq!(k.frame_name(0xffffffff81000400, false), "do_wait");
        assert_eq!(k.frame_name(0xffffffff810005ff, false), "do_wait");
        assert_eq!(k.frame_name(0xffffffff81000600, false), "dup_mmap");
        // A return address right after a call that ends do_wait belongs to do_wait.
        assert_eq!(k.frame_name(0xffffffff81000600, true), "do_wait");
        // Weak functions are code too.
        assert_eq!(k.frame_name(0xffffffff81000810, false), "abort");
        // Aliases: the real name wins over section markers and __pi_ copies.
        assert_eq!(k.frame_name(0xffffffff81000010, false), "startup_64");
        assert_eq!(k.frame_name(0xffffffff81000110, false), "entry_SYSCALL_64");
        assert_eq!(k.frame_name(0xffffffff81000910, false), "memset");
        assert_eq!(k.frame_name(0x10, false), UNKNOWN);
    }

    #[test]
    fn a_return_into_a_return_trampoline_names_the_trampoline_not_its_neighbour() {
        // As in 5.10's kallsyms: elfcorehdr_read ends where kretprobe_trampoline begins.
        let text = "ffffffff81000000 T _stext\n\
                    ffffffff81000100 T elfcorehdr_read\n\
                    ffffffff81000140 T kretprobe_trampoline\n\
                    ffffffff81000190 T do_exit_caller\n\
                    ffffffff81000200 T next_fn\n\
                    ffffffff81001000 T _etext\n";
        let k = KernelSymbolizer::build(text, &ext());
        assert_eq!(
            k.frame_name(0xffffffff81000140, true),
            "kretprobe_trampoline"
        );
        // Any other function start reached as a return address follows a call at the very
        // end of the function before it (a noreturn call): that function is the frame.
        assert_eq!(k.frame_name(0xffffffff81000200, true), "do_exit_caller");
        assert!(is_return_trampoline("kretprobe_trampoline"));
        assert!(!is_return_trampoline("elfcorehdr_read"));
    }

    #[test]
    fn addresses_past_the_end_of_core_text_are_unknown() {
        let k = with_bpf();
        assert_eq!(k.frame_name(0xffffffff81000fff, false), "kernel_clone");
        assert_eq!(k.frame_name(0xffffffff81001000, false), UNKNOWN);
        assert_eq!(k.frame_name(0xffffffff81200010, false), UNKNOWN);
    }

    #[test]
    fn freed_init_and_exit_text_is_never_named() {
        let k = with_bpf();
        for addr in [0xffffffff83000010, 0xffffffff83000210, 0xffffffff83000310] {
            assert_eq!(k.frame_name(addr, false), UNKNOWN, "{addr:#x}");
        }
        assert_eq!(k.frame_name(0xffffffff83100010, false), UNKNOWN);
    }

    #[test]
    fn a_trampoline_past_the_last_text_symbol_is_a_bpf_frame() {
        let k = with_bpf();
        let tramp = k.frame_name(0xffffffffc0200040, true);
        assert_eq!(tramp, "[bpf_trampoline]");
        assert!(is_bpf_frame(&tramp));
        assert_eq!(
            k.frame_name(0xffffffffc0100010, false),
            "[bpf_prog fentry_do_wait]"
        );
        assert_eq!(k.frame_name(0xffffffffc0100810, false), "[bpf_prog]");
        assert!(is_bpf_frame("[bpf_prog]"));
        // The program ends at its JIT length, the trampoline at one page.
        assert_eq!(k.frame_name(0xffffffffc0100300, false), UNKNOWN);
        assert_eq!(k.frame_name(0xffffffffc0201000, false), UNKNOWN);
        assert_eq!(k.frame_name(0xffffffffc0300010, false), "ftrace_trampoline");
    }

    #[test]
    fn without_the_bpf_entries_the_trampoline_is_unknown_not_a_neighbour() {
        // The table read before the probes loaded: the 6.1 phantom `exit_amd_microcode`.
        let k = KernelSymbolizer::build(CORE, &ext());
        assert_eq!(k.frame_name(0xffffffffc0200040, true), UNKNOWN);
        let k = KernelSymbolizer::build(CORE, &Extents::default());
        assert_eq!(k.frame_name(0xffffffffc0200040, true), UNKNOWN);
    }

    #[test]
    fn module_symbols_end_with_their_module() {
        let k = with_bpf();
        assert_eq!(k.frame_name(0xffffffffc0001010, false), "xfs_foo");
        assert_eq!(k.frame_name(0xffffffffc0002fff, false), "xfs_bar");
        assert_eq!(k.frame_name(0xffffffffc0003000, false), UNKNOWN);
        // No /proc/modules: the fallback span still ends before the BPF pages.
        let k = KernelSymbolizer::build(CORE, &Extents::default());
        assert_eq!(k.frame_name(0xffffffffc0001110, false), "xfs_bar");
        assert_eq!(
            k.frame_name(0xffffffffc0001100 + UNBOUNDED_SPAN, false),
            UNKNOWN
        );
    }

    #[test]
    fn hidden_addresses_name_nothing() {
        let k = KernelSymbolizer::build(
            "0000000000000000 T _stext\n0000000000000000 t do_wait\n",
            &ext(),
        );
        assert!(k.is_empty());
        assert_eq!(k.frame_name(0x10, false), UNKNOWN);
    }

    #[test]
    fn lists_init_only_symbols() {
        let init = init_only_symbols(CORE);
        let want: BTreeSet<String> = ["start_kernel", "init_amd_microcode", "exit_amd_microcode"]
            .into_iter()
            .map(String::from)
            .collect();
        // do_wait also runs (a second static copy in text); markers are not functions.
        assert_eq!(init, want);
    }

    #[test]
    fn parses_module_extents() {
        let m = parse_modules(
            "xfs 8192 0 - Live 0xffffffffc0001000\nhidden 100 0 - Live 0x0000000000000000\nbad\n",
        );
        assert_eq!(m.len(), 1);
        assert_eq!(m["xfs"], (0xffffffffc0001000, 8192));
    }

    mod never_a_neighbour {
        use super::*;
        use proptest::prelude::*;

        const BASE: u64 = 0xffff_ffff_8100_0000;

        proptest! {
            /// Whatever the table, a named address lies in a text symbol of that name with no
            /// other symbol starting between the two, inside core text.
            #[test]
            fn a_named_address_is_inside_its_own_symbol(
                syms in proptest::collection::vec((0u64..512, 0usize..4, 0usize..6), 0..40),
                etext in 1u64..520,
                probes in proptest::collection::vec(0u64..530, 1..20),
            ) {
                let kinds = ['t', 'T', 'W', 'd'];
                let mut text = format!("{BASE:x} T _stext\n{:x} T _etext\n", BASE + etext * 16);
                for (off, kind, name) in &syms {
                    text.push_str(&format!("{:x} {} f{name}\n", BASE + off * 16, kinds[*kind]));
                }
                let k = KernelSymbolizer::build(&text, &Extents::default());
                let lines: Vec<Line> = kallsyms::lines(&text).collect();
                for p in probes {
                    let addr = BASE + p * 16 + 3;
                    let name = k.frame_name(addr, false);
                    if name == UNKNOWN {
                        continue;
                    }
                    prop_assert!(addr < BASE + etext * 16, "{name} past _etext");
                    let start = lines
                        .iter()
                        .filter(|l| l.name == name && is_text(l.kind) && l.addr <= addr)
                        .map(|l| l.addr)
                        .max();
                    prop_assert!(start.is_some(), "{name} does not start before {addr:x}");
                    let start = start.unwrap();
                    prop_assert!(
                        !lines.iter().any(|l| l.addr > start && l.addr <= addr),
                        "another symbol starts between {name} and {addr:x}"
                    );
                }
            }
        }
    }
}
