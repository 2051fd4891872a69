//! The Logs screen's snapshots. A test binary of its own: tui-logger's buffer is
//! process-wide, so nothing else may log here. Wall-clock times are masked.

use crossterm::event::{KeyCode, KeyEvent, KeyModifiers};
use ratatui::backend::TestBackend;
use ratatui::Terminal;

use maar::console::app::App;
use maar::console::view;
use maar::engine::{self, EngineOptions};
use maar::load::load_scenario;
use maar_demo::Demo;

/// Replaces every `dd:dd:dd` (a wall-clock time) with `hh:mm:ss`.
fn mask_times(s: &str) -> String {
    let c: Vec<char> = s.chars().collect();
    let mut out = String::with_capacity(s.len());
    let mut i = 0;
    while i < c.len() {
        let is_time = i + 8 <= c.len()
            && [0, 1, 3, 4, 6, 7]
                .iter()
                .all(|&k| c[i + k].is_ascii_digit())
            && c[i + 2] == ':'
            && c[i + 5] == ':';
        if is_time {
            out.push_str("hh:mm:ss");
            i += 8;
        } else {
            out.push(c[i]);
            i += 1;
        }
    }
    out
}

#[test]
fn logs_snapshots() {
    use tracing_subscriber::layer::SubscriberExt;
    tracing::subscriber::set_global_default(
        tracing_subscriber::registry().with(tui_logger::TuiTracingSubscriberLayer),
    )
    .unwrap();
    tui_logger::init_logger(tui_logger::LevelFilter::Info).unwrap();
    let mut sim = Demo::new(load_scenario(None).unwrap(), None).unwrap();
    sim.run_until(60);
    let handle = engine::start(
        maar::backend::from_demo(sim),
        None,
        EngineOptions {
            speed: 60.0,
            paused: true,
            ..Default::default()
        },
    );
    let mut app = App::new(handle);
    // The operator's name shows in the log; fix it so the snapshot is the same anywhere.
    app.actor = maar_scheduler::Actor::system("operator");
    for c in ":cordon-gpu a100-04 1\ny:approve 9\ny:logs\n".chars() {
        let code = if c == '\n' {
            KeyCode::Enter
        } else {
            KeyCode::Char(c)
        };
        app.key(KeyEvent::new(code, KeyModifiers::NONE));
    }
    // Let the logger's mover thread hand the two records over.
    let end = std::time::Instant::now() + std::time::Duration::from_secs(5);
    for (w, h) in [(80u16, 24u16), (160, 48)] {
        let text = loop {
            tui_logger::move_events();
            let mut t = Terminal::new(TestBackend::new(w, h)).unwrap();
            t.draw(|f| view::draw(f, &app)).unwrap();
            let buf = t.backend().buffer().clone();
            let text: String = (0..h)
                .map(|y| {
                    (0..w)
                        .map(|x| buf[(x, y)].symbol().to_string())
                        .collect::<String>()
                        + "\n"
                })
                .collect();
            if text.contains("no quota request #9") || std::time::Instant::now() > end {
                break text;
            }
            std::thread::sleep(std::time::Duration::from_millis(20));
        };
        insta::assert_snapshot!(format!("logs_{w}x{h}"), mask_times(&text));
    }
    // The move keys scroll the log: back a page with k, the newest again with G.
    for i in 0..100 {
        tracing::info!(target: "maar", "numbered line {i:03}");
    }
    let draw = |app: &App| {
        tui_logger::move_events();
        let mut t = Terminal::new(TestBackend::new(80, 24)).unwrap();
        t.draw(|f| view::draw(f, app)).unwrap();
        let buf = t.backend().buffer().clone();
        (0..24u16)
            .map(|y| {
                (0..80u16)
                    .map(|x| buf[(x, y)].symbol().to_string())
                    .collect::<String>()
                    + "\n"
            })
            .collect::<String>()
    };
    let end = std::time::Instant::now() + std::time::Duration::from_secs(5);
    while !draw(&app).contains("numbered line 099") {
        assert!(std::time::Instant::now() < end, "{}", draw(&app));
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    let press = |app: &mut App, c: KeyCode| app.key(KeyEvent::new(c, KeyModifiers::NONE));
    press(&mut app, KeyCode::Char('k'));
    press(&mut app, KeyCode::Char('k'));
    let back = draw(&app);
    assert!(!back.contains("numbered line 099"), "{back}");
    assert!(back.contains("numbered line 0"), "{back}");
    assert!(back.contains("paged"), "{back}");
    press(&mut app, KeyCode::Char('G'));
    let now = draw(&app);
    assert!(now.contains("numbered line 099"), "{now}");
}
