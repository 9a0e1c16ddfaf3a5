//! The tracer's library, grouped by layer along the data flow: the kernel and what it
//! allows, the probes, recording (collection into run data), analysis, rendering, and the
//! commands that drive them.

// The kernel, and what a target can be measured with on it.
// Functions the tracer refuses to probe, and why.
pub mod guard;
// Facts about the running kernel: symbols, BTF, tracefs, privileges, syscall names.
pub mod kernel;
// The attach-plan table: for each target, the ordered ways to measure it.
pub mod plan;
// User-space symbolization (ELF symbol tables and /proc/PID/maps).
pub mod symbols;
// USDT probes read from an ELF file.
pub mod usdt;

// Probes.
// Calibration: a known workload counted through a plan's probes.
pub mod calibrate;
// The probes' own cost, measured at attach.
pub mod cost_at_attach;
// The probe engine: the eBPF object, its maps and its attachments.
pub mod engine;
// `--phase-fn BINARY:SYMBOL`: measure only inside one user function.
pub mod phase_fn;
// Resolution: the first plan of each target this kernel allows, verified.
pub mod resolve;

// Recording: running the command, collecting the kernel's aggregates into run data.
// The kernel aggregates turned into run data.
pub mod collect;
// Writing a run directory atomically.
pub mod dir_writer;
// Finding an executable the way execvp does.
pub mod exec_path;
// Who owns what the tracer writes under sudo.
pub mod owner;
// `tracer record`: attach, run or follow, stop, detach, write.
pub mod record;
// The on-disk run format (`run.json`, folded stacks, CSV).
pub mod rundata;
// The hidden directories both output writers stage their work in.
pub mod staging;
// `tracer sweep`: workloads or a command over their N lists under one session.
pub mod sweep;

// Analysis and rendering.
// Analysis of saved run data: tables, verdicts, root causes, discoveries, comparisons.
pub mod analysis;
// Load, analyse, render: the offline pipeline `report` and `compare` run.
pub mod pipeline;
// Rendering: terminal, text, Markdown, HTML, JSON, CSV, SVG and exports.
pub mod render;

// The command layer.
// Command-line values clap does not parse itself.
pub mod cli;
// What each `tracer` command does once its command line is parsed.
pub mod commands;
// Errors and the exit codes they map to.
pub mod error;
// `compare --fail-on` and `--expect`: which verdicts pass the gate a CI job reads.
pub mod gate;
// The long help texts.
pub mod help;
