//! Drawing. Everything here reads the app's owned snapshot; nothing changes state, and
//! tables build only the rows that fit on screen.

use ratatui::layout::{Constraint, Layout, Rect};
use ratatui::style::{Modifier, Style};
use ratatui::text::{Line, Span};
use ratatui::widgets::{Block, Borders, Cell, Clear, Paragraph, Row, Table, Tabs, Wrap};
use ratatui::Frame;

use maar_scheduler::quantity::{fmt_bytes, fmt_cpu, fmt_duration};
use maar_widgets::columns::{self, Column};
use maar_widgets::{spark, window, GpuCell, GpuGrid, QuotaBar};

use super::app::{App, Mode, Screen};

pub const MIN_W: u16 = 80;
pub const MIN_H: u16 = 24;

pub fn draw(f: &mut Frame, app: &App) {
    let area = f.area();
    if area.width < MIN_W || area.height < MIN_H {
        let msg = format!(
            "terminal too small: {}x{} (needs {MIN_W}x{MIN_H}) — q quits",
            area.width, area.height
        );
        f.render_widget(Paragraph::new(msg).wrap(Wrap { trim: true }), area);
        return;
    }
    let [head, tabs, body, foot] = Layout::vertical([
        Constraint::Length(2),
        Constraint::Length(1),
        Constraint::Min(5),
        Constraint::Length(1),
    ])
    .areas(area);
    header(f, app, head);
    let titles: Vec<Line> = Screen::ALL.iter().map(|s| Line::from(s.name())).collect();
    let idx = Screen::ALL
        .iter()
        .position(|s| *s == app.screen)
        .unwrap_or(0);
    f.render_widget(
        Tabs::new(titles)
            .select(idx)
            .highlight_style(app.theme.selection),
        tabs,
    );
    match app.screen {
        Screen::Overview => overview(f, app, body),
        Screen::Nodes => nodes(f, app, body),
        Screen::Jobs => jobs(f, app, body),
        Screen::Quotas => quotas(f, app, body),
        Screen::Events => events(f, app, body),
        Screen::Alerts => alerts_view(f, app, body),
        Screen::Cost => cost(f, app, body),
        Screen::Logs => logs(f, app, body),
        Screen::Help => help(f, app, body),
    }
    let line = match &app.mode {
        Mode::Command(s) => format!(":{s}"),
        Mode::Filter(s) => format!("/{s}"),
        _ if !app.filter.is_empty() => format!("[filter: {}] {}", app.filter, app.message),
        _ => app.message.clone(),
    };
    f.render_widget(Paragraph::new(line), foot);
    match &app.mode {
        Mode::Explain(ex, at) => popup(
            f,
            area,
            " explain — j/k PgUp/PgDn scroll, Esc closes ",
            &ex.to_string(),
            *at,
        ),
        Mode::Confirm(_, p, at) => popup(
            f,
            area,
            " what if — y do it, n/Esc keep as is, j/k scroll ",
            &p.text(usize::MAX),
            *at,
        ),
        _ => {}
    }
}

/// Text over the screen, scrolled `at` lines (never past its end); says where it is
/// when it does not fit.
fn popup(f: &mut Frame, area: Rect, title: &str, text: &str, at: u16) {
    let r = Rect {
        x: area.x + 2,
        y: area.y + 2,
        width: area.width.saturating_sub(4),
        height: area.height.saturating_sub(4),
    };
    let p = Paragraph::new(text.to_string()).wrap(Wrap { trim: false });
    let inner_h = r.height.saturating_sub(2);
    let total = p.line_count(r.width.saturating_sub(2)) as u16;
    let at = at.min(total.saturating_sub(inner_h));
    let pos = if total > inner_h {
        format!(
            " lines {}-{} of {total} ",
            at + 1,
            (at + inner_h).min(total)
        )
    } else {
        String::new()
    };
    f.render_widget(Clear, r);
    f.render_widget(
        p.scroll((at, 0)).block(
            Block::default()
                .borders(Borders::ALL)
                .title(title.to_string())
                .title_bottom(Line::from(pos).right_aligned()),
        ),
        r,
    );
}

