//! The Debian system setup reads: the host, or another root (a test's chroot) whose apt
//! state is read through apt's and dpkg's own options.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use crate::apt::{self, Policy, Simulation};

use super::plan::{AptPlanError, BackportsError};

/// The Debian system whose packages setup checks and installs: the host (`/`), or another
/// root such as a test's chroot. apt and dpkg read another root's sources, index and
/// dpkg status through `-o Dir=` and `--admindir`, so against it only what reads
/// (queries, simulations) is run; installing is for the host alone.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct System {
    root: PathBuf,
}

impl System {
    pub fn host() -> Self {
        System {
            root: PathBuf::from("/"),
        }
    }

    pub fn at(root: impl Into<PathBuf>) -> Self {
        System { root: root.into() }
    }

    fn is_host(&self) -> bool {
        self.root == Path::new("/")
    }

    /// `apt-get` or `apt-cache` reading this system, in the C locale (its output is
    /// parsed).
    fn apt(&self, tool: &str) -> Command {
        let mut c = Command::new(tool);
        if !self.is_host() {
            let r = self.root.display();
            for o in [
                format!("Dir={r}"),
                // The one Dir:: path that is absolute by default.
                format!("Dir::State::status={r}/var/lib/dpkg/status"),
                // Reading only: no binary caches written into the root.
                "Dir::Cache::pkgcache=".into(),
                "Dir::Cache::srcpkgcache=".into(),
            ] {
                c.arg("-o").arg(o);
            }
        }
        c.env("LC_ALL", "C");
        c
    }

    fn dpkg_query(&self) -> Command {
        let mut c = Command::new("dpkg-query");
        if !self.is_host() {
            c.arg(format!(
                "--admindir={}",
                self.root.join("var/lib/dpkg").display()
            ));
        }
        c.env("LC_ALL", "C");
        c
    }

    /// The installed version of `pkg`, if it is installed.
    pub fn installed_version(&self, pkg: &str) -> Option<String> {
        let mut c = self.dpkg_query();
        c.args(["-W", "-f=${Status}\t${Version}", pkg]);
        let s = quiet_stdout(c)?;
        let (status, version) = s.split_once('\t')?;
        (status == "install ok installed").then(|| version.to_string())
    }

    /// The installed package's status record (its control fields).
    pub(super) fn installed_record(&self, pkg: &str) -> Option<String> {
        let mut c = self.dpkg_query();
        c.args(["-s", pkg]);
        quiet_stdout(c)
    }

    /// `apt-cache policy` of each of `pkgs` apt knows.
    pub fn policies(&self, pkgs: &[&str]) -> Vec<Policy> {
        if pkgs.is_empty() {
            return Vec::new();
        }
        let mut c = self.apt("apt-cache");
        c.arg("policy").args(pkgs);
        quiet_stdout(c)
            .map(|s| apt::parse_policy(&s))
            .unwrap_or_default()
    }

    /// apt's candidate version, `None` when apt knows no installable version.
    pub fn candidate(&self, pkg: &str) -> Option<String> {
        self.policies(&[pkg]).into_iter().next()?.candidate
    }

    /// The control records apt has for these `package=version` specs (none for a version
    /// it does not know).
    pub(super) fn records(&self, specs: &[String]) -> Vec<String> {
        if specs.is_empty() {
            return Vec::new();
        }
        let mut c = self.apt("apt-cache");
        c.arg("show").args(specs);
        quiet_stdout(c)
            .map(|s| apt::records(&s).collect())
            .unwrap_or_default()
    }

    /// The release's codename (`bookworm`), from the root's os-release.
    pub fn codename(&self) -> Result<String, BackportsError> {
        let path = self.root.join("etc/os-release");
        let text =
            std::fs::read_to_string(&path).map_err(|e| BackportsError::Io(path.clone(), e))?;
        text.lines()
            .find_map(|l| l.strip_prefix("VERSION_CODENAME="))
            .map(|v| v.trim().trim_matches('"').to_string())
            .filter(|v| !v.is_empty())
            .ok_or(BackportsError::NoCodename(path))
    }

    /// What `apt-get install --no-install-recommends ARGS` would do, changing nothing.
    pub fn simulate(&self, args: &[String]) -> Result<Simulation, AptPlanError> {
        let mut c = self.apt("apt-get");
        c.args(["-s", "-q", "install", "--no-install-recommends"])
            .args(args);
        let shown = format!(
            "apt-get -s install --no-install-recommends {}",
            args.join(" ")
        );
        let out = c.output().map_err(|source| AptPlanError::Spawn {
            cmd: shown.clone(),
            source,
        })?;
        let stdout = String::from_utf8_lossy(&out.stdout);
        if !out.status.success() {
            return Err(AptPlanError::Simulation {
                root: self.root.clone(),
                cmd: shown,
                output: format!("{}{}", stdout.trim(), String::from_utf8_lossy(&out.stderr))
                    .trim()
                    .to_string(),
            });
        }
        Ok(apt::parse_simulation(&stdout))
    }
}

/// A command's stdout when it succeeds (its stderr discarded).
pub(super) fn quiet_stdout(mut c: Command) -> Option<String> {
    let out = c.stderr(Stdio::null()).output().ok()?;
    out.status
        .success()
        .then(|| String::from_utf8_lossy(&out.stdout).into_owned())
}
