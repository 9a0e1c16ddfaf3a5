//! Builds the eBPF programs (tracer-ebpf, target bpfel-unknown-none, nightly + build-std) and
//! leaves the object in OUT_DIR, from where `tracer` embeds it with `include_bytes_aligned!`.
//! Also compiles the export formats' .proto files (`proto/`) into prost types and a
//! descriptor set, both in OUT_DIR (see `src/render/export/proto.rs`).
fn main() {
    export_protos();
    // The nested cargo's progress lines would otherwise surface as one warning each.
    // SAFETY: build scripts are single-threaded at this point.
    unsafe { std::env::set_var("CARGO_TERM_QUIET", "true") };
    let root = concat!(env!("CARGO_MANIFEST_DIR"), "/../tracer-ebpf");
    let package = aya_build::Package {
        name: "tracer-ebpf",
        root_dir: root,
        ..Default::default()
    };
    if let Err(e) = aya_build::build_ebpf([package], aya_build::Toolchain::default()) {
        panic!(
            "building the eBPF programs failed: {e:#}\n\
             (they need the nightly toolchain with rust-src and bpf-linker: run `cargo xtask setup`)"
        );
    }
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
