//! Rebuild the eBPF object when the linker changes: it is an undeclared tool dependency.
fn main() {
    if let Some(path) = std::env::var_os("PATH") {
        for dir in std::env::split_paths(&path) {
            let candidate = dir.join("bpf-linker");
            if candidate.exists() {
                println!("cargo:rerun-if-changed={}", candidate.display());
                break;
            }
        }
    }
}
