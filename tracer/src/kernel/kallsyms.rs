//! /proc/kallsyms: which functions exist out of line on this kernel, and the line format that
//! `symbolize` reads kernel stack addresses with.
use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hasher};
use std::io;
use std::path::Path;

/// FNV-1a: the name index holds ~60k kernel symbol names, built on every record before the
/// probes attach; SipHash (the default, DoS-resistant) spent more time hashing them than the
/// kernel spent producing the file. The names come from the kernel, not from an adversary.
#[derive(Default)]
struct Fnv(u64);

impl Hasher for Fnv {
    fn finish(&self) -> u64 {
        self.0
    }

    fn write(&mut self, bytes: &[u8]) {
        let mut h = if self.0 == 0 {
            0xcbf2_9ce4_8422_2325
        } else {
            self.0
        };
        for &b in bytes {
            h ^= u64::from(b);
            h = h.wrapping_mul(0x0100_0000_01b3);
        }
        self.0 = h;
    }
}

type NameIndex = HashMap<String, Vec<usize>, BuildHasherDefault<Fnv>>;

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Symbol {
    pub addr: u64,
    pub name: String,
    /// Loadable module the symbol belongs to, if any.
    pub module: Option<String>,
    /// 't'/'T' text symbols only are kept; true for global ('T').
    pub global: bool,
}

/// Text symbols of the running kernel, sorted by address.
#[derive(Clone, Debug, Default)]
pub struct Kallsyms {
    syms: Vec<Symbol>,
    /// name -> indices into `syms` (a static name can appear several times).
    by_name: NameIndex,
}

impl Kallsyms {
    pub fn load() -> io::Result<Kallsyms> {
        Kallsyms::load_from(Path::new("/proc/kallsyms"))
    }

    pub fn load_from(path: &Path) -> io::Result<Kallsyms> {
        let text = std::fs::read_to_string(path)?;
        Ok(Kallsyms::parse(&text))
    }

    /// Parse kallsyms text for the names of its text symbols. Unreadable lines are skipped:
    /// the file is the kernel's, and one odd line must not cost the whole symbol table.
    pub fn parse(text: &str) -> Kallsyms {
        let mut syms: Vec<Symbol> = lines(text)
            .filter(|l| matches!(l.kind, 't' | 'T'))
            .map(|l| Symbol {
                addr: l.addr,
                name: l.name.to_string(),
                module: l.module.map(str::to_string),
                global: l.kind == 'T',
            })
            .collect();
        syms.sort_by_key(|s| s.addr);
        let mut by_name = NameIndex::with_capacity_and_hasher(syms.len(), Default::default());
        for (i, s) in syms.iter().enumerate() {
            by_name.entry(s.name.clone()).or_default().push(i);
        }
        Kallsyms { syms, by_name }
    }

    pub fn is_empty(&self) -> bool {
        self.syms.is_empty()
    }

    /// How many out-of-line copies of `name` exist (0 = absent: inlined or not built).
    pub fn count(&self, name: &str) -> usize {
        self.by_name.get(name).map_or(0, Vec::len)
    }

    pub fn contains(&self, name: &str) -> bool {
        self.count(name) > 0
    }

    /// The address of kernel function `name` and where the next text symbol starts (its end
    /// as far as kallsyms tells); None when it is absent or not unique (a static name that
    /// several files define).
    pub fn extent(&self, name: &str) -> Option<(u64, u64)> {
        let [i] = self.by_name.get(name)?.as_slice() else {
            return None;
        };
        let start = self.syms[*i].addr;
        let end = self.syms[*i + 1..].iter().find(|s| s.addr > start)?.addr;
        Some((start, end))
    }

    /// The extent of the function that starts at `addr` (its start and where the next text
    /// symbol starts); None when no text symbol starts there.
    pub fn extent_at(&self, addr: u64) -> Option<(u64, u64)> {
        let i = self.syms.partition_point(|s| s.addr < addr);
        (self.syms.get(i)?.addr == addr).then_some(())?;
        let end = self.syms[i + 1..].iter().find(|s| s.addr > addr)?.addr;
        Some((addr, end))
    }

