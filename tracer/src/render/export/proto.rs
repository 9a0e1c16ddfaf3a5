//! The export formats' protobuf types, generated at build time from `tracer/proto/` (see
//! build.rs), and the descriptor set they were generated from.

/// Perfetto's trace format (`perfetto.protos`), the messages the trace exporter writes.
#[allow(clippy::all, missing_docs)]
pub mod perfetto {
    include!(concat!(env!("OUT_DIR"), "/perfetto.protos.rs"));
}

/// pprof's profile format (`perftools.profiles`).
#[allow(clippy::all, missing_docs)]
pub mod pprof {
    include!(concat!(env!("OUT_DIR"), "/perftools.profiles.rs"));
}

/// The encoded `FileDescriptorSet` of both schemas: what a reflective decoder needs to read
/// the exports without these generated types (the tests decode through it).
pub const DESCRIPTOR_SET: &[u8] = include_bytes!(concat!(env!("OUT_DIR"), "/export_protos.bin"));
