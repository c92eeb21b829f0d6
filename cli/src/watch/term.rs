//! The terminal while `mpiq watch` runs: raw mode and the alternate screen,
//! put back on every way out (return, panic, SIGTERM/SIGHUP through
//! [`crate::signals::set_exit_hook`]); and standard error taken into a pipe,
//! so that warnings (of mpiq, of the debug library's helper) show on the
//! status line instead of scribbling over the screen, and are printed again
//! on exit.

use std::collections::VecDeque;
use std::io::{BufRead, BufReader, Stdout, Write};
use std::os::fd::AsRawFd;
use std::sync::atomic::{AtomicBool, AtomicI32, Ordering};
use std::sync::{Arc, Mutex};

use crossterm::cursor::{Hide, Show};
use crossterm::execute;
use crossterm::terminal::{disable_raw_mode, enable_raw_mode, EnterAlternateScreen, LeaveAlternateScreen};
use ratatui::backend::CrosstermBackend;
use ratatui::Terminal;

/// Whether the terminal is in the watch's state.
static ACTIVE: AtomicBool = AtomicBool::new(false);
/// The original standard error while it goes into the pipe (-1: none).
static SAVED_STDERR: AtomicI32 = AtomicI32::new(-1);

/// The last lines written on standard error.
#[derive(Debug, Default)]
pub struct Messages {
    lines: VecDeque<String>,
}

impl Messages {
    const KEEP: usize = 50;

    /// The newest line.
    pub fn last(&self) -> Option<&str> {
        self.lines.back().map(String::as_str)
    }

    fn push(&mut self, line: String) {
        if self.lines.back() == Some(&line) {
            return;
        }
        if self.lines.len() == Self::KEEP {
            self.lines.pop_front();
        }
        self.lines.push_back(line);
    }
}

/// The terminal in the watch's state; put back when dropped.
pub struct Screen {
    /// The ratatui terminal.
    pub terminal: Terminal<CrosstermBackend<Stdout>>,
    /// What was written on standard error meanwhile.
    pub messages: Arc<Mutex<Messages>>,
}

/// Puts the terminal and standard error back (any thread, more than once).
pub fn restore() {
    if ACTIVE.swap(false, Ordering::SeqCst) {
        let _ = disable_raw_mode();
        let _ = execute!(std::io::stdout(), LeaveAlternateScreen, Show);
    }
    let fd = SAVED_STDERR.swap(-1, Ordering::SeqCst);
    if fd >= 0 {
        let _ = nix::unistd::dup2(fd, 2);
        let _ = nix::unistd::close(fd);
    }
}

/// Standard error into a pipe whose lines a thread keeps.
fn capture_stderr(messages: Arc<Mutex<Messages>>) -> std::io::Result<()> {
    let (read, write) = nix::unistd::pipe()?;
    let saved = nix::unistd::dup(2)?;
    if let Err(e) = nix::unistd::dup2(write.as_raw_fd(), 2) {
        let _ = nix::unistd::close(saved);
        return Err(e.into());
    }
    SAVED_STDERR.store(saved, Ordering::SeqCst);
    drop(write);
    std::thread::Builder::new()
        .name("mpiq-watch-stderr".into())
        .spawn(move || {
            for line in BufReader::new(std::fs::File::from(read)).lines() {
                let Ok(line) = line else { break };
                let line = line.trim_end().to_string();
                if !line.is_empty() {
                    messages.lock().unwrap_or_else(|e| e.into_inner()).push(line);
                }
            }
        })?;
    Ok(())
}

impl Screen {
    /// Raw mode, the alternate screen, no cursor; standard error captured.
    pub fn start() -> std::io::Result<Screen> {
        let messages = Arc::new(Mutex::new(Messages::default()));
        crate::signals::set_exit_hook(Some(restore));
        capture_stderr(Arc::clone(&messages))?;
        enable_raw_mode()?;
        ACTIVE.store(true, Ordering::SeqCst);
        let mut stdout = std::io::stdout();
        let started = execute!(stdout, EnterAlternateScreen, Hide)
            .and_then(|()| Terminal::new(CrosstermBackend::new(std::io::stdout())));
        match started {
            Ok(terminal) => Ok(Screen { terminal, messages }),
            Err(e) => {
                restore();
                Err(e)
            }
        }
    }

    /// The newest line of standard error.
    pub fn last_message(&self) -> Option<String> {
        self.messages
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .last()
            .map(str::to_string)
    }
}

impl Drop for Screen {
    fn drop(&mut self) {
        restore();
        crate::signals::set_exit_hook(None);
        let m = self.messages.lock().unwrap_or_else(|e| e.into_inner());
        let mut err = std::io::stderr();
        for line in &m.lines {
            let _ = writeln!(err, "{line}");
        }
    }
}
