//! Drawing one console frame with 10,000 nodes and 100,000 jobs. Figures: BENCHMARKS.md.

use criterion::{criterion_group, criterion_main, Criterion};
use ratatui::backend::TestBackend;
use ratatui::Terminal;

use maar::console::app::App;
use maar::console::view;
use maar::engine::{self, Bare, EngineOptions};
use maar::load::load_scenario;
use maar_demo::synthetic;
use maar_scheduler::Core;

fn frame(c: &mut Criterion) {
    let mut cl = synthetic::cluster(10_000, 8);
    synthetic::submit_single_gpu_jobs(&mut cl, 100_000, 1);
    cl.schedule();
    let loaded = maar::backend::Loaded::new(
        Core::new(cl),
        Box::new(Bare),
        maar::backend::demo_meta("", &load_scenario(None).unwrap(), 0),
    );
    let handle = engine::start(
        loaded,
        None,
        EngineOptions {
            speed: 1.0,
            paused: true,
            ..Default::default()
        },
    );
    let mut app = App::new(handle);
    let mut term = Terminal::new(TestBackend::new(160, 48)).unwrap();
    for (name, cmd) in [
        ("overview", ":overview\n"),
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

/// The overview of 3 clusters of 5,000 nodes x 8 GPUs (50,000 jobs each): one frame,
/// and what a change in any cluster costs (its totals and the GPUs by model summed
/// over all 15,000 nodes again).
fn three_clusters(c: &mut Criterion) {
    let sites: Vec<maar::console::app::Site> = (0..3)
        .map(|i| {
            let mut cl = synthetic::cluster(5_000, 8);
            synthetic::submit_single_gpu_jobs(&mut cl, 50_000, i + 1);
            cl.schedule();
            let loaded = maar::backend::Loaded::new(
                Core::new(cl),
                Box::new(Bare),
                maar::backend::demo_meta("", &load_scenario(None).unwrap(), 0),
            );
            maar::console::app::Site {
                name: format!("site-{i}"),
                engine: engine::start(
                    loaded,
                    None,
                    EngineOptions {
                        speed: 1.0,
                        paused: true,
                        ..Default::default()
                    },
                ),
            }
        })
        .collect();
    let mut app = App::with_sites(sites);
    let mut term = Terminal::new(TestBackend::new(160, 48)).unwrap();
    c.bench_function("console_frame/3x5000_nodes/overview", |b| {
        b.iter(|| term.draw(|f| view::draw(f, &app)).unwrap().area.width)
    });
    c.bench_function("console_frame/3x5000_nodes/a_cluster_changed", |b| {
        b.iter(|| {
            app.site_versions[1] = u64::MAX;
            app.refresh_sites()
        })
    });
    // `:cluster all`: every cluster's 50,000 jobs and 5,000 nodes put together in one
    // table (done at most once a second while they change).
    let mut g = c.benchmark_group("console_frame/3x5000_nodes");
    g.sample_size(10);
    g.bench_function("all_rows", |b| {
        b.iter(|| {
            app.show_all_sites(true);
            app.rows.len()
        })
    });
    g.finish();
}

criterion_group!(benches, frame, three_clusters);
criterion_main!(benches);
