//! Workloads that reproduce the kernel mailing-list benchmarks behind each traced target, and
//! the phase-marker protocol through which the tracer learns "measuring N now".
pub mod cases;
pub mod marker;
