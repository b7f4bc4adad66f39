//! The terminal the dashboard draws on: crossterm's backend, but for how it asks the
//! terminal where its cursor is.
//!
//! An inline viewport needs the cursor's position, when it opens, when the terminal is
//! resized and when it is cleared. crossterm asks with `ESC [ 6 n` in raw mode, which also
//! turns the terminal's signal keys off (`ISIG`): a Ctrl-C typed in that moment would reach
//! crossterm's reader as a byte (0x03), be kept as a key event nobody reads, and the run
//! would go on. Here the query runs in raw mode with `ISIG` put back, so Ctrl-C (and Ctrl-\,
//! Ctrl-Z) stay the terminal's signals throughout: the line discipline turns the key into
//! SIGINT before any reader sees it, and the run stops as on any other Ctrl-C (exit 130, the
//! result saved). Echo and line editing stay off for the query, so the answer is neither
//! shown nor waited on for a newline.

use std::io;

use ratatui::backend::{Backend, ClearType, CrosstermBackend, WindowSize};
use ratatui::buffer::Cell;
use ratatui::layout::{Position, Size};

use super::stdio::TerminalOut;

/// crossterm's backend on the console's terminal, querying the cursor with the signal keys
/// kept.
pub struct DashboardBackend(CrosstermBackend<TerminalOut>);

impl DashboardBackend {
    pub fn new(out: TerminalOut) -> DashboardBackend {
        DashboardBackend(CrosstermBackend::new(out))
    }
}

/// Raw mode as crossterm sets it, with `ISIG` on again, for as long as it lives (crossterm
/// restores the terminal's own modes when it is dropped).
struct RawKeepingSignals;

impl RawKeepingSignals {
    fn enter() -> io::Result<RawKeepingSignals> {
        ratatui::crossterm::terminal::enable_raw_mode()?;
        // From here on, dropping it restores the modes whatever happens next.
        let raw = RawKeepingSignals;
        keep_signal_keys()?;
        Ok(raw)
    }
}

impl Drop for RawKeepingSignals {
    fn drop(&mut self) {
        let _ = ratatui::crossterm::terminal::disable_raw_mode();
    }
}

/// Turns `ISIG` on in the modes of the terminal crossterm put in raw mode (stdin when it is
/// one, else `/dev/tty`, as crossterm chooses).
fn keep_signal_keys() -> io::Result<()> {
    use std::os::fd::AsRawFd;
    // SAFETY: `isatty` only reads the descriptor's state.
    let stdin_is_tty = unsafe { libc::isatty(libc::STDIN_FILENO) } == 1;
    let tty = if stdin_is_tty {
        None
    } else {
        Some(
            std::fs::File::options()
                .read(true)
                .write(true)
                .open("/dev/tty")?,
        )
    };
    let fd = tty.as_ref().map_or(libc::STDIN_FILENO, |f| f.as_raw_fd());
    // SAFETY: a termios is plain data; all zeroes is a valid value, overwritten next.
    let mut modes: libc::termios = unsafe { std::mem::zeroed() };
    // SAFETY: `fd` is open for the call (stdin, or `tty` alive to the end of this function)
    // and `modes` is a termios the call writes.
    if unsafe { libc::tcgetattr(fd, &mut modes) } != 0 {
        return Err(io::Error::last_os_error());
    }
    modes.c_lflag |= libc::ISIG;
    // SAFETY: as above; `modes` is the terminal's own, with one flag more.
    if unsafe { libc::tcsetattr(fd, libc::TCSANOW, &modes) } != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

impl Backend for DashboardBackend {
    type Error = io::Error;

    fn draw<'a, I>(&mut self, content: I) -> io::Result<()>
    where
        I: Iterator<Item = (u16, u16, &'a Cell)>,
    {
        self.0.draw(content)
    }

    fn append_lines(&mut self, n: u16) -> io::Result<()> {
        self.0.append_lines(n)
    }

    fn hide_cursor(&mut self) -> io::Result<()> {
        self.0.hide_cursor()
    }

    fn show_cursor(&mut self) -> io::Result<()> {
        self.0.show_cursor()
    }

    fn get_cursor_position(&mut self) -> io::Result<Position> {
        let _raw = RawKeepingSignals::enter()?;
        // crossterm sees raw mode on and asks without changing the modes again.
        self.0.get_cursor_position()
    }

    fn set_cursor_position<P: Into<Position>>(&mut self, position: P) -> io::Result<()> {
        self.0.set_cursor_position(position)
    }

    fn clear(&mut self) -> io::Result<()> {
        self.0.clear()
    }

    fn clear_region(&mut self, clear_type: ClearType) -> io::Result<()> {
        self.0.clear_region(clear_type)
    }

    fn size(&self) -> io::Result<Size> {
        self.0.size()
    }

    fn window_size(&mut self) -> io::Result<WindowSize> {
        self.0.window_size()
    }

    fn flush(&mut self) -> io::Result<()> {
        Backend::flush(&mut self.0)
    }
}
