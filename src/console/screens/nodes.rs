//! The Nodes screen: every node, its GPUs on Enter; c u d act on the selected node
//! (the verbs' keys).

use ratatui::layout::{Constraint, Layout, Rect};
use ratatui::style::Style;
use ratatui::Frame;

use maar_scheduler::quantity::{fmt_bytes, fmt_cpu};
use maar_widgets::columns::Column;
use maar_widgets::{spark, GpuGrid};

use crossterm::event::KeyCode;

use super::super::screen::Then;
use super::super::state::App;
use super::super::table::{bar, fitted, plain, rows_table, title, verb_hints, Cells};

/// The screen's own keys (the operator's come from the verbs).
pub const KEYS: &[(&str, &str)] = &[("Enter", "show / hide the node's GPUs")];

pub fn rows(app: &App) -> Vec<usize> {
    let f = app.filter.to_lowercase();
    (0..app.snapshot.nodes.len())
        .filter(|&i| {
            let n = &app.snapshot.nodes[i];
            f.is_empty()
                || format!(
                    "{} {} {} {} {} {} {}",
                    n.cluster,
                    n.name,
                    n.pool,
                    n.role,
                    n.condition,
                    if n.cordoned { "cordoned" } else { "" },
                    n.gpus.first().map(|g| g.model.as_str()).unwrap_or("")
                )
                .to_lowercase()
                .contains(&f)
        })
        .collect()
}

/// What row `i` is, by name (the selection follows it).
pub fn row_key(app: &App, i: usize) -> String {
    app.snapshot
        .nodes
        .get(i)
        .map(|n| format!("{}:{}", n.cluster, n.name))
        .unwrap_or_default()
}

/// Enter shows or hides the selected node's GPUs.
pub fn key(app: &mut App, k: KeyCode) -> Option<Then> {
    (k == KeyCode::Enter).then(|| {
        let n = app
            .rows
            .get(app.selected)
            .map(|&i| app.snapshot.nodes[i].name.clone());
        app.expanded = if app.expanded == n { None } else { n };
        Then::Done
    })
}

pub fn node_cells(app: &App, n: &maar_scheduler::metrics::NodeView) -> Cells {
    let st = if n.condition != "Ready" {
        app.theme.crit
    } else if n.cordoned {
        app.theme.warn
    } else {
        Style::default()
    };
    let disk = (n.disk_used * 100).checked_div(n.disk).unwrap_or(0);
    let mut cells = vec![
        plain(n.name.clone()),
        plain(n.pool.clone()),
        plain(n.role.clone()),
        (n.status(), st),
        plain(format!("{} {}/{}", gpu_grid(n), n.gpus_used, n.gpus_total)),
        plain(
            n.gpus
                .first()
                .map(|g| g.model.clone())
                .unwrap_or_else(|| "-".into()),
        ),
        plain(format!(
            "{}/{}",
            fmt_cpu(n.cpu_allocated),
            fmt_cpu(n.cpu_milli)
        )),
        plain(format!(
            "{}/{}",
            fmt_bytes(n.memory_allocated),
            fmt_bytes(n.memory)
        )),
        (
            format!("{disk}%"),
            if disk >= 90 {
                app.theme.crit
            } else {
                Style::default()
            },
        ),
        plain(n.host.map(|h| h.to_string()).unwrap_or_default()),
    ];
    if app.all_rows() {
        cells.insert(0, plain(n.cluster.clone()));
    }
    cells
}

/// The nodes' columns; CLUSTER first when every cluster's nodes are listed
/// (`:cluster all`).
pub fn node_columns(app: &App) -> Vec<Column> {
    let mut cols = vec![
        Column::new("NODE", 8).name(),
        Column::new("POOL", 6).drop(5),
        Column::new("ROLE", 4).drop(6),
        Column::new("STATUS", 8),
        Column::new("GPUS", 5),
        Column::new("MODEL", 4).drop(2),
        Column::new("CPU", 5).drop(3),
        Column::new("MEMORY", 6).drop(4),
        Column::new("DISK", 4),
        Column::new("IN USE (measured)", 4).grow().drop(7),
    ];
    if app.all_rows() {
        cols.insert(0, Column::new("CLUSTER", 4).name());
    }
    cols
}

