//! Drawing the frame: the header, the tabs, the current screen (each screen draws
//! itself: `screens/`), the bottom line and the popups. Everything here reads the
//! app's owned snapshot; nothing changes state but one fact a frame gives back: how
//! many rows the table showed (`App::page`, what PgUp and PgDn move by).

use ratatui::layout::{Constraint, Layout, Rect};
use ratatui::style::{Modifier, Style};
use ratatui::text::{Line, Span};
use ratatui::widgets::{Block, Borders, Clear, Paragraph, Tabs, Wrap};
use ratatui::Frame;

use maar_scheduler::quantity::{fmt_cpu, fmt_duration};
use maar_widgets::columns;

use super::screen::Screen;
use super::state::{App, Mode};

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
    let line = match &app.mode {
        // What is typed, its end in sight when longer than the line.
        Mode::Command(s) => columns::cut_start(&format!(":{s}"), area.width),
        Mode::Filter(s) => columns::cut_start(&format!("/{s}"), area.width),
        _ if !app.filter.is_empty() => format!("[filter: {}] {}", app.filter, app.message),
        _ => app.message.clone(),
    };
    // A message longer than the line takes a second one (a refusal's reason was cut
    // mid-word at 80 columns); a longer one still ends with `…`, and is in the log.
    let long = columns::width_of(&line) > area.width as usize;
    let [head, tabs, body, foot] = Layout::vertical([
        Constraint::Length(2),
        Constraint::Length(1),
        Constraint::Min(5),
        Constraint::Length(if long { 2 } else { 1 }),
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
    super::screens::draw(f, app, body);
    let line = if long {
        let (first, rest) = columns::split_line(&line, area.width);
        format!("{first}\n{}", columns::cut_end(&rest, area.width))
    } else {
        line
    };
    f.render_widget(Paragraph::new(line), foot);
    match &app.mode {
        Mode::Explain(ex, at) => {
            let mut text = ex.to_string();
            if !app.elsewhere.is_empty() {
                // Several clusters: how it would fare in each of the others.
                text.push_str("Elsewhere: if it were sent there now\n");
                for l in &app.elsewhere {
                    text.push_str(&format!("  {l}\n"));
                }
            }
            popup(
                f,
                area,
                " explain — j/k PgUp/PgDn scroll, Esc closes ",
                &text,
                *at,
            )
        }
        Mode::Confirm(_, p, at) => popup(
            f,
            area,
            &match app.shown_cluster() {
                "" => " what if — y do it, n/Esc keep as is, j/k scroll ".to_string(),
                c => format!(" what if, in {c} — y do it, n/Esc keep as is, j/k scroll "),
            },
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
    let n_alerts = super::screens::alerts::open(app);
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
            // How to leave first: on a narrow terminal the facts after it are cut,
            // not `:now returns`.
            Span::raw(format!(
                " actions off, :now returns  GPU {}/{} pend {} run {} alerts {n_alerts} {}({})",
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
    // The cluster shown, when there are several.
    let kind = match app.site_label() {
        l if l.is_empty() => app.status.kind.to_string(),
        l => format!("{} {l}", app.status.kind),
    };
    // The alert count, bold in the critical colour when there are any.
    let alerts = Span::styled(
        format!("alerts {n_alerts}"),
        if n_alerts > 0 {
            app.theme.crit.add_modifier(Modifier::BOLD)
        } else {
            Style::default()
        },
    );
    let l1 = Line::from(vec![
        Span::styled("maar ", app.theme.header),
        Span::raw(format!(
            "{}  t={}  {}{}  GPUs {}/{} used  ",
            kind,
            fmt_duration(app.snapshot.time_s),
            // A maar that does not hold the lease says so first: it only watches.
            if !app.status.leading {
                "STANDBY (another maar schedules; this one watches)"
            } else if app.paused {
                "PAUSED"
            } else {
                "running"
            },
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
        alerts.clone(),
        Span::raw(format!("  {} ({})", app.actor.user, app.grant.role)),
        Span::styled(
            if app.status.unreachable.is_some() {
                "  NOT ANSWERING (its API server is out of reach)"
            } else {
                ""
            },
            app.theme.crit.add_modifier(Modifier::BOLD),
        ),
    ]);
    // Narrow terminals get the same facts in fewer words, rather than cut.
    let l1 = if l1.width() > area.width as usize {
        Line::from(vec![
            Span::styled("maar ", app.theme.header),
            Span::raw(format!(
                "{} {} {} {}x GPU {}/{} pend {} run {} ",
                kind,
                fmt_duration(app.snapshot.time_s),
                if !app.status.leading {
                    "STANDBY"
                } else if app.paused {
                    "PAUSED"
                } else {
                    "live"
                },
                app.speed,
                fmt_cpu(m.allocated.gpu_milli),
                fmt_cpu(m.total.gpu_milli),
                m.jobs.pending,
                m.jobs.running
            )),
            alerts,
            Span::raw(format!(" {}({})", app.actor.user, app.grant.role)),
            Span::styled(
                if app.status.unreachable.is_some() {
                    " NOT ANSWERING"
                } else {
                    ""
                },
                app.theme.crit.add_modifier(Modifier::BOLD),
            ),
        ])
    } else {
        l1
    };
    let l2 = format!("GPUs by model (used/idle/total): {}", models.join("  "));
    let l2 = Line::from(columns::cut_end(&l2, area.width));
    f.render_widget(Paragraph::new(vec![l1, l2]), area);
}
