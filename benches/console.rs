//! Drawing one console frame with 10,000 nodes and 100,000 jobs. Figures: BENCHMARKS.md.

use std::sync::{Arc, Mutex};

use criterion::{criterion_group, criterion_main, Criterion};
use ratatui::backend::TestBackend;
use ratatui::Terminal;

use maar::console::app::App;
use maar::console::view;
use maar::load::load_scenario;
use maar_scheduler::{synthetic, Sim};

fn frame(c: &mut Criterion) {
    let mut sim = Sim::new(load_scenario(None).unwrap(), None).unwrap();
    let mut cl = synthetic::cluster(10_000, 8);
    synthetic::submit_single_gpu_jobs(&mut cl, 100_000, 1);
    cl.schedule();
    sim.cluster = cl;
    let mut app = App::new(Arc::new(Mutex::new(sim)));
    let mut term = Terminal::new(TestBackend::new(160, 48)).unwrap();
    for (name, cmd) in [
        ("nodes", ":nodes\n"),
        ("jobs", ":jobs\n"),
        ("events", ":events\n"),
    ] {
        for ch in cmd.chars() {
            let code = if ch == '\n' {
                crossterm::event::KeyCode::Enter
            } else {
                crossterm::event::KeyCode::Char(ch)
            };
            app.key(crossterm::event::KeyEvent::new(
                code,
                crossterm::event::KeyModifiers::NONE,
            ));
        }
        c.bench_function(
            &format!("console_frame/10000_nodes_100000_jobs/{name}"),
            |b| b.iter(|| term.draw(|f| view::draw(f, &app)).unwrap().area.width),
        );
    }
}

criterion_group!(benches, frame);
criterion_main!(benches);
