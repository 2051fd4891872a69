//! The terminal and the event loop. The engine runs on its own thread; the loop reads
//! the views it publishes, so a slow terminal never stalls scheduling and a busy
//! engine never freezes the screen. The UI redraws only when something changed, at
//! most about 30 times a second.
//!
//! The terminal is restored on every way out: `q`, a panic, and SIGINT, SIGTERM,
//! SIGHUP or SIGQUIT. Signals are taken by a thread of their own: it asks the loop to
//! stop and, if the loop does not within a second (it is stuck), restores the terminal
//! itself and ends the process. SIGTSTP (and Ctrl-Z, which a raw terminal delivers as
//! a key) suspends as a shell user expects: the terminal is restored, the process
//! stops, and on SIGCONT the console takes the terminal back and redraws. SIGUSR1 is
//! ignored (its default would end the process with the terminal left raw).

use std::io::IsTerminal;
use std::os::fd::AsFd;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use crossterm::event::{Event, EventStream, KeyEventKind};
use futures::StreamExt;
use signal_hook::consts::{SIGHUP, SIGINT, SIGQUIT, SIGTERM, SIGTSTP, SIGUSR1};

use super::app::App;
use super::view;
use crate::engine::EngineHandle;

/// The signals that end maar.
pub const STOP_SIGNALS: [i32; 4] = [SIGINT, SIGTERM, SIGHUP, SIGQUIT];

/// How the console ended.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Ended {
    Quit,
    Signal(i32),
    /// The engine lost its state file (taken over, deleted, replaced): why.
    Lost(String),
}

/// The console needs a terminal on both sides.
pub fn check_terminal() -> std::io::Result<()> {
    if !std::io::stdout().is_terminal() || !std::io::stdin().is_terminal() {
        return Err(std::io::Error::other(
            "the console needs a terminal on stdin and stdout; for output to a pipe or file use `maar sim` or `maar get`",
        ));
    }
    Ok(())
}