fn header(f: &mut Frame, app: &App, area: Rect) {
    let m = &app.snapshot.metrics;
    let models: Vec<String> = m
        .by_model
        .iter()
        .map(|g| {
            format!(
                "{} {}/{}/{}",
                g.model,
                fmt_cpu((g.allocated * 1000.0) as u64),
                fmt_cpu((g.idle.max(0.0) * 1000.0) as u64),
                g.total
            )
        })
        .collect();
    let n_alerts = app.open_alerts();
    if let Some(p) = &app.past {
        // A banner no one can miss, short, then the facts in few words.
        let l1 = Line::from(vec![
            Span::styled(
                format!(
                    " PAST t={} (now {}) ",
                    fmt_duration(p.at),
                    fmt_duration(app.live_s)
                ),
                app.theme
                    .warn
                    .add_modifier(Modifier::REVERSED | Modifier::BOLD),
            ),
            Span::raw(format!(
                " actions off  GPU {}/{} pend {} run {} alerts {n_alerts} {}({})  :now returns",
                fmt_cpu(m.allocated.gpu_milli),
                fmt_cpu(m.total.gpu_milli),
                m.jobs.pending,
                m.jobs.running,
                app.actor.user,
                app.grant.role
            )),
        ]);
        let l2 = Line::from(format!(
            "GPUs by model (used/idle/total): {}",
            models.join("  ")
        ));
        f.render_widget(Paragraph::new(vec![l1, l2]), area);
        return;
    }
    let l1 = Line::from(vec![
        Span::styled("maar ", app.theme.header),
        Span::raw(format!(
            "{}  t={}  {}{}  GPUs {}/{} used  ",
            app.status.kind,
            fmt_duration(app.snapshot.time_s),
            if app.paused { "PAUSED" } else { "running" },
            if app.status.kind != "demo" {
                // A real cluster: real time, no speed to show.
                " (live)".to_string()
            } else if !app.paused
                && app.speed >= 10.0
                && app.status.achieved > 0.0
                && app.status.achieved < 0.8 * app.speed
            {
                // The cluster cannot keep up with the speed asked: say how fast it goes.
                format!("  {}x (at {:.0}x)", app.speed, app.status.achieved)
            } else {
                format!("  {}x", app.speed)
            },
            fmt_cpu(m.allocated.gpu_milli),
            fmt_cpu(m.total.gpu_milli),
        )),
        Span::raw(format!(
            "jobs {} pending {} running  ",
            m.jobs.pending, m.jobs.running
        )),
        Span::styled(
            format!("alerts {n_alerts}"),
            if n_alerts > 0 {
                app.theme.crit.add_modifier(Modifier::BOLD)
            } else {
                Style::default()
            },
        ),
        Span::raw(format!("  {} ({})", app.actor.user, app.grant.role)),
    ]);
    // Narrow terminals get the same facts in fewer words, rather than cut.
    let l1 = if l1.width() > area.width as usize {
        Line::from(vec![
            Span::styled("maar ", app.theme.header),
            Span::raw(format!(
                "{} {} {} {}x GPU {}/{} pend {} run {} ",
                app.status.kind,
                fmt_duration(app.snapshot.time_s),
                if app.paused { "PAUSED" } else { "live" },
                app.speed,
                fmt_cpu(m.allocated.gpu_milli),
                fmt_cpu(m.total.gpu_milli),
                m.jobs.pending,
                m.jobs.running
            )),
            Span::styled(
                format!("alerts {n_alerts}"),
                if n_alerts > 0 {
                    app.theme.crit.add_modifier(Modifier::BOLD)
                } else {
                    Style::default()
                },
            ),
            Span::raw(format!(" {}({})", app.actor.user, app.grant.role)),
        ])
    } else {
        l1
    };
    let l2 = format!("GPUs by model (used/idle/total): {}", models.join("  "));
    let l2 = Line::from(columns::cut_end(&l2, area.width));
    f.render_widget(Paragraph::new(vec![l1, l2]), area);
}

/// A table's cells: text and style.
type Cells = Vec<(String, Style)>;

fn plain(s: impl Into<String>) -> (String, Style) {
    (s.into(), Style::default())
}

/// A table whose columns fit the area and the rows shown (only those are built): each
/// column as wide as its content where there is room, the growing one taking the rest,
/// the least important dropped on narrow terminals, text cut with an ellipsis.
fn fitted(
    app: &App,
    mut cols: Vec<Column>,
    rows: Vec<Cells>,
    sel: Option<usize>,
    title: String,
    width: u16,
) -> Table<'static> {
    for r in &rows {
        for (c, (text, _)) in cols.iter_mut().zip(r) {
            c.fit(text);
        }
    }
    let widths = columns::layout(&cols, width);
    let shown: Vec<usize> = (0..cols.len()).filter(|&i| widths[i].is_some()).collect();
    let header: Vec<String> = shown
        .iter()
        .map(|&i| columns::cut_end(cols[i].header, widths[i].unwrap_or(0)))
        .collect();
    let rows: Vec<Row> = rows
        .into_iter()
        .enumerate()
        .map(|(k, r)| {
            let cells: Vec<Cell> = shown
                .iter()
                .map(|&i| {
                    let (t, st) = r.get(i).cloned().unwrap_or_default();
                    Cell::from(columns::cut(&cols[i], &t, widths[i].unwrap_or(0))).style(st)
                })
                .collect();
            let row = Row::new(cells);
            if Some(k) == sel {
                row.style(app.theme.selection)
            } else {
                row
            }
        })
        .collect();
    Table::new(
        rows,
        shown
            .iter()
            .map(|&i| Constraint::Length(widths[i].unwrap_or(0))),
    )
    .header(Row::new(header).style(app.theme.header))
    .block(Block::default().borders(Borders::TOP).title(title))
}

