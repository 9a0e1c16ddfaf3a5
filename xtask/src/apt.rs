//! apt with a private state: its own sources.list, lists, cache, preferences and trusted
//! keys, all under a directory of ours. The host's /etc/apt is never written; its
//! apt.conf.d is still read (so a proxy configured there keeps working), but every
//! directory that decides *what* is fetched and *whom* to trust is overridden.
//!
//! Signatures are always verified, against the host's `debian-archive-keyring`.

use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;

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

/// The records of an `apt-cache show` or `dpkg-query -s` output (blank-line separated).
pub fn records(out: &str) -> impl Iterator<Item = String> + '_ {
    out.split("\n\n")
        .map(str::trim)
        .filter(|r| !r.is_empty())
        .map(str::to_string)
}

/// One package of an `apt-cache policy` output.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Policy {
    pub package: String,
    pub installed: Option<String>,
    pub candidate: Option<String>,
}

/// Parses `apt-cache policy a b ...`: one block per package apt knows (it prints nothing
/// for names it does not know), each with `Installed:` and `Candidate:` lines where
/// `(none)` means none.
pub fn parse_policy(out: &str) -> Vec<Policy> {
    let value = |l: &str, key: &str| {
        l.trim()
            .strip_prefix(key)
            .map(str::trim)
            .filter(|v| !v.is_empty() && *v != "(none)")
            .map(str::to_string)
    };
    let mut all: Vec<Policy> = Vec::new();
    for line in out.lines() {
        if !line.starts_with(' ') && line.ends_with(':') {
            all.push(Policy {
                package: line.trim_end_matches(':').to_string(),
                installed: None,
                candidate: None,
            });
        } else if let Some(p) = all.last_mut() {
            if line.trim().starts_with("Installed:") {
                p.installed = value(line, "Installed:");
            } else if line.trim().starts_with("Candidate:") {
                p.candidate = value(line, "Candidate:");
            }
        }
    }
    all
}

/// One field of an RFC-822 style control record (first record only, no continuation
/// lines needed for the fields we read).
pub fn control_field(record: &str, field: &str) -> Option<String> {
    let prefix = format!("{field}:");
    record
        .lines()
        .take_while(|l| !l.trim().is_empty())
        .find_map(|l| l.strip_prefix(&prefix).map(|v| v.trim().to_string()))
}

/// From a Depends field, the first package whose name satisfies `pred` (version
/// constraints and alternatives dropped).
pub fn pick_dependency(depends: &str, pred: impl Fn(&str) -> bool) -> Option<String> {
    depends
        .split([',', '|'])
        .map(|d| {
            d.split_whitespace()
                .next()
                .unwrap_or("")
                .split(':')
                .next()
                .unwrap_or("")
        })
        .find(|name| !name.is_empty() && pred(name))
        .map(str::to_string)
}

/// Turns apt's error output into advice, especially for trust problems: we never fall
/// back to `trusted=yes`, so a key problem must be fixed on the host.
pub fn diagnose(stderr: &str) -> String {
    let mut hints = Vec::new();
    if let Some(i) = stderr.find("NO_PUBKEY") {
        let key: String = stderr[i + 9..]
            .trim_start()
            .chars()
            .take_while(|c| c.is_ascii_hexdigit())
            .collect();
        hints.push(format!(
            "the signing key {key} is not in {DEBIAN_KEYRING}. Update the package \
             debian-archive-keyring (e.g. from bookworm-updates or backports); signatures \
             are never skipped."
        ));
    }
    if stderr.contains("EXPKEYSIG") || stderr.contains("KEYEXPIRED") {
        hints.push("a signing key has expired: update debian-archive-keyring.".into());
    }
    if stderr.contains("is no longer valid") || stderr.contains("expired") {
        hints.push(
            "the suite's Release file is past its Valid-Until date: the suite has probably \
             moved to archive.debian.org (tried next when available)."
                .into(),
        );
    }
    if stderr.contains("does not have a Release file") || stderr.contains("404") {
        hints.push(
            "the suite is not on this mirror (retired suites move to archive.debian.org).".into(),
        );
    }
    if stderr.contains("Temporary failure resolving") || stderr.contains("Could not connect") {
        hints.push("the mirror is unreachable from this machine (network or proxy).".into());
    }
    if hints.is_empty() {
        String::new()
    } else {
        format!("hint: {}", hints.join("\nhint: "))
    }
}

