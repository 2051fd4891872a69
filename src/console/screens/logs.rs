//! The Logs screen: maar's own log lines (tracing, through tui-logger).

use crossterm::event::KeyCode;
use ratatui::layout::Rect;
use ratatui::widgets::{Block, Borders};
use ratatui::Frame;
use tui_logger::TuiWidgetEvent as Ev;

use super::super::state::App;

pub use super::still::{key, row_key, rows};

/// The screen's own keys.
pub const KEYS: &[(&str, &str)] = &[
    ("k PgUp j PgDn", "scroll the log back a page, and forward"),
    ("G End Esc", "back to the newest lines, following them"),
];

/// The move keys on this screen scroll the log (a page at a time, as tui-logger
/// scrolls); `true` when the key was one of them.
pub fn scroll(app: &mut App, k: KeyCode) -> bool {
    let ev = match k {
        KeyCode::Char('k') | KeyCode::Up | KeyCode::PageUp => Ev::PrevPageKey,
        KeyCode::Char('j') | KeyCode::Down | KeyCode::PageDown if app.log_back => Ev::NextPageKey,
        KeyCode::Char('j') | KeyCode::Down | KeyCode::PageDown => return true,
        KeyCode::Char('G') | KeyCode::End | KeyCode::Esc if app.log_back => Ev::EscapeKey,
        KeyCode::Char('G') | KeyCode::End => return true,
        _ => return false,
    };
    app.log_view.transition(ev);
    app.log_back = ev != Ev::EscapeKey;
    app.message = if app.log_back {
        "the log is paged (k/j a page back and forward, G follows the newest lines)".into()
    } else {
        "the log follows its newest lines".into()
    };
    true
}

pub fn draw(f: &mut Frame, app: &App, area: Rect) {
    // The tracing log (operator actions, refusals, console errors), kept by tui-logger.
    let w = tui_logger::TuiLoggerWidget::default()
        .style_error(app.theme.crit)
        .style_warn(app.theme.warn)
        .style_info(app.theme.ok)
        .output_separator(' ')
        .output_target(false)
        .output_file(false)
        .output_line(false)
        .state(&app.log_view)
        .block(
            Block::default()
                .borders(Borders::TOP)
                .title(if app.log_back {
                    " logs (tracing), paged — k/j a page, G follows the newest "
                } else {
                    " logs (tracing) — k scrolls back "
                }),
        );
    f.render_widget(w, area);
}
