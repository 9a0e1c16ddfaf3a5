//! `cargo xtask setup`: checks, and installs when missing, everything the build and the
//! tests need. Quick and silent-ish when all is present; says what it installs; fails
//! naming what could not be had.

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use anyhow::{Context, Result, anyhow, bail};

use crate::apt::{self, AptError, AptRoot, Policy, Relation, SimulatedRemoval, Simulation};

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
    fn installed_record(&self, pkg: &str) -> Option<String> {
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
    fn records(&self, specs: &[String]) -> Vec<String> {
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
fn quiet_stdout(mut c: Command) -> Option<String> {
    let out = c.stderr(Stdio::null()).output().ok()?;
    out.status
        .success()
        .then(|| String::from_utf8_lossy(&out.stdout).into_owned())
}

/// An installed package apt would remove, and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Removal {
    pub package: String,
    pub version: String,
    /// Each declared conflict behind it; empty when the control fields name none.
    pub because: Vec<String>,
}

/// Why setup could not avoid a removal by matching the installed packages' backports
/// versions (see [`plan_install`]).
#[derive(Debug, thiserror::Error)]
pub enum BackportsError {
    #[error("{0} names no VERSION_CODENAME")]
    NoCodename(PathBuf),
    #[error("{0}: {1}")]
    Io(PathBuf, std::io::Error),
    #[error("reading {suite}: {source}")]
    Apt {
        suite: String,
        #[source]
        source: AptError,
    },
    #[error("{package} {version} is not (or no longer) in {suite}")]
    NotInBackports {
        package: String,
        version: String,
        suite: String,
    },
    #[error(
        "none of the packages setup installs is built from {source_package} (the source of \
         {package}) in {suite}"
    )]
    NoSibling {
        package: String,
        source_package: String,
        suite: String,
    },
    #[error("apt does not accept the {suite} packages ({packages}): {source}")]
    Refused {
        suite: String,
        packages: String,
        #[source]
        source: Box<AptPlanError>,
    },
    #[error("even with {packages} from {suite}, apt would remove {removals}")]
    StillRemoves {
        suite: String,
        packages: String,
        removals: String,
    },
}

#[derive(Debug, thiserror::Error)]
pub enum AptPlanError {
    #[error("{}", refusal(.wanted, .removals, .backports))]
    WouldRemove {
        wanted: Vec<String>,
        removals: Vec<Removal>,
        /// Why taking packages from backports did not avoid it.
        backports: Box<BackportsError>,
    },
    #[error("could not run `{cmd}`: {source}")]
    Spawn { cmd: String, source: std::io::Error },
    #[error("`{cmd}` (on {}) failed:\n{output}", .root.display())]
    Simulation {
        root: PathBuf,
        cmd: String,
        output: String,
    },
}

/// The refusal: each package apt would remove and why, what setup tried, and what to do.
fn refusal(wanted: &[String], removals: &[Removal], backports: &BackportsError) -> String {
    let mut m = format!(
        "installing {} would make apt REMOVE {} installed package(s):",
        wanted.join(" "),
        removals.len()
    );
    for r in removals {
        m.push_str(&format!("\n  {} {}: ", r.package, r.version));
        if r.because.is_empty() {
            m.push_str(
                "no declared conflict names it; apt removes it as a consequence of the other \
                 changes",
            );
        } else {
            m.push_str(&r.because.join("; "));
        }
    }
    m.push_str(&format!(
        "\nsetup could not avoid it with backports: {backports}"
    ));
    m.push_str(
        "\nNothing was changed. Replace or remove those packages yourself and run `cargo xtask \
         setup` again, or run `cargo xtask setup --yes` to let apt remove them.",
    );
    m
}

/// An install setup has simulated and found acceptable.
#[derive(Debug, Clone)]
pub struct AptPlan {
    /// What follows `apt-get install --no-install-recommends`: package names, and paths
    /// of .debs fetched from backports.
    pub args: Vec<String>,
    /// apt's simulation of exactly that install.
    pub simulation: Simulation,
    /// Set when the plain install would have removed packages and backports avoided it.
    pub backports: Option<BackportsChoice>,
}

#[derive(Debug, Clone)]
pub struct BackportsChoice {
    pub suite: String,
    /// What the plain install would have removed.
    pub avoided: Vec<SimulatedRemoval>,
    /// The packages taken from the suite, with their versions.
    pub packages: Vec<(String, String)>,
}

