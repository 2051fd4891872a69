//! Checked output: every write is checked, so a full disk or a closed file is an
//! error (exit 1) instead of a truncated result and exit 0; a reader that went away
//! (a closed pipe, as `maar get events | head`) ends the program quietly, as Unix
//! tools do.

use std::io::{self, Write};

/// Why writing the output failed.
#[derive(Debug)]
pub enum WriteFailure {
    /// The reader closed the pipe: stop quietly.
    Closed,
    /// Any other failure (full disk, I/O error): say so.
    Failed(io::Error),
}

impl WriteFailure {
    pub fn from_io(e: io::Error) -> WriteFailure {
        if e.kind() == io::ErrorKind::BrokenPipe {
            WriteFailure::Closed
        } else {
            WriteFailure::Failed(e)
        }
    }
}

/// A writer that remembers its first failure and stops writing after it.
pub struct Out<'a> {
    w: &'a mut dyn Write,
    failed: Option<io::Error>,
}

impl<'a> Out<'a> {
    pub fn new(w: &'a mut dyn Write) -> Out<'a> {
        Out { w, failed: None }
    }

    pub fn put(&mut self, s: &str) {
        if self.failed.is_none() {
            if let Err(e) = self.w.write_all(s.as_bytes()) {
                self.failed = Some(e);
            }
        }
    }

    /// Flushes what was written so far (failures are reported by `finish`).
    pub fn flush(&mut self) {
        if self.failed.is_none() {
            if let Err(e) = self.w.flush() {
                self.failed = Some(e);
            }
        }
    }

    /// Flushes and reports the first failure.
    pub fn finish(self) -> Result<(), WriteFailure> {
        if let Some(e) = self.failed {
            return Err(WriteFailure::from_io(e));
        }
        self.w.flush().map_err(WriteFailure::from_io)
    }
}
