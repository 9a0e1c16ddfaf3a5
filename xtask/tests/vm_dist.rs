//! `cargo xtask dist`: the release holds what it says, its checksums verify, the `.deb`
//! unpacks (with `dpkg -x`, into an empty directory) into a working `usr/bin/tracer` with its
//! man pages and completions, and that unpacked binary, copied alone into guests whose
//! /bin has no tracer and no workloads, traces on kernels it was not built on (5.10, 6.12).

mod common;

use std::collections::BTreeMap;
use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

use common::{boot, guest, read_json, status_of};
use xtask::dist;
use xtask::kernel::Kernel;

/// The release and its `.deb` unpacked, built once per test process.
struct Release {
    dir: PathBuf,
    files: Vec<PathBuf>,
    unpacked: PathBuf,
}

fn release() -> &'static Release {
    static R: OnceLock<Release> = OnceLock::new();
    R.get_or_init(|| {
        let work = common::work_dir("dist");
        let dir = work.join("release");
        let files = dist::build(&dir).expect("cargo xtask dist");
        let unpacked = work.join("unpacked");
        fs::create_dir_all(&unpacked).unwrap();
        run_ok(
            Command::new("dpkg")
                .arg("-x")
                .arg(dir.join(dist::deb_name()))
                .arg(&unpacked),
        );
        Release {
            dir,
            files,
            unpacked,
        }
    })
}

/// Whether a 64-bit little-endian ELF file has a PT_INTERP program header (a dynamic loader
/// the box would have to provide).
fn has_interpreter(elf: &[u8]) -> bool {
    assert_eq!(
        &elf[..6],
        b"\x7fELF\x02\x01",
        "not a 64-bit little-endian ELF"
    );
    let u16_at = |o: usize| u16::from_le_bytes([elf[o], elf[o + 1]]) as usize;
    let phoff = u64::from_le_bytes(elf[0x20..0x28].try_into().unwrap()) as usize;
    let (size, count) = (u16_at(0x36), u16_at(0x38));
    (0..count).any(|i| {
        let o = phoff + i * size;
        u32::from_le_bytes(elf[o..o + 4].try_into().unwrap()) == 3 // PT_INTERP
    })
}

fn run_ok(c: &mut Command) -> String {
    let o = c.output().unwrap_or_else(|e| panic!("{c:?}: {e}"));
    assert!(
        o.status.success(),
        "{c:?}: {}\n{}",
        o.status,
        String::from_utf8_lossy(&o.stderr)
    );
    String::from_utf8(o.stdout).unwrap()
}

#[test]
#[ignore = "builds the release and boots VMs: run through cargo xtask test"]
fn the_release_holds_binaries_pages_completions_a_deb_and_sums_that_verify() {
    let r = release();
    let has = |f: &str| r.files.iter().any(|p| p == Path::new(f));
    for f in [
        "tracer",
        "workloads",
        "man/man1/tracer.1",
        "man/man1/tracer-record.1",
        "man/man1/tracer-sweep.1",
        "completions/tracer.bash",
        "completions/_tracer",
        "completions/tracer.fish",
        "README.md",
        "docs/guide.md",
        "SHA256SUMS",
        &dist::deb_name(),
    ] {
        assert!(has(f), "{f} missing from the release: {:?}", r.files);
    }
    assert!(
        !r.dir.with_file_name("release.partial").exists(),
        "the partial directory is renamed, not left beside the release"
    );
    // Every file but the sums themselves is summed, and each sum verifies.
    let sums = fs::read_to_string(r.dir.join("SHA256SUMS")).unwrap();
    assert_eq!(sums.lines().count(), r.files.len() - 1, "{sums}");
    let check = run_ok(
        Command::new("sha256sum")
            .args(["-c", "SHA256SUMS"])
            .current_dir(&r.dir),
    );
    assert!(!check.contains("FAILED"), "{check}");
    // The binaries are static: nothing for the box to provide.
    for bin in ["tracer", "workloads"] {
        let elf = fs::read(r.dir.join(bin)).unwrap();
        assert!(!has_interpreter(&elf), "{bin} names a dynamic loader");
    }
    let version = run_ok(Command::new(r.dir.join("tracer")).arg("--version"));
    assert_eq!(version.trim(), format!("tracer {}", dist::version()));
}

