//! The programs that go into the guest: static musl release builds of the workspace's
//! guest packages (`tracer`, `workloads`) and of `vm-init`, always under the
//! workspace's `target/x86_64-unknown-linux-musl/release/`.

use std::collections::BTreeMap;
use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::process::Command;

use crate::paths;

pub const MUSL_TARGET: &str = "x86_64-unknown-linux-musl";

/// Packages whose binaries are installed in the guest as `/bin/<name>`. Add a package
/// here and every `[[bin]]` of it appears in the VMs.
pub const GUEST_PACKAGES: &[&str] = &["tracer", "workloads"];

#[derive(Debug, thiserror::Error)]
pub enum GuestError {
    #[error("could not run {0}: {1}")]
    Spawn(String, #[source] std::io::Error),
    #[error("`{0}` failed (exit status {1}); its errors are above")]
    Build(String, String),
    #[error("cargo metadata: {0}")]
    Metadata(String),
    #[error(
        "guest binary {0} is missing: build the guest binaries first \
         (`cargo xtask guest`, or `xtask::guest::build()`)"
    )]
    Missing(PathBuf),
}

/// Paths of the guest programs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GuestBinaries {
    /// The guest's `/init`.
    pub init: PathBuf,
    /// Every binary of [`GUEST_PACKAGES`], by name (installed as `/bin/<name>`).
    pub bins: BTreeMap<String, PathBuf>,
}

impl GuestBinaries {
    /// `target/x86_64-unknown-linux-musl/release/tracer`.
    pub fn tracer(&self) -> &Path {
        &self.bins["tracer"]
    }

    /// `target/x86_64-unknown-linux-musl/release/workloads`.
    pub fn workloads(&self) -> &Path {
        &self.bins["workloads"]
    }
}

/// `target/x86_64-unknown-linux-musl/release`.
pub fn release_dir() -> PathBuf {
    paths::target_dir().join(MUSL_TARGET).join("release")
}

fn cargo() -> Command {
    // The cargo that started us (right toolchain), else the one on PATH.
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| OsString::from("cargo"));
    let mut c = Command::new(cargo);
    c.current_dir(paths::workspace_root())
        .env_remove("CARGO_TARGET_DIR")
        .env_remove("CARGO_BUILD_TARGET_DIR");
    c
}

fn run(mut c: Command) -> Result<(), GuestError> {
    let shown = format!("{c:?}");
    let status = c
        .status()
        .map_err(|e| GuestError::Spawn(shown.clone(), e))?;
    if status.success() {
        Ok(())
    } else {
        Err(GuestError::Build(shown, status.to_string()))
    }
}

/// `cargo build --release --target <musl> --target-dir <workspace target>`.
fn musl_build() -> Command {
    let mut c = cargo();
    c.args([
        "build",
        "--release",
        "--target",
        MUSL_TARGET,
        "--target-dir",
    ])
    .arg(paths::target_dir());
    c
}

/// Set by `cargo xtask test` once it has built the guest binaries: [`build`] then only
/// locates them. The VM tests run beside `cargo test --workspace`, and a second cargo in the
/// same target directory would wait for its lock until the workspace tests end.
pub const BUILT_ENV: &str = "XTASK_GUEST_BUILT";

/// Builds the guest binaries (a no-op when they are up to date) and returns their paths.
pub fn build() -> Result<GuestBinaries, GuestError> {
    if std::env::var_os(BUILT_ENV).is_some() {
        return locate();
    }
    let mut c = musl_build();
    for p in GUEST_PACKAGES {
        c.args(["-p", p]);
    }
    run(c)?;
    let mut c = musl_build();
    c.args(["-p", "xtask", "--bin", "vm-init"]);
    run(c)?;
    locate()
}

/// The guest binaries' paths without building; fails naming the first one missing.
pub fn locate() -> Result<GuestBinaries, GuestError> {
    let dir = release_dir();
    let init = dir.join("vm-init");
    let mut bins = BTreeMap::new();
    for name in bin_names()? {
        bins.insert(name.clone(), dir.join(&name));
    }
    for p in std::iter::once(&init).chain(bins.values()) {
        if !p.is_file() {
            return Err(GuestError::Missing(p.clone()));
        }
    }
    Ok(GuestBinaries { init, bins })
}

/// Names of the `bin` targets of [`GUEST_PACKAGES`], from `cargo metadata`.
fn bin_names() -> Result<Vec<String>, GuestError> {
    let mut c = cargo();
    c.args([
        "metadata",
        "--no-deps",
        "--format-version",
        "1",
        "--offline",
    ]);
    let out = c
        .output()
        .map_err(|e| GuestError::Spawn("cargo metadata".into(), e))?;
    if !out.status.success() {
        return Err(GuestError::Metadata(
            String::from_utf8_lossy(&out.stderr).into_owned(),
        ));
    }
    let meta: serde_json::Value =
        serde_json::from_slice(&out.stdout).map_err(|e| GuestError::Metadata(e.to_string()))?;
    let mut names = Vec::new();
    for pkg in meta["packages"].as_array().into_iter().flatten() {
        if !GUEST_PACKAGES.contains(&pkg["name"].as_str().unwrap_or("")) {
            continue;
        }
        for t in pkg["targets"].as_array().into_iter().flatten() {
            let is_bin = t["kind"]
                .as_array()
                .is_some_and(|k| k.iter().any(|k| k == "bin"));
            if is_bin && let Some(n) = t["name"].as_str() {
                names.push(n.to_string());
            }
        }
    }
    for p in GUEST_PACKAGES {
        if !names.iter().any(|n| n == p) {
            return Err(GuestError::Metadata(format!(
                "package {p} has no binary named {p}"
            )));
        }
    }
    Ok(names)
}
