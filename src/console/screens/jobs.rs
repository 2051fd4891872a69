//! The Jobs screen: Pending in queue order, then Restarting, Running and the recently
//! ended; Enter explains the selected job; + - r x act on it (the verbs' keys).

use ratatui::layout::Rect;
use ratatui::Frame;

use maar_scheduler::quantity::fmt_duration;
use maar_widgets::columns::Column;

use crossterm::event::KeyCode;

use super::super::screen::Then;
use super::super::state::{App, Mode};
use super::super::table::{plain, rows_table, title, verb_hints, Cells};

/// The screen's own keys (the operator's come from the verbs).
pub const KEYS: &[(&str, &str)] = &[("Enter", "explain the job")];

/// Jobs as listed on the Jobs screen: Pending in queue order, then Restarting,
/// Running, and the recently ended ones (newest first, so they can be requeued).
pub fn rows(app: &App) -> Vec<usize> {
    let f = app.filter.to_lowercase();
    let mut v: Vec<usize> = (0..app.snapshot.jobs.len())
        .filter(|&i| {
            let j = &app.snapshot.jobs[i];
            f.is_empty()
                || format!(
                    "{} {}/{} {} {} {} {} {} {}",
                    j.cluster,
                    j.project,
                    j.name,
                    j.phase,
                    j.pool,
                    j.priority,
                    j.kind,
                    j.request,
                    j.reasons.join(" ")
                )
                .to_lowercase()
                .contains(&f)
        })
        .collect();
    let rank = |p: &str| match p {
        "Pending" => 0,
        "Restarting" => 1,
        "Running" => 2,
        _ => 3,
    };
    v.sort_by_key(|&i| {
        let j = &app.snapshot.jobs[i];
        let r = rank(&j.phase);
        let order = match r {
            0 => j.queue_position.unwrap_or(u32::MAX) as i64,
            3 => -(i as i64),
            _ => -(j.wait_s as i64),
        };
        (r, order, i)
    });
    v
}

/// What row `i` is, by name (the selection follows it).
pub fn row_key(app: &App, i: usize) -> String {
    app.snapshot
        .jobs
        .get(i)
        .map(|j| format!("{}:{}/{}", j.cluster, j.project, j.name))
        .unwrap_or_default()
}

/// Enter explains the selected job (in the past too: from the copy looked at).
pub fn key(app: &mut App, k: KeyCode) -> Option<Then> {
    if k != KeyCode::Enter {
        return None;
    }
    let j = app.rows.get(app.selected).map(|&i| &app.snapshot.jobs[i])?;
    let name = format!("{}/{}", j.project, j.name);
    explain(app, &name);
    Some(Then::Done)
}

/// Opens the explanation of job `name` (`:explain JOB`, Enter on its row), as it was
/// when looking at the past.
pub fn explain(app: &mut App, name: &str) {
    let ex = match &app.past {
        Some(p) => {
            let c = p.core.cluster();
            c.job_id(name)
                .map(|id| c.explain(id))
                .map_err(|e| e.to_string())
        }
        None => app.engine.explain(name),
    };
    match ex {
        Ok(ex) => {
            app.elsewhere = app.elsewhere_of(name);
            app.mode = Mode::Explain(Box::new(ex), 0)
        }
        Err(e) => app.message = format!("explain {name}: {e}"),
    }
}

pub fn job_cells(app: &App, j: &maar_scheduler::metrics::JobView) -> Cells {
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
    let mut cells = vec![
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
    ];
    if app.all_rows() {
        cells.insert(0, plain(j.cluster.clone()));
    }
    cells
}

/// The queue's columns; CLUSTER first when every cluster's jobs are listed
/// (`:cluster all`), each row naming its own.
pub fn job_columns(app: &App) -> Vec<Column> {
    let mut cols = vec![
        Column::new("PROJECT", 5).name().drop(2),
        Column::new("NAME", 10).name(),
        Column::new("PHASE", 7),
        Column::new("PRIO", 4).drop(4),
        Column::new("POOL", 6).drop(5),
        Column::new("REQUEST", 14).soft().drop(3),
        Column::new("WAIT/RUN", 5),
        Column::new("STARTS", 6).drop(3),
        Column::new("REASON", 28).grow(),
    ];
    if app.all_rows() {
        cols.insert(0, Column::new("CLUSTER", 4).name());
    }
    cols
}

pub fn draw(f: &mut Frame, app: &App, area: Rect) {
    let t = rows_table(
        app,
        area,
        job_columns(app),
        |i| Some(job_cells(app, &app.snapshot.jobs[i])),
        title(
            app,
            format!("queue ({})", app.rows.len()),
            "Enter explain",
            &verb_hints("jobs"),
        ),
    );
    f.render_widget(t, area);
}
