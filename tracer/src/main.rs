fn main() {
    let obj = aya::include_bytes_aligned!(concat!(env!("OUT_DIR"), "/tracer-ebpf"));
    println!("{}", obj.len());
}
