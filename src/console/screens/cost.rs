//! The Cost screen: GPU-hours and cost by project and model.

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
