//! The five workloads, one module each: its options, variants (each a case in `cases.rs`),
//! setup, measured operation and teardown.
pub mod getpid;
pub mod mempolicy;
pub mod spawn;
pub mod sysvipc;
pub mod waitpid;

use crate::harness::options::Common;
use workloads::nlist;

/// The --n list, or the workload's default.
pub fn n_list(common: &Common, default: &str) -> Vec<u64> {
    match &common.n {
        Some(l) => l.0.clone(),
        None => nlist::parse(default).expect("default N lists are valid"),
    }
}

/// Keeps the first occurrence of each variant, in order.
pub fn dedup<T: PartialEq + Copy>(items: Vec<T>) -> Vec<T> {
    let mut out = Vec::new();
    for i in items {
        if !out.contains(&i) {
            out.push(i);
        }
    }
    out
}