/// Decides how to install `wanted` on `system`, by simulating it first; changes nothing
/// on the system (`work` receives a private apt state and downloaded .debs).
///
/// When the plain install would remove installed packages, setup tries the one way
/// around it that it knows, which covers the machines this project runs on: the removed
/// package was installed from the release's backports suite, and its newer version
/// conflicts with the release's version of a sibling setup wants. On those machines the
/// image carries qemu-utils 10.0 from bookworm-backports, which declares
/// `Breaks: qemu-system-common (<< 1:8.0+dfsg-5~)`, while bookworm's qemu-system-x86 7.2
/// needs qemu-system-common 7.2. So setup takes the wanted siblings (same source
/// package) from backports at the installed package's version, plus those of their
/// dependencies that only backports satisfies (for qemu 10.0: qemu-system-common,
/// qemu-system-data and a newer seabios), as .debs fetched through a private apt state,
/// and lets apt resolve everything else from the system's own sources. The alternatives
/// are worse: adding backports to the system's sources means editing /etc/apt; a private
/// apt state with the system's sources plus backports, asked for
/// `qemu-system-x86/bookworm-backports`, does not resolve, as apt 2.6 does not switch a
/// dependency (qemu-system-common) to a non-candidate version by itself; and
/// `-t bookworm-backports` would take backports' version of every dependency it has one
/// of, not only of those the conflict requires.
///
/// If that does not give an install free of removals either, the plan is refused with
/// [`AptPlanError::WouldRemove`], unless `allow_removals`.
pub fn plan_install(
    system: &System,
    wanted: &[&str],
    allow_removals: bool,
    work: &Path,
) -> Result<AptPlan, AptPlanError> {
    let names: Vec<String> = wanted.iter().map(|s| s.to_string()).collect();
    let plain = system.simulate(&names)?;
    if plain.removals.is_empty() {
        return Ok(AptPlan {
            args: names,
            simulation: plain,
            backports: None,
        });
    }
    let why = match with_backports(system, wanted, &plain.removals, work) {
        Ok(plan) => return Ok(plan),
        Err(why) => why,
    };
    if allow_removals {
        say(&format!("backports do not avoid the removal: {why}"));
        return Ok(AptPlan {
            args: names,
            simulation: plain,
            backports: None,
        });
    }
    Err(AptPlanError::WouldRemove {
        wanted: names,
        removals: explain_removals(system, &plain, wanted),
        backports: Box::new(why),
    })
}

