//! What apt installs for setup on a Debian system, decided by simulation: the packages
//! missing, from the system's suite or from its backports when the system's versions would
//! make apt remove an installed package, and a refusal that names each removal otherwise.

use crate::apt::{self, AptError, AptRoot, Relation, SimulatedRemoval, Simulation};
use std::path::{Path, PathBuf};

use super::say;
use super::system::System;

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

    let mut chosen = siblings(&root, wanted, removals, &suite)?;
    add_dependencies(system, &root, &mut chosen).map_err(apt_err)?;

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

/// The seeds: each removed package's siblings among `wanted` (built from its source
/// package), at the version backports has it.
fn siblings(
    root: &AptRoot,
    wanted: &[&str],
    removals: &[SimulatedRemoval],
    suite: &str,
) -> Result<Vec<Chosen>, BackportsError> {
    let apt_err = |source| BackportsError::Apt {
        suite: suite.to_string(),
        source,
    };
    let mut chosen: Vec<Chosen> = Vec::new();
    for r in removals {
        let Some((version, source)) = family_version(root, r, &mut chosen).map_err(apt_err)? else {
            return Err(BackportsError::NotInBackports {
                package: r.package.clone(),
                version: r.version.clone(),
                suite: suite.to_string(),
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
                suite: suite.to_string(),
            });
        }
    }
    Ok(chosen)
}

/// Adds to `chosen` their dependencies that the system cannot satisfy but backports can,
/// transitively.
fn add_dependencies(
    system: &System,
    root: &AptRoot,
    chosen: &mut Vec<Chosen>,
) -> Result<(), apt::AptError> {
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
        let in_backports = root.candidates(&needed_names)?;
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
                let rec = root.show_exact(&package, &version)?.unwrap_or_default();
                chosen.push(Chosen::new(&package, &version, &rec));
            }
        }
        wave = before..chosen.len();
    }
    Ok(())
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
}
