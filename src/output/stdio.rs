//! The one writer of the program's console output: stdout (the result block, the lines
//! Python prints) and stderr (notes, warnings, "Saved the result to ..."). `app::main`
//! makes one [`Console`] and passes it down; nothing below the app prints on its own.
//!
//! Why a writer of our own and not `print!`: `print!` panics when stdout is gone
//! (`vllm-bench ... | head -n 3`, `> /dev/full`), and the panic used to lose the result file.
//! Here a failed write is remembered, not raised: the first error on stdout closes stdout
//! for the rest of the run (later writes are skipped), the run goes on and saves its result,
//! and the app then turns the error into its exit (a broken pipe: quietly, the run's own
//! exit code; any other error: one line and exit 1). A failed write to stderr is dropped:
//! there is nowhere left to say it.

use std::fmt::Display;
use std::io::{self, Write};
use std::sync::{Arc, Mutex, MutexGuard};

use crate::safe_text::escape_keeping_lines;

/// Where the console's bytes go: the process's stdio, or buffers a test reads.
enum Sink {
    Stdio,
    Capture(Arc<Mutex<Captured>>),
}

/// What a captured console received.
#[derive(Debug, Default, Clone, PartialEq)]
pub struct Captured {
    pub stdout: String,
    pub stderr: String,
}

struct State {
    sink: Sink,
    /// The first error writing stdout; stdout is closed from then on.
    stdout_error: Option<io::Error>,
}

/// The program's console (cheap to clone: clones share one state, so a helper thread's
/// notice and the main thread's block go through the same writer).
#[derive(Clone)]
pub struct Console {
    state: Arc<Mutex<State>>,
}

impl std::fmt::Debug for Console {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Console")
    }
}

impl Console {
    /// The process's stdout and stderr.
    pub fn stdio() -> Console {
        Console::with(Sink::Stdio)
    }

    /// A console whose output a test reads back from the returned buffers.
    pub fn capture() -> (Console, Arc<Mutex<Captured>>) {
        let buffers = Arc::new(Mutex::new(Captured::default()));
        (Console::with(Sink::Capture(buffers.clone())), buffers)
    }

    fn with(sink: Sink) -> Console {
        Console {
            state: Arc::new(Mutex::new(State {
                sink,
                stdout_error: None,
            })),
        }
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        // A panic while holding the lock cannot leave the state half-written (it is two
        // plain fields), so a poisoned lock is still usable.
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Writes `text` to stdout (blocks end with their own newline), control characters
    /// other than line feeds and tabs escaped ([`escape_keeping_lines`]): whatever text from
    /// a server or a file a block holds, it cannot drive the terminal.
    pub fn out(&self, text: impl Display) {
        let text = text.to_string();
        let text = escape_keeping_lines(&text);
        let mut state = self.lock();
        if state.stdout_error.is_some() {
            return;
        }
        let result = match &state.sink {
            Sink::Stdio => {
                let mut stdout = io::stdout().lock();
                write!(stdout, "{text}").and_then(|()| stdout.flush())
            }
            Sink::Capture(c) => {
                let mut c = c.lock().unwrap_or_else(|p| p.into_inner());
                use std::fmt::Write as _;
                let _ = write!(c.stdout, "{text}");
                Ok(())
            }
        };
        if let Err(e) = result {
            state.stdout_error = Some(e);
        }
    }

    /// Writes `text` and a newline to stdout.
    pub fn line(&self, text: impl Display) {
        self.out(format_args!("{text}\n"));
    }

    /// Writes `text` and a newline to stderr (an error there is dropped: see the module doc),
    /// escaped as [`Self::out`] escapes.
    pub fn err_line(&self, text: impl Display) {
        let text = text.to_string();
        let text = escape_keeping_lines(&text);
        let state = self.lock();
        match &state.sink {
            Sink::Stdio => {
                let _ = writeln!(io::stderr().lock(), "{text}");
            }
            Sink::Capture(c) => {
                let mut c = c.lock().unwrap_or_else(|p| p.into_inner());
                use std::fmt::Write as _;
                let _ = writeln!(c.stderr, "{text}");
            }
        }
    }

    /// `warning: TEXT` on stderr.
    pub fn warning(&self, text: impl Display) {
        self.err_line(format_args!("warning: {text}"));
    }

    /// `note: TEXT` on stderr.
    pub fn note(&self, text: impl Display) {
        self.err_line(format_args!("note: {text}"));
    }

    /// Whether stdout is a terminal (a captured console's never is): the terminal chart.
    pub fn stdout_is_terminal(&self) -> bool {
        use std::io::IsTerminal;
        matches!(self.lock().sink, Sink::Stdio) && io::stdout().is_terminal()
    }

    /// Whether stderr is a terminal (a captured console's never is): the progress bar.
    pub fn stderr_is_terminal(&self) -> bool {
        use std::io::IsTerminal;
        matches!(self.lock().sink, Sink::Stdio) && io::stderr().is_terminal()
    }

    /// A writer of raw terminal bytes to stdout (the dashboard's frames: escape sequences
    /// are its point, so they are not escaped), through this console's one state: `None`
    /// unless stdout is the process's and a terminal. A failed write closes stdout as
    /// [`Self::out`]'s does.
    pub fn terminal(&self) -> Option<TerminalOut> {
        use std::io::IsTerminal;
        let state = self.lock();
        match state.sink {
            Sink::Stdio if io::stdout().is_terminal() && state.stdout_error.is_none() => {
                Some(TerminalOut {
                    console: self.clone(),
                })
            }
            _ => None,
        }
    }

    /// True once a write to stdout failed (nothing more is written there).
    pub fn stdout_closed(&self) -> bool {
        self.lock().stdout_error.is_some()
    }

    /// The first error writing stdout, taken (the app's exit decision).
    pub fn take_stdout_error(&self) -> Option<io::Error> {
        self.lock().stdout_error.take()
    }
}

/// Raw bytes to the terminal on stdout ([`Console::terminal`]).
pub struct TerminalOut {
    console: Console,
}

impl Write for TerminalOut {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        let mut state = self.console.lock();
        if state.stdout_error.is_some() {
            return Err(io::Error::new(
                io::ErrorKind::BrokenPipe,
                "stdout is closed",
            ));
        }
        let result = io::stdout().lock().write_all(buf);
        match result {
            Ok(()) => Ok(buf.len()),
            Err(e) => {
                let kind = e.kind();
                state.stdout_error = Some(e);
                Err(io::Error::new(kind, "stdout is closed"))
            }
        }
    }

    fn flush(&mut self) -> io::Result<()> {
        let _state = self.console.lock();
        io::stdout().lock().flush()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_captured_console_keeps_stdout_and_stderr_apart() {
        let (console, captured) = Console::capture();
        console.line("block");
        console.out("a");
        console.warning("w");
        console.note("n");
        let c = captured.lock().unwrap().clone();
        assert_eq!(c.stdout, "block\na");
        assert_eq!(c.stderr, "warning: w\nnote: n\n");
        assert!(!console.stdout_closed());
        assert!(console.take_stdout_error().is_none());
    }

    #[test]
    fn server_text_that_reaches_the_console_cannot_drive_the_terminal() {
        let (console, captured) = Console::capture();
        console.line("model \x1b]0;pwned\x07\tok");
        console.err_line("error: \x1b[2Jgone\r");
        let c = captured.lock().unwrap().clone();
        assert_eq!(c.stdout, "model \\x1b]0;pwned\\x07\tok\n");
        assert_eq!(c.stderr, "error: \\x1b[2Jgone\\x0d\n");
    }
}
