//! The Alerts screen: open alerts (A: also acknowledged and resolved); Enter goes to
//! the alert's job or node; a acknowledges it (the verb's key).

use ratatui::layout::Rect;
use ratatui::style::Modifier;
use ratatui::Frame;

use maar_scheduler::quantity::fmt_duration;
use maar_widgets::columns::Column;

use crossterm::event::KeyCode;
use maar_scheduler::alerts::AlertView;

use super::super::screen::Then;
use super::super::state::App;
use super::super::table::{plain, rows_table, title, verb_hints, Cells};

/// The screen's own keys (the operator's come from the verbs).
pub const KEYS: &[(&str, &str)] = &[
    ("Enter", "go to the alert's job or node"),
    ("A", "show acknowledged and resolved alerts too"),
];

/// The alerts the Alerts screen lists: open ones first (critical first), then with
/// `A` the acknowledged and the resolved; through the filter.
pub fn list(app: &App) -> Vec<AlertView> {
    let f = app.filter.to_lowercase();
    let s = &app.snapshot;
    s.alerts
        .iter()
        .filter(|a| app.alerts_all || a.state == "open")
        .chain(s.resolved_alerts.iter().filter(|_| app.alerts_all))
        .filter(|a| {
            f.is_empty()
                || format!(
                    "{} {} {} {} {}",
                    a.cluster, a.severity, a.state, a.key, a.message
                )
                .to_lowercase()
                .contains(&f)
        })
        .cloned()
        .collect()
}

/// Open alerts (the header's count).
pub fn open(app: &App) -> usize {
    app.snapshot
        .alerts
        .iter()
        .filter(|a| a.state == "open")
        .count()
}

/// What row `i` is, by name (the selection follows it).
/// Its rows: every alert, in the order the list shows them.
pub fn rows(app: &App) -> Vec<usize> {
    (0..app.alerts.len()).collect()
}

pub fn row_key(app: &App, i: usize) -> String {
    app.alerts
        .get(i)
        .map(|a| format!("{}:{}", a.cluster, a.key))
        .unwrap_or_default()
}

/// Enter goes to the alert's object; A shows acknowledged and resolved alerts too.
pub fn key(app: &mut App, k: KeyCode) -> Option<Then> {
    match k {
        KeyCode::Enter => {
            let a = app
                .rows
                .get(app.selected)
                .and_then(|&i| app.alerts.get(i))?;
            Some(Then::Follow(a.object.clone()))
        }
        KeyCode::Char('A') => {
            app.alerts_all = !app.alerts_all;
            app.message = if app.alerts_all {
                "showing open, acknowledged and resolved alerts (A: open only)".into()
            } else {
                "showing open alerts (A: also acknowledged and resolved)".into()
            };
            Some(Then::Recompute)
        }
        _ => None,
    }
}

pub fn alert_cells(app: &App, a: &maar_scheduler::alerts::AlertView) -> Cells {
    let st = if a.severity == "critical" {
        app.theme.crit.add_modifier(Modifier::BOLD)
    } else {
        app.theme.warn
    };
    let state = match (&a.acked_by, a.resolved_at) {
        (Some(by), Some(t)) => format!("resolved {} (ack {by})", fmt_duration(t)),
        (Some(by), None) => format!("ack by {by}"),
        _ => a.state.clone(),
    };
    vec![
        (
            if a.severity == "critical" {
                "CRIT"
            } else {
                "WARN"
            }
            .to_string(),
            st,
        ),
        plain(state),
        plain(if a.count > 1 {
            format!("x{}", a.count)
        } else {
            String::new()
        }),
        plain(a.message.clone()),
        // What `:ack ALERT` and `maar ack` take.
        plain(a.key.clone()),
    ]
}

pub fn alert_columns() -> Vec<Column> {
    vec![
        Column::new("LEVEL", 4),
        Column::new("STATE", 4).drop(2),
        Column::new("N", 3).drop(1),
        // The alert read whole before its key (which `a` on the row spares typing)
        // takes the room: the key goes first on a narrow terminal.
        Column::new("ALERT", 44).grow(),
        Column::new("KEY", 8).name().drop(3),
    ]
}

pub fn draw(f: &mut Frame, app: &App, area: Rect) {
    let what = if app.alerts_all {
        format!("alerts: all ({})", app.rows.len())
    } else {
        format!("alerts: open ({})", app.rows.len())
    };
    let mut cols = alert_columns();
    if app.all_rows() {
        cols.insert(0, Column::new("CLUSTER", 4).name());
    }
    let t = rows_table(
        app,
        area,
        cols,
        |i| {
            app.alerts.get(i).map(|a| {
                let mut c = alert_cells(app, a);
                if app.all_rows() {
                    c.insert(0, plain(a.cluster.clone()));
                }
                c
            })
        },
        title(
            app,
            what,
            "Enter go to its job or node, A all/open",
            &verb_hints("alerts"),
        ),
    );
    f.render_widget(t, area);
}