/// The title of a screen: what it shows and its keys, the action keys only for those
/// who may use them.
fn title(app: &App, what: String, look: &str, act: &str) -> String {
    let mut t = format!(" {what}");
    let keys: Vec<&str> = [look]
        .into_iter()
        .chain(
            (app.grant.role >= maar_scheduler::Role::Operator && app.past.is_none()).then_some(act),
        )
        .filter(|k| !k.is_empty())
        .collect();
    if !keys.is_empty() {
        t.push_str(" — ");
        t.push_str(&keys.join(", "));
    }
    if app.past.is_some() {
        t.push_str(" — the past: actions off");
    } else if app.grant.role < maar_scheduler::Role::Operator && !act.is_empty() {
        t.push_str(&format!(" — {}: look only", app.grant.role));
    }
    t.push(' ');
    t
}

fn node_cells(app: &App, n: &maar_scheduler::metrics::NodeView) -> Cells {
    let st = if n.condition != "Ready" {
        app.theme.crit
    } else if n.cordoned {
        app.theme.warn
    } else {
        Style::default()
    };
    let disk = (n.disk_used * 100).checked_div(n.disk).unwrap_or(0);
    vec![
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
        plain(
            n.host
                .map(|h| {
                    format!(
                        "cpu {}% mem {} load {:.2}",
                        h.cpu_busy_pct,
                        fmt_bytes(h.memory_used),
                        h.load1_centi as f64 / 100.0
                    )
                })
                .unwrap_or_default(),
        ),
    ]
}

fn node_columns() -> Vec<Column> {
    vec![
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
    ]
}

fn nodes(f: &mut Frame, app: &App, area: Rect) {
    let rows_idx = &app.rows;
    let (body, detail) = match &app.expanded {
        Some(_) => {
            let [a, b] = Layout::vertical([Constraint::Percentage(55), Constraint::Percentage(45)])
                .areas(area);
            (a, Some(b))
        }
        None => (area, None),
    };
    let (start, end) = window(
        rows_idx.len(),
        app.selected,
        body.height.saturating_sub(2) as usize,
    );
    let rows: Vec<Cells> = rows_idx[start..end]
        .iter()
        .map(|&i| node_cells(app, &app.snapshot.nodes[i]))
        .collect();
    let t = fitted(
        app,
        node_columns(),
        rows,
        Some(app.selected.saturating_sub(start)),
        title(
            app,
            format!("nodes ({})", rows_idx.len()),
            "Enter GPUs",
            "c cordon, u uncordon, d drain",
        ),
        body.width,
    );
    f.render_widget(t, body);
    if let (Some(d), Some(name)) = (detail, &app.expanded) {
        if let Some(n) = app.snapshot.nodes.iter().find(|n| &n.name == name) {
            let rows: Vec<Cells> = n
                .gpus
                .iter()
                .take(d.height.saturating_sub(2) as usize)
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
                format!(" {name} GPUs — :cordon-gpu {name} N, :uncordon-gpu {name} N "),
                d.width,
            );
            f.render_widget(t, d);
        }
    }
}

/// The GPUs of one model across the cluster: a cell per card, and counts.
#[derive(Clone, Debug, Default)]
pub struct ModelRow {
    pub model: String,
    pub cells: Vec<GpuCell>,
    pub total: u32,
    pub used: u32,
    /// Unhealthy, or on a NotReady node.
    pub down: u32,
    pub cordoned: u32,
}

/// GPUs by model (the overview's summary), computed once per snapshot.
pub fn model_rows(s: &maar_scheduler::metrics::Snapshot) -> Vec<ModelRow> {
    use std::collections::BTreeMap;
    let mut by: BTreeMap<String, ModelRow> = BTreeMap::new();
    for n in &s.nodes {
        if !n.gpu_labelled {
            continue;
        }
        let down = n.condition != "Ready";
        for (g, cell) in n.gpus.iter().zip(gpu_cells(n)) {
            let e = by.entry(g.model.clone()).or_insert_with(|| ModelRow {
                model: g.model.clone(),
                ..Default::default()
            });
            // A card on a NotReady node is as unusable as an unhealthy one; a free card
            // of a cordoned node takes nothing new.
            e.cells.push(match cell {
                _ if down => GpuCell::Unhealthy,
                GpuCell::Free if n.cordoned => GpuCell::Cordoned,
                c => c,
            });
            e.total += 1;
            e.used += u32::from(!g.holders.is_empty());
            e.down += u32::from(g.health != "Healthy" || down);
            e.cordoned += u32::from(g.cordoned || n.cordoned);
        }
    }
    by.into_values().collect()
}

