//! /proc/kallsyms: which functions exist out of line on this kernel, and the line format that
//! `symbolize` reads kernel stack addresses with.
use std::io;
use std::path::Path;

/// One text symbol: where it starts and where its name is in [`Kallsyms::names`].
#[derive(Clone, Copy, Debug)]
struct Sym {
    addr: u64,
    name: u32,
    len: u32,
}

/// Text symbols of the running kernel. The ~120k names sit in one string and the index by
/// name is a sorted list of positions: a map of owned names (each twice, as symbol and as
/// key) took 40 MB to load, half the tracer's peak memory, where this takes about 9.
#[derive(Clone, Debug, Default)]
pub struct Kallsyms {
    /// Every symbol's name, one after another.
    names: String,
    /// Sorted by address.
    syms: Vec<Sym>,
    /// Positions in `syms`, sorted by name (then address): a name's copies are adjacent,
    /// and so are its compiler clones (`name.isra.0`) after it.
    by_name: Vec<u32>,
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
        let mut names = String::new();
        let mut syms: Vec<Sym> = lines(text)
            .filter(|l| matches!(l.kind, 't' | 'T'))
            .map(|l| {
                let at = names.len() as u32;
                names.push_str(l.name);
                Sym {
                    addr: l.addr,
                    name: at,
                    len: l.name.len() as u32,
                }
            })
            .collect();
        names.shrink_to_fit();
        syms.sort_by_key(|s| s.addr);
        let mut k = Kallsyms {
            names,
            by_name: (0..syms.len() as u32).collect(),
            syms,
        };
        let mut by_name = std::mem::take(&mut k.by_name);
        by_name.sort_unstable_by(|&a, &b| {
            let (sa, sb) = (&k.syms[a as usize], &k.syms[b as usize]);
            k.name(sa).cmp(k.name(sb)).then(sa.addr.cmp(&sb.addr))
        });
        k.by_name = by_name;
        k
    }

    fn name(&self, s: &Sym) -> &str {
        &self.names[s.name as usize..(s.name + s.len) as usize]
    }

    /// The positions in `by_name` of the names `pick` accepts, `before` telling which sort
    /// before them: a contiguous run.
    fn run(&self, before: impl Fn(&str) -> bool, pick: impl Fn(&str) -> bool) -> &[u32] {
        let name = |i: &u32| self.name(&self.syms[*i as usize]);
        let from = self.by_name.partition_point(|i| before(name(i)));
        let len = self.by_name[from..]
            .iter()
            .take_while(|i| pick(name(i)))
            .count();
        &self.by_name[from..from + len]
    }

    /// The symbols named `name`, as positions in `syms`.
    fn named(&self, name: &str) -> &[u32] {
        self.run(|n| n < name, |n| n == name)
    }

    pub fn is_empty(&self) -> bool {
        self.syms.is_empty()
    }

    /// How many out-of-line copies of `name` exist (0 = absent: inlined or not built).
    pub fn count(&self, name: &str) -> usize {
        self.named(name).len()
    }

    pub fn contains(&self, name: &str) -> bool {
        self.count(name) > 0
    }

    /// The address of kernel function `name` and where the next text symbol starts (its end
    /// as far as kallsyms tells); None when it is absent or not unique (a static name that
    /// several files define).
    pub fn extent(&self, name: &str) -> Option<(u64, u64)> {
        let [i] = self.named(name) else {
            return None;
        };
        self.extent_at(self.syms[*i as usize].addr)
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
            .run(|n| n < prefix.as_str(), |n| n.starts_with(&prefix))
            .iter()
            .map(|&i| self.name(&self.syms[i as usize]))
            .filter(|k| !k.ends_with(".cold") && !k.contains(".cold."))
            .map(str::to_string)
            .collect();
        out.dedup();
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
        assert_eq!(k.count("xfs_foo"), 1);
        assert_eq!(k.count("dup"), 0);
        assert_eq!(k.count("zzz"), 0);
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
