//! Code that fits in one head: no non-test source file of the workspace over
//! [`MAX_FILE_LINES`] lines, no function outside tests over [`MAX_FN_LINES`]. A file's test
//! module (from its `#[cfg(test)]` on) and files that are test modules of their own
//! (`tests.rs`) are left out: a test reads best whole.

use std::fs;
use std::path::{Path, PathBuf};

use xtask::paths;

const MAX_FILE_LINES: usize = 600;
const MAX_FN_LINES: usize = 100;

/// Every `.rs` file under the crates' `src/`, test-module files left out.
fn sources() -> Vec<PathBuf> {
    let root = paths::workspace_root();
    let mut out = Vec::new();
    let mut todo: Vec<PathBuf> = ["tracer", "tracer-ebpf", "workloads", "xtask"]
        .iter()
        .map(|c| root.join(c).join("src"))
        .collect();
    while let Some(d) = todo.pop() {
        for e in fs::read_dir(&d).unwrap_or_else(|e| panic!("{}: {e}", d.display())) {
            let p = e.unwrap().path();
            if p.is_dir() {
                todo.push(p);
            } else if p.extension().is_some_and(|x| x == "rs")
                && p.file_name().is_some_and(|n| n != "tests.rs")
            {
                out.push(p);
            }
        }
    }
    out.sort();
    out
}

/// The lines before the file's test module.
fn non_test_lines(text: &str) -> Vec<&str> {
    text.lines()
        .take_while(|l| !l.starts_with("#[cfg(test)]"))
        .collect()
}

/// Each function's name and length in lines: from its `fn` line to the first line after it
/// that closes a block at the `fn` line's indentation.
fn functions(lines: &[&str]) -> Vec<(String, usize, usize)> {
    let mut out = Vec::new();
    let mut i = 0;
    while i < lines.len() {
        let l = lines[i];
        let body = l.trim_start();
        let indent = &l[..l.len() - body.len()];
        let words: Vec<&str> = body.split_whitespace().collect();
        let at = words.iter().take(5).position(|w| *w == "fn").filter(|&k| {
            words[..k]
                .iter()
                .all(|w| w.starts_with("pub") || ["async", "const", "unsafe", "extern"].contains(w))
        });
        if let Some(k) = at
            && let Some(name) = words.get(k + 1)
            && !l.trim_end().ends_with(';')
        {
            let close = format!("{indent}}}");
            let end = (i + 1..lines.len())
                .find(|&j| lines[j] == close)
                .unwrap_or(lines.len() - 1);
            let name: String = name
                .chars()
                .take_while(|c| c.is_alphanumeric() || *c == '_')
                .collect();
            out.push((name, i + 1, end - i + 1));
            i = end + 1;
        } else {
            i += 1;
        }
    }
    out
}

fn rel(p: &Path) -> String {
    p.strip_prefix(paths::workspace_root())
        .unwrap_or(p)
        .display()
        .to_string()
}

#[test]
fn no_source_file_or_function_is_too_long() {
    let mut long = Vec::new();
    let files = sources();
    assert!(files.len() > 100, "{} source files found", files.len());
    let mut fns = 0;
    for f in &files {
        let text = fs::read_to_string(f).unwrap();
        let lines = non_test_lines(&text);
        if lines.len() > MAX_FILE_LINES {
            long.push(format!("{}: {} lines", rel(f), lines.len()));
        }
        for (name, at, len) in functions(&lines) {
            fns += 1;
            if len > MAX_FN_LINES {
                long.push(format!("{}:{at}: fn {name}: {len} lines", rel(f)));
            }
        }
    }
    assert!(fns > 1000, "{fns} functions found");
    assert!(
        long.is_empty(),
        "over {MAX_FILE_LINES} lines a file or {MAX_FN_LINES} a function:\n{}",
        long.join("\n")
    );
}

/// The scan finds what it looks for: a function's whole body however it is declared, and a
/// declaration without a body is none.
#[test]
fn functions_are_measured_from_fn_to_their_closing_brace() {
    let src = "\
pub(crate) async fn a(x: u32) -> u32 {
    if x > 0 {
    }
    x
}
fn b();
impl T {
    pub fn c(&self) {
        let y = 1;
    }
}
";
    let lines: Vec<&str> = src.lines().collect();
    assert_eq!(
        functions(&lines),
        [("a".to_string(), 1, 5), ("c".to_string(), 8, 3)]
    );
}