/// Debian's version order (Debian Policy §5.6.12): the epoch numerically, then the
/// upstream version, then the revision. Those two are compared as alternating runs:
/// a run of non-digits character by character, where `~` sorts before anything (even the
/// end of the run, so `1.0~rc1` < `1.0`) and letters before other characters; then a run
/// of digits as a number.
pub fn compare_versions(a: &str, b: &str) -> std::cmp::Ordering {
    let (ea, ua, ra) = split_version(a);
    let (eb, ub, rb) = split_version(b);
    ea.cmp(&eb)
        .then_with(|| compare_part(ua, ub))
        .then_with(|| compare_part(ra, rb))
}

/// `[epoch:]upstream[-revision]`; the revision is after the last hyphen.
fn split_version(v: &str) -> (u64, &str, &str) {
    let (epoch, rest) = match v.split_once(':') {
        Some((e, rest)) if !e.is_empty() && e.bytes().all(|c| c.is_ascii_digit()) => {
            (e.parse().unwrap_or(u64::MAX), rest)
        }
        _ => (0, v),
    };
    let (upstream, revision) = rest.rsplit_once('-').unwrap_or((rest, ""));
    (epoch, upstream, revision)
}

/// The weight of one character of a non-digit run; `None` is the end of the run.
fn weight(c: Option<u8>) -> i32 {
    match c {
        Some(b'~') => -1,
        None => 0,
        Some(c) if c.is_ascii_alphabetic() => i32::from(c),
        Some(c) => i32::from(c) + 256,
    }
}

fn compare_part(a: &str, b: &str) -> std::cmp::Ordering {
    use std::cmp::Ordering;
    let (mut a, mut b) = (a.as_bytes(), b.as_bytes());
    let run = |s: &[u8], digits: bool| {
        s.iter()
            .take_while(|c| c.is_ascii_digit() == digits)
            .count()
    };
    while !a.is_empty() || !b.is_empty() {
        let (sa, rest_a) = a.split_at(run(a, false));
        let (sb, rest_b) = b.split_at(run(b, false));
        for i in 0..sa.len().max(sb.len()) {
            let o = weight(sa.get(i).copied()).cmp(&weight(sb.get(i).copied()));
            if o != Ordering::Equal {
                return o;
            }
        }
        let (da, rest_a) = rest_a.split_at(run(rest_a, true));
        let (db, rest_b) = rest_b.split_at(run(rest_b, true));
        // As numbers of any length: without leading zeros, longer is larger.
        let strip =
            |d: &[u8]| -> Vec<u8> { d.iter().copied().skip_while(|&c| c == b'0').collect() };
        let (na, nb) = (strip(da), strip(db));
        let o = na.len().cmp(&nb.len()).then_with(|| na.cmp(&nb));
        if o != Ordering::Equal {
            return o;
        }
        a = rest_a;
        b = rest_b;
    }
    Ordering::Equal
}

/// A version relation of a dependency field.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum VersionOp {
    Earlier,
    EarlierOrEqual,
    Equal,
    LaterOrEqual,
    Later,
}

impl VersionOp {
    fn parse(s: &str) -> Option<Self> {
        Some(match s {
            "<<" => VersionOp::Earlier,
            // `<` and `>` are the obsolete spellings of `<=` and `>=` (Policy §7.1).
            "<=" | "<" => VersionOp::EarlierOrEqual,
            "=" => VersionOp::Equal,
            ">=" | ">" => VersionOp::LaterOrEqual,
            ">>" => VersionOp::Later,
            _ => return None,
        })
    }

