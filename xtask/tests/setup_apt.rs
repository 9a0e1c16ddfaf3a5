//! `cargo xtask setup`'s apt logic against real Debian systems: bookworm chroots
//! (`debootstrap --variant=minbase`, with the sources of a fresh machine of this project's
//! kind) in which a package that conflicts with one setup installs is installed. setup
//! reads a chroot through apt's `-o Dir=` and only simulates there, so these tests check
//! its refusal and that the chroot's dpkg status is left as it was.
//!
//! They need root (debootstrap, chroot) and the network (deb.debian.org). The chroots are
//! cached under `target/setup-test/`: the first run builds them (about two minutes, most
//! of it debootstrap), later runs take seconds. Delete that directory to rebuild them,
//! e.g. to refresh their package index.

use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;

use xtask::apt;
use xtask::paths::{self, FileLock};
use xtask::setup::{self, AptPlanError, System};

/// What a fresh machine of this project's kind has in /etc/apt/sources.list.d.
const SOURCES: &str = "\
Types: deb
URIs: http://deb.debian.org/debian
Suites: bookworm bookworm-updates
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg

Types: deb
URIs: http://deb.debian.org/debian-security
Suites: bookworm-security
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg
";

fn dir() -> PathBuf {
    paths::target_dir().join("setup-test")
}

fn run(what: &str, c: &mut Command) {
    let st = c
        .status()
        .unwrap_or_else(|e| panic!("{what}: cannot run {c:?}: {e}"));
    assert!(st.success(), "{what}: {c:?} failed ({st})");
}

fn chroot(root: &Path, args: &[&str]) -> Command {
    let mut c = Command::new("chroot");
    c.arg(root)
        .args(args)
        .env("DEBIAN_FRONTEND", "noninteractive")
        .env("LC_ALL", "C");
    c
}

/// A chroot built once under `target/setup-test/<name>` (a `.complete` marker says it is
/// whole), by `build` on an empty directory; serialised between test threads and
/// processes by a lock.
fn cached(name: &str, build: impl FnOnce(&Path)) -> PathBuf {
    assert!(
        // SAFETY: geteuid has no preconditions.
        unsafe { libc::geteuid() } == 0,
        "the setup chroot tests need root (debootstrap, chroot): run them as root or \
         through `cargo xtask test`"
    );
    let root = dir().join(name);
    let _lock = FileLock::exclusive(&dir().join(format!("{name}.lock"))).expect("lock");
    let marker = root.join(".complete");
    if !marker.exists() {
        let _ = fs::remove_dir_all(&root);
        let started = std::time::Instant::now();
        build(&root);
        // The downloaded .debs and apt's binary caches are not needed again.
        run("apt-get clean", &mut chroot(&root, &["apt-get", "clean"]));
        fs::write(&marker, "").expect("marker");
        eprintln!(
            "built the {name} chroot in {:.0} s",
            started.elapsed().as_secs_f64()
        );
    }
    root
}

/// Debian 12 minbase with the fresh machine's sources and an index.
fn bookworm() -> PathBuf {
    cached("bookworm", |root| {
        run(
            "debootstrap",
            Command::new("debootstrap")
                .args(["--variant=minbase", "bookworm"])
                .arg(root)
                .arg(apt::MIRRORS[0].uri),
        );
        fs::remove_file(root.join("etc/apt/sources.list")).expect("sources.list");
        fs::write(root.join("etc/apt/sources.list.d/debian.sources"), SOURCES).expect("sources");
        run(
            "apt-get update",
            &mut chroot(root, &["apt-get", "update", "-q"]),
        );
    })
}

/// A copy of [`bookworm`] with `prepare` run on it.
fn bookworm_with(name: &str, prepare: impl FnOnce(&Path)) -> PathBuf {
    let base = bookworm();
    cached(name, |root| {
        run("copy", Command::new("cp").arg("-a").arg(&base).arg(root));
        fs::remove_file(root.join(".complete")).expect("marker of the copy");
        prepare(root);
    })
}

/// bookworm with `busybox`, which setup's `busybox-static` declares `Conflicts:` with.
fn with_busybox() -> PathBuf {
    bookworm_with("bookworm-busybox", |root| {
        run(
            "install busybox",
            &mut chroot(
                root,
                &[
                    "apt-get",
                    "install",
                    "-y",
                    "-q",
                    "--no-install-recommends",
                    "busybox",
                ],
            ),
        );
    })
}

/// What setup would install on `system`: the packages of its list that are missing.
fn missing(system: &System) -> Vec<&'static str> {
    setup::package_states(system)
        .into_iter()
        .filter(|(_, _, installed)| installed.is_none())
        .map(|(p, _, _)| p)
        .collect()
}

fn dpkg_status(root: &Path) -> Vec<u8> {
    fs::read(root.join("var/lib/dpkg/status")).expect("dpkg status")
}

#[test]
fn refuses_to_remove_an_installed_package_and_changes_nothing() {
    let root = with_busybox();
    let system = System::at(&root);
    let busybox = system
        .installed_version("busybox")
        .expect("busybox is installed in the chroot");
    let wanted = missing(&system);
    assert!(wanted.contains(&"busybox-static"), "{wanted:?}");
    let before = dpkg_status(&root);

    let err = setup::plan_install(&system, &wanted, false)
        .expect_err("installing busybox-static removes busybox: setup must refuse");
    let message = err.to_string();
    let AptPlanError::WouldRemove { removals, .. } = &err else {
        panic!("expected a refusal, got: {message}");
    };
    let names: Vec<&str> = removals.iter().map(|r| r.package.as_str()).collect();
    assert_eq!(names, ["busybox"], "{message}");
    assert_eq!(removals[0].version, busybox);
    assert!(
        removals[0]
            .because
            .iter()
            .any(|b| b.starts_with("busybox-static ") && b.ends_with("declares Conflicts: busybox")),
        "{message}"
    );
    for part in [
        format!("REMOVE 1 installed package(s):\n  busybox {busybox}: "),
        "(which setup installs) declares Conflicts: busybox".into(),
        "Nothing was changed".into(),
        "`cargo xtask setup --yes`".into(),
    ] {
        assert!(message.contains(&part), "{part:?} not in:\n{message}");
    }
    assert!(
        dpkg_status(&root) == before,
        "the chroot's dpkg status changed"
    );

    // With --yes the same install is planned, removal included.
    let plan =
        setup::plan_install(&system, &wanted, true).expect("with --yes, setup plans the install");
    let removed: Vec<&str> = plan
        .simulation
        .removals
        .iter()
        .map(|r| r.package.as_str())
        .collect();
    assert_eq!(removed, ["busybox"]);
    for w in &wanted {
        assert!(
            plan.simulation.installs.iter().any(|i| i.package == *w),
            "{w} is not installed by the plan"
        );
    }
    assert!(
        dpkg_status(&root) == before,
        "the chroot's dpkg status changed"
    );
}
