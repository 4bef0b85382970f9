//! Standard output that a reader going away does not crash: `podgrace explain … | head` ends
//! quietly, and a `run` whose output pipe is closed still deletes its pod in order.

use std::io::{self, Write};
use std::sync::atomic::{AtomicBool, Ordering};

/// Set once a write found the pipe's reader gone (EPIPE).
static GONE: AtomicBool = AtomicBool::new(false);

/// Standard output (locked per call). Once a write fails with EPIPE, it and every later write
/// are dropped and reported as done; other errors are returned as they are.
pub struct Out;

impl Out {
    fn gone<T>(e: io::Error, done: T) -> io::Result<T> {
        if e.kind() == io::ErrorKind::BrokenPipe {
            GONE.store(true, Ordering::Relaxed);
            Ok(done)
        } else {
            Err(e)
        }
    }
}

impl Write for Out {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        if GONE.load(Ordering::Relaxed) {
            return Ok(buf.len());
        }
        io::stdout()
            .lock()
            .write(buf)
            .or_else(|e| Self::gone(e, buf.len()))
    }

    fn flush(&mut self) -> io::Result<()> {
        if GONE.load(Ordering::Relaxed) {
            return Ok(());
        }
        io::stdout().lock().flush().or_else(|e| Self::gone(e, ()))
    }
}