/// The plan of [`plan_install`] that takes packages from `<codename>-backports` so as to
/// keep `removals`, which must be installed from there.
fn with_backports(
    system: &System,
    wanted: &[&str],
    removals: &[SimulatedRemoval],
    work: &Path,
) -> Result<AptPlan, BackportsError> {
    let suite = format!("{}-backports", system.codename()?);
    let apt_err = |source| BackportsError::Apt {
        suite: suite.clone(),
        source,
    };
    let root = backports_root(&suite, &work.join("apt"))?;

    // The seeds: each removed package's siblings among `wanted`, at its version.
    let mut chosen: Vec<Chosen> = Vec::new();
    for r in removals {
        let Some((version, source)) = family_version(&root, r, &mut chosen).map_err(apt_err)?
        else {
            return Err(BackportsError::NotInBackports {
                package: r.package.clone(),
                version: r.version.clone(),
                suite,
            });
        };
        let mut siblings = 0;
        for w in wanted {
            if chosen.iter().any(|c| c.package == *w) {
                continue;
            }
            if let Some(rec) = root.show_exact(w, &version).map_err(apt_err)?
                && source_package(&rec) == source
            {
                chosen.push(Chosen::new(w, &version, &rec));
                siblings += 1;
            }
        }
        if siblings == 0 {
            return Err(BackportsError::NoSibling {
                package: r.package.clone(),
                source_package: source,
                suite,
            });
        }
    }

    // Their dependencies that the system cannot satisfy but backports can, transitively.
    // One the system satisfies with its installed or candidate version stays the system's;
    // one neither satisfies is left to apt (it may be a virtual package), whose
    // simulation below has the last word. In waves (the dependencies of all packages
    // chosen in the last one at once), as each look-up in the system's index takes a
    // second or so.
    let mut wave = 0..chosen.len();
    while !wave.is_empty() {
        let clauses: Vec<Vec<Relation>> = chosen[wave.clone()]
            .iter()
            .flat_map(|c| c.dependencies.iter().cloned())
            .filter(|clause| {
                !clause
                    .iter()
                    .any(|rel| chosen.iter().any(|c| rel.matches(&c.package, &c.version)))
            })
            .collect();
        let names: Vec<&str> = clauses
            .iter()
            .flat_map(|c| c.iter().map(|r| r.package.as_str()))
            .collect();
        let on_system = system.policies(&names);
        let need: Vec<&Vec<Relation>> = clauses
            .iter()
            .filter(|clause| {
                !clause.iter().any(|rel| {
                    on_system.iter().any(|p| {
                        p.package == rel.package
                            && [&p.installed, &p.candidate]
                                .into_iter()
                                .flatten()
                                .any(|v| rel.matches(&p.package, v))
                    })
                })
            })
            .collect();
        let needed_names: Vec<&str> = need
            .iter()
            .flat_map(|c| c.iter().map(|r| r.package.as_str()))
            .collect();
        let in_backports = root.candidates(&needed_names).map_err(apt_err)?;
        let before = chosen.len();
        for clause in need {
            let pick = clause.iter().find_map(|rel| {
                let p = in_backports.iter().find(|p| p.package == rel.package)?;
                let v = p.candidate.as_ref()?;
                rel.matches(&p.package, v)
                    .then(|| (rel.package.clone(), v.clone()))
            });
            if let Some((package, version)) = pick
                && !chosen.iter().any(|c| c.package == package)
            {
                let rec = root
                    .show_exact(&package, &version)
                    .map_err(apt_err)?
                    .unwrap_or_default();
                chosen.push(Chosen::new(&package, &version, &rec));
            }
        }
        wave = before..chosen.len();
    }

    let debs_dir = work.join("debs");
    let _ = std::fs::remove_dir_all(&debs_dir);
    let mut args = Vec::new();
    for c in &chosen {
        let deb = root
            .download_exact(&c.package, &c.version, &debs_dir)
            .map_err(apt_err)?;
        args.push(deb.display().to_string());
    }
    args.extend(
        wanted
            .iter()
            .filter(|w| !chosen.iter().any(|c| c.package == **w))
            .map(|w| w.to_string()),
    );
    let packages: Vec<(String, String)> = chosen
        .iter()
        .map(|c| (c.package.clone(), c.version.clone()))
        .collect();
    let listed = packages
        .iter()
        .map(|(p, v)| format!("{p} {v}"))
        .collect::<Vec<_>>()
        .join(", ");
    let simulation = system
        .simulate(&args)
        .map_err(|e| BackportsError::Refused {
            suite: suite.clone(),
            packages: listed.clone(),
            source: Box::new(e),
        })?;
    if !simulation.removals.is_empty() {
        return Err(BackportsError::StillRemoves {
            suite,
            packages: listed,
            removals: simulation
                .removals
                .iter()
                .map(|r| format!("{} {}", r.package, r.version))
                .collect::<Vec<_>>()
                .join(", "),
        });
    }
    Ok(AptPlan {
        args,
        simulation,
        backports: Some(BackportsChoice {
            suite,
            avoided: removals.to_vec(),
            packages,
        }),
    })
}

/// The version, and the source package, at which to take the siblings of `removed` (an
/// installed package) from backports: its own version while backports has it. Once
/// backports has moved on, its newer version, `removed` itself then being upgraded to it
/// (added to `chosen`): an upgrade keeps it installed. `None` when backports has no
/// version of it that is its own or newer.
fn family_version(
    root: &AptRoot,
    removed: &SimulatedRemoval,
    chosen: &mut Vec<Chosen>,
) -> Result<Option<(String, String)>, AptError> {
    if let Some(rec) = root.show_exact(&removed.package, &removed.version)? {
        return Ok(Some((removed.version.clone(), source_package(&rec))));
    }
    let newer = root
        .candidates(&[&removed.package])?
        .into_iter()
        .find_map(|p| p.candidate)
        .filter(|c| apt::compare_versions(c, &removed.version).is_gt());
    let Some(version) = newer else {
        return Ok(None);
    };
    let Some(rec) = root.show_exact(&removed.package, &version)? else {
        return Ok(None);
    };
    chosen.push(Chosen::new(&removed.package, &version, &rec));
    Ok(Some((version, source_package(&rec))))
}