#[test]
#[ignore = "builds the release and boots VMs: run through cargo xtask test"]
fn the_deb_installs_tracer_its_pages_and_completions_owned_by_root() {
    let r = release();
    let deb = r.dir.join(dist::deb_name());
    let fields = run_ok(Command::new("dpkg-deb").arg("-f").arg(&deb).args([
        "Package",
        "Version",
        "Architecture",
    ]));
    assert_eq!(
        fields,
        format!(
            "Package: tracer\nVersion: {}\nArchitecture: amd64\n",
            dist::version()
        )
    );
    let contents = run_ok(Command::new("dpkg-deb").arg("--contents").arg(&deb));
    for line in contents.lines() {
        assert!(line.contains(" root/root "), "not root's: {line}");
    }
    let u = &r.unpacked;
    let tracer = u.join("usr/bin/tracer");
    let version = run_ok(Command::new(&tracer).arg("--version"));
    assert_eq!(version.trim(), format!("tracer {}", dist::version()));
    assert!(u.join(dist::DEB_WORKLOADS).is_file());
    // Gzipped pages that man can read: the main page names every subcommand's page.
    let page = run_ok(
        Command::new("gzip")
            .args(["-dc"])
            .arg(u.join("usr/share/man/man1/tracer.1.gz")),
    );
    assert!(page.contains(".TH tracer 1"), "{page}");
    for sub in ["record", "sweep", "report", "compare"] {
        assert!(
            page.contains(&format!("tracer\\-{sub}(1)")),
            "{sub}: {page}"
        );
        assert!(
            u.join(format!("usr/share/man/man1/tracer-{sub}.1.gz"))
                .is_file()
        );
    }
    for (shell, _, dest) in dist::COMPLETIONS {
        let script = fs::read_to_string(u.join(dest)).unwrap();
        assert!(
            script.contains("sweep") && script.contains("--targets"),
            "{shell} completion lacks the subcommands: {dest}"
        );
    }
    // bash can load its completion and then completes `tracer sw` to `sweep`.
    let bash = run_ok(Command::new("bash").arg("-c").arg(format!(
        "source {}; COMP_WORDS=(tracer sw); COMP_CWORD=1; COMP_LINE='tracer sw'; \
         COMP_POINT=9; _tracer tracer sw tracer; printf '%s\\n' \"${{COMPREPLY[@]}}\"",
        u.join("usr/share/bash-completion/completions/tracer").display()
    )));
    assert_eq!(bash.trim(), "sweep");
}

/// The unpacked `.deb`'s binary, in a guest whose initramfs carries no tracer or workloads of
/// its own: a built-in sweep (which must find `../lib/tracer/workloads` itself) and a record
/// whose counts are exact.
fn deb_binary_traces_on(kernel: Kernel) {
    let r = release();
    let u = r.unpacked.to_str().unwrap();
    let script = format!(
        "! command -v workloads && ! command -v tracer
echo alone=$? >> /out/status
{u}/usr/bin/tracer sweep waitpid --n 1,24 --no-report -o /out/sweep -- --variant waitpid-pid --iterations 6 --warmup 0
echo sweep=$? >> /out/status
{u}/usr/bin/tracer record --targets do_wait -o /out/rec -- {u}/usr/lib/tracer/workloads waitpid --variant waitpid-pid --n 10 --iterations 5 --warmup 0
echo record=$? >> /out/status
"
    );
    let name = format!("dist-{kernel}");
    let (_, out) = boot(kernel, &name, &script, 600, |_, cfg| {
        let mut bare = guest();
        bare.bins = BTreeMap::new();
        cfg.guest(bare).include(&r.unpacked)
    });
    let st = status_of(&out);
    assert_eq!(
        (st["alone"], st["sweep"], st["record"]),
        (0, 0, 0),
        "{kernel}: {st:?}"
    );
    // Exact counts: one do_wait per waitpid(pid) op, per phase.
    let run = read_json(&out.join("rec/run.json"));
    let ops: u64 = run["phases"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|p| p["case_name"] == "waitpid-pid")
        .map(|p| p["ops"].as_u64().unwrap())
        .sum();
    let calls: u64 = run["spans"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|s| s["target"] == "do_wait" && s["case_name"] == "waitpid-pid")
        .map(|s| s["calls"].as_u64().unwrap())
        .sum();
    assert!(ops >= 5, "{kernel}: {ops} ops");
    assert_eq!(
        calls, ops,
        "{kernel}: do_wait calls against waitpid(pid) ops"
    );
    // The sweep's data renders on the host with the release's own binary.
    run_ok(
        Command::new(r.dir.join("tracer"))
            .arg("report")
            .arg(out.join("sweep"))
            .arg("--no-flamegraphs"),
    );
    let summary = read_json(&out.join("sweep/report/summary.json"));
    assert!(
        summary.to_string().contains("do_wait"),
        "{kernel}: no do_wait verdict in {summary}"
    );
}

#[test]
#[ignore = "builds the release and boots VMs: run through cargo xtask test"]
fn the_deb_binary_alone_traces_on_5_10() {
    deb_binary_traces_on(Kernel::V5_10);
}

#[test]
#[ignore = "builds the release and boots VMs: run through cargo xtask test"]
fn the_deb_binary_alone_traces_on_6_12() {
    deb_binary_traces_on(Kernel::V6_12);
}
