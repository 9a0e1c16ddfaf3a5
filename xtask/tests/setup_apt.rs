//! `cargo xtask setup`'s apt logic against real Debian systems: bookworm chroots
//! (`debootstrap --variant=minbase`, with the sources of a fresh machine of this project's
//! kind) in which a package that conflicts with one setup installs is installed. setup
//! reads a chroot through apt's `-o Dir=` and only simulates there, so these tests check
//! its refusal, its way around the known qemu conflict, and that the chroot's dpkg status
//! is left as it was.
//!
//! They need root (debootstrap, chroot) and the network (deb.debian.org). The chroots are
//! cached under `target/setup-test/`: the first run builds them (about two minutes, most
//! of it debootstrap), later runs take seconds. Delete that directory to rebuild them,
//! e.g. to refresh their package index.

use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;

use xtask::apt::{self, AptRoot};
use xtask::paths::{self, FileLock};
use xtask::setup::{self, AptPlanError, BackportsError, System};

/// The qemu-utils of the machine image CI runs on.
const CI_QEMU_UTILS: &str = "1:10.0.2+ds-2+deb13u1~bpo12+1";

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

/// bookworm with qemu-utils from bookworm-backports, as on the CI machine image: the
/// CI's version while backports has it, else backports' current one.
fn with_backports_qemu_utils() -> PathBuf {
    bookworm_with("bookworm-qemu-utils-bpo", |root| {
        install_backports_qemu_utils(root, false)
    })
}

/// bookworm with a qemu-utils from bookworm-backports that backports has since replaced
/// by a newer version. Made by giving backports' current .deb an earlier version
/// (`<version>~older`: `~` sorts before the end), so it is the same package otherwise.
fn with_superseded_backports_qemu_utils() -> PathBuf {
    bookworm_with("bookworm-qemu-utils-bpo-older", |root| {
        install_backports_qemu_utils(root, true)
    })
}

