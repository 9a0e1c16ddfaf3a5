//! `cargo xtask setup`: checks, and installs when missing, everything the build and the
//! tests need. Quick and silent-ish when all is present; says what it installs; fails
//! naming what could not be had.

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use anyhow::{Context, Result, anyhow, bail};

/// rustc's LLVM major: bpf-linker must be built against the same one.
pub const LLVM_MAJOR: u32 = 22;
pub const BPF_LINKER_VERSION: &str = "0.13.0";

/// Debian packages and why each is needed.
pub const APT_PACKAGES: &[(&str, &str)] = &[
    ("llvm-22-dev", "bpf-linker links libLLVM 22"),
    (
        "libpolly-22-dev",
        "needed to link bpf-linker against LLVM 22",
    ),
    ("qemu-system-x86", "the VM runner"),
    ("busybox-static", "the guest userland (/bin/busybox)"),
    ("bpftrace", "cross-checking probes by hand"),
    ("zstd", "compressed kernel artifacts"),
    ("musl-tools", "static musl guest binaries (C parts)"),
    ("cpio", "reference reader in the initramfs writer's tests"),
    (
        "debian-archive-keyring",
        "verifying the Debian kernels' signatures",
    ),
    ("dpkg", "dpkg-deb unpacks the kernel packages"),
    ("apt", "fetching kernels with a private apt state"),
    ("gcc", "crates that build C code"),
    (
        "binutils",
        "as --32 and ld -m elf_i386 build the 32-bit test program (tracer/tests/native.rs)",
    ),
    (
        "chromium-headless-shell",
        "the browser test loads index.html over file:// (tracer/tests/browser.rs)",
    ),
    (
        "systemtap-sdt-dev",
        "<sys/sdt.h> for the USDT benchmarks in tracer/tests/c (tracer/tests/usdt.rs)",
    ),
    (
        "util-linux",
        "ipcmk, ipcs and ipcrm, real programs the kernel-loop tests drive (natively and staged \
         into the guests)",
    ),
    (
        "bash",
        "a real shell the kernel-loop tests drive (natively and staged into the guests)",
    ),
];

fn say(what: &str) {
    eprintln!("setup: {what}");
}

fn output(cmd: &str, args: &[&str]) -> Option<String> {
    let out = Command::new(cmd)
        .args(args)
        .stderr(Stdio::null())
        .output()
        .ok()?;
    out.status
        .success()
        .then(|| String::from_utf8_lossy(&out.stdout).into_owned())
}

/// Runs a command with its output visible; errors name the command.
fn run_visible(mut c: Command) -> Result<()> {
    let shown = format!("{c:?}");
    say(&format!("running {shown}"));
    let st = c
        .status()
        .with_context(|| format!("could not start {shown}"))?;
    if !st.success() {
        bail!("{shown} failed ({st})");
    }
    Ok(())
}

fn is_root() -> bool {
    // SAFETY: geteuid has no preconditions.
    unsafe { libc::geteuid() == 0 }
}

/// A command run as root: directly when we are root, else through `sudo -n`.
fn as_root(program: &str) -> Result<Command> {
    if is_root() {
        return Ok(Command::new(program));
    }
    if output("sudo", &["-n", "true"]).is_some() {
        let mut c = Command::new("sudo");
        c.args(["-n", "--preserve-env=DEBIAN_FRONTEND", program]);
        return Ok(c);
    }
    bail!(
        "installing packages needs root: run `cargo xtask setup` as root or with password-less sudo"
    )
}

pub fn installed_version(pkg: &str) -> Option<String> {
    let s = output("dpkg-query", &["-W", "-f=${Status}\t${Version}", pkg])?;
    let (status, version) = s.split_once('\t')?;
    (status == "install ok installed").then(|| version.to_string())
}

/// apt's candidate version, `None` when apt knows no installable version.
pub fn candidate(pkg: &str) -> Option<String> {
    let s = output("apt-cache", &["policy", pkg])?;
    parse_candidate(&s)
}

pub fn parse_candidate(policy: &str) -> Option<String> {
    policy
        .lines()
        .find_map(|l| l.trim().strip_prefix("Candidate:"))
        .map(str::trim)
        .filter(|v| !v.is_empty() && *v != "(none)")
        .map(str::to_string)
}

fn apt_get(args: &[&str]) -> Result<()> {
    let mut c = as_root("apt-get")?;
    c.args(args).env("DEBIAN_FRONTEND", "noninteractive");
    run_visible(c)
}

fn apt_packages(check_only: bool) -> Result<()> {
    let mut missing = Vec::new();
    for (pkg, why) in APT_PACKAGES {
        match installed_version(pkg) {
            Some(v) => say(&format!("present: {pkg} {v}")),
            None => {
                say(&format!("missing: {pkg} ({why})"));
                missing.push(*pkg);
            }
        }
    }
    if missing.is_empty() {
        return Ok(());
    }
    if check_only {
        bail!("missing packages: {}", missing.join(" "));
    }
    // Refresh the index only when needed: a package without a candidate, or (below) an
    // install that fails because the index is stale.
    let mut updated = false;
    if missing.iter().any(|p| candidate(p).is_none()) {
        apt_get(&["update", "-q"])?;
        updated = true;
    }
    let mut args = vec!["install", "-y", "-q", "--no-install-recommends"];
    args.extend(&missing);
    say(&format!("installing: {}", missing.join(" ")));
    if let Err(e) = apt_get(&args) {
        if updated {
            return Err(e);
        }
        say("install failed; refreshing the package index and retrying once");
        apt_get(&["update", "-q"])?;
        apt_get(&args)?;
    }
    let still: Vec<_> = missing
        .iter()
        .filter(|p| installed_version(p).is_none())
        .map(|p| match candidate(p) {
            Some(_) => p.to_string(),
            None => format!("{p} (no installable version in the configured apt sources)"),
        })
        .collect();
    if !still.is_empty() {
        bail!("could not install: {}", still.join(", "));
    }
    Ok(())
}

fn rustup(args: &[&str]) -> Command {
    let mut c = Command::new("rustup");
    c.args(args);
    c
}

fn rust_toolchains(check_only: bool) -> Result<()> {
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

fn bpf_linker(check_only: bool) -> Result<()> {
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

/// Runs every check; with `check_only` nothing is installed and anything missing is an
/// error.
pub fn run(check_only: bool) -> Result<()> {
    let started = std::time::Instant::now();
    apt_packages(check_only).context("apt packages")?;
    rust_toolchains(check_only).context("Rust toolchains")?;
    bpf_linker(check_only).context("bpf-linker")?;
    say(&format!(
        "all present ({:.1} s)",
        started.elapsed().as_secs_f64()
    ));
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_apt_candidate() {
        let p =
            "busybox-static:\n  Installed: (none)\n  Candidate: 1:1.35.0-4+b3\n  Version table:\n";
        assert_eq!(parse_candidate(p).as_deref(), Some("1:1.35.0-4+b3"));
        assert_eq!(
            parse_candidate("x:\n  Installed: (none)\n  Candidate: (none)\n"),
            None
        );
        assert_eq!(parse_candidate(""), None);
    }

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

    #[test]
    fn package_list_is_complete_for_the_runner() {
        let names: Vec<_> = APT_PACKAGES.iter().map(|p| p.0).collect();
        for needed in [
            "qemu-system-x86",
            "busybox-static",
            "debian-archive-keyring",
            "llvm-22-dev",
            "cpio",
            "chromium-headless-shell",
            "systemtap-sdt-dev",
        ] {
            assert!(names.contains(&needed), "{needed}");
        }
    }
}