/// GPUs by model, one glyph per GPU (wrapped to the width), with counts and health.
fn gpu_summary(app: &App, width: u16, max_lines: usize) -> Vec<Line<'static>> {
    let by = &app.models;
    let labels: Vec<String> = by
        .iter()
        .map(|r| {
            let (m, total, used, bad, cordoned) = (&r.model, r.total, r.used, &r.down, &r.cordoned);
            let mut l = format!("{m:<8} {used:>3}/{total:<3} used");
            if *bad > 0 {
                l.push_str(&format!(" {bad} down"));
            }
            if *cordoned > 0 {
                l.push_str(&format!(" {cordoned} cordoned"));
            }
            l
        })
        .collect();
    let lw = labels.iter().map(|l| l.chars().count()).max().unwrap_or(0) + 2;
    let room = (width as usize).saturating_sub(lw).max(8);
    // Only the lines that fit are built: each model gets its share, and a grid longer
    // than that ends with `…`.
    let per_model = (max_lines / by.len().max(1)).max(1);
    let mut lines = Vec::new();
    for (r, label) in by.iter().zip(labels) {
        let (cells, bad) = (&r.cells, r.down);
        let shown = cells.len().min(per_model * room);
        let cut = shown < cells.len();
        let mut glyphs: Vec<char> = GpuGrid {
            cells: cells[..shown].to_vec(),
        }
        .text()
        .chars()
        .collect();
        if cut {
            if let Some(last) = glyphs.last_mut() {
                *last = '…';
            }
        }
        for (k, chunk) in glyphs.chunks(room).enumerate() {
            let head = if k == 0 {
                format!("{label:<lw$}")
            } else {
                " ".repeat(lw)
            };
            lines.push(Line::from(vec![
                Span::styled(
                    head,
                    if bad > 0 && k == 0 {
                        app.theme.crit
                    } else {
                        Style::default()
                    },
                ),
                Span::raw(chunk.iter().collect::<String>()),
            ]));
        }
    }
    lines
}

/// The first screen: GPUs by model with health, the Pending queue with reasons, open
/// alerts and the newest events, all at once. Wide terminals put the queue and the
/// alerts side by side; narrow ones stack everything with fewer rows each.
fn overview(f: &mut Frame, app: &App, area: Rect) {
    let summary = gpu_summary(
        app,
        area.width,
        (area.height / 3).saturating_sub(1) as usize,
    );
    let sum_h = (summary.len() as u16 + 1).min(area.height / 3).max(2);
    let wide = area.width >= 120;
    let rest = area.height.saturating_sub(sum_h);
    // Each panel as tall as its rows (plus title and header) within its share; the
    // events take what is left.
    let open = app.open_alerts() as u16;
    let pending = app.rows.len() as u16;
    let (queue_h, alerts_h, events_h) = if wide {
        let top = (pending.max(open) + 2).clamp(4, rest * 3 / 5);
        (top, top, rest - top)
    } else {
        let q = (pending + 2).clamp(3, rest * 2 / 5);
        let a = (open + 2).clamp(3, rest.saturating_sub(q + 4).max(3));
        (q, a, rest.saturating_sub(q + a))
    };
    let [s_area, mid, e_area] = if wide {
        Layout::vertical([
            Constraint::Length(sum_h),
            Constraint::Length(queue_h),
            Constraint::Min(events_h.min(3)),
        ])
        .areas(area)
    } else {
        Layout::vertical([
            Constraint::Length(sum_h),
            Constraint::Length(queue_h + alerts_h),
            Constraint::Min(events_h.min(3)),
        ])
        .areas(area)
    };
    let [q_area, a_area] = if wide {
        let [q, _gap, a] = Layout::horizontal([
            Constraint::Percentage(60),
            Constraint::Length(1),
            Constraint::Fill(1),
        ])
        .areas(mid);
        [q, a]
    } else {
        Layout::vertical([Constraint::Length(queue_h), Constraint::Length(alerts_h)]).areas(mid)
    };
    f.render_widget(
        Paragraph::new(summary).block(
            Block::default()
                .borders(Borders::TOP)
                .title(" GPUs by model — █ used ▄ shared · free x down (unhealthy or NotReady node) c cordoned "),
        ),
        s_area,
    );
    // The Pending queue, in queue order, with each job's reason.
    let idx = &app.rows;
    let (start, end) = window(
        idx.len(),
        app.selected,
        q_area.height.saturating_sub(2) as usize,
    );
    let rows: Vec<Cells> = idx[start..end]
        .iter()
        .map(|&i| {
            let j = &app.snapshot.jobs[i];
            vec![
                plain(format!("{}/{}", j.project, j.name)),
                plain(fmt_duration(j.wait_s)),
                plain(j.reasons.first().cloned().unwrap_or_default()),
            ]
        })
        .collect();
    f.render_widget(
        fitted(
            app,
            vec![
                Column::new("PENDING", 12).name(),
                Column::new("WAIT", 5),
                Column::new("REASON", 16).grow(),
            ],
            rows,
            (!idx.is_empty()).then_some(app.selected.saturating_sub(start)),
            format!(" queue: {} Pending — Enter explains ", idx.len()),
            q_area.width,
        ),
        q_area,
    );
    let open: Vec<&maar_scheduler::alerts::AlertView> = app
        .snapshot
        .alerts
        .iter()
        .filter(|a| a.state == "open")
        .collect();
    let rows: Vec<Cells> = open
        .iter()
        .take(a_area.height.saturating_sub(2) as usize)
        .map(|a| {
            let c = alert_cells(app, a);
            vec![c[0].clone(), c[3].clone()]
        })
        .collect();
    f.render_widget(
        fitted(
            app,
            vec![Column::new("LEVEL", 4), Column::new("ALERT", 20).grow()],
            rows,
            None,
            format!(" open alerts ({}) — :alerts to work them ", open.len()),
            a_area.width,
        ),
        a_area,
    );
    let rows: Vec<Cells> = app
        .snapshot
        .events
        .iter()
        .rev()
        .take(e_area.height.saturating_sub(2) as usize)
        .map(|e| event_cells(app, e))
        .collect();
    f.render_widget(
        fitted(
            app,
            event_columns(),
            rows,
            None,
            " latest events ".into(),
            e_area.width,
        ),
        e_area,
    );
}

