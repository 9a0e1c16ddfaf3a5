//! `cargo xtask same`: does a change leave what the tracer writes as it was? The tracer of a
//! base revision and the working tree's each render every run and sweep under
//! `tracer/tests/fixtures` (and any directories named), and compare the fixtures' kernel
//! pairs; then every file written is compared. JSON is compared as values, with numbers to
//! ten significant digits (a release musl build and a debug glibc build differ in the last
//! bits of a logarithm); every other file byte for byte. The output directories' own paths
//! are the only text replaced.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{Context, Result, bail};
use serde_json::Value;

use crate::paths::{target_dir, workspace_root};

pub struct SameOptions {
    /// The revision to compare with (anything `git worktree add` takes).
    pub base: String,
    /// More run or sweep directories to render besides the fixtures.
    pub dirs: Vec<PathBuf>,
}

/// One rendering both tracers do: `tracer report DIR` or `tracer compare A B`.
#[derive(Clone, Debug, PartialEq)]
enum Job {
    Report(PathBuf),
    Compare(PathBuf, PathBuf),
}

impl Job {
    /// A name for its output directory, unique among the jobs.
    fn key(&self, i: usize) -> String {
        let name = |p: &Path| {
            p.components()
                .rev()
                .take(2)
                .map(|c| c.as_os_str().to_string_lossy().into_owned())
                .collect::<Vec<_>>()
                .into_iter()
                .rev()
                .collect::<Vec<_>>()
                .join("_")
        };
        match self {
            Job::Report(d) => format!("{i:03}-{}", name(d)),
            Job::Compare(a, b) => format!("{i:03}-compare-{}-{}", name(a), name(b)),
        }
    }
}

pub fn run(opts: SameOptions) -> Result<()> {
    let root = workspace_root();
    let work = target_dir().join("same");
    let base_bin = build_base(&root, &work, &opts.base)?;
    eprintln!("xtask same: building the working tree's tracer");
    cargo_build(&root, None)?;
    let head_bin = target_dir().join("debug/tracer");

    let fixtures = root.join("tracer/tests/fixtures");
    let mut jobs: Vec<Job> = data_dirs(&fixtures)?.into_iter().map(Job::Report).collect();
    jobs.extend(compare_pairs(&fixtures)?);
    for d in &opts.dirs {
        if !is_data_dir(d) {
            bail!(
                "{} is neither a run nor a sweep directory (no run.json or sweep.json)",
                d.display()
            );
        }
        jobs.push(Job::Report(d.clone()));
    }
    let (base_out, head_out) = (work.join("out-base"), work.join("out-head"));
    for d in [&base_out, &head_out] {
        let _ = std::fs::remove_dir_all(d);
        std::fs::create_dir_all(d).with_context(|| format!("creating {}", d.display()))?;
    }
    for (i, job) in jobs.iter().enumerate() {
        let key = job.key(i);
        eprintln!("xtask same: [{}/{}] {key}", i + 1, jobs.len());
        render(&base_bin, job, &base_out.join(&key))?;
        render(&head_bin, job, &head_out.join(&key))?;
    }
    let diffs = compare_trees(&base_out, &head_out)?;
    let files = list_files(&head_out)?.len();
    if diffs.is_empty() {
        println!(
            "same: {} renderings, {files} files, identical to {}",
            jobs.len(),
            opts.base
        );
        Ok(())
    } else {
        for d in &diffs {
            println!("differs: {d}");
        }
        bail!(
            "{} of {files} files differ from {}'s (base under {}, working tree under {})",
            diffs.len(),
            opts.base,
            base_out.display(),
            head_out.display()
        )
    }
}

/// The base revision's tracer, built in a worktree of its own under `work` (a build from
/// nothing the first time: a few minutes).
fn build_base(root: &Path, work: &Path, base: &str) -> Result<PathBuf> {
    let tree = work.join("base-tree");
    if tree.exists() && git(root, &["worktree", "remove", "--force"], &[&tree]).is_err() {
        // Left by an interrupted run, or no longer registered: start afresh.
        std::fs::remove_dir_all(&tree).with_context(|| format!("removing {}", tree.display()))?;
    }
    git(root, &["worktree", "prune"], &[])?;
    std::fs::create_dir_all(work)?;
    git(
        root,
        &["worktree", "add", "--detach"],
        &[&tree, Path::new(base)],
    )
    .with_context(|| format!("checking out {base}"))?;
    eprintln!("xtask same: building the tracer of {base}");
    let target = work.join("target");
    cargo_build(&tree, Some(&target))?;
    Ok(target.join("debug/tracer"))
}

