//! The Rust side of setup: the stable and nightly toolchains with what the eBPF build
//! needs (rust-src, the musl target), and bpf-linker built against rustc's LLVM.

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{Context, Result, anyhow, bail};

use super::{BPF_LINKER_VERSION, LLVM_MAJOR, output, run_visible, say};

fn rustup(args: &[&str]) -> Command {
    let mut c = Command::new("rustup");
    c.args(args);
    c
}

pub(super) fn rust_toolchains(check_only: bool) -> Result<()> {
    let toolchains = output("rustup", &["toolchain", "list"])
        .ok_or_else(|| anyhow!("rustup not found: the Rust toolchain must come from rustup"))?;
    if !toolchains.lines().any(|l| l.starts_with("nightly")) {
        if check_only {
            bail!("the nightly toolchain is missing");
        }
        say("installing: nightly toolchain (builds the eBPF programs with -Z build-std)");
        run_visible(rustup(&[
            "toolchain",
            "install",
            "nightly",
            "--profile",
            "minimal",
            "--component",
            "rust-src",
        ]))?;
    } else {
        say("present: nightly toolchain");
    }
    let comps = output(
        "rustup",
        &["component", "list", "--toolchain", "nightly", "--installed"],
    )
    .unwrap_or_default();
    if comps.lines().any(|l| l.starts_with("rust-src")) {
        say("present: rust-src (nightly)");
    } else if check_only {
        bail!("rust-src is missing from the nightly toolchain");
    } else {
        say("installing: rust-src for nightly");
        run_visible(rustup(&[
            "component",
            "add",
            "rust-src",
            "--toolchain",
            "nightly",
        ]))?;
    }
    let targets = output("rustup", &["target", "list", "--installed"]).unwrap_or_default();
    if targets
        .lines()
        .any(|l| l.trim() == crate::guest::MUSL_TARGET)
    {
        say(&format!("present: target {}", crate::guest::MUSL_TARGET));
    } else if check_only {
        bail!("target {} is missing", crate::guest::MUSL_TARGET);
    } else {
        say(&format!("installing: target {}", crate::guest::MUSL_TARGET));
        run_visible(rustup(&["target", "add", crate::guest::MUSL_TARGET]))?;
    }
    let nightly = output("rustc", &["+nightly", "-vV"])
        .ok_or_else(|| anyhow!("`rustc +nightly -vV` failed"))?;
    match llvm_major_of_rustc(&nightly) {
        Some(m) if m == LLVM_MAJOR => say(&format!("present: nightly rustc uses LLVM {m}")),
        Some(m) => bail!(
            "the nightly rustc uses LLVM {m}, but bpf-linker is built for LLVM {LLVM_MAJOR}: \
             the eBPF objects would not link. Install a nightly with LLVM {LLVM_MAJOR} \
             (e.g. `rustup toolchain install nightly-2026-05-19`) or update LLVM_MAJOR in xtask/src/setup.rs"
        ),
        None => bail!("cannot read the LLVM version from `rustc +nightly -vV`:\n{nightly}"),
    }
    Ok(())
}

pub fn llvm_major_of_rustc(vv: &str) -> Option<u32> {
    vv.lines()
        .find_map(|l| l.strip_prefix("LLVM version:"))
        .and_then(|v| v.trim().split('.').next()?.parse().ok())
}

/// The libLLVM major an executable links (from `ldd` output), if any.
pub fn linked_llvm_major(ldd: &str) -> Option<Result<u32, String>> {
    let line = ldd.lines().find(|l| l.contains("libLLVM"))?;
    if line.contains("not found") {
        return Some(Err(line.trim().to_string()));
    }
    // "libLLVM.so.22.1 => ..." or "libLLVM-22.so => ..."
    let name = line.split_whitespace().next()?;
    let digits: String = name
        .trim_start_matches("libLLVM")
        .trim_start_matches(['-', '.'])
        .trim_start_matches("so.")
        .chars()
        .take_while(char::is_ascii_digit)
        .collect();
    Some(digits.parse().map_err(|_| line.trim().to_string()))
}

fn cargo_home() -> PathBuf {
    std::env::var_os("CARGO_HOME")
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            PathBuf::from(std::env::var_os("HOME").unwrap_or_default()).join(".cargo")
        })
}

fn find_bpf_linker() -> Option<PathBuf> {
    let mut dirs: Vec<PathBuf> = std::env::var_os("PATH")
        .map(|p| std::env::split_paths(&p).collect())
        .unwrap_or_default();
    dirs.push(cargo_home().join("bin"));
    dirs.into_iter()
        .map(|d| d.join("bpf-linker"))
        .find(|p| p.is_file())
}