/// A package taken from backports.
struct Chosen {
    package: String,
    version: String,
    dependencies: Vec<Vec<Relation>>,
}

impl Chosen {
    fn new(package: &str, version: &str, record: &str) -> Self {
        let mut dependencies = Vec::new();
        for field in ["Pre-Depends", "Depends"] {
            if let Some(f) = apt::control_field(record, field) {
                dependencies.extend(apt::parse_relations(&f));
            }
        }
        Chosen {
            package: package.into(),
            version: version.into(),
            dependencies,
        }
    }
}

/// The source package a binary package's record names (`Source: qemu (1:10.0.2...)`),
/// which is the package's own name when the field is absent.
fn source_package(record: &str) -> String {
    apt::control_field(record, "Source")
        .and_then(|s| s.split_whitespace().next().map(str::to_string))
        .or_else(|| apt::control_field(record, "Package"))
        .unwrap_or_default()
}

/// A private apt state for the backports suite, updated, from the first mirror that has
/// it.
fn backports_root(suite: &str, dir: &Path) -> Result<AptRoot, BackportsError> {
    let mut last = None;
    for mirror in apt::MIRRORS {
        let root = AptRoot::new(dir.join(suite), suite, mirror);
        match root.update() {
            Ok(()) => return Ok(root),
            Err(e) => last = Some(e),
        }
    }
    Err(BackportsError::Apt {
        suite: suite.into(),
        source: last.expect("MIRRORS is not empty"),
    })
}

/// Why apt would remove each package of `sim.removals`: the conflicts declared between
/// it (as installed) and what would be installed, in either direction.
fn explain_removals(system: &System, sim: &Simulation, wanted: &[&str]) -> Vec<Removal> {
    let specs: Vec<String> = sim
        .installs
        .iter()
        .map(|i| format!("{}={}", i.package, i.version))
        .collect();
    let incoming = system.records(&specs);
    sim.removals
        .iter()
        .map(|r| {
            let own = system.installed_record(&r.package).unwrap_or_default();
            Removal {
                package: r.package.clone(),
                version: r.version.clone(),
                because: conflicts(&r.package, &r.version, &own, sim, &incoming, wanted),
            }
        })
        .collect()
}