/// One glyph per GPU (unlabelled GPUs are not scheduled and show as none).
fn gpu_grid(n: &maar_scheduler::metrics::NodeView) -> String {
    if !n.gpu_labelled {
        return String::new();
    }
    GpuGrid {
        cells: gpu_cells(n),
    }
    .text()
}

/// Each GPU's state as a grid cell.
fn gpu_cells(n: &maar_scheduler::metrics::NodeView) -> Vec<GpuCell> {
    n.gpus
        .iter()
        .map(|g| {
            if g.health != "Healthy" {
                GpuCell::Unhealthy
            } else if g.cordoned {
                GpuCell::Cordoned
            } else if g.holders.is_empty() {
                GpuCell::Free
            } else if g.mem_allocated >= g.memory {
                GpuCell::Full
            } else {
                GpuCell::Partial((g.mem_allocated * 100 / g.memory.max(1)) as u8)
            }
        })
        .collect()
}

fn bar(used: u64, total: u64, width: usize) -> String {
    let filled = if total == 0 {
        0
    } else {
        ((used as u128 * width as u128) / total as u128) as usize
    };
    format!(
        "[{}{}]",
        "#".repeat(filled.min(width)),
        ".".repeat(width - filled.min(width))
    )
}

fn job_cells(app: &App, j: &maar_scheduler::metrics::JobView) -> Cells {
    let phase_style = match j.phase.as_str() {
        "Pending" => app.theme.pending,
        "Restarting" => app.theme.restarting,
        _ => app.theme.running,
    };
    let time = if j.phase == "Pending" {
        fmt_duration(j.wait_s)
    } else {
        fmt_duration(j.run_s)
    };
    vec![
        plain(j.project.clone()),
        plain(j.name.clone()),
        (j.phase.clone(), phase_style),
        plain(j.priority.clone()),
        plain(j.pool.clone()),
        plain(j.request.clone()),
        plain(time),
        plain(maar_scheduler::forecast::starts_cell(
            app.snapshot.time_s,
            j.expected_start_s,
            j.expected_start_basis.as_deref(),
        )),
        plain(match &j.autoscaler_paused_by {
            Some(who) if j.phase == "Running" => format!("autoscaler paused by {who}"),
            _ => j.reasons.first().cloned().unwrap_or_default(),
        }),
    ]
}

fn job_columns() -> Vec<Column> {
    vec![
        Column::new("PROJECT", 5).name().drop(2),
        Column::new("NAME", 10).name(),
        Column::new("PHASE", 7),
        Column::new("PRIO", 4).drop(4),
        Column::new("POOL", 6).drop(5),
        Column::new("REQUEST", 14).soft().drop(3),
        Column::new("WAIT/RUN", 5),
        Column::new("STARTS", 6).drop(3),
        Column::new("REASON", 28).grow(),
    ]
}

