//! The Cost screen: GPU-hours and cost by project and department; with every
//! cluster's rows (`:cluster all`), each row's cluster first and the total over all.

use ratatui::layout::Rect;
use ratatui::Frame;

use maar_widgets::columns::Column;

use super::super::state::App;
use super::super::table::{fitted, plain, Cells};

pub use super::still::{key, row_key, rows};

/// The screen's own keys.
pub const KEYS: &[(&str, &str)] = &[];

pub fn draw(f: &mut Frame, app: &App, area: Rect) {
    let c = &app.snapshot.costs;
    let all = app.all_rows();
    let row = |cluster: &str, first: String, department: &str, hours: f64, cost: f64| {
        let mut cells = vec![
            plain(first),
            plain(department.to_string()),
            plain(format!("{hours:.1}")),
            plain(format!("{cost:.2}")),
        ];
        if all {
            cells.insert(0, plain(cluster.to_string()));
        }
        cells
    };
    let mut rows: Vec<Cells> = c
        .projects
        .iter()
        .map(|p| {
            row(
                &p.cluster,
                p.project.clone(),
                &p.department,
                p.gpu_hours,
                p.cost,
            )
        })
        .collect();
    rows.extend(c.departments.iter().map(|d| {
        row(
            &d.cluster,
            "(department)".into(),
            &d.department,
            d.gpu_hours,
            d.cost,
        )
    }));
    rows.truncate(area.height.saturating_sub(2) as usize);
    let mut cols = vec![
        Column::new("PROJECT", 8).name(),
        Column::new("DEPARTMENT", 8).name(),
        Column::new("GPU-HOURS", 9),
        Column::new("BILL", 8).grow(),
    ];
    if all {
        cols.insert(0, Column::new("CLUSTER", 4).name());
    }
    f.render_widget(
        fitted(
            app,
            cols,
            rows,
            None,
            format!(
                " cost so far — total {:.2}{} ",
                c.total,
                if all { " over every cluster" } else { "" }
            ),
            area.width,
        ),
        area,
    );
}