    /// Compiler clones of `name` (`name.isra.0`, `name.constprop.0`, `name.part.0`), which a
    /// kprobe can attach to when the plain name is gone. `.cold` parts are excluded: they are
    /// not entry points.
    pub fn clones(&self, name: &str) -> Vec<String> {
        let prefix = format!("{name}.");
        let mut out: Vec<String> = self
            .by_name
            .keys()
            .filter(|k| k.starts_with(&prefix) && !k.ends_with(".cold") && !k.contains(".cold."))
            .cloned()
            .collect();
        out.sort();
        out
    }
}

/// One line of /proc/kallsyms: `address type name [module]`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Line<'a> {
    pub addr: u64,
    /// nm-style type letter: t/T text, w/W weak, d/D data, b/B bss, r/R read-only...
    pub kind: char,
    pub name: &'a str,
    /// The bracketed group: a module name, `bpf` for BPF programs and trampolines,
    /// `__builtin__ftrace`/`__builtin__kprobes` for the tracing machinery's own code pages.
    pub module: Option<&'a str>,
}

/// The readable lines of kallsyms text, in file order.
/// The kernel writes `%px %c %s` and, for modules, `\t[%s]`: split at those separators with
/// `split_once` (memchr underneath) rather than a whitespace tokenizer, which took most of a
/// second for the 120k lines of a 6.x kernel in debug builds.
pub fn lines(text: &str) -> impl Iterator<Item = Line<'_>> {
    text.lines().filter_map(|line| {
        let (addr, rest) = line.split_once(' ')?;
        let (kind, rest) = rest.split_once(' ')?;
        let (name, module) = match rest.split_once('\t') {
            Some((name, m)) => (name, Some(m.trim().trim_matches(|c| c == '[' || c == ']'))),
            None => (rest.trim_end(), None),
        };
        let mut kinds = kind.chars();
        let kind = kinds.next().filter(|_| kinds.next().is_none())?;
        if name.is_empty() || name.contains(' ') {
            return None;
        }
        let addr = u64::from_str_radix(addr, 16).ok()?;
        Some(Line {
            addr,
            kind,
            name,
            module,
        })
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const SAMPLE: &str = "\
ffffffff81000000 T _stext
ffffffff8135e380 T __do_wait
ffffffff8135e5f0 t do_wait
ffffffff815f3470 T dup_mmap
ffffffff815f4000 t dup_mmap.constprop.0
ffffffff815f4100 t dup_mmap.cold
ffffffff815f5000 d some_data
ffffffffc0001000 t xfs_foo\t[xfs]
ffffffff8135e700 t do_wait
";

    #[test]
    fn parses_text_symbols_only() {
        let k = Kallsyms::parse(SAMPLE);
        assert!(k.contains("do_wait"));
        assert_eq!(k.count("do_wait"), 2);
        assert!(!k.contains("some_data"));
        assert_eq!(k.clones("dup_mmap"), vec!["dup_mmap.constprop.0"]);
        let xfs = &k.syms[k.by_name["xfs_foo"][0]];
        assert_eq!(xfs.module.as_deref(), Some("xfs"));
    }

    /// A function ends where the next text symbol starts; a name defined twice has no one
    /// extent.
    #[test]
    fn a_unique_function_spans_to_the_next_text_symbol() {
        let k = Kallsyms::parse(SAMPLE);
        assert_eq!(
            k.extent("dup_mmap"),
            Some((0xffffffff815f3470, 0xffffffff815f4000))
        );
        assert_eq!(k.extent("do_wait"), None);
        assert_eq!(k.extent("some_data"), None);
        // By address: only where a function starts (a call's target, not inside one).
        assert_eq!(
            k.extent_at(0xffffffff815f3470),
            Some((0xffffffff815f3470, 0xffffffff815f4000))
        );
        assert_eq!(k.extent_at(0xffffffff815f3471), None);
    }

    #[test]
    fn lines_carry_type_and_group() {
        let l: Vec<Line> =
            lines("ffffffffc0201000 t bpf_trampoline_6442\t[bpf]\nbad line\n").collect();
        assert_eq!(
            l,
            vec![Line {
                addr: 0xffffffffc0201000,
                kind: 't',
                name: "bpf_trampoline_6442",
                module: Some("bpf"),
            }]
        );
        assert_eq!(lines("zz T name\n").count(), 0);
        assert_eq!(lines("ff Tt name\n").count(), 0);
    }
}
