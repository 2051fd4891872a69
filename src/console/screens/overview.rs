//! The Overview: GPUs by model, the Pending queue (Enter explains), alerts, events.

use ratatui::layout::{Constraint, Layout, Rect};
use ratatui::style::Style;
use ratatui::text::{Line, Span};
use ratatui::widgets::{Block, Borders, Paragraph};
use ratatui::Frame;

use maar_scheduler::quantity::fmt_duration;
use maar_widgets::columns::{cut_end, Column};
use maar_widgets::{window, GpuGrid};

use crossterm::event::KeyCode;

use super::super::screen::Then;
use super::super::state::App;
use super::super::table::{fitted, plain, Cells};

/// The screen's own keys (the operator's come from the verbs).
pub const KEYS: &[(&str, &str)] = &[];

/// Pending jobs in queue order (the overview's queue), through the filter.
pub fn rows(app: &App) -> Vec<usize> {
    let mut v: Vec<usize> = super::jobs::rows(app)
        .into_iter()
        .filter(|&i| app.snapshot.jobs[i].phase == "Pending")
        .collect();
    v.sort_by_key(|&i| (app.snapshot.jobs[i].queue_position.unwrap_or(u32::MAX), i));
    v
}

/// Enter explains the selected Pending job, as on the Jobs screen.
/// Its rows are jobs (the Pending queue), named as the Jobs screen names them.
pub use super::jobs::row_key;

pub fn key(app: &mut App, k: KeyCode) -> Option<Then> {
    super::jobs::key(app, k)
}

/// GPUs by model, one glyph per GPU (wrapped to the width), with counts and health.
fn gpu_summary(app: &App, width: u16, max_lines: usize) -> Vec<Line<'static>> {
    let by = &app.models;
    // Narrow terminals get the counts in the grid's own glyphs (`8x` down, `16c`
    // cordoned, as the legend says), leaving the cards the room: at 80 columns the
    // words left 40 columns for a100's 64 cards.
    let narrow = width < 120;
    let labels: Vec<String> = by
        .iter()
        .map(|r| {
            let (m, total, used, bad, cordoned) = (&r.model, r.total, r.used, &r.down, &r.cordoned);
            let mut l = if narrow {
                format!("{m:<7} {used:>3}/{total:<3}")
            } else {
                format!("{m:<8} {used:>3}/{total:<3} used")
            };
            if *bad > 0 {
                l.push_str(&if narrow {
                    format!(" {bad}x")
                } else {
                    format!(" {bad} down")
                });
            }
            if *cordoned > 0 {
                l.push_str(&if narrow {
                    format!(" {cordoned}c")
                } else {
                    format!(" {cordoned} cordoned")
                });
            }
            l
        })
        .collect();
    let lw = labels.iter().map(|l| l.chars().count()).max().unwrap_or(0) + 2;
    let room = (width as usize).saturating_sub(lw).max(8);
    // Only the lines that fit are built: each model gets its share, and a grid longer
    // than that ends with `…`.
    let per_model = (max_lines / by.len().max(1)).max(1);
    // More models than lines: the last line names the models left out, with their
    // counts, rather than dropping them without a word.
    let fit = if by.len() > max_lines {
        max_lines.saturating_sub(1)
    } else {
        by.len()
    };
    // Each grid its share (no more than it needs), then the lines left over to the
    // grids that need more, in order.
    let need = |r: &super::super::rows::ModelRow| r.cells.len().div_ceil(room).max(1);
    let mut alloc: Vec<usize> = by
        .iter()
        .take(fit)
        .map(|r| need(r).min(per_model).max(1))
        .collect();
    if by.len() <= max_lines {
        let mut spare = max_lines.saturating_sub(alloc.iter().sum());
        for (a, r) in alloc.iter_mut().zip(by) {
            let extra = need(r).saturating_sub(*a).min(spare);
            *a += extra;
            spare -= extra;
        }
    }
    let mut lines = Vec::new();
    for ((r, label), lines_of) in by.iter().zip(labels).take(fit).zip(alloc) {
        let (cells, bad) = (&r.cells, r.down);
        let shown = cells.len().min(lines_of * room);
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
    if fit < by.len() && max_lines > 0 {
        let rest: Vec<String> = by[fit..]
            .iter()
            .map(|r| format!("{} {}/{}", r.model, r.used, r.total))
            .collect();
        let more = format!(
            "+{} more{}: {}",
            rest.len(),
            if fit == 0 { " models" } else { "" },
            rest.join(", ")
        );
        lines.push(Line::from(cut_end(&more, width)));
    }
    lines
}

/// The first screen: GPUs by model with health, the Pending queue with reasons, open
/// alerts and the newest events, all at once. Wide terminals put the queue and the
/// alerts side by side; narrow ones stack everything with fewer rows each.
pub fn draw(f: &mut Frame, app: &App, area: Rect) {
    // Several clusters: each one's totals first, the GPUs by model summed over all.
    let area = if app.site_rows.len() > 1 {
        let h = (app.site_rows.len() as u16 + 2).min(area.height / 3);
        let [c_area, rest] =
            Layout::vertical([Constraint::Length(h), Constraint::Min(0)]).areas(area);
        draw_sites(f, app, c_area);
        rest
    } else {
        area
    };
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
    let open = super::alerts::open(app) as u16;
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
                // The legend whole at any width (at 80 columns the long one lost its
                // `c cordoned`).
                .title(match (app.site_rows.len() > 1, s_area.width >= 100) {
                    (true, _) => " GPUs by model, all clusters — █ used ▄ shared · free x down c cordoned ",
                    (false, true) => " GPUs by model — █ used ▄ shared · free x down (unhealthy or NotReady node) c cordoned ",
                    (false, false) => " GPUs by model — █ used ▄ shared · free x down c cordoned ",
                }),
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
            let c = super::alerts::alert_cells(app, a);
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
        .map(|e| super::events::event_cells(app, e))
        .collect();
    f.render_widget(
        fitted(
            app,
            super::events::event_columns(),
            rows,
            None,
            " latest events ".into(),
            e_area.width,
        ),
        e_area,
    );
}

/// Each cluster of several: its nodes, GPUs, queue and clock, or why it stopped; the
/// one shown is marked.
fn draw_sites(f: &mut Frame, app: &App, area: Rect) {
    let gpus = maar_scheduler::quantity::fmt_cpu;
    let rows: Vec<Cells> = app
        .site_rows
        .iter()
        .enumerate()
        .map(|(i, r)| {
            vec![
                plain(format!(
                    "{}{}",
                    if i == app.site { "> " } else { "  " },
                    r.name
                )),
                plain(r.nodes.to_string()),
                plain(format!(
                    "{}/{}",
                    gpus(r.gpu_used_milli),
                    gpus(r.gpu_total_milli)
                )),
                plain(r.pending.to_string()),
                plain(r.running.to_string()),
                plain(fmt_duration(r.time_s)),
                match &r.down {
                    Some(why) => (why.clone(), app.theme.crit),
                    None => plain("up"),
                },
            ]
        })
        .collect();
    f.render_widget(
        fitted(
            app,
            vec![
                Column::new("CLUSTER", 9).name(),
                Column::new("NODES", 5),
                Column::new("GPUS USED", 9),
                Column::new("PENDING", 7),
                Column::new("RUNNING", 7),
                Column::new("TIME", 6),
                Column::new("STATE", 6).grow(),
            ],
            rows,
            None,
            format!(
                " {} clusters — C or :cluster NAME|all shows another or all; :submit FILE goes where it starts first ",
                app.site_rows.len()
            ),
            area.width,
        ),
        area,
    );
}
