//! The README and docs/ as a reader uses them: every command they quote for `tracer` or
//! `cargo xtask` parses with the real command line (the tracer's binary in parse-only mode,
//! xtask's own parser), and every link between them and to files of the repository leads
//! somewhere: the file exists, and a `#anchor` names one of its headings.
//!
//! The tracer binary is the workspace's debug build (`cargo test --workspace`, as
//! `cargo xtask test` runs it, builds it beside this test).

use std::collections::BTreeSet;
use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;

use clap::Parser;
use xtask::cli::Cli;
use xtask::paths;

/// README.md and every page under docs/.
fn pages() -> Vec<PathBuf> {
    let root = paths::workspace_root();
    let mut pages = vec![root.join("README.md")];
    let mut docs: Vec<PathBuf> = fs::read_dir(root.join("docs"))
        .expect("docs/ exists")
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|x| x == "md"))
        .collect();
    docs.sort();
    pages.extend(docs);
    pages
}

/// The lines of a page inside fenced code blocks (indented fences too), with their line
/// numbers, continuation lines (`\` at the end) joined.
fn code_lines(text: &str) -> Vec<(usize, String)> {
    let mut out = Vec::new();
    let mut fenced = false;
    let mut pending: Option<(usize, String)> = None;
    for (i, line) in text.lines().enumerate() {
        if line.trim_start().starts_with("```") {
            fenced = !fenced;
            continue;
        }
        if !fenced {
            continue;
        }
        let (start, mut joined) = pending.take().unwrap_or((i + 1, String::new()));
        joined.push_str(line.trim());
        match joined.strip_suffix('\\') {
            Some(head) => pending = Some((start, format!("{} ", head.trim_end()))),
            None => out.push((start, joined)),
        }
    }
    out
}

/// Shell words of one simple command: quotes removed, redirections and a trailing comment
/// dropped. Enough for the commands the docs quote (no expansions are performed: `{n}`,
/// globs and `$VAR` stay as written, which is what the tracer receives for its own
/// placeholders).
fn words(cmd: &str) -> Vec<String> {
    let mut words = Vec::new();
    let mut cur = String::new();
    let mut has = false;
    let mut quote: Option<char> = None;
    for c in cmd.chars() {
        match (quote, c) {
            (Some(q), c) if c == q => quote = None,
            (Some(_), c) => cur.push(c),
            (None, '\'' | '"') => {
                quote = Some(c);
                has = true;
            }
            (None, '#') if !has => break,
            (None, c) if c.is_whitespace() => {
                if has {
                    words.push(std::mem::take(&mut cur));
                    has = false;
                }
            }
            (None, c) => {
                cur.push(c);
                has = true;
            }
        }
    }
    if has {
        words.push(cur);
    }
    // Redirections: `> f`, `2> f`, `< f`, `>f`, `2>&1`.
    let mut kept = Vec::new();
    let mut skip_next = false;
    for w in words {
        if skip_next {
            skip_next = false;
            continue;
        }
        let bare = w.trim_start_matches(|c: char| c.is_ascii_digit());
        if bare.starts_with('>') || bare.starts_with('<') {
            skip_next = bare.len() == 1 || bare == ">>";
            continue;
        }
        kept.push(w);
    }
    kept
}

/// The simple commands of one shell line: split at `&&`, `||`, `;` and `|`, outside quotes.
fn simple_commands(line: &str) -> Vec<String> {
    let mut out = vec![String::new()];
    let mut quote: Option<char> = None;
    let chars: Vec<char> = line.chars().collect();
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        match quote {
            Some(q) if c == q => quote = None,
            Some(_) => {}
            None if c == '\'' || c == '"' => quote = Some(c),
            None if c == ';' || c == '|' || (c == '&' && chars.get(i + 1) == Some(&'&')) => {
                if chars.get(i + 1) == Some(&c) {
                    i += 1;
                }
                out.push(String::new());
                i += 1;
                continue;
            }
            None => {}
        }
        out.last_mut().unwrap().push(c);
        i += 1;
    }
    out
}

/// A command the docs quote: whose it is and its arguments (program name excluded).
#[derive(Debug, Clone, PartialEq)]
enum Quoted {
    Tracer(Vec<String>),
    Xtask(Vec<String>),
}