/// The declared conflicts between an installed package (`own`, its record) and the
/// packages `sim` installs (`incoming`, their records), as sentences. Pure, so it is
/// unit-tested.
fn conflicts(
    package: &str,
    version: &str,
    own: &str,
    sim: &Simulation,
    incoming: &[String],
    wanted: &[&str],
) -> Vec<String> {
    let role = |p: &str| {
        if wanted.contains(&p) {
            "which setup installs"
        } else {
            "which setup's packages need"
        }
    };
    let mut why = Vec::new();
    for field in ["Breaks", "Conflicts"] {
        let Some(f) = apt::control_field(own, field) else {
            continue;
        };
        for rel in apt::parse_relations(&f).into_iter().flatten() {
            for i in sim
                .installs
                .iter()
                .filter(|i| rel.matches(&i.package, &i.version))
            {
                why.push(format!(
                    "it declares {field}: {rel}, and {} {} would be installed ({})",
                    i.package,
                    i.version,
                    role(&i.package)
                ));
            }
        }
    }
    for rec in incoming {
        let (Some(p), Some(v)) = (
            apt::control_field(rec, "Package"),
            apt::control_field(rec, "Version"),
        ) else {
            continue;
        };
        if !sim
            .installs
            .iter()
            .any(|i| i.package == p && i.version == v)
        {
            continue;
        }
        for field in ["Breaks", "Conflicts"] {
            let Some(f) = apt::control_field(rec, field) else {
                continue;
            };
            for rel in apt::parse_relations(&f).into_iter().flatten() {
                if rel.matches(package, version) {
                    why.push(format!("{p} {v} ({}) declares {field}: {rel}", role(&p)));
                }
            }
        }
    }
    why
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

    /// A simulation of installing `(package, version)` pairs.
    fn installing(pkgs: &[(&str, &str)]) -> Simulation {
        Simulation {
            installs: pkgs
                .iter()
                .map(|(p, v)| apt::SimulatedInstall {
                    package: p.to_string(),
                    version: v.to_string(),
                    replaces: None,
                    origin: "Debian:12.15/oldstable".into(),
                })
                .collect(),
            removals: Vec::new(),
        }
    }

    #[test]
    fn a_removal_is_explained_by_the_installed_packages_breaks() {
        // qemu-utils from bookworm-backports against bookworm's qemu-system-x86.
        let own = "Package: qemu-utils\nStatus: install ok installed\n\
                   Version: 1:10.0.2+ds-2+deb13u1~bpo12+1\n\
                   Replaces: qemu-system-common (<< 1:8.0+dfsg-5~)\n\
                   Breaks: qemu-system-common (<< 1:8.0+dfsg-5~)\n";
        let sim = installing(&[
            ("qemu-system-common", "1:7.2+dfsg-7+deb12u18+b3"),
            ("qemu-system-x86", "1:7.2+dfsg-7+deb12u18+b3"),
        ]);
        let why = conflicts(
            "qemu-utils",
            "1:10.0.2+ds-2+deb13u1~bpo12+1",
            own,
            &sim,
            &[],
            &["qemu-system-x86"],
        );
        assert_eq!(
            why,
            vec![
                "it declares Breaks: qemu-system-common (<< 1:8.0+dfsg-5~), and \
                 qemu-system-common 1:7.2+dfsg-7+deb12u18+b3 would be installed (which \
                 setup's packages need)"
            ]
        );
        // The same qemu-utils against a qemu 10 qemu-system-common: nothing to explain.
        let sim10 = installing(&[("qemu-system-common", "1:10.0.2+ds-2+deb13u1~bpo12+1")]);
        assert!(
            conflicts(
                "qemu-utils",
                "1:10.0.2+ds-2+deb13u1~bpo12+1",
                own,
                &sim10,
                &[],
                &[]
            )
            .is_empty()
        );
    }

    #[test]
    fn a_removal_is_explained_by_an_incoming_packages_conflicts() {
        let sim = installing(&[("busybox-static", "1:1.35.0-4+deb12u1+b1")]);
        let incoming = vec![
            "Package: busybox-static\nVersion: 1:1.35.0-4+deb12u1+b1\nReplaces: busybox\n\
             Provides: busybox\nConflicts: busybox\n"
                .to_string(),
            // A record of a version the simulation does not install does not count.
            "Package: busybox-static\nVersion: 1:1.30\nBreaks: busybox (<< 9)\n".to_string(),
        ];
        let own = "Package: busybox\nVersion: 1:1.35.0-4+b3\n";
        let why = conflicts(
            "busybox",
            "1:1.35.0-4+b3",
            own,
            &sim,
            &incoming,
            &["busybox-static"],
        );
        assert_eq!(
            why,
            vec![
                "busybox-static 1:1.35.0-4+deb12u1+b1 (which setup installs) declares \
                 Conflicts: busybox"
            ]
        );
    }

    #[test]
    fn the_refusal_names_each_removal_and_what_to_do() {
        let m = refusal(
            &["busybox-static".into(), "qemu-system-x86".into()],
            &[
                Removal {
                    package: "busybox".into(),
                    version: "1:1.35.0-4+b3".into(),
                    because: vec!["busybox-static 1 declares Conflicts: busybox".into()],
                },
                Removal {
                    package: "libfoo1".into(),
                    version: "2".into(),
                    because: vec![],
                },
            ],
            &BackportsError::NotInBackports {
                package: "busybox".into(),
                version: "1:1.35.0-4+b3".into(),
                suite: "bookworm-backports".into(),
            },
        );
        assert!(
            m.starts_with(
                "installing busybox-static qemu-system-x86 would make apt REMOVE 2 installed \
                 package(s):\n  busybox 1:1.35.0-4+b3: busybox-static 1 declares Conflicts: \
                 busybox\n  libfoo1 2: no declared conflict"
            ),
            "{m}"
        );
        assert!(
            m.contains("busybox 1:1.35.0-4+b3 is not (or no longer) in bookworm-backports"),
            "{m}"
        );
        assert!(m.contains("Nothing was changed"), "{m}");
        assert!(m.contains("`cargo xtask setup --yes`"), "{m}");
    }

    #[test]
    fn the_source_package_comes_from_the_source_field() {
        assert_eq!(
            source_package("Package: qemu-utils\nSource: qemu (1:10.0.2+ds-2)\nVersion: 1\n"),
            "qemu"
        );
        assert_eq!(source_package("Package: seabios\nVersion: 1\n"), "seabios");
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
            "debootstrap",
        ] {
            assert!(names.contains(&needed), "{needed}");
        }
    }
}