fn install_backports_qemu_utils(root: &Path, older: bool) {
    let bpo = AptRoot::new(
        root.join("tmp/bpo-apt"),
        "bookworm-backports",
        apt::MIRRORS[0],
    );
    bpo.update().expect("bookworm-backports index");
    let version = match bpo
        .show_exact("qemu-utils", CI_QEMU_UTILS)
        .expect("apt-cache")
    {
        Some(_) if !older => CI_QEMU_UTILS.to_string(),
        _ => bpo
            .candidates(&["qemu-utils"])
            .expect("apt-cache")
            .into_iter()
            .find_map(|p| p.candidate)
            .expect("bookworm-backports has qemu-utils"),
    };
    let dir = root.join("tmp/bpo");
    let mut deb = bpo
        .download_exact("qemu-utils", &version, &dir)
        .expect("download qemu-utils");
    if older {
        let tree = dir.join("tree");
        run(
            "unpack qemu-utils",
            Command::new("dpkg-deb").arg("-R").arg(&deb).arg(&tree),
        );
        let control = tree.join("DEBIAN/control");
        let text = fs::read_to_string(&control).expect("control");
        let old = format!("Version: {version}\n");
        assert!(text.contains(&old), "{text}");
        fs::write(
            &control,
            text.replace(&old, &format!("Version: {version}~older\n")),
        )
        .expect("control");
        deb = dir.join("qemu-utils-older.deb");
        run(
            "repack qemu-utils",
            Command::new("dpkg-deb")
                .args(["-b", "-Zgzip"])
                .arg(&tree)
                .arg(&deb),
        );
    }
    let inside = Path::new("/").join(deb.strip_prefix(root).expect("inside the root"));
    run(
        "install qemu-utils from bookworm-backports",
        &mut chroot(
            root,
            &[
                "apt-get",
                "install",
                "-y",
                "-q",
                "--no-install-recommends",
                inside.to_str().expect("utf-8 path"),
            ],
        ),
    );
    let _ = fs::remove_dir_all(root.join("tmp/bpo-apt"));
    let _ = fs::remove_dir_all(&dir);
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
    let work = tempfile::tempdir().expect("tempdir");

    let err = setup::plan_install(&system, &wanted, false, work.path())
        .expect_err("installing busybox-static removes busybox: setup must refuse");
    let message = err.to_string();
    let AptPlanError::WouldRemove {
        removals,
        backports,
        ..
    } = &err
    else {
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
    // busybox is bookworm's own: backports cannot help.
    assert!(
        matches!(
            **backports,
            BackportsError::NotInBackports { ref package, .. } if package == "busybox"
        ),
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
    let plan = setup::plan_install(&system, &wanted, true, work.path())
        .expect("with --yes, setup plans the install");
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
    assert!(plan.backports.is_none());
    assert!(
        dpkg_status(&root) == before,
        "the chroot's dpkg status changed"
    );
}

#[test]
fn keeps_a_backports_qemu_utils_by_taking_qemu_from_backports() {
    let root = with_backports_qemu_utils();
    let system = System::at(&root);
    let qemu_utils = system
        .installed_version("qemu-utils")
        .expect("qemu-utils is installed in the chroot");
    assert!(qemu_utils.contains("~bpo12"), "{qemu_utils}");
    eprintln!("qemu-utils in the chroot: {qemu_utils}");
    let wanted = missing(&system);
    assert!(wanted.contains(&"qemu-system-x86"), "{wanted:?}");
    let before = dpkg_status(&root);
    let work = tempfile::tempdir().expect("tempdir");

    let plan = setup::plan_install(&system, &wanted, false, work.path())
        .unwrap_or_else(|e| panic!("setup should find an install that removes nothing: {e}"));
    assert_eq!(plan.simulation.removals, vec![], "{plan:?}");
    let installed = |p: &str| plan.simulation.installs.iter().find(|i| i.package == p);
    for p in ["qemu-system-x86", "qemu-system-common", "qemu-system-data"] {
        let i = installed(p).unwrap_or_else(|| panic!("{p} is not in the plan"));
        assert_eq!(i.version, qemu_utils, "{p}");
        assert_eq!(i.origin, "local-deb", "{p}");
    }
    assert!(
        installed("qemu-utils").is_none(),
        "qemu-utils is left alone"
    );
    let b = plan
        .backports
        .as_ref()
        .expect("the plan takes from backports");
    assert_eq!(b.suite, "bookworm-backports");
    // The premise: the plain install (bookworm's qemu) would have removed qemu-utils.
    assert_eq!(b.avoided.len(), 1);
    assert_eq!(b.avoided[0].package, "qemu-utils");
    // Only what the conflict requires comes from backports; the rest of setup's packages
    // come from the system's own sources.
    for i in &plan.simulation.installs {
        let from_bpo = b
            .packages
            .iter()
            .any(|(p, v)| *p == i.package && *v == i.version);
        assert_eq!(i.origin == "local-deb", from_bpo, "{i:?}");
    }
    for w in &wanted {
        assert!(installed(w).is_some(), "{w} is not installed by the plan");
    }
    eprintln!("from bookworm-backports: {:?}", b.packages);
    assert!(
        dpkg_status(&root) == before,
        "the chroot's dpkg status changed"
    );
}

#[test]
fn upgrades_a_backports_qemu_utils_that_backports_has_moved_past() {
    let root = with_superseded_backports_qemu_utils();
    let system = System::at(&root);
    let old = system
        .installed_version("qemu-utils")
        .expect("qemu-utils is installed in the chroot");
    let current = old
        .strip_suffix("~older")
        .unwrap_or_else(|| panic!("{old} is the rewritten version"))
        .to_string();
    let wanted = missing(&system);
    let before = dpkg_status(&root);
    let work = tempfile::tempdir().expect("tempdir");

    let plan = setup::plan_install(&system, &wanted, false, work.path())
        .unwrap_or_else(|e| panic!("setup should find an install that removes nothing: {e}"));
    assert_eq!(plan.simulation.removals, vec![], "{plan:?}");
    let installed = |p: &str| plan.simulation.installs.iter().find(|i| i.package == p);
    // qemu-utils is kept by upgrading it to backports' version, with its siblings.
    let qu = installed("qemu-utils").expect("qemu-utils is upgraded");
    assert_eq!(qu.version, current);
    assert_eq!(qu.replaces.as_deref(), Some(old.as_str()));
    for p in ["qemu-system-x86", "qemu-system-common", "qemu-system-data"] {
        let i = installed(p).unwrap_or_else(|| panic!("{p} is not in the plan"));
        assert_eq!(i.version, current, "{p}");
    }
    let b = plan
        .backports
        .as_ref()
        .expect("the plan takes from backports");
    assert!(
        b.packages
            .contains(&("qemu-utils".to_string(), current.clone())),
        "{b:?}"
    );
    assert!(
        dpkg_status(&root) == before,
        "the chroot's dpkg status changed"
    );
}