/// The tracer and xtask commands in one simple command's words: after `sudo`, `VAR=value`
/// prefixes and a `$ ` prompt, a word naming the tracer (`tracer`, `target/release/tracer`)
/// or `cargo xtask`; a VM command's own command after `--` when it is the tracer; and a
/// quoted command line (as `ssh box '...'` takes) searched again.
fn quoted(words: &[String]) -> Vec<Quoted> {
    let mut w: Vec<&str> = words.iter().map(String::as_str).collect();
    while let Some(first) = w.first() {
        if *first == "$" || *first == "sudo" || (first.contains('=') && !first.starts_with('-')) {
            w.remove(0);
        } else {
            break;
        }
    }
    let rest = |from: usize| w[from..].iter().map(|s| s.to_string()).collect::<Vec<_>>();
    match w.as_slice() {
        ["cargo", "xtask", ..] => {
            let mut found = vec![Quoted::Xtask(rest(2))];
            if w.get(2) == Some(&"vm")
                && let Some(dd) = w.iter().position(|x| *x == "--")
            {
                found.extend(quoted(&rest(dd + 1)));
            }
            found
        }
        [first, ..] if *first == "tracer" || first.ends_with("/tracer") => {
            vec![Quoted::Tracer(rest(1))]
        }
        // A command line in one quoted word (ssh's remote command).
        [_, ..] => words
            .iter()
            .filter(|x| x.contains(' '))
            .flat_map(|x| simple_commands(x))
            .flat_map(|c| quoted(&self::words(&c)))
            .collect(),
        [] => Vec::new(),
    }
}

/// Every (page, line, command) the pages quote.
fn commands() -> Vec<(String, usize, Quoted)> {
    let mut out = Vec::new();
    for page in pages() {
        let text = fs::read_to_string(&page).unwrap();
        let name = page.file_name().unwrap().to_string_lossy().into_owned();
        for (line_no, line) in code_lines(&text) {
            for c in simple_commands(&line) {
                for q in quoted(&words(&c)) {
                    out.push((name.clone(), line_no, q));
                }
            }
        }
    }
    out
}

fn tracer_binary() -> PathBuf {
    let p = paths::target_dir().join("debug").join("tracer");
    assert!(
        p.is_file(),
        "precondition: {} is built (cargo test --workspace builds it; or cargo build -p tracer)",
        p.display()
    );
    p
}

