//! Builds the eBPF programs (tracer-ebpf, target bpfel-unknown-none, nightly + build-std,
//! linked by bpf-linker) and leaves the object in OUT_DIR as `tracer-ebpf`, from where
//! `tracer` embeds it with `include_bytes_aligned!`. Also compiles the export formats' .proto
//! files (`proto/`) into prost types and a descriptor set, both in OUT_DIR (see
//! `src/render/export/proto.rs`).
//!
//! The object is the same for every profile and host target of the tracer, so it is built in
//! one directory under the workspace's target directory (`target/ebpf`), not once per
//! profile: the debug build the tests use and the static release build the VMs use share it
//! (the `core` build for BPF alone is a minute of one core).
use std::path::{Path, PathBuf};
use std::process::Command;

fn main() {
    export_protos();
    let out = PathBuf::from(std::env::var_os("OUT_DIR").expect("cargo sets OUT_DIR"));
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../tracer-ebpf");
    println!("cargo:rerun-if-changed={}", root.display());
    let target_dir = shared_target_dir(&out).join("ebpf");
    if let Err(e) = build_ebpf(&root, &target_dir, &out) {
        panic!(
            "building the eBPF programs failed: {e}\n\
             (they need the nightly toolchain with rust-src and bpf-linker: run `cargo xtask setup`)"
        );
    }
}

/// The target directory this build writes into: `CARGO_TARGET_DIR` when set, else the one
/// above OUT_DIR's profile directory (`<target>/<profile>/build/<pkg>/out`, or
/// `<target>/<triple>/<profile>/build/<pkg>/out` when cargo was given `--target`), else
/// OUT_DIR itself. Not the nearest ancestor cargo tagged (`CACHEDIR.TAG`): cargo tags the
/// `<triple>` directory too, and the static guest build then built its own copy of the
/// object, a minute of one core on the suite's critical path.
fn shared_target_dir(out: &Path) -> PathBuf {
    if let Some(d) = std::env::var_os("CARGO_TARGET_DIR") {
        return PathBuf::from(d);
    }
    let Some(mut dir) = out.ancestors().nth(4) else {
        return out.to_path_buf();
    };
    let triple = std::env::var_os("TARGET");
    if triple.is_some()
        && dir.file_name() == triple.as_deref()
        && let Some(up) = dir.parent()
    {
        dir = up;
    }
    if dir.join("CACHEDIR.TAG").is_file() {
        dir.to_path_buf()
    } else {
        out.to_path_buf()
    }
}

/// `cargo +nightly build` of the eBPF crate's binary into `target_dir` (cargo's own lock
/// keeps two builds from writing it at once), then its object copied to `out`.
fn build_ebpf(root: &Path, target_dir: &Path, out: &Path) -> Result<(), String> {
    const TARGET: &str = "bpfel-unknown-none";
    let arch = std::env::var("CARGO_CFG_TARGET_ARCH").unwrap_or_else(|_| "x86_64".into());
    // The BPF programs read registers by the host's layout (bpf_target_arch), carry BTF and
    // debug info for the loader.
    let rustflags = [
        format!("--cfg=bpf_target_arch=\"{arch}\""),
        "-Cdebuginfo=2".into(),
        "-Clink-arg=--btf".into(),
    ]
    .join("\x1f");
    let mut c = Command::new("rustup");
    c.args(["run", "nightly", "cargo", "build", "--quiet", "--release"])
        .args(["--package", "tracer-ebpf", "--bins", "--target", TARGET])
        .args(["-Z", "build-std=core", "--target-dir"])
        .arg(target_dir)
        .current_dir(root)
        .env("CARGO_ENCODED_RUSTFLAGS", rustflags)
        // The outer build's compiler settings are for the host, not for BPF.
        .env_remove("RUSTC")
        .env_remove("RUSTC_WORKSPACE_WRAPPER")
        .env_remove("RUSTC_WRAPPER")
        .env_remove("RUSTFLAGS")
        .env_remove("CARGO_TARGET_DIR")
        .env_remove("CARGO_BUILD_TARGET");
    let o = c
        .output()
        .map_err(|e| format!("running rustup run nightly cargo build: {e}"))?;
    if !o.status.success() {
        return Err(format!(
            "cargo build of tracer-ebpf ({}):\n{}",
            o.status,
            String::from_utf8_lossy(&o.stderr)
        ));
    }
    let built = target_dir.join(TARGET).join("release").join("tracer-ebpf");
    std::fs::copy(&built, out.join("tracer-ebpf"))
        .map(drop)
        .map_err(|e| format!("copying {} to OUT_DIR: {e}", built.display()))
}

/// The Perfetto and pprof schemas: protox parses them (pure Rust, no protoc), prost-build turns
/// the descriptors into Rust types, and the descriptor set itself is kept for the tests, which
/// decode what the exporters write through it.
fn export_protos() {
    const FILES: [&str; 2] = ["perfetto/trace.proto", "pprof/profile.proto"];
    let root = concat!(env!("CARGO_MANIFEST_DIR"), "/proto");
    for f in FILES {
        println!("cargo:rerun-if-changed={root}/{f}");
    }
    let fds = protox::compile(FILES, [root])
        .unwrap_or_else(|e| panic!("compiling the export protos in {root}: {e}"));
    let out = std::path::PathBuf::from(std::env::var_os("OUT_DIR").expect("cargo sets OUT_DIR"));
    std::fs::write(
        out.join("export_protos.bin"),
        prost::Message::encode_to_vec(&fds),
    )
    .expect("writing the export descriptor set");
    prost_build::Config::new()
        .compile_fds(fds)
        .unwrap_or_else(|e| panic!("generating the export proto types: {e}"));
}
