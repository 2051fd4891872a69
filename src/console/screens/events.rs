//! The Events screen: newest first, filtered by field and text.

use ratatui::layout::Rect;
use ratatui::style::Style;
use ratatui::Frame;

use maar_scheduler::quantity::fmt_duration;
use maar_widgets::columns::Column;

use super::super::state::App;
use super::super::table::{plain, rows_table, Cells};

pub use super::still::key;

/// The screen's own keys (the operator's come from the verbs).
pub const KEYS: &[(&str, &str)] = &[(
    "/severity:warning kind:job object:a100 cluster:site-b oom",
    "filter by field and text",
)];

/// Events, newest first, through the filter: words `severity:warning`,
/// `kind:job|node|gpu|quota`, `object:TEXT` match those fields; other words must
/// appear somewhere in the event. All words must match.
pub fn rows(app: &App) -> Vec<usize> {
    let f = app.filter.to_lowercase();
    let words: Vec<&str> = f.split_whitespace().collect();
    (0..app.snapshot.events.len())
        .rev()
        .filter(|&i| {
            let e = &app.snapshot.events[i];
            words.iter().all(|w| match w.split_once(':') {
                Some(("severity" | "sev", v)) => e.severity.name().to_lowercase().starts_with(v),
                Some(("kind", v)) => e.kind() == v,
                Some(("object" | "obj", v)) => e.object.to_lowercase().contains(v),
                Some(("cluster", v)) => e.cluster.to_lowercase().contains(v),
                _ => format!(
                    "{} {} {} {} {}",
                    e.cluster,
                    e.severity.name(),
                    e.reason,
                    e.object,
                    e.message
                )
                .to_lowercase()
                .contains(w),
            })
        })
        .collect()
}

/// What row `i` is, by name (the selection follows it).
pub fn row_key(app: &App, i: usize) -> String {
    app.snapshot
        .events
        .get(i)
        .map(|e| format!("{}:{}", e.cluster, e.seq))
        .unwrap_or_default()
}

pub fn event_cells(app: &App, e: &maar_scheduler::Event) -> Cells {
    let st = match e.severity {
        maar_scheduler::Severity::Error => app.theme.crit,
        maar_scheduler::Severity::Warning => app.theme.warn,
        _ => Style::default(),
    };
    vec![
        plain(fmt_duration(e.time)),
        (e.severity.name().to_string(), st),
        plain(e.reason.to_string()),
        plain(e.object.clone()),
        plain(e.message.clone()),
    ]
}

pub fn event_columns() -> Vec<Column> {
    vec![
        Column::new("TIME", 5),
        Column::new("TYPE", 4).drop(3),
        Column::new("REASON", 8).drop(2),
        Column::new("OBJECT", 10).name(),
        Column::new("MESSAGE", 20).grow(),
    ]
}

pub fn draw(f: &mut Frame, app: &App, area: Rect) {
    let mut cols = event_columns();
    if app.all_rows() {
        cols.insert(0, Column::new("CLUSTER", 4).name());
    }
    let t = rows_table(
        app,
        area,
        cols,
        |i| {
            let e = &app.snapshot.events[i];
            let mut c = event_cells(app, e);
            if app.all_rows() {
                c.insert(0, plain(e.cluster.clone()));
            }
            Some(c)
        },
        format!(
            " events ({}) — / filters by severity, kind, object or text ",
            app.rows.len()
        ),
    );
    f.render_widget(t, area);
}
