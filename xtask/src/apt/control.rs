//! What apt and dpkg print, read: control records and their fields, `apt-cache policy`
//! blocks, `apt-get -s` simulations, and the hints an apt failure's messages call for.

use super::DEBIAN_KEYRING;

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