fn git(dir: &Path, args: &[&str], paths: &[&Path]) -> Result<()> {
    let out = Command::new("git")
        .current_dir(dir)
        .args(args)
        .args(paths)
        .output()
        .context("running git")?;
    if !out.status.success() {
        bail!(
            "git {}: {}",
            args.join(" "),
            String::from_utf8_lossy(&out.stderr).trim()
        );
    }
    Ok(())
}

fn cargo_build(dir: &Path, target: Option<&Path>) -> Result<()> {
    let mut c = Command::new(std::env::var("CARGO").unwrap_or_else(|_| "cargo".into()));
    c.current_dir(dir).args(["build", "-q", "-p", "tracer"]);
    if let Some(t) = target {
        c.arg("--target-dir").arg(t);
    }
    let status = c.status().context("running cargo build")?;
    if !status.success() {
        bail!("cargo build -p tracer failed in {}", dir.display());
    }
    Ok(())
}

fn is_data_dir(d: &Path) -> bool {
    d.join("run.json").is_file() || d.join("sweep.json").is_file()
}

/// The run and sweep directories under `root`, outermost only (a sweep renders its runs),
/// sorted.
fn data_dirs(root: &Path) -> Result<Vec<PathBuf>> {
    let mut out = Vec::new();
    let mut todo = vec![root.to_path_buf()];
    while let Some(d) = todo.pop() {
        if is_data_dir(&d) {
            out.push(d);
            continue;
        }
        for e in std::fs::read_dir(&d).with_context(|| format!("reading {}", d.display()))? {
            let p = e?.path();
            if p.is_dir() {
                todo.push(p);
            }
        }
    }
    out.sort();
    Ok(out)
}

/// For each directory of `root` holding several runs or sweeps (a kernel pair's saved
/// sweeps), the first compared with each other one.
fn compare_pairs(root: &Path) -> Result<Vec<Job>> {
    let mut jobs = Vec::new();
    let mut groups: Vec<PathBuf> = std::fs::read_dir(root)?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.is_dir() && !is_data_dir(p))
        .collect();
    groups.sort();
    for g in groups {
        let members = data_dirs(&g)?;
        if let Some((first, rest)) = members.split_first() {
            for m in rest {
                jobs.push(Job::Compare(first.clone(), m.clone()));
            }
        }
    }
    Ok(jobs)
}

/// Runs `bin` on `job` into `out`; what it printed and its exit status go to `out.txt`
/// beside it, so a change of wording or status is a difference too.
fn render(bin: &Path, job: &Job, out: &Path) -> Result<()> {
    let mut c = Command::new(bin);
    match job {
        Job::Report(d) => c.arg("report").arg(d),
        Job::Compare(a, b) => c.arg("compare").arg(a).arg(b),
    };
    c.arg("-o").arg(out);
    let o = c
        .output()
        .with_context(|| format!("running {}", bin.display()))?;
    let mut text = o.stdout;
    text.extend_from_slice(&o.stderr);
    text.extend_from_slice(format!("exit {:?}\n", o.status.code()).as_bytes());
    // Beside the directory (whose name may hold dots: "6.18"), not in place of its extension.
    let mut log = out.as_os_str().to_owned();
    log.push(".txt");
    std::fs::write(PathBuf::from(log), text)?;
    Ok(())
}

/// Every file under `dir`, relative to it.
fn list_files(dir: &Path) -> Result<BTreeSet<PathBuf>> {
    let mut out = BTreeSet::new();
    let mut todo = vec![dir.to_path_buf()];
    while let Some(d) = todo.pop() {
        for e in std::fs::read_dir(&d).with_context(|| format!("reading {}", d.display()))? {
            let p = e?.path();
            if p.is_dir() {
                todo.push(p);
            } else {
                out.insert(p.strip_prefix(dir).expect("under dir").to_path_buf());
            }
        }
    }
    Ok(out)
}