pub fn draw(f: &mut Frame, app: &App, area: Rect) {
    let rows_idx = &app.rows;
    let shown = app
        .expanded
        .as_ref()
        .and_then(|name| app.snapshot.nodes.iter().find(|n| &n.name == name));
    let (body, detail) = match shown {
        Some(n) => {
            // Room for every card (its borders and header too), the table keeping at
            // least six rows: at 80x24 an 8-card node's last card was left out.
            let want = n.gpus.len() as u16 + 3;
            let [a, b] =
                Layout::vertical([Constraint::Min(6), Constraint::Length(want)]).areas(area);
            (a, Some(b))
        }
        None => (area, None),
    };
    let t = rows_table(
        app,
        body,
        node_columns(app),
        |i| Some(node_cells(app, &app.snapshot.nodes[i])),
        title(
            app,
            format!("nodes ({})", rows_idx.len()),
            "Enter GPUs",
            &verb_hints("nodes"),
        ),
    );
    f.render_widget(t, body);
    if let (Some(d), Some(n)) = (detail, shown) {
        let name = &n.name;
        {
            // Where not every card fits, the cards that need an operator first
            // (unhealthy, cordoned), and the title says how many are shown.
            let room = d.height.saturating_sub(3) as usize;
            let mut gpus: Vec<&maar_scheduler::metrics::GpuView> = n.gpus.iter().collect();
            if gpus.len() > room {
                gpus.sort_by_key(|g| (g.health == "Healthy", !g.cordoned, g.index));
                gpus.truncate(room);
                gpus.sort_by_key(|g| g.index);
            }
            let of = if gpus.len() < n.gpus.len() {
                format!(
                    " ({} of {} shown, unhealthy and cordoned first)",
                    gpus.len(),
                    n.gpus.len()
                )
            } else {
                String::new()
            };
            let rows: Vec<Cells> = gpus
                .iter()
                .map(|g| {
                    let bar = bar(g.mem_allocated, g.memory, 10);
                    let hist = app
                        .history
                        .get(&(n.name.clone(), g.index))
                        .map(|h| spark(h.iter().map(|&u| u as u64), 100))
                        .unwrap_or_default();
                    vec![
                        plain(g.index.to_string()),
                        plain(g.model.clone()),
                        plain(format!(
                            "{bar} {}/{}",
                            fmt_bytes(g.mem_allocated),
                            fmt_bytes(g.memory)
                        )),
                        plain(format!("{:>3}% {hist}", g.util_pct)),
                        plain(format!("{}C {}W", g.temp_c, g.power_w)),
                        (
                            g.health.clone(),
                            if g.health != "Healthy" {
                                app.theme.crit
                            } else {
                                Style::default()
                            },
                        ),
                        plain(if g.cordoned { "cordoned" } else { "" }),
                        plain(if g.holders.is_empty() {
                            "-".to_string()
                        } else {
                            g.holders.join(",")
                        }),
                    ]
                })
                .collect();
            let cols = vec![
                Column::new("GPU", 3),
                Column::new("MODEL", 4).drop(3),
                Column::new("MEMORY", 12),
                Column::new("UTIL (history)", 5).drop(2),
                Column::new("TEMP/PWR", 8).drop(4),
                Column::new("HEALTH", 7),
                Column::new("CORDON", 6),
                Column::new("HOLDERS", 8).grow(),
            ];
            let t = fitted(
                app,
                cols,
                rows,
                None,
                format!(" {name} GPUs{of} — :cordon-gpu {name} N, :uncordon-gpu {name} N "),
                d.width,
            );
            f.render_widget(t, d);
        }
    }
}

/// One glyph per GPU (unlabelled GPUs are not scheduled and show as none).
fn gpu_grid(n: &maar_scheduler::metrics::NodeView) -> String {
    if !n.gpu_labelled {
        return String::new();
    }
    GpuGrid {
        cells: super::super::rows::gpu_cells(n),
    }
    .text()
}