fn jobs(f: &mut Frame, app: &App, area: Rect) {
    let rows_idx = &app.rows;
    let (start, end) = window(
        rows_idx.len(),
        app.selected,
        area.height.saturating_sub(2) as usize,
    );
    let rows: Vec<Cells> = rows_idx[start..end]
        .iter()
        .map(|&i| job_cells(app, &app.snapshot.jobs[i]))
        .collect();
    let t = fitted(
        app,
        job_columns(),
        rows,
        Some(app.selected.saturating_sub(start)),
        title(
            app,
            format!("queue ({})", rows_idx.len()),
            "Enter explain",
            "+/- priority, r requeue, x cancel",
        ),
        area.width,
    );
    f.render_widget(t, area);
}

/// `used/max` of one quota dimension (`-` for no limit).
fn used_of(used: u64, max: Option<u64>, f: fn(u64) -> String) -> String {
    format!("{}/{}", f(used), max.map(f).unwrap_or_else(|| "-".into()))
}

fn quotas(f: &mut Frame, app: &App, area: Rect) {
    let reqs = &app.rows;
    let [top, legend, bottom] = Layout::vertical([
        Constraint::Min(4),
        Constraint::Length(1),
        Constraint::Length((reqs.len() as u16 + 2).clamp(3, 10)),
    ])
    .areas(area);
    let rows: Vec<Cells> = app
        .snapshot
        .quotas
        .iter()
        .take(top.height.saturating_sub(2) as usize)
        .map(|q| {
            let max = q.max.gpu_milli;
            let b = QuotaBar::new(q.used.gpu_milli, q.reserved.gpu_milli, max).text(22);
            vec![
                plain(q.project.clone()),
                plain(q.department.clone()),
                plain(q.pool.clone()),
                plain(b),
                plain(format!(
                    "{}/{}/{}",
                    fmt_cpu(q.used.gpu_milli),
                    fmt_cpu(q.reserved.gpu_milli),
                    max.map(fmt_cpu).unwrap_or_else(|| "-".into())
                )),
                plain(used_of(q.used.gpu_mem, q.max.gpu_mem, fmt_bytes)),
                plain(used_of(q.used.cpu_milli, q.max.cpu_milli, fmt_cpu)),
                plain(used_of(q.used.memory, q.max.memory, fmt_bytes)),
                plain(used_of(q.used.disk, q.max.disk, fmt_bytes)),
            ]
        })
        .collect();
    let cols = vec![
        Column::new("PROJECT", 6).name(),
        Column::new("DEPARTMENT", 6).drop(6),
        Column::new("POOL", 6).name(),
        Column::new("GPUS (| reserved)", 12).drop(1),
        Column::new("GPU U/R/MAX", 7),
        Column::new("GPU MEM", 7).drop(2),
        Column::new("CPU", 5).drop(3),
        Column::new("MEMORY", 7).drop(4),
        Column::new("DISK", 5).drop(5).grow(),
    ];
    f.render_widget(
        fitted(
            app,
            cols,
            rows,
            None,
            " quotas — used/reserved/max GPUs, used/max of the rest ".into(),
            top.width,
        ),
        top,
    );
    f.render_widget(
        Paragraph::new(
            "bar: # used within reserved  | end of reserved  = borrowed above reserved  . room to max  ! over max;  - no limit",
        )
        .style(Style::default().add_modifier(Modifier::DIM)),
        legend,
    );
    let rows: Vec<Cells> = reqs
        .iter()
        .map(|&i| {
            let r = &app.snapshot.quota_requests[i];
            vec![
                plain(format!("#{}", r.id)),
                plain(r.project.clone()),
                plain(r.pool.clone()),
                plain(format!(
                    "+{} GPUs{}",
                    r.gpus,
                    if r.reserved { " reserved" } else { "" }
                )),
                plain(r.reason.clone()),
            ]
        })
        .collect();
    let cols = vec![
        Column::new("ID", 3),
        Column::new("PROJECT", 6).name(),
        Column::new("POOL", 6).name(),
        Column::new("ASK", 8),
        Column::new("REASON", 10).grow(),
    ];
    let sel = (!reqs.is_empty()).then_some(app.selected);
    f.render_widget(
        fitted(
            app,
            cols,
            rows,
            sel,
            title(
                app,
                format!("pending quota requests ({})", reqs.len()),
                "",
                "a approve, r reject (admin)",
            ),
            bottom.width,
        ),
        bottom,
    );
}

