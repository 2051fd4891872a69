//! Drawing. Everything here reads the app's owned snapshot; nothing changes state, and
//! tables build only the rows that fit on screen.

use ratatui::layout::{Constraint, Layout, Rect};
use ratatui::style::{Modifier, Style};
use ratatui::text::{Line, Span};
use ratatui::widgets::{Block, Borders, Cell, Clear, Paragraph, Row, Table, Tabs, Wrap};
use ratatui::Frame;

use maar_scheduler::quantity::{fmt_bytes, fmt_cpu, fmt_duration};
use maar_widgets::{spark, window, GpuCell, GpuGrid, QuotaBar};

use super::app::{App, Mode, Screen};

pub const MIN_W: u16 = 80;
pub const MIN_H: u16 = 24;

/// Alerts derived from the snapshot: OOM kills, disk >= 90%, unhealthy GPUs, NotReady
/// nodes, jobs Pending longer than the scenario's `pending_alert`.
pub fn alerts(app: &App) -> Vec<(String, String)> {
    let s = &app.snapshot;
    let mut v = Vec::new();
    for n in &s.nodes {
        if n.condition != "Ready" {
            v.push(("CRIT".into(), format!("node {} {}", n.name, n.condition)));
        }
        if n.disk > 0 && n.disk_used * 100 / n.disk >= 90 {
            v.push((
                "WARN".into(),
                format!("node {} disk {}% used", n.name, n.disk_used * 100 / n.disk),
            ));
        }
        for g in n.gpus.iter().filter(|g| g.health != "Healthy") {
            v.push((
                "CRIT".into(),
                format!("GPU {}/{} {}", n.name, g.index, g.health),
            ));
        }
    }
    for e in s
        .events
        .iter()
        .rev()
        .filter(|e| e.reason == "OOMKilled")
        .take(20)
    {
        v.push((
            "WARN".into(),
            format!(
                "{} OOM-killed at {}",
                e.object.trim_start_matches("job/"),
                fmt_duration(e.time)
            ),
        ));
    }
    for j in s
        .jobs
        .iter()
        .filter(|j| j.phase == "Pending" && j.wait_s >= app.pending_alert_s.max(1))
    {
        v.push((
            "WARN".into(),
            format!(
                "{}/{} Pending for {}",
                j.project,
                j.name,
                fmt_duration(j.wait_s)
            ),
        ));
    }
    v
}

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
    let n_alerts = app.alerts.len();
    if let Some(p) = &app.past {
        // A banner no one can miss: this is not the present.
        let l1 = Line::from(vec![
            Span::styled(
                format!(
                    " PAST t={} (now {}, {} ago) — actions off; [ ] step, :now returns ",
                    fmt_duration(p.at),
                    fmt_duration(app.live_s),
                    fmt_duration(app.live_s.saturating_sub(p.at))
                ),
                app.theme
                    .warn
                    .add_modifier(Modifier::REVERSED | Modifier::BOLD),
            ),
            Span::raw(format!(
                "  GPUs {}/{} used  jobs {} pending {} running  alerts {n_alerts}",
                fmt_cpu(m.allocated.gpu_milli),
                fmt_cpu(m.total.gpu_milli),
                m.jobs.pending,
                m.jobs.running
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
            "{}  t={}  {}  {}x{}  GPUs {}/{} used  ",
            app.status.kind,
            fmt_duration(app.snapshot.time_s),
            if app.paused { "PAUSED" } else { "running" },
            app.speed,
            // When the cluster cannot keep up with the speed asked, say how fast it goes.
            if !app.paused && app.status.achieved > 0.0 && app.status.achieved < 0.8 * app.speed {
                format!(" (at {:.0}x)", app.status.achieved)
            } else {
                String::new()
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
    let l2 = Line::from(format!(
        "GPUs by model (used/idle/total): {}",
        models.join("  ")
    ));
    f.render_widget(Paragraph::new(vec![l1, l2]), area);
}

fn table<'a>(
    app: &App,
    header: Vec<&'a str>,
    widths: Vec<Constraint>,
    rows: Vec<Row<'a>>,
    sel: Option<usize>,
    title: String,
) -> Table<'a> {
    let rows: Vec<Row> = rows
        .into_iter()
        .enumerate()
        .map(|(i, r)| {
            if Some(i) == sel {
                r.style(app.theme.selection)
            } else {
                r
            }
        })
        .collect();
    Table::new(rows, widths)
        .header(Row::new(header).style(app.theme.header))
        .block(Block::default().borders(Borders::TOP).title(title))
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
    let rows: Vec<Row> = rows_idx[start..end]
        .iter()
        .map(|&i| {
            let n = &app.snapshot.nodes[i];
            let status = if n.cordoned {
                format!("{},Cordoned", n.condition)
            } else {
                n.condition.clone()
            };
            let st = if n.condition != "Ready" {
                app.theme.crit
            } else if n.cordoned {
                app.theme.warn
            } else {
                Style::default()
            };
            let disk = (n.disk_used * 100).checked_div(n.disk).unwrap_or(0);
            Row::new(vec![
                Cell::from(n.name.clone()),
                Cell::from(n.pool.clone()),
                Cell::from(n.role.clone()),
                Cell::from(status).style(st),
                Cell::from(format!("{} {}/{}", gpu_grid(n), n.gpus_used, n.gpus_total)),
                Cell::from(
                    n.gpus
                        .first()
                        .map(|g| g.model.clone())
                        .unwrap_or_else(|| "-".into()),
                ),
                Cell::from(format!(
                    "{}/{}",
                    fmt_cpu(n.cpu_allocated),
                    fmt_cpu(n.cpu_milli)
                )),
                Cell::from(format!(
                    "{}/{}",
                    fmt_bytes(n.memory_allocated),
                    fmt_bytes(n.memory)
                )),
                Cell::from(format!("{disk}%")).style(if disk >= 90 {
                    app.theme.crit
                } else {
                    Style::default()
                }),
            ])
        })
        .collect();
    let widths = vec![
        Constraint::Length(12),
        Constraint::Length(14),
        Constraint::Length(10),
        Constraint::Length(22),
        Constraint::Length(13),
        Constraint::Length(8),
        Constraint::Length(9),
        Constraint::Length(13),
        Constraint::Min(5),
    ];
    let t = table(
        app,
        vec![
            "NODE", "POOL", "ROLE", "STATUS", "GPUS", "MODEL", "CPU", "MEMORY", "DISK",
        ],
        widths,
        rows,
        Some(app.selected - start),
        format!(
            " nodes ({}) — Enter GPUs, c cordon, u uncordon, d drain ",
            rows_idx.len()
        ),
    );
    f.render_widget(t, body);
    if let (Some(d), Some(name)) = (detail, &app.expanded) {
        if let Some(n) = app.snapshot.nodes.iter().find(|n| &n.name == name) {
            let rows: Vec<Row> = n
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
                    Row::new(vec![
                        Cell::from(g.index.to_string()),
                        Cell::from(g.model.clone()),
                        Cell::from(format!(
                            "{bar} {}/{}",
                            fmt_bytes(g.mem_allocated),
                            fmt_bytes(g.memory)
                        )),
                        Cell::from(format!("{:>3}% {hist}", g.util_pct)),
                        Cell::from(format!("{}C {}W", g.temp_c, g.power_w)),
                        Cell::from(g.health.clone()).style(if g.health != "Healthy" {
                            app.theme.crit
                        } else {
                            Style::default()
                        }),
                        Cell::from(if g.cordoned { "cordoned" } else { "" }),
                        Cell::from(if g.holders.is_empty() {
                            "-".to_string()
                        } else {
                            g.holders.join(",")
                        }),
                    ])
                })
                .collect();
            let widths = vec![
                Constraint::Length(3),
                Constraint::Length(8),
                Constraint::Length(26),
                Constraint::Length(20),
                Constraint::Length(10),
                Constraint::Length(16),
                Constraint::Length(9),
                Constraint::Min(10),
            ];
            let t = table(
                app,
                vec![
                    "GPU",
                    "MODEL",
                    "MEMORY",
                    "UTIL (history)",
                    "TEMP/PWR",
                    "HEALTH",
                    "CORDON",
                    "HOLDERS",
                ],
                widths,
                rows,
                None,
                format!(" {name} GPUs — :cordon-gpu {name} N "),
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
        cells: n
            .gpus
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
            .collect(),
    }
    .text()
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

fn jobs(f: &mut Frame, app: &App, area: Rect) {
    let rows_idx = &app.rows;
    let (start, end) = window(
        rows_idx.len(),
        app.selected,
        area.height.saturating_sub(2) as usize,
    );
    let rows: Vec<Row> = rows_idx[start..end]
        .iter()
        .map(|&i| {
            let j = &app.snapshot.jobs[i];
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
            Row::new(vec![
                Cell::from(j.project.clone()),
                Cell::from(j.name.clone()),
                Cell::from(j.phase.clone()).style(phase_style),
                Cell::from(j.priority.clone()),
                Cell::from(j.pool.clone()),
                Cell::from(j.request.clone()),
                Cell::from(time),
                Cell::from(match &j.autoscaler_paused_by {
                    Some(who) if j.phase == "Running" => {
                        format!("autoscaler paused by {who}")
                    }
                    _ => j.reasons.first().cloned().unwrap_or_default(),
                }),
            ])
        })
        .collect();
    let widths = vec![
        Constraint::Length(11),
        Constraint::Length(18),
        Constraint::Length(10),
        Constraint::Length(6),
        Constraint::Length(13),
        Constraint::Length(26),
        Constraint::Length(7),
        Constraint::Min(8),
    ];
    let t = table(
        app,
        vec![
            "PROJECT", "NAME", "PHASE", "PRIO", "POOL", "REQUEST", "WAIT/RUN", "REASON",
        ],
        widths,
        rows,
        Some(app.selected - start),
        format!(
            " queue ({}) — Enter explain, +/- priority, r requeue, x cancel ",
            rows_idx.len()
        ),
    );
    f.render_widget(t, area);
}

fn quotas(f: &mut Frame, app: &App, area: Rect) {
    let reqs = &app.rows;
    let [top, bottom] = Layout::vertical([
        Constraint::Min(5),
        Constraint::Length((reqs.len() as u16 + 2).clamp(3, 10)),
    ])
    .areas(area);
    let rows: Vec<Row> = app
        .snapshot
        .quotas
        .iter()
        .take(top.height.saturating_sub(2) as usize)
        .map(|q| {
            let max = q.max.gpu_milli;
            let b = QuotaBar::new(q.used.gpu_milli, q.reserved.gpu_milli, max).text(22);
            Row::new(vec![
                q.project.clone(),
                q.department.clone(),
                q.pool.clone(),
                b,
                format!(
                    "{} / {} / {}",
                    fmt_cpu(q.used.gpu_milli),
                    fmt_cpu(q.reserved.gpu_milli),
                    max.map(fmt_cpu).unwrap_or_else(|| "-".into())
                ),
            ])
        })
        .collect();
    let widths = vec![
        Constraint::Length(12),
        Constraint::Length(12),
        Constraint::Length(13),
        Constraint::Length(22),
        Constraint::Min(12),
    ];
    f.render_widget(
        table(
            app,
            vec![
                "PROJECT",
                "DEPARTMENT",
                "POOL",
                "GPUS (| reserved)",
                "USED/RES/MAX",
            ],
            widths,
            rows,
            None,
            " quotas — GPUs used, | marks reserved ".into(),
        ),
        top,
    );
    let rows: Vec<Row> = reqs
        .iter()
        .map(|&i| {
            let r = &app.snapshot.quota_requests[i];
            Row::new(vec![
                format!("#{}", r.id),
                r.project.clone(),
                r.pool.clone(),
                format!("+{} GPUs", r.gpus),
                r.reason.clone(),
            ])
        })
        .collect();
    let widths = vec![
        Constraint::Length(5),
        Constraint::Length(13),
        Constraint::Length(14),
        Constraint::Length(10),
        Constraint::Min(10),
    ];
    let sel = (!reqs.is_empty()).then_some(app.selected);
    f.render_widget(
        table(
            app,
            vec!["ID", "PROJECT", "POOL", "ASK", "REASON"],
            widths,
            rows,
            sel,
            format!(
                " pending quota requests ({}) — a approve, r reject ",
                reqs.len()
            ),
        ),
        bottom,
    );
}

fn events(f: &mut Frame, app: &App, area: Rect) {
    let idx = &app.rows;
    let (start, end) = window(
        idx.len(),
        app.selected,
        area.height.saturating_sub(2) as usize,
    );
    let rows: Vec<Row> = idx[start..end]
        .iter()
        .map(|&i| {
            let e = &app.snapshot.events[i];
            let st = match e.severity {
                maar_scheduler::Severity::Error => app.theme.crit,
                maar_scheduler::Severity::Warning => app.theme.warn,
                _ => Style::default(),
            };
            Row::new(vec![
                Cell::from(fmt_duration(e.time)),
                Cell::from(e.severity.name()).style(st),
                Cell::from(e.reason.to_string()),
                Cell::from(e.object.clone()),
                Cell::from(e.message.clone()),
            ])
        })
        .collect();
    let widths = vec![
        Constraint::Length(7),
        Constraint::Length(8),
        Constraint::Length(16),
        Constraint::Length(28),
        Constraint::Min(20),
    ];
    f.render_widget(
        table(
            app,
            vec!["TIME", "TYPE", "REASON", "OBJECT", "MESSAGE"],
            widths,
            rows,
            Some(app.selected - start),
            format!(
                " events ({}) — / filters by severity, kind, object or text ",
                idx.len()
            ),
        ),
        area,
    );
}

fn alerts_view(f: &mut Frame, app: &App, area: Rect) {
    let a = &app.alerts;
    let rows: Vec<Row> = a
        .iter()
        .take(area.height.saturating_sub(2) as usize)
        .map(|(sev, msg)| {
            let st = if sev == "CRIT" {
                app.theme.crit.add_modifier(Modifier::BOLD)
            } else {
                app.theme.warn
            };
            Row::new(vec![
                Cell::from(sev.clone()).style(st),
                Cell::from(msg.clone()),
            ])
        })
        .collect();
    f.render_widget(
        table(
            app,
            vec!["LEVEL", "ALERT"],
            vec![Constraint::Length(6), Constraint::Min(20)],
            rows,
            None,
            format!(" alerts ({}) ", a.len()),
        ),
        area,
    );
}

fn cost(f: &mut Frame, app: &App, area: Rect) {
    let c = &app.snapshot.costs;
    let mut rows: Vec<Row> = c
        .projects
        .iter()
        .map(|p| {
            Row::new(vec![
                p.project.clone(),
                p.department.clone(),
                format!("{:.1}", p.gpu_hours),
                format!("{:.2}", p.cost),
            ])
        })
        .collect();
    rows.extend(c.departments.iter().map(|d| {
        Row::new(vec![
            "(department)".into(),
            d.department.clone(),
            format!("{:.1}", d.gpu_hours),
            format!("{:.2}", d.cost),
        ])
    }));
    rows.truncate(area.height.saturating_sub(2) as usize);
    let widths = vec![
        Constraint::Length(14),
        Constraint::Length(16),
        Constraint::Length(10),
        Constraint::Min(10),
    ];
    f.render_widget(
        table(
            app,
            vec!["PROJECT", "DEPARTMENT", "GPU-HOURS", "BILL"],
            widths,
            rows,
            None,
            format!(" cost so far — total {:.2} ", c.total),
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

pub const HELP: &[(&str, &str)] = &[
    ("q, ctrl-c", "quit"),
    ("Tab / shift-Tab", "next / previous screen"),
    (
        ":SCREEN",
        "go to a screen: nodes jobs quotas events alerts cost logs help",
    ),
    ("/", "filter the current table (Esc clears)"),
    ("j k, arrows, g G, PgUp PgDn", "move"),
    ("Enter", "jobs: explain; nodes: show GPUs"),
    ("c u d", "nodes: cordon, uncordon, drain (confirm)"),
    (
        "+ - r x",
        "jobs: priority up/down, requeue, cancel (confirm)",
    ),
    ("a r", "quotas: approve, reject the selected request"),
    ("space, < >", "pause, slower, faster"),
    (
        "[ ]  { }",
        "time travel: back / forward 5 minutes, 1 hour (actions are off in the past)",
    ),
    (
        ":at 2h15m  :now",
        "look at the cluster at a moment of its history; back to now",
    ),
    (
        ":cordon-gpu NODE N  :uncordon-gpu NODE N",
        "cordon / uncordon one GPU",
    ),
    (":approve ID  :reject ID REASON", "decide a quota request"),
    (":priority JOB high|medium|low|N", "set a job's priority"),
    (
        ":requeue JOB  :cancel JOB",
        "requeue or cancel a job (confirm)",
    ),
    (
        ":drain NODE  :cordon NODE",
        "drain (confirm) or cordon a node",
    ),
    (
        ":scale JOB N",
        "set a service's replicas (its autoscaler pauses)",
    ),
    (":submit FILE.yaml", "submit a job"),
    (":speed X", "set the speed (1-86400)"),
    (
        "y  n/Esc  j k",
        "each action first shows what it would do: y does it, n or Esc keeps things, j/k scroll",
    ),
    (
        ":request-quota PROJECT POOL GPUS [reserved] [REASON]",
        "ask for quota (an operator approves it)",
    ),
    (
        ":autoscale JOB",
        "hand a service scaled by hand back to its autoscaler",
    ),
    (":pause  :resume", "pause or resume the simulation"),
    (
        "? or Esc on this screen",
        "back to the screen you came from",
    ),
    (
        "GPU bars",
        "█ used  ▄ partly used (shared)  · free  x unhealthy  c cordoned",
    ),
];

/// Keys that act on one screen, listed first when `?` is pressed there.
pub fn screen_keys(s: Screen) -> &'static [(&'static str, &'static str)] {
    match s {
        Screen::Nodes => &[
            ("Enter", "show / hide the node's GPUs"),
            ("c u d", "cordon, uncordon, drain the node (c, d confirm)"),
            (":cordon-gpu NODE N", "cordon one GPU"),
        ],
        Screen::Jobs => &[
            ("Enter", "explain the job"),
            ("+ -", "priority up / down"),
            ("r x", "requeue, cancel (confirm)"),
        ],
        Screen::Quotas => &[(
            "a r",
            "approve, reject the selected request (reject confirms)",
        )],
        Screen::Events => &[(
            "/severity:warning kind:job object:a100 oom",
            "filter by field and text",
        )],
        _ => &[],
    }
}

/// The role an entry of the help needs (None: anyone may).
pub fn help_needs(keys: &str, screen: Option<Screen>) -> Option<maar_scheduler::Role> {
    use maar_scheduler::Role;
    let admin = keys.starts_with(":approve") || (keys == "a r");
    let operator = keys.starts_with("c u d")
        || keys.starts_with("+ -")
        || keys.starts_with("r x")
        || keys.starts_with("+ - r x")
        || [
            ":cordon",
            ":uncordon",
            ":priority",
            ":requeue",
            ":drain",
            ":scale",
            ":submit",
            ":request-quota",
            ":autoscale",
        ]
        .iter()
        .any(|p| keys.starts_with(p));
    let _ = screen;
    if admin {
        Some(Role::Admin)
    } else if operator {
        Some(Role::Operator)
    } else {
        None
    }
}

fn help(f: &mut Frame, app: &App, area: Rect) {
    let row = |k: &str, v: String| match help_needs(k, Some(app.help_for))
        .filter(|need| *need > app.grant.role)
    {
        Some(need) => Row::new(vec![k.to_string(), format!("{v} — needs {need}")])
            .style(Style::default().add_modifier(Modifier::DIM | Modifier::CROSSED_OUT)),
        None => Row::new(vec![k.to_string(), v]),
    };
    let here = screen_keys(app.help_for)
        .iter()
        .map(|(k, v)| row(k, format!("{v} (on {})", app.help_for.name())));
    let rows: Vec<Row> = std::iter::once(Row::new(vec![
        "you are".to_string(),
        format!("{} ({})", app.grant.role, app.grant.why),
    ]))
    .chain(here)
    .chain(HELP.iter().map(|(k, v)| row(k, v.to_string())))
    .take(area.height.saturating_sub(2) as usize)
    .collect();
    f.render_widget(
        table(
            app,
            vec!["KEYS", "WHAT"],
            {
                let longest = screen_keys(app.help_for)
                    .iter()
                    .chain(HELP.iter())
                    .map(|(k, _)| k.chars().count())
                    .max()
                    .unwrap_or(10) as u16;
                vec![
                    Constraint::Length((longest + 1).min(area.width * 2 / 5)),
                    Constraint::Min(10),
                ]
            },
            rows,
            None,
            " help ".into(),
        ),
        area,
    );
}
