//! Builds the eBPF programs (tracer-ebpf, target bpfel-unknown-none, nightly + build-std) and
//! leaves the object in OUT_DIR, from where `tracer` embeds it with `include_bytes_aligned!`.
fn main() {
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
