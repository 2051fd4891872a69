//! The Quotas screen: each project's quota per pool (reserved, used, borrowed) and the
//! pending quota requests; a r decide the selected request (the verbs' keys). With
//! every cluster's rows, each project's GPUs summed over all of them (CLUSTER
//! `(all)`).

use ratatui::layout::{Constraint, Layout, Rect};
use ratatui::style::{Modifier, Style};
use ratatui::widgets::Paragraph;
use ratatui::Frame;

use maar_scheduler::quantity::{fmt_bytes, fmt_cpu};
use maar_widgets::columns::Column;
use maar_widgets::QuotaBar;

use super::super::state::App;
use super::super::table::{fitted, plain, title, verb_hints, Cells};

pub use super::still::key;

/// The screen's own keys (the operator's come from the verbs).
pub const KEYS: &[(&str, &str)] = &[];

/// Pending quota requests (Quotas screen selection).
pub fn rows(app: &App) -> Vec<usize> {
    (0..app.snapshot.quota_requests.len())
        .filter(|&i| app.snapshot.quota_requests[i].status == "Pending")
        .collect()
}

/// What row `i` is, by name (the selection follows it).
pub fn row_key(app: &App, i: usize) -> String {
    app.snapshot
        .quota_requests
        .get(i)
        .map(|r| format!("{}:{}", r.cluster, r.id))
        .unwrap_or_default()
}

/// `used/max` of one quota dimension (`-` for no limit).
fn used_of(used: u64, max: Option<u64>, f: fn(u64) -> String) -> String {
    format!("{}/{}", f(used), max.map(f).unwrap_or_else(|| "-".into()))
}

pub fn draw(f: &mut Frame, app: &App, area: Rect) {
    let reqs = &app.rows;
    let [top, legend, bottom] = Layout::vertical([
        Constraint::Min(4),
        Constraint::Length(1),
        Constraint::Length((reqs.len() as u16 + 2).clamp(3, 10)),
    ])
    .areas(area);
    let mut rows: Vec<Cells> = app
        .snapshot
        .quotas
        .iter()
        .take(top.height.saturating_sub(2) as usize)
        .map(|q| {
            let max = q.max.gpu_milli;
            let b = QuotaBar::new(q.used.gpu_milli, q.reserved.gpu_milli, max).text(22);
            let mut cells = vec![
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
            ];
            if app.all_rows() {
                cells.insert(0, plain(q.cluster.clone()));
            }
            cells
        })
        .collect();
    if app.all_rows() {
        // Each project over every cluster: the budget a dispatch stays within.
        let room = (top.height.saturating_sub(2) as usize).saturating_sub(rows.len());
        let sums = maar_scheduler::metrics::project_sums(&app.snapshot.quotas);
        rows.extend(sums.into_iter().take(room).map(|p| {
            let b = QuotaBar::new(p.used_gpu_milli, p.reserved_gpu_milli, p.max_gpu_milli).text(22);
            vec![
                plain("(all)"),
                plain(p.project),
                plain(p.department),
                plain("(every pool)"),
                plain(b),
                plain(format!(
                    "{}/{}/{}",
                    fmt_cpu(p.used_gpu_milli),
                    fmt_cpu(p.reserved_gpu_milli),
                    p.max_gpu_milli.map(fmt_cpu).unwrap_or_else(|| "-".into())
                )),
                plain("-"),
                plain("-"),
                plain("-"),
                plain("-"),
            ]
        }));
    }
    let mut cols = vec![
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
    if app.all_rows() {
        cols.insert(0, Column::new("CLUSTER", 4).name());
    }
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
        Paragraph::new(if legend.width >= 112 {
            "bar: # used within reserved  | end of reserved  = borrowed above reserved  . room to max  ! over max;  - no limit"
        } else {
            // Narrow: the same marks in fewer words, none cut.
            "# used  | reserved ends  = borrowed  . room to max  ! over max  - no limit"
        })
        .style(Style::default().add_modifier(Modifier::DIM)),
        legend,
    );
    let rows: Vec<Cells> = reqs
        .iter()
        .map(|&i| {
            let r = &app.snapshot.quota_requests[i];
            let mut cells = vec![
                plain(format!("#{}", r.id)),
                plain(r.project.clone()),
                plain(r.pool.clone()),
                plain(format!(
                    "+{} GPUs{}",
                    r.gpus,
                    if r.reserved { " reserved" } else { "" }
                )),
                plain(r.reason.clone()),
            ];
            if app.all_rows() {
                cells.insert(0, plain(r.cluster.clone()));
            }
            cells
        })
        .collect();
    let mut cols = vec![
        Column::new("ID", 3),
        Column::new("PROJECT", 6).name(),
        Column::new("POOL", 6).name(),
        Column::new("ASK", 8),
        Column::new("REASON", 10).grow(),
    ];
    if app.all_rows() {
        cols.insert(0, Column::new("CLUSTER", 4).name());
    }
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
                &verb_hints("quotas"),
            ),
            bottom.width,
        ),
        bottom,
    );
}
