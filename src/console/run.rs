//! The terminal and the event loop. The simulation advances on its own thread, so a slow
//! terminal never stalls scheduling; the UI redraws only when something changed, at most
//! about 30 times a second. The terminal is restored on exit, panic, ctrl-c, SIGTERM and
//! SIGHUP.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use crossterm::event::{Event, EventStream, KeyEventKind};
use futures::StreamExt;

use maar_scheduler::Sim;

use super::app::App;
use super::view;

/// Opens the console on a simulation until the operator quits.
pub fn run(sim: Sim, speed: f64, mouse: bool, theme: super::theme::Theme) -> std::io::Result<()> {
    use std::io::IsTerminal;
    if !std::io::stdout().is_terminal() || !std::io::stdin().is_terminal() {
        return Err(std::io::Error::other(
            "the console needs a terminal on stdin and stdout; for output to a pipe or file use `maar sim` or `maar get`",
        ));
    }
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()?;
    rt.block_on(event_loop(sim, speed, mouse, theme))
}

async fn event_loop(
    mut sim: Sim,
    speed: f64,
    mouse: bool,
    theme: super::theme::Theme,
) -> std::io::Result<()> {
    // Settle time 0 first (arrivals, first scheduling cycle) so the first frame is true.
    let now = sim.now();
    sim.run_until(now);
    let sim = Arc::new(Mutex::new(sim));
    let mut app = App::new(sim.clone());
    app.speed = speed;
    app.theme = theme;
    let stop = Arc::new(AtomicBool::new(false));
    let paused = Arc::new(AtomicBool::new(false));
    let speed_bits = Arc::new(AtomicU64::new(speed.to_bits()));
    let ticker = {
        let (sim, stop, paused, speed_bits) = (
            sim.clone(),
            stop.clone(),
            paused.clone(),
            speed_bits.clone(),
        );
        std::thread::spawn(move || {
            let mut last = Instant::now();
            while !stop.load(Ordering::Relaxed) {
                std::thread::sleep(Duration::from_millis(100));
                let dt = last.elapsed().as_secs_f64();
                last = Instant::now();
                if paused.load(Ordering::Relaxed) {
                    continue;
                }
                let sp = f64::from_bits(speed_bits.load(Ordering::Relaxed));
                let mut s = sim.lock().expect("sim lock");
                let to = s.now() + (dt * sp).round().max(1.0) as u64;
                s.run_until(to);
            }
        })
    };
    // Logs: tracing events go to tui-logger's buffer, shown on the Logs screen.
    {
        use tracing_subscriber::layer::SubscriberExt;
        let _ = tracing::subscriber::set_global_default(
            tracing_subscriber::registry().with(tui_logger::TuiTracingSubscriberLayer),
        );
        let _ = tui_logger::init_logger(tui_logger::LevelFilter::Info);
        tracing::info!(target: "maar", "console started: {} nodes, speed {}x", app.snapshot.nodes.len(), app.speed);
    }
    let mut terminal = match ratatui::try_init() {
        Ok(t) => t,
        Err(e) => {
            stop.store(true, Ordering::Relaxed);
            let _ = ticker.join();
            return Err(std::io::Error::other(format!(
                "cannot open the terminal: {e}"
            )));
        }
    };
    if mouse {
        let _ = crossterm::execute!(std::io::stdout(), crossterm::event::EnableMouseCapture);
    }
    let mut events = EventStream::new();
    let mut frame = tokio::time::interval(Duration::from_millis(33));
    let mut refresh = tokio::time::interval(Duration::from_millis(250));
    #[cfg(unix)]
    let (mut term, mut hup) = {
        use tokio::signal::unix::{signal, SignalKind};
        (
            signal(SignalKind::terminate())?,
            signal(SignalKind::hangup())?,
        )
    };
    let result = loop {
        #[cfg(unix)]
        let sig = async {
            tokio::select! {
                _ = term.recv() => (),
                _ = hup.recv() => (),
            }
        };
        #[cfg(not(unix))]
        let sig = std::future::pending::<()>();
        tokio::select! {
            _ = sig => break Ok(()),
            ev = events.next() => match ev {
                Some(Ok(Event::Key(k))) if k.kind == KeyEventKind::Press => app.key(k),
                Some(Ok(Event::Resize(..))) => app.dirty = true,
                Some(Ok(Event::Mouse(m))) => app.mouse(m.kind),
                Some(Ok(_)) => {}
                Some(Err(e)) => break Err(e),
                None => break Ok(()),
            },
            _ = refresh.tick() => {
                if !app.paused {
                    app.refresh_if_changed();
                }
            }
            _ = frame.tick() => {
                if app.dirty {
                    // Synchronized output: the terminal shows the frame whole, no tearing.
                    let _ = crossterm::execute!(std::io::stdout(), crossterm::terminal::BeginSynchronizedUpdate);
                    terminal.draw(|f| view::draw(f, &app))?;
                    let _ = crossterm::execute!(std::io::stdout(), crossterm::terminal::EndSynchronizedUpdate);
                    app.dirty = false;
                }
            }
        }
        paused.store(app.paused, Ordering::Relaxed);
        speed_bits.store(app.speed.to_bits(), Ordering::Relaxed);
        if app.quit {
            break Ok(());
        }
    };
    stop.store(true, Ordering::Relaxed);
    if mouse {
        let _ = crossterm::execute!(std::io::stdout(), crossterm::event::DisableMouseCapture);
    }
    ratatui::restore();
    let _ = ticker.join();
    result
}