/// Waits, headless, for a stop signal (its number) or for an engine (one per cluster)
/// to lose its state file (why).
pub fn wait_headless_all(engines: &[EngineHandle]) -> Result<i32, String> {
    let fatal = || engines.iter().find_map(|e| e.view().status.fatal.clone());
    let mut signals = match signal_hook::iterator::Signals::new(STOP_SIGNALS) {
        Ok(s) => s,
        Err(_) => loop {
            if let Some(why) = fatal() {
                return Err(why);
            }
            std::thread::sleep(Duration::from_millis(200));
        },
    };
    loop {
        if let Some(sig) = signals.pending().next() {
            return Ok(sig);
        }
        if let Some(why) = fatal() {
            return Err(why);
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}

pub fn wait_for_signal() -> i32 {
    match signal_hook::iterator::Signals::new(STOP_SIGNALS) {
        Ok(mut s) => s.forever().next().unwrap_or(SIGTERM),
        Err(_) => loop {
            std::thread::sleep(Duration::from_secs(3600));
        },
    }
}

/// What the signal thread needs to put the terminal back without the event loop.
struct Rescue {
    /// The terminal's settings before the console changed them (only this thread
    /// reads them).
    termios: std::sync::Mutex<Option<nix::sys::termios::Termios>>,
    mouse: bool,
}

impl Rescue {
    /// Restores the terminal with plain system calls (no locks another thread may hold).
    fn restore(&self) {
        let stdout = std::io::stdout();
        let mut seq = String::from("\x1b[?2026l\x1b[0m\x1b[?1049l\x1b[?25h");
        if self.mouse {
            seq.push_str("\x1b[?1000l\x1b[?1002l\x1b[?1003l\x1b[?1006l\x1b[?1015l");
        }
        let _ = nix::unistd::write(stdout.as_fd(), seq.as_bytes());
        let saved = self.termios.lock().ok().and_then(|t| t.clone());
        if let Some(t) = &saved {
            let stdin = std::io::stdin();
            let _ =
                nix::sys::termios::tcsetattr(stdin.as_fd(), nix::sys::termios::SetArg::TCSANOW, t);
        }
    }
}

/// Opens the console on several clusters (the first shown; `C` goes to the next), or
/// on one, until the operator quits or a signal arrives.
pub fn run_sites(
    sites: Vec<super::app::Site>,
    joining: Option<std::sync::Arc<crate::federation::Joining>>,
    read_only: bool,
    mouse: bool,
    theme: super::theme::Theme,
    note: Option<String>,
) -> std::io::Result<Ended> {
    check_terminal()?;
    let rescue = Arc::new(Rescue {
        termios: std::sync::Mutex::new(nix::sys::termios::tcgetattr(std::io::stdin().as_fd()).ok()),
        mouse,
    });
    // Signals: registered before the terminal changes, so none is lost.
    let mut signals = signal_hook::iterator::Signals::new(STOP_SIGNALS)?;
    let signal_handle = signals.handle();
    let (sig_tx, sig_rx) = tokio::sync::mpsc::unbounded_channel::<i32>();
    let finished = Arc::new(AtomicBool::new(false));
    let watcher = {
        let (rescue, finished) = (rescue.clone(), finished.clone());
        std::thread::Builder::new()
            .name("maar-signals".into())
            .spawn(move || {
                if let Some(sig) = signals.forever().next() {
                    let _ = sig_tx.send(sig);
                    // Give the loop a second to stop cleanly; else it is stuck.
                    for _ in 0..100 {
                        if finished.load(Ordering::SeqCst) {
                            return;
                        }
                        std::thread::sleep(Duration::from_millis(10));
                    }
                    rescue.restore();
                    let _ = nix::unistd::write(
                        std::io::stderr().as_fd(),
                        format!("maar: signal {sig}: the console did not stop in time; terminal restored\n")
                            .as_bytes(),
                    );
                    // SAFETY: ends the process at once, without running anything that
                    // could wait on the stuck thread.
                    unsafe { nix::libc::_exit(128 + sig) };
                }
            })?
    };
    // Suspend (SIGTSTP) and SIGUSR1: handled, never the default action.
    let mut pauses = signal_hook::iterator::Signals::new([SIGTSTP, SIGUSR1])?;
    let pauses_handle = pauses.handle();
    let (tstp_tx, tstp_rx) = tokio::sync::mpsc::unbounded_channel::<()>();
    let pauser = std::thread::Builder::new()
        .name("maar-suspend".into())
        .spawn(move || {
            for sig in pauses.forever() {
                if sig == SIGTSTP {
                    let _ = tstp_tx.send(());
                }
            }
        })?;
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    let r = rt.block_on(event_loop(
        (sites, joining, read_only),
        mouse,
        theme,
        note,
        sig_rx,
        tstp_rx,
    ));
    finished.store(true, Ordering::SeqCst);
    signal_handle.close();
    pauses_handle.close();
    let _ = watcher.join();
    let _ = pauser.join();
    r
}

/// Suspends the console like any terminal program: the terminal as it was, the
/// process stopped (SIGSTOP: SIGTSTP is handled here), and on SIGCONT the console's
/// terminal again, redrawn whole.
fn suspend(terminal: &mut ratatui::DefaultTerminal, mouse: bool) -> std::io::Result<()> {
    if mouse {
        let _ = crossterm::execute!(std::io::stdout(), crossterm::event::DisableMouseCapture);
    }
    ratatui::restore();
    let _ = nix::sys::signal::raise(nix::sys::signal::Signal::SIGSTOP);
    // Continued.
    crossterm::terminal::enable_raw_mode()?;
    crossterm::execute!(std::io::stdout(), crossterm::terminal::EnterAlternateScreen)?;
    if mouse {
        let _ = crossterm::execute!(std::io::stdout(), crossterm::event::EnableMouseCapture);
    }
    // The whole screen again: cleared here, and both buffers emptied so the next frame
    // draws every cell (`Terminal::clear` would ask the terminal for the cursor, whose
    // answer the event stream reads first).
    crossterm::execute!(
        std::io::stdout(),
        crossterm::terminal::Clear(crossterm::terminal::ClearType::All)
    )?;
    terminal.swap_buffers();
    Ok(())
}

async fn event_loop(
    (sites, joining, read_only): (
        Vec<super::app::Site>,
        Option<std::sync::Arc<crate::federation::Joining>>,
        bool,
    ),
    mouse: bool,
    theme: super::theme::Theme,
    note: Option<String>,
    mut signals: tokio::sync::mpsc::UnboundedReceiver<i32>,
    mut suspends: tokio::sync::mpsc::UnboundedReceiver<()>,
) -> std::io::Result<Ended> {
    let mut app = App::with_sites_joining(sites, joining, read_only);
    app.theme = theme;
    if let Some(n) = note {
        tracing::info!(target: "maar", "{n}");
        app.message = n;
    }
    // Logs: tracing events go to tui-logger's buffer, shown on the Logs screen. Info
    // and above only, filtered before an event is built: the HTTP/2 and Kubernetes
    // clients trace every frame and request at debug and trace level, which the Logs
    // screen never shows.
    {
        use tracing_subscriber::layer::SubscriberExt;
        use tracing_subscriber::Layer;
        let _ = tracing::subscriber::set_global_default(
            tracing_subscriber::registry().with(
                tui_logger::TuiTracingSubscriberLayer
                    .with_filter(tracing_subscriber::filter::LevelFilter::INFO),
            ),
        );
        let _ = tui_logger::init_logger(tui_logger::LevelFilter::Info);
        tracing::info!(target: "maar", "console started: {} nodes, speed {}x, acting as {}", app.snapshot.nodes.len(), app.speed, app.actor);
        if let Some(p) = &app.status.state {
            tracing::info!(target: "maar", "state file {}", p.display());
        }
    }
    let mut terminal = ratatui::try_init()
        .map_err(|e| std::io::Error::other(format!("cannot open the terminal: {e}")))?;
    if mouse {
        let _ = crossterm::execute!(std::io::stdout(), crossterm::event::EnableMouseCapture);
    }
    // The views of the cluster shown (another's when `C` switches); the others' are
    // read each frame.
    let mut views = Some(app.engine.watch());
    let mut watching = app.site;
    let mut events = EventStream::new();
    let mut frame = tokio::time::interval(Duration::from_millis(33));
    let result = loop {
        tokio::select! {
            sig = signals.recv() => break Ok(Ended::Signal(sig.unwrap_or(SIGTERM))),
            Some(()) = suspends.recv() => {
                suspend(&mut terminal, mouse)?;
                app.dirty = true;
            }
            ev = events.next() => match ev {
                // Ctrl-Z: a raw terminal sends it as a key, not as SIGTSTP.
                Some(Ok(Event::Key(k)))
                    if k.kind == KeyEventKind::Press
                        && k.code == crossterm::event::KeyCode::Char('z')
                        && k.modifiers.contains(crossterm::event::KeyModifiers::CONTROL) =>
                {
                    suspend(&mut terminal, mouse)?;
                    app.dirty = true;
                }
                Some(Ok(Event::Key(k))) if k.kind == KeyEventKind::Press => app.key(k),
                Some(Ok(Event::Resize(..))) => app.dirty = true,
                Some(Ok(Event::Mouse(m))) => app.mouse(m.kind),
                Some(Ok(_)) => {}
                Some(Err(e)) => break Err(e),
                None => break Ok(Ended::Quit),
            },
            changed = async {
                match views.as_mut() {
                    Some(v) => v.changed().await,
                    None => std::future::pending().await,
                }
            } => {
                if let Some(why) = app.engine.view().status.fatal.clone() {
                    if app.sites.len() < 2 {
                        break Ok(Ended::Lost(why));
                    }
                    // One of several stopped: shown as such, the others go on.
                    app.message = format!("cluster {} stopped: {why}", app.site_label());
                    app.dirty = true;
                    views = None;
                    continue;
                }
                if changed.is_err() {
                    break Ok(Ended::Quit);
                }
                // Paused too: what others do (a command from the command line)
                // shows, so the screen is what the next action acts on.
                app.refresh_if_changed();
            }
            _ = frame.tick() => {
                app.refresh_sites();
                if app.dirty {
                    // Synchronized output: the terminal shows the frame whole, no tearing.
                    let _ = crossterm::execute!(std::io::stdout(), crossterm::terminal::BeginSynchronizedUpdate);
                    terminal.draw(|f| view::draw(f, &app))?;
                    let _ = crossterm::execute!(std::io::stdout(), crossterm::terminal::EndSynchronizedUpdate);
                    app.dirty = false;
                }
            }
        }
        if let Some(secs) = app.stall.take() {
            // Test hook (see debug_stall_allowed): the loop is stuck for a while.
            std::thread::sleep(Duration::from_secs(secs));
        }
        if app.quit {
            break Ok(Ended::Quit);
        }
        if app.site != watching {
            views = Some(app.engine.watch());
            watching = app.site;
        }
    };
    if mouse {
        let _ = crossterm::execute!(std::io::stdout(), crossterm::event::DisableMouseCapture);
    }
    ratatui::restore();
    result
}