fn event_cells(app: &App, e: &maar_scheduler::Event) -> Cells {
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

fn event_columns() -> Vec<Column> {
    vec![
        Column::new("TIME", 5),
        Column::new("TYPE", 4).drop(3),
        Column::new("REASON", 8).drop(2),
        Column::new("OBJECT", 10).name(),
        Column::new("MESSAGE", 20).grow(),
    ]
}

fn events(f: &mut Frame, app: &App, area: Rect) {
    let idx = &app.rows;
    let (start, end) = window(
        idx.len(),
        app.selected,
        area.height.saturating_sub(2) as usize,
    );
    let rows: Vec<Cells> = idx[start..end]
        .iter()
        .map(|&i| event_cells(app, &app.snapshot.events[i]))
        .collect();
    f.render_widget(
        fitted(
            app,
            event_columns(),
            rows,
            Some(app.selected.saturating_sub(start)),
            format!(
                " events ({}) — / filters by severity, kind, object or text ",
                idx.len()
            ),
            area.width,
        ),
        area,
    );
}

fn alert_cells(app: &App, a: &maar_scheduler::alerts::AlertView) -> Cells {
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
    ]
}

fn alert_columns() -> Vec<Column> {
    vec![
        Column::new("LEVEL", 4),
        Column::new("STATE", 4).drop(2),
        Column::new("N", 3).drop(1),
        Column::new("ALERT", 20).grow(),
    ]
}

fn alerts_view(f: &mut Frame, app: &App, area: Rect) {
    let idx = &app.rows;
    let (start, end) = window(
        idx.len(),
        app.selected,
        area.height.saturating_sub(2) as usize,
    );
    let rows: Vec<Cells> = idx[start..end]
        .iter()
        .filter_map(|&i| app.alerts.get(i))
        .map(|a| alert_cells(app, a))
        .collect();
    let what = if app.alerts_all {
        format!("alerts: all ({})", idx.len())
    } else {
        format!("alerts: open ({})", idx.len())
    };
    f.render_widget(
        fitted(
            app,
            alert_columns(),
            rows,
            (!idx.is_empty()).then_some(app.selected.saturating_sub(start)),
            title(
                app,
                what,
                "Enter go to its job or node, A all/open",
                "a acknowledge",
            ),
            area.width,
        ),
        area,
    );
}

fn cost(f: &mut Frame, app: &App, area: Rect) {
    let c = &app.snapshot.costs;
    let mut rows: Vec<Cells> = c
        .projects
        .iter()
        .map(|p| {
            vec![
                plain(p.project.clone()),
                plain(p.department.clone()),
                plain(format!("{:.1}", p.gpu_hours)),
                plain(format!("{:.2}", p.cost)),
            ]
        })
        .collect();
    rows.extend(c.departments.iter().map(|d| {
        vec![
            plain("(department)"),
            plain(d.department.clone()),
            plain(format!("{:.1}", d.gpu_hours)),
            plain(format!("{:.2}", d.cost)),
        ]
    }));
    rows.truncate(area.height.saturating_sub(2) as usize);
    let cols = vec![
        Column::new("PROJECT", 8).name(),
        Column::new("DEPARTMENT", 8).name(),
        Column::new("GPU-HOURS", 9),
        Column::new("BILL", 8).grow(),
    ];
    f.render_widget(
        fitted(
            app,
            cols,
            rows,
            None,
            format!(" cost so far — total {:.2} ", c.total),
            area.width,
        ),
        area,
    );
}

fn logs(f: &mut Frame, app: &App, area: Rect) {
    // The tracing log (operator actions, refusals, console errors), kept by tui-logger.
    let w = tui_logger::TuiLoggerWidget::default()
        .style_error(app.theme.crit)
        .style_warn(app.theme.warn)
        .style_info(app.theme.ok)
        .output_separator(' ')
        .output_target(false)
        .output_file(false)
        .output_line(false)
        .block(
            Block::default()
                .borders(Borders::TOP)
                .title(" logs (tracing) "),
        );
    f.render_widget(w, area);
}

/// The console's own keys and `:` commands (the operator's commands and their keys
/// come from their declarations, [`maar_scheduler::verbs::VERBS`]).
pub const HELP: &[(&str, &str)] = &[
    ("q, ctrl-c", "quit"),
    ("Tab / shift-Tab", "next / previous screen"),
    (
        ":SCREEN",
        "go to a screen: overview nodes jobs quotas events alerts cost logs help",
    ),
    ("/", "filter the current table (Esc clears)"),
    ("j k, arrows, g G, PgUp PgDn", "move"),
    (
        "Enter",
        "jobs: explain; nodes: show GPUs; alerts: go to its job or node",
    ),
    ("A", "alerts: show acknowledged and resolved too"),
    ("space, < >", "pause, slower, faster"),
    (
        "[ ]  { }",
        "time travel: back / forward 5 minutes, 1 hour (actions are off in the past)",
    ),
    (
        ":at 2h15m  :now",
        "look at the cluster at a moment of its history; back to now",
    ),
    (":speed X", "set the speed (1-86400)"),
    (":pause  :resume", "pause or resume the simulation"),
    (
        "y  n/Esc  j k",
        "each action first shows what it would do: y does it, n or Esc keeps things, j/k scroll",
    ),
    (
        "? or Esc on this screen",
        "back to the screen you came from",
    ),
    (
        "GPU bars",
        "█ used  ▄ partly used (shared)  · free  x unhealthy  c cordoned",
    ),
];

