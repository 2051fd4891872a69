//! The table every screen draws with: cells, columns fitted to the terminal and the
//! content, the selected row, a title with the keys its user may use.

use ratatui::layout::{Constraint, Rect};
use ratatui::style::Style;
use ratatui::widgets::{Block, Borders, Cell, Row, Table};

use maar_widgets::columns::{self, Column};
use maar_widgets::window;

use super::state::App;

/// A table's cells: text and style.
pub type Cells = Vec<(String, Style)>;

pub fn plain(s: impl Into<String>) -> (String, Style) {
    (s.into(), Style::default())
}

/// A table whose columns fit the area and the rows shown (only those are built): each
/// column as wide as its content where there is room, the growing one taking the rest,
/// the least important dropped on narrow terminals, text cut with an ellipsis.
pub fn fitted(
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
pub fn title(app: &App, what: String, look: &str, act: &str) -> String {
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

pub fn bar(used: u64, total: u64, width: usize) -> String {
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

/// A screen's table over its rows (`app.rows`): only the rows that fit `area` around
/// the selection are built (`cells` of a row's index; `None` skips it), fitted to the
/// columns, the selection marked, `title` above.
pub fn rows_table(
    app: &App,
    area: Rect,
    cols: Vec<Column>,
    cells: impl Fn(usize) -> Option<Cells>,
    title: String,
) -> Table<'static> {
    let shown = area.height.saturating_sub(2) as usize;
    // PgUp/PgDn move by what the table shows.
    app.page.set(shown.max(1));
    let (start, end) = window(app.rows.len(), app.selected, shown);
    let rows: Vec<Cells> = app.rows[start..end]
        .iter()
        .filter_map(|&i| cells(i))
        .collect();
    let sel = (!app.rows.is_empty()).then_some(app.selected.saturating_sub(start));
    fitted(app, cols, rows, sel, title, area.width)
}

/// The operator's keys on a screen, from their verbs' declarations, for its title:
/// `c cordon, u uncordon, d drain`; a verb's keys together (`+/- priority`); `(admin)`
/// when one of them needs an admin.
pub fn verb_hints(screen: &str) -> String {
    use maar_scheduler::verbs::VERBS;
    let mut parts = Vec::new();
    let mut admin = false;
    for v in VERBS {
        let keys: Vec<String> = v
            .keys
            .iter()
            .filter(|k| k.screen == screen)
            .map(|k| k.key.to_string())
            .collect();
        if !keys.is_empty() {
            parts.push(format!("{} {}", keys.join("/"), v.name));
            admin |= v.role == maar_scheduler::Role::Admin;
        }
    }
    let mut s = parts.join(", ");
    if admin {
        s.push_str(" (admin)");
    }
    s
}
