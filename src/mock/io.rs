//! The socket side of a mock connection: the stream, its write buffer and the emitted
//! timeline of the stream being written. Its own module so that the stream generator and the
//! connection both use it without importing each other.

use std::io;
use std::mem;
use std::time::Instant;

use super::emission::StreamTrace;
use super::tls::MockStream;

/// The socket and its write buffer.
#[derive(Debug)]
pub struct Io {
    /// The client connection.
    pub stream: MockStream,
    /// Bytes waiting to be written.
    pub out: Vec<u8>,
    /// The emitted timeline of the current stream (only with `MockConfig::timing_report`).
    pub trace: Option<StreamTrace>,
}

impl Io {
    /// Writes everything buffered.
    pub async fn flush(&mut self) -> io::Result<()> {
        if self.out.is_empty() {
            return Ok(());
        }
        if let Some(trace) = &mut self.trace {
            // The hand-off instant of every content chunk in this write: just before the
            // bytes go to the kernel.
            trace.handing_off(Instant::now());
        }
        let buf = mem::take(&mut self.out);
        let (res, mut buf) = self.stream.write_all(buf).await;
        buf.clear();
        self.out = buf;
        res.map(drop)
    }
}
