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
    let object = out.join("tracer-ebpf");
    match objcopy() {
        Some(tool) => slim(&tool, &built, &object),
        None => {
            println!(
                "cargo:warning=rust-objcopy not found in the nightly toolchain: the eBPF object \
                 keeps its DWARF and line info (about 16 MB more of the tracer's memory)"
            );
            std::fs::copy(&built, &object)
                .map(drop)
                .map_err(|e| format!("copying {} to OUT_DIR: {e}", built.display()))
        }
    }
}

/// The nightly toolchain's `rust-objcopy` (LLVM's objcopy, shipped with rustc) and the
/// directory of the LLVM library it links.
fn objcopy() -> Option<(PathBuf, PathBuf)> {
    let o = Command::new("rustup")
        .args(["run", "nightly", "rustc", "--print", "sysroot"])
        .env_remove("RUSTC")
        .output()
        .ok()?;
    let sysroot = PathBuf::from(String::from_utf8(o.stdout).ok()?.trim());
    let tool = std::fs::read_dir(sysroot.join("lib/rustlib"))
        .ok()?
        .filter_map(|e| e.ok())
        .map(|e| e.path().join("bin/rust-objcopy"))
        .find(|p| p.is_file())?;
    Some((tool, sysroot.join("lib")))
}

/// `built` into `object` without what only a debugger or a verifier log reads: the DWARF
/// sections (the loader uses BTF, which bpf-linker made from them) and .BTF.ext's line info
/// (source lines for the verifier's messages; func_info, which BTF-typed subprograms need,
/// stays). The object is embedded in the tracer and parsed at every start: the DWARF is 12 of
/// its 16 MB, and aya copies the whole line info (1.1 MB) into each of the ~160 programs it
/// loads, so the two cost about 16 MB of peak memory for nothing the tracer uses.
fn slim((tool, lib): &(PathBuf, PathBuf), built: &Path, object: &Path) -> Result<(), String> {
    let ext = object.with_extension("btf-ext");
    let run = |args: &[&std::ffi::OsStr]| -> Result<(), String> {
        let o = Command::new(tool)
            .args(args)
            .env("LD_LIBRARY_PATH", lib)
            .output()
            .map_err(|e| format!("running {}: {e}", tool.display()))?;
        if o.status.success() {
            Ok(())
        } else {
            Err(format!(
                "{} {args:?}: {}",
                tool.display(),
                String::from_utf8_lossy(&o.stderr)
            ))
        }
    };
    let dump = format!(".BTF.ext={}", ext.display());
    run(&[
        "--remove-section=.debug_*".as_ref(),
        "--remove-section=.rel.debug_*".as_ref(),
        "--dump-section".as_ref(),
        dump.as_ref(),
        built.as_os_str(),
        object.as_os_str(),
    ])?;
    let mut bytes = std::fs::read(&ext).map_err(|e| format!("reading {}: {e}", ext.display()))?;
    drop_line_info(&mut bytes)?;
    std::fs::write(&ext, &bytes).map_err(|e| format!("writing {}: {e}", ext.display()))?;
    run(&[
        "--update-section".as_ref(),
        dump.as_ref(),
        object.as_os_str(),
    ])
}

/// Sets the line info's length in a .BTF.ext header to zero (the header: magic 0xeb9f,
/// version, flags, header length, then func_info's offset and length, then line_info's).
fn drop_line_info(ext: &mut [u8]) -> Result<(), String> {
    const LINE_INFO_LEN: usize = 20;
    let u32_at = |b: &[u8], at: usize| {
        b.get(at..at + 4)
            .map(|w| u32::from_le_bytes(w.try_into().unwrap()))
    };
    let magic = ext.get(0..2).map(|m| u16::from_le_bytes([m[0], m[1]]));
    if magic != Some(0xeb9f) || u32_at(ext, 4).is_none_or(|h| (h as usize) < LINE_INFO_LEN + 4) {
        return Err("the eBPF object's .BTF.ext has no header this build knows".into());
    }
    ext[LINE_INFO_LEN..LINE_INFO_LEN + 4].copy_from_slice(&0u32.to_le_bytes());
    Ok(())
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
