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

/// Text safe for a terminal: control characters (C0 but newline and tab, DEL, C1) are
/// shown as `\x1b`-style escapes.
pub fn clean(s: &str) -> std::borrow::Cow<'_, str> {
    let bad = |c: char| c.is_control() && c != '\n' && c != '\t';
    if !s.chars().any(bad) {
        return std::borrow::Cow::Borrowed(s);
    }
    let mut out = String::with_capacity(s.len() + 8);
    for c in s.chars() {
        if bad(c) {
            out.push_str(&format!("\\x{:02x}", c as u32));
        } else {
            out.push(c);
        }
    }
    std::borrow::Cow::Owned(out)
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

    /// Writes text; control characters other than newline and tab (stored text may
    /// hold any, e.g. an escape sequence in a name) are written visibly, never raw.
    pub fn put(&mut self, s: &str) {
        if self.failed.is_none() {
            if let Err(e) = self.w.write_all(clean(s).as_bytes()) {
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

#[cfg(test)]
mod tests {
    #[test]
    fn control_characters_are_shown_not_sent() {
        assert_eq!(super::clean("a\tb\n"), "a\tb\n");
        assert_eq!(super::clean("\u{1b}[2Jx\u{9b}"), "\\x1b[2Jx\\x9b");
    }
}
