//! `cargo xtask man`: the tracer's man pages (`tracer.1`, `tracer-record.1`, ...), generated
//! from its command line definition by the tracer itself (`tracer __man DIR`), so they always
//! match `tracer --help`. Nothing generated is kept in the repository.

use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{Context, Result, bail};

use crate::paths;

/// `target/man/man1`, the default output.
pub fn default_dir() -> PathBuf {
    paths::target_dir().join("man").join("man1")
}

/// Build the host tracer (provisioning first: it embeds eBPF programs), write its man pages
/// into `out`, and return their paths, sorted.
pub fn generate(out: &Path) -> Result<Vec<PathBuf>> {
    // cargo runs the tracer from the workspace root: resolve a relative `out` from here.
    let out = &std::path::absolute(out).with_context(|| format!("{}", out.display()))?;
    crate::setup::run(false).context("provisioning")?;
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    let status = Command::new(cargo)
        .current_dir(paths::workspace_root())
        .args([
            "run", "--quiet", "-p", "tracer", "--bin", "tracer", "--", "__man",
        ])
        .arg(out)
        .status()
        .context("running cargo")?;
    if !status.success() {
        bail!("`tracer __man {}` failed ({status})", out.display());
    }
    let mut pages: Vec<PathBuf> = std::fs::read_dir(out)
        .with_context(|| format!("reading {}", out.display()))?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "1"))
        .collect();
    pages.sort();
    if pages.is_empty() {
        bail!("no man page was written to {}", out.display());
    }
    Ok(pages)
}
