//! `cargo xtask dist`: a release to copy to a box with no Rust toolchain. The static musl
//! `tracer` and `workloads` (the guest binaries: they run on any x86-64 Linux kernel the
//! tracer supports, since the eBPF programs are embedded and relocated at load time), their
//! man pages and shell completions, a `.deb` holding the same files, and `SHA256SUMS`.
//!
//! Everything generated comes from the static tracer itself (`tracer __man`, `tracer
//! completions`), so the pages always match the binary they ship with. The directory is
//! built under a `.partial` name and renamed when complete: an interrupted `dist` never
//! leaves something that looks like a release.

use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{Context, Result, bail, ensure};

use crate::{guest, paths};

/// The version every artifact is named after: the tracer package's.
pub fn version() -> &'static str {
    // xtask and tracer are versioned together in this workspace; the test below checks it.
    env!("CARGO_PKG_VERSION")
}

/// `target/dist/tracer-<version>-x86_64-linux-musl`.
pub fn default_dir() -> PathBuf {
    paths::target_dir()
        .join("dist")
        .join(format!("tracer-{}-x86_64-linux-musl", version()))
}

/// The `.deb`'s file name (Debian's `name_version_arch.deb`).
pub fn deb_name() -> String {
    format!("tracer_{}_amd64.deb", version())
}

/// The shells `tracer completions` is asked for, with where each file goes: its name in the
/// release's `completions/` and its install path in the `.deb` (each shell's vendor directory).
pub const COMPLETIONS: [(&str, &str, &str); 3] = [
    (
        "bash",
        "tracer.bash",
        "usr/share/bash-completion/completions/tracer",
    ),
    ("zsh", "_tracer", "usr/share/zsh/vendor-completions/_tracer"),
    (
        "fish",
        "tracer.fish",
        "usr/share/fish/vendor_completions.d/tracer.fish",
    ),
];

/// Where the `.deb` puts `workloads`: not on PATH (the name is generic), but where the tracer
/// looks for it beside its own directory (`../lib/tracer/workloads`).
pub const DEB_WORKLOADS: &str = "usr/lib/tracer/workloads";

/// Build the release into `out` (replacing what was there) and return its files, relative to
/// `out`, sorted.
pub fn build(out: &Path) -> Result<Vec<PathBuf>> {
    let out = std::path::absolute(out).with_context(|| format!("{}", out.display()))?;
    let g = guest::build().context("building the static musl binaries")?;
    let partial = with_suffix(&out, ".partial");
    remove_dir_if_present(&partial)?;
    fs::create_dir_all(&partial).with_context(|| format!("creating {}", partial.display()))?;

    install(g.tracer(), &partial.join("tracer"), 0o755)?;
    install(g.workloads(), &partial.join("workloads"), 0o755)?;
    let tracer = partial.join("tracer");
    let man = partial.join("man").join("man1");
    fs::create_dir_all(&man)?;
    run(Command::new(&tracer).arg("__man").arg(&man))?;
    let pages = man_pages(&man)?;
    let comp = partial.join("completions");
    fs::create_dir_all(&comp)?;
    for (shell, name, _) in COMPLETIONS {
        let script = output(Command::new(&tracer).args(["completions", shell]))?;
        ensure!(
            !script.is_empty(),
            "`tracer completions {shell}` printed nothing"
        );
        fs::write(comp.join(name), script)?;
    }
    fs::copy(
        paths::workspace_root().join("README.md"),
        partial.join("README.md"),
    )?;
    // The pages the README links to, at the same relative paths.
    fs::create_dir_all(partial.join("docs"))?;
    for page in doc_pages()? {
        fs::copy(&page, partial.join("docs").join(page.file_name().unwrap()))?;
    }

    let deb = partial.join(deb_name());
    build_deb(&partial, &pages, &deb)?;
    write_sums(&partial)?;

    remove_dir_if_present(&out)?;
    fs::rename(&partial, &out)
        .with_context(|| format!("renaming {} to {}", partial.display(), out.display()))?;
    let mut files = Vec::new();
    list_files(&out, &out, &mut files)?;
    files.sort();
    Ok(files)
}