#[test]
fn every_quoted_command_parses_with_the_real_cli() {
    let all = commands();
    let tracer = tracer_binary();
    let mut failures = Vec::new();
    let (mut n_tracer, mut n_xtask) = (0, 0);
    for (page, line, q) in &all {
        match q {
            Quoted::Xtask(args) => {
                n_xtask += 1;
                let argv = std::iter::once("cargo xtask".to_string()).chain(args.iter().cloned());
                if let Err(e) = Cli::try_parse_from(argv) {
                    failures.push(format!(
                        "{page}:{line}: cargo xtask {}\n{e}",
                        args.join(" ")
                    ));
                }
            }
            Quoted::Tracer(args) => {
                n_tracer += 1;
                let out = Command::new(&tracer)
                    .args(args)
                    .env("TRACER_PARSE_ONLY", "1")
                    .output()
                    .unwrap();
                if !out.status.success() {
                    failures.push(format!(
                        "{page}:{line}: tracer {}\n{}",
                        args.join(" "),
                        String::from_utf8_lossy(&out.stderr)
                    ));
                }
            }
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n\n"));
    // The pages quote both tools: a parser that found nothing would pass the loop above.
    assert!(
        n_tracer >= 20 && n_xtask >= 4,
        "{n_tracer} tracer and {n_xtask} xtask commands found"
    );
}

#[test]
fn a_command_that_does_not_parse_is_caught() {
    // The same path as above, on commands that must fail: an unknown subcommand and a
    // value the option refuses.
    let tracer = tracer_binary();
    for bad in [
        &["frobnicate"][..],
        &["sweep", "--budget", "ten", "--", "true"],
    ] {
        let st = Command::new(&tracer)
            .args(bad)
            .env("TRACER_PARSE_ONLY", "1")
            .output()
            .unwrap()
            .status;
        assert!(!st.success(), "tracer {bad:?} parsed");
    }
    assert!(Cli::try_parse_from(["cargo xtask", "runn"]).is_err());
}

#[test]
fn shell_lines_split_into_the_commands_they_run() {
    let lines = code_lines(
        "text\n```sh\nsudo tracer record --no-verify -o run -- \\\n  workloads getpid  # note\n```\n",
    );
    assert_eq!(
        lines,
        [(
            3,
            "sudo tracer record --no-verify -o run -- workloads getpid  # note".to_string()
        )]
    );
    let q = |line: &str| -> Vec<Quoted> {
        simple_commands(line)
            .iter()
            .flat_map(|c| quoted(&words(c)))
            .collect()
    };
    let s = |v: &[&str]| v.iter().map(|x| x.to_string()).collect::<Vec<_>>();
    assert_eq!(
        q(&lines[0].1),
        [Quoted::Tracer(s(&[
            "record",
            "--no-verify",
            "-o",
            "run",
            "--",
            "workloads",
            "getpid"
        ]))]
    );
    assert_eq!(
        q("tracer report run -o report && go tool pprof -top x 2> /dev/null"),
        [Quoted::Tracer(s(&["report", "run", "-o", "report"]))]
    );
    assert_eq!(
        q("ssh box 'sudo dpkg -i t.deb && sudo tracer probes --verify'"),
        [Quoted::Tracer(s(&["probes", "--verify"]))]
    );
    assert_eq!(
        q("cargo xtask vm --kernel 6.1 -- tracer sweep --ops '{N}*2' -- ./b {n}"),
        [
            Quoted::Xtask(s(&[
                "vm", "--kernel", "6.1", "--", "tracer", "sweep", "--ops", "{N}*2", "--", "./b",
                "{n}"
            ])),
            Quoted::Tracer(s(&["sweep", "--ops", "{N}*2", "--", "./b", "{n}"]))
        ]
    );
    assert_eq!(
        q("RUST_LOG=debug cargo xtask run -j 2"),
        [Quoted::Xtask(s(&["run", "-j", "2"]))]
    );
    assert!(q("cargo build --release -p tracer").is_empty());
}

/// GitHub's anchor for a heading: lower case, punctuation other than `-` and `_` dropped,
/// spaces to `-`.
fn anchor(heading: &str) -> String {
    heading
        .trim()
        .to_lowercase()
        .chars()
        .filter(|c| c.is_alphanumeric() || *c == '-' || *c == '_' || *c == ' ')
        .map(|c| if c == ' ' { '-' } else { c })
        .collect()
}

fn anchors(text: &str) -> BTreeSet<String> {
    let mut fenced = false;
    let mut out = BTreeSet::new();
    for line in text.lines() {
        if line.trim_start().starts_with("```") {
            fenced = !fenced;
        } else if !fenced && let Some(h) = line.strip_prefix('#') {
            out.insert(anchor(h.trim_start_matches('#')));
        }
    }
    out
}

/// The `](target)` links of a page that are not web addresses.
fn local_links(text: &str) -> Vec<String> {
    text.split("](")
        .skip(1)
        .filter_map(|rest| rest.split_once(')').map(|(t, _)| t.to_string()))
        .filter(|t| !t.starts_with("http://") && !t.starts_with("https://"))
        .collect()
}

#[test]
fn every_link_between_the_pages_leads_somewhere() {
    let mut broken = Vec::new();
    let mut checked = 0;
    for page in pages() {
        let text = fs::read_to_string(&page).unwrap();
        let dir = page.parent().unwrap();
        for link in local_links(&text) {
            let (file, frag) = link.split_once('#').unwrap_or((&link, ""));
            let target: PathBuf = if file.is_empty() {
                page.clone()
            } else {
                dir.join(file)
            };
            checked += 1;
            if !Path::new(&target).exists() {
                broken.push(format!("{}: {link}: no such file", page.display()));
                continue;
            }
            if !frag.is_empty() {
                let t = fs::read_to_string(&target).unwrap_or_default();
                if !anchors(&t).contains(frag) {
                    broken.push(format!("{}: {link}: no such heading", page.display()));
                }
            }
        }
    }
    assert!(broken.is_empty(), "{}", broken.join("\n"));
    assert!(checked >= 10, "only {checked} links found");
    assert_eq!(
        anchor(" Your own benchmark, any kernel function, and discover"),
        "your-own-benchmark-any-kernel-function-and-discover"
    );
}

#[test]
fn the_readme_stays_short() {
    let text = fs::read_to_string(paths::workspace_root().join("README.md")).unwrap();
    let lines = text.lines().count();
    assert!(
        lines <= 300,
        "README.md has {lines} lines: the detail belongs in docs/"
    );
}