    pub fn symbol(self) -> &'static str {
        match self {
            VersionOp::Earlier => "<<",
            VersionOp::EarlierOrEqual => "<=",
            VersionOp::Equal => "=",
            VersionOp::LaterOrEqual => ">=",
            VersionOp::Later => ">>",
        }
    }

    /// Whether `version` stands in this relation to `bound`.
    pub fn holds(self, version: &str, bound: &str) -> bool {
        use std::cmp::Ordering::*;
        let o = compare_versions(version, bound);
        match self {
            VersionOp::Earlier => o == Less,
            VersionOp::EarlierOrEqual => o != Greater,
            VersionOp::Equal => o == Equal,
            VersionOp::LaterOrEqual => o != Less,
            VersionOp::Later => o == Greater,
        }
    }
}

/// One package named in a relationship field (`Depends`, `Breaks`, `Conflicts`, ...),
/// optionally with a version relation.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Relation {
    pub package: String,
    pub version: Option<(VersionOp, String)>,
}

impl Relation {
    /// Whether `package` at `version` satisfies (or, in Breaks and Conflicts, matches)
    /// this relation.
    pub fn matches(&self, package: &str, version: &str) -> bool {
        self.package == package
            && self
                .version
                .as_ref()
                .is_none_or(|(op, bound)| op.holds(version, bound))
    }
}

impl std::fmt::Display for Relation {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match &self.version {
            Some((op, v)) => write!(f, "{} ({} {v})", self.package, op.symbol()),
            None => write!(f, "{}", self.package),
        }
    }
}

/// Parses a relationship field of a binary package into its clauses (comma-separated),
/// each a list of alternatives (`|`). An architecture qualifier (`:any`) is dropped;
/// a relation whose operator cannot be read is kept without its version.
pub fn parse_relations(field: &str) -> Vec<Vec<Relation>> {
    field
        .split(',')
        .map(|clause| {
            clause
                .split('|')
                .filter_map(|alt| {
                    let alt = alt.trim();
                    let end = alt
                        .find(|c: char| c.is_whitespace() || c == '(')
                        .unwrap_or(alt.len());
                    let package = alt[..end].split(':').next().unwrap_or("").to_string();
                    if package.is_empty() {
                        return None;
                    }
                    let version = alt[end..]
                        .trim()
                        .strip_prefix('(')
                        .and_then(|r| r.split(')').next())
                        .and_then(|inner| {
                            let inner = inner.trim();
                            let op_len = inner
                                .find(|c: char| !matches!(c, '<' | '>' | '='))
                                .unwrap_or(inner.len());
                            let op = VersionOp::parse(&inner[..op_len])?;
                            let v = inner[op_len..].trim();
                            (!v.is_empty()).then(|| (op, v.to_string()))
                        });
                    Some(Relation { package, version })
                })
                .collect::<Vec<_>>()
        })
        .filter(|c| !c.is_empty())
        .collect()
}