/// The files that differ between trees `a` and `b` (each tree's own path replaced in its
/// text), and those only one of them has.
fn compare_trees(a: &Path, b: &Path) -> Result<Vec<String>> {
    let (fa, fb) = (list_files(a)?, list_files(b)?);
    let mut diffs = Vec::new();
    for f in fa.symmetric_difference(&fb) {
        let side = if fa.contains(f) {
            "base"
        } else {
            "working tree"
        };
        diffs.push(format!("{} (only the {side} wrote it)", f.display()));
    }
    for f in fa.intersection(&fb) {
        let (x, y) = (std::fs::read(a.join(f))?, std::fs::read(b.join(f))?);
        let (x, y) = (unrooted(&x, a), unrooted(&y, b));
        let same = if f.extension().is_some_and(|e| e == "json") {
            match (
                serde_json::from_slice::<Value>(&x),
                serde_json::from_slice::<Value>(&y),
            ) {
                (Ok(vx), Ok(vy)) => rounded(&vx) == rounded(&vy),
                _ => x == y,
            }
        } else {
            x == y
        };
        if !same {
            diffs.push(f.display().to_string());
        }
    }
    Ok(diffs)
}

/// `bytes` with every occurrence of `root`'s path replaced by a marker.
fn unrooted(bytes: &[u8], root: &Path) -> Vec<u8> {
    let needle = root.to_string_lossy();
    let needle = needle.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i..].starts_with(needle) {
            out.extend_from_slice(b"<OUT>");
            i += needle.len();
        } else {
            out.push(bytes[i]);
            i += 1;
        }
    }
    out
}

/// `v` with every non-integer number as a string of ten significant digits.
fn rounded(v: &Value) -> Value {
    match v {
        Value::Number(n) if n.is_f64() => {
            Value::String(format!("{:.9e}", n.as_f64().expect("an f64")))
        }
        Value::Array(a) => Value::Array(a.iter().map(rounded).collect()),
        Value::Object(o) => Value::Object(o.iter().map(|(k, v)| (k.clone(), rounded(v))).collect()),
        _ => v.clone(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn write(dir: &Path, rel: &str, text: &str) {
        let p = dir.join(rel);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(p, text).unwrap();
    }

    /// Two trees that differ only in the last bits of a float and in their own paths compare
    /// equal; a changed number, a changed word, or a file only one side wrote is a difference.
    #[test]
    fn trees_compare_by_value_and_by_byte() {
        let t = tempfile::tempdir().unwrap();
        let (a, b) = (t.path().join("a"), t.path().join("b"));
        let same = |a_json: &str, b_json: &str, a_txt: &str, b_txt: &str| {
            let _ = std::fs::remove_dir_all(&a);
            let _ = std::fs::remove_dir_all(&b);
            write(&a, "r/summary.json", a_json);
            write(&b, "r/summary.json", b_json);
            write(&a, "r.txt", &a_txt.replace("ROOT", &a.to_string_lossy()));
            write(&b, "r.txt", &b_txt.replace("ROOT", &b.to_string_lossy()));
            compare_trees(&a, &b).unwrap()
        };
        let none: Vec<String> = Vec::new();
        assert_eq!(
            same(
                r#"{"growth": 0.2356397405716219, "n": 3}"#,
                r#"{"growth": 0.23563974057162196, "n": 3}"#,
                "report: ROOT/r/index.html\n",
                "report: ROOT/r/index.html\n",
            ),
            none
        );
        assert_eq!(
            same(r#"{"growth": 0.2356}"#, r#"{"growth": 0.2357}"#, "x", "x"),
            ["r/summary.json"]
        );
        assert_eq!(
            same(r#"{"n": 3}"#, r#"{"n": 3}"#, "O(n)", "O(n log n)"),
            ["r.txt"]
        );
        assert_eq!(same("{}", "{}", "x", "x"), none);
        write(&b, "r/extra.svg", "<svg/>");
        assert_eq!(
            compare_trees(&a, &b).unwrap(),
            ["r/extra.svg (only the working tree wrote it)"]
        );
    }

    /// The fixtures' runs and sweeps are found outermost only, and a directory of several
    /// (a kernel pair) is compared pairwise from its first.
    #[test]
    fn jobs_are_the_outermost_runs_and_each_pair_group() {
        let t = tempfile::tempdir().unwrap();
        let r = t.path();
        write(r, "one/run.json", "{}");
        write(r, "sweep/sweep.json", "{}");
        write(r, "sweep/waitpid/run.json", "{}");
        write(r, "pair/5.10/sweep.json", "{}");
        write(r, "pair/6.1/sweep.json", "{}");
        let dirs = data_dirs(r).unwrap();
        assert_eq!(
            dirs,
            ["one", "pair/5.10", "pair/6.1", "sweep"].map(|d| r.join(d))
        );
        assert_eq!(
            compare_pairs(r).unwrap(),
            [Job::Compare(r.join("pair/5.10"), r.join("pair/6.1"))]
        );
    }
}
