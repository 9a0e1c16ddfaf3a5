//! `cargo xtask setup`: checks, and installs when missing, everything the build and the
//! tests need. Quick and silent-ish when all is present; says what it installs; fails
//! naming what could not be had.
//!
//! Its parts: [`plan`] decides what apt installs (and refuses removals), [`toolchain`]
//! checks rustup's toolchains and bpf-linker.

mod plan;
mod system;
mod toolchain;

pub use plan::{AptPlan, AptPlanError, BackportsChoice, BackportsError, Removal, plan_install};
pub use system::System;
use system::quiet_stdout;
use toolchain::{bpf_linker, rust_toolchains};
pub use toolchain::{linked_llvm_major, llvm_major_of_rustc};

use std::path::Path;
use std::process::Command;

use anyhow::{Context, Result, bail};

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
    (
        "debootstrap",
        "the Debian chroots setup's own apt tests run against (xtask/tests/setup_apt.rs)",
    ),
];

fn say(what: &str) {
    eprintln!("setup: {what}");
}

fn output(cmd: &str, args: &[&str]) -> Option<String> {
    let mut c = Command::new(cmd);
    c.args(args);
    quiet_stdout(c)
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

fn apt_get(args: &[&str]) -> Result<()> {
    let mut c = as_root("apt-get")?;
    c.args(args).env("DEBIAN_FRONTEND", "noninteractive");
    run_visible(c)
}

/// Runs a plan on the host. Unless removals are allowed, `--no-remove` makes apt stop
/// rather than remove anything, should the real run differ from the simulation.
fn install(plan: &AptPlan, allow_removals: bool) -> Result<()> {
    let mut args = vec!["install", "-y", "-q", "--no-install-recommends"];
    if !allow_removals {
        args.push("--no-remove");
    }
    args.extend(plan.args.iter().map(String::as_str));
    apt_get(&args)
}

/// Each package of [`APT_PACKAGES`] with its installed version on `system`.
pub fn package_states(system: &System) -> Vec<(&'static str, &'static str, Option<String>)> {
    APT_PACKAGES
        .iter()
        .map(|(p, why)| (*p, *why, system.installed_version(p)))
        .collect()
}

fn apt_packages(check_only: bool, allow_removals: bool) -> Result<()> {
    let system = System::host();
    let mut missing = Vec::new();
    for (pkg, why, version) in package_states(&system) {
        match version {
            Some(v) => say(&format!("present: {pkg} {v}")),
            None => {
                say(&format!("missing: {pkg} ({why})"));
                missing.push(pkg);
            }
        }
    }
    if missing.is_empty() {
        return Ok(());
    }
    if check_only {
        bail!("missing packages: {}", missing.join(" "));
    }
    // Refresh the index only when needed: a package without a candidate, or (below) a
    // plan or an install that fails because the index is stale.
    let mut updated = false;
    if missing.iter().any(|p| system.candidate(p).is_none()) {
        apt_get(&["update", "-q"])?;
        updated = true;
    }
    let work = crate::paths::target_dir().join("setup");
    loop {
        let attempt = plan_install(&system, &missing, allow_removals, &work)
            .map_err(anyhow::Error::from)
            .and_then(|plan| {
                announce(&plan);
                install(&plan, allow_removals)
            });
        match attempt {
            Ok(()) => break,
            Err(e)
                if updated
                    || matches!(
                        e.downcast_ref::<AptPlanError>(),
                        Some(AptPlanError::WouldRemove { .. })
                    ) =>
            {
                return Err(e);
            }
            Err(e) => {
                say(&format!(
                    "{e:#}\nsetup: refreshing the package index and retrying once"
                ));
                apt_get(&["update", "-q"])?;
                updated = true;
            }
        }
    }
    let still: Vec<_> = missing
        .iter()
        .filter(|p| system.installed_version(p).is_none())
        .map(|p| match system.candidate(p) {
            Some(_) => p.to_string(),
            None => format!("{p} (no installable version in the configured apt sources)"),
        })
        .collect();
    if !still.is_empty() {
        bail!("could not install: {}", still.join(", "));
    }
    Ok(())
}

/// Says what a plan installs beyond the plain request, and what it removes.
fn announce(plan: &AptPlan) {
    if let Some(b) = &plan.backports {
        for r in &b.avoided {
            say(&format!(
                "{} {} is installed from {}, and the system's versions of what setup \
                 installs would make apt remove it",
                r.package, r.version, b.suite
            ));
        }
        let list: Vec<String> = b.packages.iter().map(|(p, v)| format!("{p} {v}")).collect();
        say(&format!(
            "so taking from {} instead: {}",
            b.suite,
            list.join(", ")
        ));
    }
    for r in &plan.simulation.removals {
        say(&format!(
            "removing (allowed by --yes): {} {}",
            r.package, r.version
        ));
    }
    let names: Vec<&str> = plan
        .args
        .iter()
        .map(|a| {
            Path::new(a)
                .file_name()
                .and_then(|n| n.to_str())
                .unwrap_or(a)
        })
        .collect();
    say(&format!("installing: {}", names.join(" ")));
}

/// Runs every check; with `check_only` nothing is installed and anything missing is an
/// error. Refuses an install that would remove an installed package.
pub fn run(check_only: bool) -> Result<()> {
    run_with(SetupOptions {
        check_only,
        allow_removals: false,
    })
}

#[derive(Debug, Clone, Copy, Default)]
pub struct SetupOptions {
    /// Install nothing; anything missing is an error.
    pub check_only: bool,
    /// Let apt remove installed packages when the install cannot be had otherwise
    /// (`--yes`).
    pub allow_removals: bool,
}

pub fn run_with(opts: SetupOptions) -> Result<()> {
    let started = std::time::Instant::now();
    apt_packages(opts.check_only, opts.allow_removals).context("apt packages")?;
    rust_toolchains(opts.check_only).context("Rust toolchains")?;
    bpf_linker(opts.check_only).context("bpf-linker")?;
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
            "debootstrap",
        ] {
            assert!(names.contains(&needed), "{needed}");
        }
    }
}
