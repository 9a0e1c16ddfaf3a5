//! Workloads that reproduce the kernel mailing-list benchmarks behind each traced target, and
//! the phase-marker protocol through which the tracer learns "measuring N now".
//!
//! The library holds only what the tracer shares with the `workloads` binary: case ids, the
//! phase markers, the workloads' names and default N lists, the `--n` list syntax, the number
//! formats of their tables and the JSON report schema. The workloads themselves
//! (fork loops, SysV IPC, mappings) live in the binary, under `src/harness/` and
//! `src/workload/`, so the library stays dependency-light.
pub mod cases;
pub mod catalog;
pub mod marker;
pub mod mem;
pub mod nlist;
pub mod numbers;
pub mod report;
