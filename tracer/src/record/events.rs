//! `events.csv` while recording (`--raw-events`): ring-buffer records written as they arrive.
use std::io::Write;
use std::path::{Path, PathBuf};

use crate::collect;
use crate::dir_writer::OutputError;
use crate::error::TracerError;
use crate::rundata;

pub(super) struct EventSink {
    w: std::io::BufWriter<std::fs::File>,
    path: PathBuf,
    rows: u64,
    /// The first write error; reported when the run is written.
    error: Option<std::io::Error>,
}

impl EventSink {
    /// `events.csv` in the run directory being written, with its header.
    pub(super) fn create(dir: &Path) -> Result<EventSink, TracerError> {
        let path = dir.join(rundata::EVENTS_CSV);
        let f = std::fs::File::create(&path).map_err(|source| OutputError::Write {
            path: path.clone(),
            source,
        })?;
        let mut w = std::io::BufWriter::with_capacity(1 << 20, f);
        w.write_all(rundata::EVENTS_HEADER.as_bytes())
            .map_err(|source| OutputError::Write {
                path: path.clone(),
                source,
            })?;
        Ok(EventSink {
            w,
            path,
            rows: 0,
            error: None,
        })
    }

    pub(super) fn drain(
        &mut self,
        rb: &mut aya::maps::RingBuf<aya::maps::MapData>,
        target_names: &[String],
    ) {
        while let Some(item) = rb.next() {
            if self.error.is_some() {
                continue; // keep draining so the kernel side does not count drops for our failure
            }
            if let Some(row) = collect::event_row(&item, target_names) {
                match self.w.write_all(row.as_bytes()) {
                    Ok(()) => self.rows += 1,
                    Err(e) => self.error = Some(e),
                }
            }
        }
    }

    /// Flush the file: the rows written, or the first write error.
    pub(super) fn finish(mut self) -> Result<u64, TracerError> {
        if self.error.is_none()
            && let Err(e) = self.w.flush()
        {
            self.error = Some(e);
        }
        match self.error {
            Some(source) => Err(OutputError::Write {
                path: self.path,
                source,
            }
            .into()),
            None => Ok(self.rows),
        }
    }
}
