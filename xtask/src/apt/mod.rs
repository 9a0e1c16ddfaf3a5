//! apt with a private state: its own sources.list, lists, cache, preferences and trusted
//! keys, all under a directory of ours. The host's /etc/apt is never written; its
//! apt.conf.d is still read (so a proxy configured there keeps working), but every
//! directory that decides *what* is fetched and *whom* to trust is overridden.
//!
//! Signatures are always verified, against the host's `debian-archive-keyring`.

use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;

mod control;
mod version;

pub use control::*;
pub use version::*;

/// The Debian archive keyring (package `debian-archive-keyring`).
pub const DEBIAN_KEYRING: &str = "/usr/share/keyrings/debian-archive-keyring.gpg";

/// A place Debian suites are published.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Mirror {
    pub uri: &'static str,
    /// archive.debian.org keeps retired suites frozen. Their Release files are still
    /// signed by the archive keys, but a `Valid-Until` date there has necessarily passed
    /// and means nothing, so for this mirror alone apt's date check is turned off. The
    /// signature check stays on.
    pub archived: bool,
}

/// Tried in order: a suite lives on deb.debian.org until it is retired to
/// archive.debian.org (bullseye may be by now).
pub const MIRRORS: [Mirror; 2] = [
    Mirror {
        uri: "http://deb.debian.org/debian",
        archived: false,
    },
    Mirror {
        uri: "http://archive.debian.org/debian",
        archived: true,
    },
];

#[derive(Debug, thiserror::Error)]
pub enum AptError {
    #[error("could not run {tool}: {source} (is apt installed?)")]
    Spawn {
        tool: &'static str,
        source: std::io::Error,
    },
    #[error("`{cmd}` failed:\n{stderr}{hint}")]
    Failed {
        cmd: String,
        stderr: String,
        hint: String,
    },
    #[error("{0}: {1}")]
    Io(PathBuf, std::io::Error),
    #[error(
        "the keyring {0} is missing: install the package debian-archive-keyring (`cargo xtask setup` does)"
    )]
    NoKeyring(PathBuf),
    #[error("package {package} in {suite}: {what}")]
    Package {
        package: String,
        suite: String,
        what: String,
    },
}

/// A private apt root for one suite on one mirror.
#[derive(Debug, Clone)]
pub struct AptRoot {
    pub dir: PathBuf,
    pub suite: String,
    pub mirror: Mirror,
    pub keyring: PathBuf,
}

/// The one-line sources.list for `suite` (main only: the cloud kernel is there) with the
/// keyring pinned and only the Packages index fetched (no Translations, Contents or
/// DEP-11 that a host apt.conf.d might enable).
pub fn sources_list(suite: &str, mirror: &Mirror, keyring: &Path) -> String {
    format!(
        "deb [arch=amd64 signed-by={} target=Packages] {} {} main\n",
        keyring.display(),
        mirror.uri,
        suite
    )
}

impl AptRoot {
    pub fn new(dir: PathBuf, suite: &str, mirror: Mirror) -> Self {
        AptRoot {
            dir,
            suite: suite.to_string(),
            mirror,
            keyring: PathBuf::from(DEBIAN_KEYRING),
        }
    }

    /// The `-o` options that confine apt to this root. Pure, so it is unit-tested.
    pub fn options(&self) -> Vec<String> {
        let d = |sub: &str| self.dir.join(sub).display().to_string();
        let mut o = vec![
            format!("Dir::State={}", d("state")),
            format!("Dir::State::status={}", d("state/status")),
            format!("Dir::Cache={}", d("cache")),
            format!("Dir::Etc::SourceList={}", d("etc/sources.list")),
            format!("Dir::Etc::SourceParts={}", d("etc/sources.list.d")),
            format!("Dir::Etc::Preferences={}", d("etc/preferences")),
            format!("Dir::Etc::PreferencesParts={}", d("etc/preferences.d")),
            // Trust comes only from the signed-by keyring in our sources.list.
            format!("Dir::Etc::Trusted={}", d("etc/trusted.gpg")),
            format!("Dir::Etc::TrustedParts={}", d("etc/trusted.gpg.d")),
            "APT::Architecture=amd64".into(),
            "APT::Architectures=amd64".into(),
            "Acquire::Languages=none".into(),
        ];
        // apt drops privileges to _apt for downloads, which cannot write into our
        // root-owned cache; downloading as the caller avoids a warning per file.
        // SAFETY: geteuid has no preconditions.
        if unsafe { libc::geteuid() } == 0 {
            o.push("APT::Sandbox::User=root".into());
        }
        if self.mirror.archived {
            o.push("Acquire::Check-Valid-Until=false".into());
        }
        o
    }

