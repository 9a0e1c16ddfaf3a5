//! Folded stacks in a run directory: which kinds there are, where each file lives, and the
//! `frame;frame;frame weight` line format.
use std::io::{self, Write};

use serde::{Deserialize, Serialize};

use super::STACKS_DIR;

#[derive(Clone, Copy, Debug, Serialize, Deserialize, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[serde(rename_all = "lowercase")]
pub enum StackKind {
    /// Kernel stacks sampled on-CPU while inside the target; weight = sample period.
    Oncpu,
    /// Kernel stacks where the thread blocked inside the target; weight = time blocked.
    Offcpu,
    /// Kernel+user stacks that called the target; weight = the calls' wall time.
    Callers,
    /// Every on-CPU sample of the traced tasks (`--discover`), kernel frames, `[user]` for
    /// samples in user mode; target `process`; weight = sample period.
    Profile,
    /// Where the traced tasks blocked (`--discover`); weight = time blocked.
    #[serde(rename = "profile-offcpu")]
    ProfileOffcpu,
    /// The kernel samples of `Profile` again, filed by the kernel entry they ran under
    /// (`--discover`): target = the entry (a syscall's name, [`ENTRY_PAGE_FAULT`],
    /// [`ENTRY_INTERRUPT`] or [`ENTRY_KERNEL`]); weight = sample period.
    Entry,
}

impl StackKind {
    pub const ALL: [StackKind; 6] = [
        StackKind::Oncpu,
        StackKind::Offcpu,
        StackKind::Callers,
        StackKind::Profile,
        StackKind::ProfileOffcpu,
        StackKind::Entry,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            StackKind::Oncpu => "oncpu",
            StackKind::Offcpu => "offcpu",
            StackKind::Callers => "callers",
            StackKind::Profile => "profile",
            StackKind::ProfileOffcpu => "profile-offcpu",
            StackKind::Entry => "entry",
        }
    }
}

#[derive(Clone, Debug, Serialize, Deserialize, PartialEq, Eq)]
pub struct StackFile {
    pub kind: StackKind,
    pub target: String,
    pub case: u32,
    pub case_name: String,
    pub n: u64,
    /// Relative path of the folded file.
    pub path: String,
    /// Sum of the weights in the file (ns) and number of samples/spans behind them.
    pub total_ns: u64,
    pub count: u64,
}

/// The entry of kernel samples taken in a user-mode page fault.
pub const ENTRY_PAGE_FAULT: &str = "page_fault";
/// ... in an interrupt or exception taken outside any syscall.
pub const ENTRY_INTERRUPT: &str = "interrupt";
/// ... in kernel work entered neither by a syscall nor by a fault or interrupt (a new
/// task's first return to user mode, a syscall that began before tracing did).
pub const ENTRY_KERNEL: &str = "kernel";

/// The target name of whole-process stacks (`StackKind::Profile*`): no kernel function.
pub const PROFILE_TARGET: &str = "process";

/// Relative path of a folded-stack file. Case names and targets are plain identifiers, so
/// they are safe path components; anything else is replaced.
pub fn stack_file_path(kind: StackKind, target: &str, case_name: &str, n: u64) -> String {
    format!(
        "{STACKS_DIR}/{}/{}/{}/n{n}.folded",
        kind.as_str(),
        safe_component(target),
        safe_component(case_name)
    )
}

/// A file-name component made of safe characters only (`.`-led names get a `_`, so none is
/// hidden or `..`).
pub fn safe_component(s: &str) -> String {
    let cleaned: String = s
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '-' || c == '_' || c == '.' {
                c
            } else {
                '_'
            }
        })
        .collect();
    if cleaned.is_empty() || cleaned.starts_with('.') {
        format!("_{cleaned}")
    } else {
        cleaned
    }
}

/// The one frame of a whole-process sample taken in user mode.
pub const USER_FRAME: &str = "[user]";

/// The root of a kernel stack whose unwind ended at an address no symbol covers.
pub const TRUNCATED_KERNEL_STACK: &str = "[truncated-kernel-stack]";

/// One folded-stack line: frames root-first and a weight.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FoldedLine {
    pub frames: Vec<String>,
    pub weight: u64,
}

/// Parse folded stacks (`a;b;c 123` per line). Blank lines are skipped; anything else that is
/// not `stack weight` is an error naming the line.
pub fn parse_folded(text: &str) -> Result<Vec<FoldedLine>, String> {
    let mut out = Vec::new();
    for (i, line) in text.lines().enumerate() {
        let line = line.trim_end();
        if line.is_empty() {
            continue;
        }
        let (stack, weight) = line
            .rsplit_once(' ')
            .ok_or_else(|| format!("line {}: no weight", i + 1))?;
        let weight: u64 = weight
            .parse()
            .map_err(|_| format!("line {}: weight {weight:?} is not a number", i + 1))?;
        if stack.is_empty() {
            return Err(format!("line {}: empty stack", i + 1));
        }
        out.push(FoldedLine {
            frames: stack.split(';').map(str::to_string).collect(),
            weight,
        });
    }
    Ok(out)
}

/// Write folded stacks, one line each, merging nothing.
pub fn write_folded<W: Write>(mut w: W, lines: &[FoldedLine]) -> io::Result<()> {
    for l in lines {
        writeln!(w, "{} {}", l.frames.join(";"), l.weight)?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn folded_round_trip() {
        let text = "a;b;c 10\n\na;b 5\n";
        let lines = parse_folded(text).unwrap();
        assert_eq!(lines.len(), 2);
        assert_eq!(lines[0].frames, vec!["a", "b", "c"]);
        let mut out = Vec::new();
        write_folded(&mut out, &lines).unwrap();
        assert_eq!(String::from_utf8(out).unwrap(), "a;b;c 10\na;b 5\n");
    }

    #[test]
    fn folded_rejects_garbage() {
        assert!(parse_folded("a;b;c").unwrap_err().contains("line 1"));
        assert!(parse_folded("a;b x").unwrap_err().contains("not a number"));
        assert!(parse_folded("ok 1\n 2").unwrap_err().contains("line 2"));
    }

    #[test]
    fn stack_paths_stay_inside() {
        let p = stack_file_path(StackKind::Oncpu, "../x", "a/b", 7);
        assert_eq!(p, "stacks/oncpu/_.._x/a_b/n7.folded");
        assert!(!p.contains("/../"));
    }
}