/// Why the installed bpf-linker is unusable, or `None` if it is fine.
fn bpf_linker_problem(path: &Path) -> Option<String> {
    let version = match output(path.to_str()?, &["--version"]) {
        Some(v) => v,
        None => return Some("`bpf-linker --version` fails (libLLVM missing?)".into()),
    };
    if !version.contains(BPF_LINKER_VERSION) {
        return Some(format!(
            "version is {}, want {BPF_LINKER_VERSION}",
            version.trim()
        ));
    }
    let ldd = output("ldd", &[path.to_str()?]).unwrap_or_default();
    match linked_llvm_major(&ldd) {
        Some(Ok(m)) if m == LLVM_MAJOR => None,
        Some(Ok(m)) => Some(format!("linked against LLVM {m}, want {LLVM_MAJOR}")),
        Some(Err(line)) => Some(format!("its libLLVM is unresolved: {line}")),
        // Statically linked LLVM: trust cargo's record of the features it was built with.
        None => {
            let record =
                std::fs::read_to_string(cargo_home().join(".crates2.json")).unwrap_or_default();
            let feature = format!("\"llvm-{LLVM_MAJOR}\"");
            let ok = record
                .split("\"bpf-linker ")
                .nth(1)
                .is_some_and(|rest| rest.split('}').next().unwrap_or("").contains(&feature));
            (!ok).then(|| format!("cannot tell which LLVM it uses (no libLLVM in ldd, no llvm-{LLVM_MAJOR} feature recorded)"))
        }
    }
}

pub(super) fn bpf_linker(check_only: bool) -> Result<()> {
    let problem = match find_bpf_linker() {
        Some(p) => match bpf_linker_problem(&p) {
            None => {
                say(&format!(
                    "present: bpf-linker {BPF_LINKER_VERSION} ({}) with LLVM {LLVM_MAJOR}",
                    p.display()
                ));
                return Ok(());
            }
            Some(why) => format!("{}: {why}", p.display()),
        },
        None => "not installed".into(),
    };
    if check_only {
        bail!("bpf-linker: {problem}");
    }
    say(&format!(
        "installing: bpf-linker {BPF_LINKER_VERSION} against LLVM {LLVM_MAJOR} ({problem}); this takes a few minutes"
    ));
    let llvm_prefix = format!("/usr/lib/llvm-{LLVM_MAJOR}");
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| OsString::from("cargo"));
    let mut c = Command::new(cargo);
    c.args([
        "install",
        "bpf-linker",
        "--version",
        BPF_LINKER_VERSION,
        "--no-default-features",
        "--features",
        &format!("llvm-{LLVM_MAJOR}"),
        "--force",
    ])
    // Without LLVM_PREFIX the build finds /usr/bin/llvm-config (Debian's default LLVM 14).
    .env("LLVM_PREFIX", &llvm_prefix)
    .env_remove("CARGO_TARGET_DIR")
    .env_remove("CARGO_BUILD_TARGET_DIR");
    run_visible(c).context("building bpf-linker")?;
    let p = find_bpf_linker()
        .ok_or_else(|| anyhow!("bpf-linker still not found after installing it"))?;
    if let Some(why) = bpf_linker_problem(&p) {
        bail!("bpf-linker was installed but is unusable: {why}");
    }
    say(&format!("installed: bpf-linker ({})", p.display()));
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_llvm_versions() {
        let vv = "rustc 1.97.0-nightly\nhost: x86_64-unknown-linux-gnu\nLLVM version: 22.1.4\n";
        assert_eq!(llvm_major_of_rustc(vv), Some(22));
        assert_eq!(llvm_major_of_rustc("rustc 1.0"), None);
        let ldd = "\tlinux-vdso.so.1 (0x1)\n\tlibLLVM.so.22.1 => /usr/lib/llvm-22/lib/libLLVM.so.22.1 (0x2)\n";
        assert_eq!(linked_llvm_major(ldd), Some(Ok(22)));
        assert_eq!(
            linked_llvm_major("\tlibLLVM-14.so.1 => /usr/lib/x (0x1)\n"),
            Some(Ok(14))
        );
        assert!(matches!(
            linked_llvm_major("\tlibLLVM.so.22.1 => not found\n"),
            Some(Err(_))
        ));
        assert_eq!(linked_llvm_major("\tlibc.so.6 => /lib/libc.so.6\n"), None);
    }
}