    /// Creates the directory skeleton and writes the sources.list.
    pub fn prepare(&self) -> Result<(), AptError> {
        if !self.keyring.exists() {
            return Err(AptError::NoKeyring(self.keyring.clone()));
        }
        for sub in [
            "state/lists/partial",
            "cache/archives/partial",
            "etc/sources.list.d",
            "etc/preferences.d",
            "etc/trusted.gpg.d",
        ] {
            let p = self.dir.join(sub);
            fs::create_dir_all(&p).map_err(|e| AptError::Io(p, e))?;
        }
        let status = self.dir.join("state/status");
        if !status.exists() {
            fs::write(&status, "").map_err(|e| AptError::Io(status, e))?;
        }
        let sl = self.dir.join("etc/sources.list");
        fs::write(&sl, sources_list(&self.suite, &self.mirror, &self.keyring))
            .map_err(|e| AptError::Io(sl, e))?;
        Ok(())
    }

    fn command(&self, tool: &'static str) -> Command {
        let mut c = Command::new(tool);
        for o in self.options() {
            c.arg("-o").arg(o);
        }
        c.env("DEBIAN_FRONTEND", "noninteractive")
            .env("LC_ALL", "C");
        c
    }

    fn run(
        &self,
        tool: &'static str,
        args: &[&str],
        cwd: Option<&Path>,
    ) -> Result<String, AptError> {
        let mut c = self.command(tool);
        c.args(args);
        if let Some(cwd) = cwd {
            c.current_dir(cwd);
        }
        let out = c
            .output()
            .map_err(|source| AptError::Spawn { tool, source })?;
        let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
        if !out.status.success() {
            return Err(AptError::Failed {
                cmd: format!(
                    "{tool} {} ({} {})",
                    args.join(" "),
                    self.mirror.uri,
                    self.suite
                ),
                hint: diagnose(&stderr),
                stderr,
            });
        }
        Ok(String::from_utf8_lossy(&out.stdout).into_owned())
    }

    /// `apt-get update`, failing on any fetch or signature error (apt otherwise exits 0
    /// after some of them).
    pub fn update(&self) -> Result<(), AptError> {
        self.prepare()?;
        self.run("apt-get", &["update", "-q", "--error-on=any"], None)
            .map(drop)
    }

    /// The `Depends` field of the candidate version of `package`.
    pub fn depends(&self, package: &str) -> Result<String, AptError> {
        let out = self.run("apt-cache", &["show", "--no-all-versions", package], None)?;
        control_field(&out, "Depends").ok_or_else(|| AptError::Package {
            package: package.into(),
            suite: self.suite.clone(),
            what: "has no Depends field".into(),
        })
    }

    /// The candidate version of `package`.
    pub fn version(&self, package: &str) -> Result<String, AptError> {
        let out = self.run("apt-cache", &["show", "--no-all-versions", package], None)?;
        control_field(&out, "Version").ok_or_else(|| AptError::Package {
            package: package.into(),
            suite: self.suite.clone(),
            what: "has no Version field".into(),
        })
    }

    /// Downloads the candidate .deb of `package` into `dest` and returns its path.
    pub fn download(&self, package: &str, dest: &Path) -> Result<PathBuf, AptError> {
        self.download_spec(package, package, &format!("{package}_"), dest)
    }

    /// Downloads `package` at exactly `version` into `dest` and returns its path.
    pub fn download_exact(
        &self,
        package: &str,
        version: &str,
        dest: &Path,
    ) -> Result<PathBuf, AptError> {
        // apt names the file package_version_arch.deb with the epoch's colon escaped.
        let prefix = format!("{package}_{}_", version.replace(':', "%3a"));
        self.download_spec(&format!("{package}={version}"), package, &prefix, dest)
    }