/// The Markdown pages under docs/, sorted.
fn doc_pages() -> Result<Vec<PathBuf>> {
    let dir = paths::workspace_root().join("docs");
    let mut pages = Vec::new();
    for e in fs::read_dir(&dir).with_context(|| format!("reading {}", dir.display()))? {
        let p = e?.path();
        if p.extension().is_some_and(|x| x == "md") {
            pages.push(p);
        }
    }
    pages.sort();
    Ok(pages)
}

/// The `.deb`: `usr/bin/tracer`, `usr/lib/tracer/workloads`, gzipped man pages, completions
/// in each shell's vendor directory, and the README and docs/ under `usr/share/doc/tracer`.
fn build_deb(release: &Path, pages: &[PathBuf], deb: &Path) -> Result<()> {
    let root = release.with_file_name(format!(
        "{}.deb-root",
        release.file_name().unwrap().to_string_lossy()
    ));
    remove_dir_if_present(&root)?;
    install(&release.join("tracer"), &root.join("usr/bin/tracer"), 0o755)?;
    install(&release.join("workloads"), &root.join(DEB_WORKLOADS), 0o755)?;
    for p in pages {
        let dest = root.join("usr/share/man/man1").join(p.file_name().unwrap());
        install(p, &dest, 0o644)?;
        // Debian policy: man pages are compressed; -n keeps the archive reproducible.
        run(Command::new("gzip").args(["-9", "-n"]).arg(&dest))?;
    }
    for (_, name, dest) in COMPLETIONS {
        install(
            &release.join("completions").join(name),
            &root.join(dest),
            0o644,
        )?;
    }
    install(
        &release.join("README.md"),
        &root.join("usr/share/doc/tracer/README.md"),
        0o644,
    )?;
    for page in fs::read_dir(release.join("docs"))? {
        let page = page?.path();
        let dest = root
            .join("usr/share/doc/tracer/docs")
            .join(page.file_name().unwrap());
        install(&page, &dest, 0o644)?;
    }
    let installed_kib = dir_bytes(&root)?.div_ceil(1024);
    let control = root.join("DEBIAN").join("control");
    fs::create_dir_all(control.parent().unwrap())?;
    fs::write(&control, control_file(version(), installed_kib))?;
    // dpkg-deb is part of dpkg, present on every Debian-family host; --root-owner-group
    // makes every file root's without needing root or fakeroot.
    run(Command::new("dpkg-deb")
        .args(["--root-owner-group", "-Zxz", "--build"])
        .arg(&root)
        .arg(deb))?;
    remove_dir_if_present(&root)
}

/// The `.deb`'s `DEBIAN/control`.
pub fn control_file(version: &str, installed_kib: u64) -> String {
    format!(
        "Package: tracer\n\
         Version: {version}\n\
         Architecture: amd64\n\
         Maintainer: tracer developers <root@localhost>\n\
         Installed-Size: {installed_kib}\n\
         Section: devel\n\
         Priority: optional\n\
         Description: find which kernel loop is O(n)\n \
         tracer times kernel functions with eBPF (tracepoints, kprobes, fentry) while a\n \
         workload sweeps a size N, fits how each call's cost grows, and names the kernel\n \
         loop that grows. Statically linked; needs root (or CAP_BPF and CAP_PERFMON),\n \
         and BTF or kprobes for function probes.\n"
    )
}

/// `SHA256SUMS` over every file of the release, in `sha256sum -c` format.
fn write_sums(release: &Path) -> Result<()> {
    let mut files = Vec::new();
    list_files(release, release, &mut files)?;
    files.sort();
    let mut c = Command::new("sha256sum");
    c.current_dir(release).arg("--").args(&files);
    let sums = output(&mut c)?;
    fs::write(release.join("SHA256SUMS"), sums)?;
    Ok(())
}