/// What `apt-get -s install ...` says it would do.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Simulation {
    /// `Inst` lines: packages installed, upgraded or downgraded.
    pub installs: Vec<SimulatedInstall>,
    /// `Remv` and `Purg` lines: installed packages removed.
    pub removals: Vec<SimulatedRemoval>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SimulatedInstall {
    pub package: String,
    pub version: String,
    /// The installed version it replaces, if any.
    pub replaces: Option<String>,
    /// Where it comes from as apt names it (`Debian:12.15/oldstable`, `local-deb`).
    pub origin: String,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SimulatedRemoval {
    pub package: String,
    /// The installed version (apt prints it in brackets; empty if it did not).
    pub version: String,
}

/// Parses apt's simulation output. The lines it reads:
///
/// ```text
/// Inst qemu-system-x86 (1:7.2+dfsg-7+deb12u18+b3 Debian:12.15/oldstable [amd64])
/// Inst libc6 [2.36-9+deb12u10] (2.36-9+deb12u14 Debian:12.15/oldstable [amd64])
/// Remv qemu-utils [1:10.0.2+ds-2+deb13u1~bpo12+1]
/// ```
///
/// (`Purg` is a removal too; `Conf` lines and everything else are ignored.)
pub fn parse_simulation(out: &str) -> Simulation {
    let bracketed = |s: &str| -> Option<String> {
        s.trim_start()
            .strip_prefix('[')
            .and_then(|r| r.split(']').next())
            .map(str::to_string)
    };
    let mut sim = Simulation::default();
    for line in out.lines() {
        let mut words = line.splitn(3, ' ');
        let (Some(kind), Some(package)) = (words.next(), words.next()) else {
            continue;
        };
        let rest = words.next().unwrap_or("");
        match kind {
            "Remv" | "Purg" => sim.removals.push(SimulatedRemoval {
                package: package.to_string(),
                version: bracketed(rest).unwrap_or_default(),
            }),
            "Inst" => {
                let replaces = bracketed(rest);
                let Some(paren) = rest.find('(') else {
                    continue;
                };
                let inner = rest[paren + 1..].split(')').next().unwrap_or("");
                let mut parts = inner.split_whitespace();
                let Some(version) = parts.next() else {
                    continue;
                };
                let origin: Vec<&str> = parts.take_while(|p| !p.starts_with('[')).collect();
                sim.installs.push(SimulatedInstall {
                    package: package.to_string(),
                    version: version.to_string(),
                    replaces,
                    origin: origin.join(" "),
                });
            }
            _ => {}
        }
    }
    sim
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

    #[test]
    fn metapackage_dependency_is_picked() {
        let show = "Package: linux-image-cloud-amd64\nSource: linux-signed-amd64 (6.1.158+1)\n\
                    Version: 6.1.158-1\nDepends: linux-image-6.1.0-41-cloud-amd64 (= 6.1.158-1)\n\
                    Description: x\n\nPackage: other\nDepends: nope\n";
        assert_eq!(control_field(show, "Version").as_deref(), Some("6.1.158-1"));
        let dep = control_field(show, "Depends").unwrap();
        let pick = |d: &str| {
            pick_dependency(d, |n| {
                n.starts_with("linux-image-") && n.ends_with("-cloud-amd64")
            })
        };
        assert_eq!(
            pick(&dep).as_deref(),
            Some("linux-image-6.1.0-41-cloud-amd64")
        );
        assert_eq!(
            pick("foo (>= 1), linux-image-6.12.48+deb13-cloud-amd64 (= 6.12.48-1)").as_deref(),
            Some("linux-image-6.12.48+deb13-cloud-amd64")
        );
        assert_eq!(
            pick("linux-image-6.1.0-9-cloud-amd64-unsigned | linux-image-6.1.0-9-cloud-amd64")
                .as_deref(),
            Some("linux-image-6.1.0-9-cloud-amd64")
        );
        assert_eq!(pick("firmware"), None);
    }

    #[test]
    fn versions_order_as_debian_orders_them() {
        use std::cmp::Ordering::*;
        for (a, b, want) in [
            // The epoch outranks everything after it.
            ("1:7.2+dfsg-7", "10.0.2+ds-2", Greater),
            (
                "1:10.0.2+ds-2+deb13u1~bpo12+1",
                "1:7.2+dfsg-7+deb12u18+b3",
                Greater,
            ),
            // `~` sorts before the end: a backport is older than the release it came from.
            (
                "1:10.0.2+ds-2+deb13u1~bpo12+1",
                "1:10.0.2+ds-2+deb13u1",
                Less,
            ),
            ("1.16.3-2~bpo12+1", "1.16.3-1~", Greater),
            ("1.0~rc1", "1.0", Less),
            ("1.0~~", "1.0~", Less),
            // Digit runs are numbers; letters sort before other characters.
            ("1.10", "1.9", Greater),
            ("1.010", "1.10", Equal),
            ("1.0a", "1.0+", Less),
            ("1.0", "1.0a", Less),
            // No revision is the same as an empty one, and the revision breaks ties.
            ("2.36", "2.36-0", Equal),
            ("2.36-9+deb12u14", "2.36-9+deb12u9", Greater),
            ("1:1.35.0-4+deb12u1+b1", "1:1.35.0-4+b3", Greater),
            ("123456789012345678901234567890", "99", Greater),
        ] {
            assert_eq!(compare_versions(a, b), want, "{a} vs {b}");
            assert_eq!(compare_versions(b, a), want.reverse(), "{b} vs {a}");
        }
    }

    /// The same pairs as dpkg itself orders them, so the table above cannot be wrong in
    /// a way both the table and the code share.
    #[test]
    fn versions_order_as_dpkg_orders_them() {
        let pairs = [
            ("1:10.0.2+ds-2+deb13u1~bpo12+1", "1:10.0.2+ds-2+deb13u1"),
            ("1.16.3-2~bpo12+1", "1.16.3-1~"),
            ("1.0a", "1.0+"),
            ("1.0", "1.0a"),
            ("2.36", "2.36-0"),
            ("1:1.35.0-4+deb12u1+b1", "1:1.35.0-4+b3"),
            ("0.9~beta.2", "0.9~beta.10"),
            ("3.0.2-0ubuntu1", "3.0.2-0+deb12u1"),
        ];
        for (a, b) in pairs {
            for (op, want) in [
                ("lt", compare_versions(a, b).is_lt()),
                ("eq", compare_versions(a, b).is_eq()),
                ("gt", compare_versions(a, b).is_gt()),
            ] {
                let st = Command::new("dpkg")
                    .args(["--compare-versions", a, op, b])
                    .status()
                    .expect("dpkg runs");
                assert_eq!(st.success(), want, "dpkg --compare-versions {a} {op} {b}");
            }
        }
    }

    #[test]
    fn relations_are_parsed_with_alternatives_and_versions() {
        let f = "libaio1 (>= 0.3.93), qemu-system-any (= 1:10.0.2+ds-2) | qemu-utils (= \
                 1:10.0.2+ds-2), ipxe-qemu,python3:any (>>3.9), bad (~> 1)";
        let r = parse_relations(f);
        assert_eq!(r.len(), 5);
        assert_eq!(
            r[0],
            vec![Relation {
                package: "libaio1".into(),
                version: Some((VersionOp::LaterOrEqual, "0.3.93".into()))
            }]
        );
        assert_eq!(r[1].len(), 2);
        assert_eq!(r[1][1].package, "qemu-utils");
        assert_eq!(r[1][1].to_string(), "qemu-utils (= 1:10.0.2+ds-2)");
        assert_eq!(r[2][0].version, None);
        assert_eq!(
            r[3][0],
            Relation {
                package: "python3".into(),
                version: Some((VersionOp::Later, "3.9".into()))
            }
        );
        // An unreadable operator keeps the name, without a version to compare.
        assert_eq!(r[4][0].package, "bad");
        assert_eq!(r[4][0].version, None);
        assert!(parse_relations("").is_empty());
    }

    #[test]
    fn relations_match_by_name_and_version() {
        let breaks = &parse_relations("qemu-system-common (<< 1:8.0+dfsg-5~)")[0][0];
        assert!(breaks.matches("qemu-system-common", "1:7.2+dfsg-7+deb12u18+b3"));
        assert!(!breaks.matches("qemu-system-common", "1:10.0.2+ds-2+deb13u1~bpo12+1"));
        assert!(!breaks.matches("qemu-system-data", "1:7.2+dfsg-7+deb12u18"));
        let any = &parse_relations("busybox")[0][0];
        assert!(any.matches("busybox", "1:1.35.0-4+b3"));
        let later = &parse_relations("seabios (>> 1.16.3-1~)")[0][0];
        assert!(later.matches("seabios", "1.16.3-2~bpo12+1"));
        assert!(!later.matches("seabios", "1.16.2-1"));
    }

    #[test]
    fn simulation_lists_installs_and_removals() {
        // Trimmed from `apt-get -s install qemu-system-x86` on bookworm with qemu-utils
        // from bookworm-backports installed.
        let out = "NOTE: This is only a simulation!\n\
                   Reading package lists...\n\
                   The following packages will be REMOVED:\n  qemu-utils\n\
                   Remv qemu-utils [1:10.0.2+ds-2+deb13u1~bpo12+1]\n\
                   Inst libc6 [2.36-9+deb12u10] (2.36-9+deb12u14 Debian:12.15/oldstable [amd64])\n\
                   Inst qemu-system-common (1:7.2+dfsg-7+deb12u18+b3 Debian:12.15/oldstable [amd64])\n\
                   Inst seabios (1.16.3-2~bpo12+1 local-deb [all])\n\
                   Inst foo (1.0 Debian Backports:bookworm-backports [all]) []\n\
                   Conf qemu-system-common (1:7.2+dfsg-7+deb12u18+b3 Debian:12.15/oldstable [amd64])\n\
                   Purg old-thing [2.0]\n";
        let sim = parse_simulation(out);
        assert_eq!(
            sim.removals,
            vec![
                SimulatedRemoval {
                    package: "qemu-utils".into(),
                    version: "1:10.0.2+ds-2+deb13u1~bpo12+1".into()
                },
                SimulatedRemoval {
                    package: "old-thing".into(),
                    version: "2.0".into()
                }
            ]
        );
        assert_eq!(sim.installs.len(), 4);
        assert_eq!(
            sim.installs[0],
            SimulatedInstall {
                package: "libc6".into(),
                version: "2.36-9+deb12u14".into(),
                replaces: Some("2.36-9+deb12u10".into()),
                origin: "Debian:12.15/oldstable".into()
            }
        );
        assert_eq!(sim.installs[1].replaces, None);
        assert_eq!(sim.installs[1].version, "1:7.2+dfsg-7+deb12u18+b3");
        assert_eq!(sim.installs[2].origin, "local-deb");
        assert_eq!(
            sim.installs[3].origin,
            "Debian Backports:bookworm-backports"
        );
        // "  qemu-utils" in apt's summary is not a removal line.
        assert_eq!(
            parse_simulation("  qemu-utils\nRemv\n"),
            Simulation::default()
        );
    }

    #[test]
    fn policy_blocks_give_installed_and_candidate() {
        let out = "qemu-utils:\n  Installed: 1:10.0.2+ds-2+deb13u1~bpo12+1\n  Candidate: \
                   1:7.2+dfsg-7+deb12u18+b3\n  Version table:\n *** \
                   1:10.0.2+ds-2+deb13u1~bpo12+1 100\n        100 /var/lib/dpkg/status\n\
                   busybox-static:\n  Installed: (none)\n  Candidate: (none)\n";
        assert_eq!(
            parse_policy(out),
            vec![
                Policy {
                    package: "qemu-utils".into(),
                    installed: Some("1:10.0.2+ds-2+deb13u1~bpo12+1".into()),
                    candidate: Some("1:7.2+dfsg-7+deb12u18+b3".into())
                },
                Policy {
                    package: "busybox-static".into(),
                    installed: None,
                    candidate: None
                }
            ]
        );
        assert!(parse_policy("").is_empty());
    }

    #[test]
    fn records_split_on_blank_lines() {
        let out = "Package: a\nVersion: 1\n\nPackage: b\nVersion: 2\n\n\n";
        let r: Vec<String> = records(out).collect();
        assert_eq!(r.len(), 2);
        assert_eq!(control_field(&r[1], "Package").as_deref(), Some("b"));
    }

    #[test]
    fn diagnosis_names_the_missing_key() {
        let h = diagnose(
            "W: GPG error: http://x bullseye InRelease: The following signatures couldn't be \
             verified because the public key is not available: NO_PUBKEY 0E98404D386FA1D9\n",
        );
        assert!(h.contains("0E98404D386FA1D9"), "{h}");
        assert!(h.contains("debian-archive-keyring"));
        assert!(
            diagnose("E: Release file for x is expired (invalid since 3d)")
                .contains("archive.debian.org")
        );
        assert_eq!(diagnose("something else"), "");
    }
}