    fn download_spec(
        &self,
        spec: &str,
        package: &str,
        file_prefix: &str,
        dest: &Path,
    ) -> Result<PathBuf, AptError> {
        fs::create_dir_all(dest).map_err(|e| AptError::Io(dest.to_path_buf(), e))?;
        self.run("apt-get", &["download", "-q", spec], Some(dest))?;
        let found = fs::read_dir(dest)
            .map_err(|e| AptError::Io(dest.to_path_buf(), e))?
            .filter_map(Result::ok)
            .map(|e| e.path())
            .find(|p| {
                p.file_name()
                    .and_then(|n| n.to_str())
                    .is_some_and(|n| n.starts_with(file_prefix) && n.ends_with(".deb"))
            });
        found.ok_or_else(|| AptError::Package {
            package: package.into(),
            suite: self.suite.clone(),
            what: format!("apt-get download left no .deb in {}", dest.display()),
        })
    }

    /// The control record of `package` at exactly `version`, `None` when the suite does
    /// not have that version (apt-cache then prints nothing and exits 0) or not the
    /// package at all (it then fails, saying so).
    pub fn show_exact(&self, package: &str, version: &str) -> Result<Option<String>, AptError> {
        let out = match self.run(
            "apt-cache",
            &["show", &format!("{package}={version}")],
            None,
        ) {
            Ok(out) => out,
            // Commands run in the C locale, so the message is apt's untranslated one.
            Err(AptError::Failed { stderr, .. }) if stderr.contains("E: No packages found") => {
                return Ok(None);
            }
            Err(e) => return Err(e),
        };
        Ok(records(&out).find(|r| {
            control_field(r, "Package").as_deref() == Some(package)
                && control_field(r, "Version").as_deref() == Some(version)
        }))
    }

    /// The suite's candidate version of each of `packages` that it has at all.
    pub fn candidates(&self, packages: &[&str]) -> Result<Vec<Policy>, AptError> {
        if packages.is_empty() {
            return Ok(Vec::new());
        }
        let mut args = vec!["policy"];
        args.extend(packages);
        Ok(parse_policy(&self.run("apt-cache", &args, None)?))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sources_list_names_suite_keyring_and_only_packages() {
        let s = sources_list("bullseye", &MIRRORS[0], Path::new(DEBIAN_KEYRING));
        assert_eq!(
            s,
            "deb [arch=amd64 signed-by=/usr/share/keyrings/debian-archive-keyring.gpg \
             target=Packages] http://deb.debian.org/debian bullseye main\n"
        );
        let a = sources_list("bullseye", &MIRRORS[1], Path::new("/k.gpg"));
        assert!(a.contains("http://archive.debian.org/debian bullseye main"));
        assert!(!a.contains("trusted=yes"));
    }

    #[test]
    fn options_confine_apt_to_the_private_root() {
        let root = AptRoot::new(PathBuf::from("/x/apt"), "trixie", MIRRORS[0]);
        let o = root.options();
        for key in [
            "Dir::State=",
            "Dir::State::status=",
            "Dir::Cache=",
            "Dir::Etc::SourceList=",
            "Dir::Etc::SourceParts=",
            "Dir::Etc::Preferences=",
            "Dir::Etc::PreferencesParts=",
            "Dir::Etc::Trusted=",
            "Dir::Etc::TrustedParts=",
        ] {
            let v = o
                .iter()
                .find(|x| x.starts_with(key))
                .unwrap_or_else(|| panic!("{key} not set"));
            assert!(v[key.len()..].starts_with("/x/apt/"), "{v}");
        }
        assert!(o.iter().all(|x| !x.contains("/etc/apt")));
        // Date checks are only relaxed for the frozen archive mirror.
        assert!(!o.iter().any(|x| x.contains("Check-Valid-Until")));
        let archived = AptRoot::new(PathBuf::from("/x/apt"), "bullseye", MIRRORS[1]);
        assert!(
            archived
                .options()
                .contains(&"Acquire::Check-Valid-Until=false".to_string())
        );
    }
}
