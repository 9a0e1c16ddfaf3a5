//! What every workload needs: options, limits, signals, children, timing, table and report.
pub mod children;
pub mod error;
pub mod ipc_janitor;
pub mod ipc_ns;
pub mod limits;
pub mod options;
pub mod session;
pub mod signals;
pub mod sys;
pub mod table;
