//! The Logs screen: maar's own log lines (tracing, through tui-logger).

use ratatui::layout::Rect;
use ratatui::widgets::{Block, Borders};
use ratatui::Frame;

use super::super::state::App;

pub use super::still::{key, row_key, rows};

/// The screen's own keys.
pub const KEYS: &[(&str, &str)] = &[];

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
        .block(
            Block::default()
                .borders(Borders::TOP)
                .title(" logs (tracing) "),
        );
    f.render_widget(w, area);
}