/// The console's own keys on one screen, listed first when `?` is pressed there (the
/// operator's keys there follow from the verbs).
pub fn screen_keys(s: Screen) -> &'static [(&'static str, &'static str)] {
    match s {
        Screen::Nodes => &[("Enter", "show / hide the node's GPUs")],
        Screen::Jobs => &[("Enter", "explain the job")],
        Screen::Alerts => &[
            ("Enter", "go to the alert's job or node"),
            ("A", "show acknowledged and resolved alerts too"),
        ],
        Screen::Events => &[(
            "/severity:warning kind:job object:a100 oom",
            "filter by field and text",
        )],
        _ => &[],
    }
}

/// A verb's key on a screen in words: "cordon the node (previewed first)".
fn key_does(v: &maar_scheduler::verbs::Verb, does: &str) -> String {
    if v.at_once {
        does.to_string()
    } else if v.destructive {
        format!("{does} (previewed, confirm; takes work away)")
    } else {
        format!("{does} (previewed, confirm)")
    }
}

/// Every help row as (keys, what, the role it needs): the screen's keys first, then
/// the console's, then each screen's operator keys, then every `:` command.
pub fn help_entries(on: Screen) -> Vec<(String, String, Option<maar_scheduler::Role>)> {
    use maar_scheduler::verbs::VERBS;
    let mut out: Vec<(String, String, Option<maar_scheduler::Role>)> = screen_keys(on)
        .iter()
        .map(|(k, v)| (k.to_string(), format!("{v} (on {})", on.name()), None))
        .collect();
    for v in VERBS {
        for k in v.keys.iter().filter(|k| k.screen == on.name()) {
            out.push((
                k.key.to_string(),
                format!("{} (on {})", key_does(v, k.does), on.name()),
                Some(v.role),
            ));
        }
    }
    out.extend(
        HELP.iter()
            .map(|(k, v)| (k.to_string(), v.to_string(), None)),
    );
    for s in Screen::ALL {
        let keys: Vec<_> = VERBS
            .iter()
            .flat_map(|v| v.keys.iter().map(move |k| (v, k)))
            .filter(|(_, k)| k.screen == s.name())
            .collect();
        if keys.is_empty() {
            continue;
        }
        let role = keys.iter().map(|(v, _)| v.role).max();
        out.push((
            keys.iter()
                .map(|(_, k)| k.key.to_string())
                .collect::<Vec<_>>()
                .join(" "),
            format!(
                "{}: {}",
                s.name(),
                keys.iter()
                    .map(|(_, k)| k.does)
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
            role,
        ));
    }
    for v in VERBS {
        out.push((format!(":{}", v.usage()), v.doc.to_string(), Some(v.role)));
    }
    out
}

/// The help's rows: the keys of the screen it was asked on, then every key; each with
/// the role it needs when the user lacks it.
pub fn help_rows(app: &App) -> Vec<Cells> {
    let row = |k: String, v: String, need: Option<maar_scheduler::Role>| -> Cells {
        match need.filter(|need| *need > app.grant.role) {
            Some(need) => {
                let dim = Style::default().add_modifier(Modifier::DIM | Modifier::CROSSED_OUT);
                vec![(k, dim), (format!("{v} — needs {need}"), dim)]
            }
            None => vec![plain(k), plain(v)],
        }
    };
    std::iter::once(vec![
        plain("you are"),
        plain(format!(
            "{} {} ({})",
            app.actor.user, app.grant.role, app.grant.why
        )),
    ])
    .chain(
        help_entries(app.help_for)
            .into_iter()
            .map(|(k, v, need)| row(k, v, need)),
    )
    .collect()
}

fn help(f: &mut Frame, app: &App, area: Rect) {
    let all = help_rows(app);
    let (start, end) = window(
        all.len(),
        app.selected,
        area.height.saturating_sub(2) as usize,
    );
    let n = all.len();
    let rows: Vec<Cells> = all.into_iter().skip(start).take(end - start).collect();
    let cols = vec![Column::new("KEYS", 10), Column::new("WHAT", 20).grow()];
    f.render_widget(
        fitted(
            app,
            cols,
            rows,
            Some(app.selected.saturating_sub(start)),
            format!(
                " help — lines {}-{} of {n}, j/k PgUp/PgDn scroll, ? or Esc back ",
                start + 1,
                end
            ),
            area.width,
        ),
        area,
    );
}