fn man_pages(dir: &Path) -> Result<Vec<PathBuf>> {
    let mut pages: Vec<PathBuf> = fs::read_dir(dir)?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "1"))
        .collect();
    pages.sort();
    ensure!(
        pages.iter().any(|p| p.ends_with("tracer.1")),
        "`tracer __man` wrote no tracer.1 into {}",
        dir.display()
    );
    Ok(pages)
}

fn install(from: &Path, to: &Path, mode: u32) -> Result<()> {
    use std::os::unix::fs::PermissionsExt;
    if let Some(parent) = to.parent() {
        fs::create_dir_all(parent).with_context(|| format!("creating {}", parent.display()))?;
    }
    fs::copy(from, to)
        .with_context(|| format!("copying {} to {}", from.display(), to.display()))?;
    fs::set_permissions(to, fs::Permissions::from_mode(mode))?;
    Ok(())
}

fn run(c: &mut Command) -> Result<()> {
    let st = c.status().with_context(|| format!("could not run {c:?}"))?;
    if !st.success() {
        bail!("{c:?} failed ({st})");
    }
    Ok(())
}

fn output(c: &mut Command) -> Result<Vec<u8>> {
    let o = c.output().with_context(|| format!("could not run {c:?}"))?;
    if !o.status.success() {
        bail!(
            "{c:?} failed ({}): {}",
            o.status,
            String::from_utf8_lossy(&o.stderr).trim()
        );
    }
    Ok(o.stdout)
}

fn with_suffix(p: &Path, suffix: &str) -> PathBuf {
    let mut s = p.as_os_str().to_owned();
    s.push(suffix);
    PathBuf::from(s)
}

fn remove_dir_if_present(p: &Path) -> Result<()> {
    match fs::remove_dir_all(p) {
        Err(e) if e.kind() != std::io::ErrorKind::NotFound => {
            Err(e).with_context(|| format!("removing {}", p.display()))
        }
        _ => Ok(()),
    }
}

fn list_files(root: &Path, dir: &Path, out: &mut Vec<PathBuf>) -> Result<()> {
    for e in fs::read_dir(dir).with_context(|| format!("reading {}", dir.display()))? {
        let p = e?.path();
        if p.is_dir() {
            list_files(root, &p, out)?;
        } else {
            out.push(p.strip_prefix(root).unwrap().to_path_buf());
        }
    }
    Ok(())
}

fn dir_bytes(dir: &Path) -> Result<u64> {
    let mut files = Vec::new();
    list_files(dir, dir, &mut files)?;
    files
        .iter()
        .map(|f| Ok(fs::metadata(dir.join(f))?.len()))
        .sum()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn control_file_is_what_dpkg_expects() {
        let c = control_file("1.2.3", 4096);
        assert!(c.starts_with("Package: tracer\nVersion: 1.2.3\nArchitecture: amd64\n"));
        assert!(c.contains("\nInstalled-Size: 4096\n"));
        // Continuation lines of the description start with one space; the file ends in \n.
        let desc: Vec<&str> = c
            .lines()
            .skip_while(|l| !l.starts_with("Description:"))
            .collect();
        assert!(
            desc.len() > 1
                && desc[1..]
                    .iter()
                    .all(|l| l.starts_with(' ') && !l.starts_with("  "))
        );
        assert!(c.ends_with("kprobes for function probes.\n"));
    }

    #[test]
    fn the_release_is_named_after_the_tracer_version() {
        let tracer_manifest =
            fs::read_to_string(paths::workspace_root().join("tracer/Cargo.toml")).unwrap();
        assert!(
            tracer_manifest.contains(&format!("\nversion = \"{}\"\n", version())),
            "xtask's version must follow tracer's"
        );
        assert_eq!(deb_name(), format!("tracer_{}_amd64.deb", version()));
        assert!(default_dir().ends_with(format!("tracer-{}-x86_64-linux-musl", version())));
    }
}
