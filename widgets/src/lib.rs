//! # maar-widgets
//!
//! Small ratatui widgets the console is built from. Each renders from plain values it is
//! given — no cluster types, no state of its own — so any view can reuse it.
//!
//! - [`QuotaBar`]: usage against a quota, with the reserved amount marked and the part
//!   above it (borrowed) drawn differently.
//! - [`GpuGrid`]: one glyph per GPU: free, partly used, full, cordoned, unhealthy.
//! - [`spark`]: a text sparkline of recent values (for table cells).
//! - [`window`]: the rows of a long list that fit on screen around the selection, so
//!   tables build only visible rows.
//! - [`columns`]: column widths that fit the terminal and the content, and text cut
//!   with an ellipsis (names in the middle).

pub mod columns;

use ratatui::buffer::Buffer;
use ratatui::layout::Rect;
use ratatui::style::Style;
use ratatui::widgets::Widget;

/// Usage against a quota: `[###|==....]`: `#` used within reserved, `|` the reserved
/// mark, `=` used above reserved (borrowed), `.` room up to max, `!` beyond max.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct QuotaBar {
    pub used: u64,
    pub reserved: u64,
    /// The limit; `None` scales the bar to what is used or reserved.
    pub max: Option<u64>,
    pub style: Style,
    pub borrowed_style: Style,
}

impl QuotaBar {
    pub fn new(used: u64, reserved: u64, max: Option<u64>) -> QuotaBar {
        QuotaBar {
            used,
            reserved,
            max,
            style: Style::default(),
            borrowed_style: Style::default(),
        }
    }

    /// The bar as text of `width` cells (brackets included).
    pub fn text(&self, width: usize) -> String {
        let inner = width.saturating_sub(2);
        if inner == 0 {
            return String::new();
        }
        let scale = self.max.unwrap_or(self.used.max(self.reserved)).max(1);
        let cell =
            |v: u64| ((v as u128 * inner as u128).div_ceil(scale as u128) as usize).min(inner);
        let used = cell(self.used);
        let reserved = cell(self.reserved.min(scale));
        let mut s = String::with_capacity(width);
        s.push('[');
        for i in 0..inner {
            let c = if i < used {
                if i < reserved {
                    '#'
                } else {
                    '='
                }
            } else {
                '.'
            };
            s.push(if reserved > 0 && i + 1 == reserved && i >= used {
                '|'
            } else {
                c
            });
        }
        if self.max.is_some_and(|m| self.used > m) {
            s.push('!');
        } else {
            s.push(']');
        }
        s
    }
}

impl Widget for QuotaBar {
    fn render(self, area: Rect, buf: &mut Buffer) {
        if area.height == 0 {
            return;
        }
        let text = self.text(area.width as usize);
        for (i, ch) in text.chars().enumerate() {
            let style = if ch == '=' {
                self.borrowed_style
            } else {
                self.style
            };
            buf[(area.x + i as u16, area.y)]
                .set_char(ch)
                .set_style(style);
        }
    }
}

/// State of one GPU for the grid.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum GpuCell {
    Free,
    /// Partly used (shared slices), in percent.
    Partial(u8),
    Full,
    Cordoned,
    Unhealthy,
}

/// One glyph per GPU: `·` free, `▄` partly used, `█` full, `c` cordoned, `x` unhealthy.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct GpuGrid {
    pub cells: Vec<GpuCell>,
}

impl GpuGrid {
    pub fn glyph(c: GpuCell) -> char {
        match c {
            GpuCell::Free => '·',
            GpuCell::Partial(_) => '▄',
            GpuCell::Full => '█',
            GpuCell::Cordoned => 'c',
            GpuCell::Unhealthy => 'x',
        }
    }

    pub fn text(&self) -> String {
        self.cells.iter().map(|&c| Self::glyph(c)).collect()
    }
}

impl Widget for GpuGrid {
    fn render(self, area: Rect, buf: &mut Buffer) {
        for (i, c) in self.cells.iter().take(area.width as usize).enumerate() {
            buf[(area.x + i as u16, area.y)].set_char(Self::glyph(*c));
        }
    }
}

/// A text sparkline of `values` scaled to `max` (eight levels).
pub fn spark(values: impl IntoIterator<Item = u64>, max: u64) -> String {
    const LEVELS: [char; 8] = ['▁', '▂', '▃', '▄', '▅', '▆', '▇', '█'];
    let max = max.max(1);
    values
        .into_iter()
        .map(|v| LEVELS[((v.min(max) * 7 + max / 2) / max) as usize])
        .collect()
}

/// The window `[start, end)` of a list of `len` rows that fits `height` lines and keeps
/// `selected` visible (scrolling as little as possible).
pub fn window(len: usize, selected: usize, height: usize) -> (usize, usize) {
    let h = height.max(1);
    let start = if selected >= h { selected + 1 - h } else { 0 };
    (start.min(len), (start + h).min(len))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quota_bar_marks_reserved_and_borrowed() {
        // 10 cells inside: reserved 4 of 10 -> mark at cell 4; used 6 -> 4 '#' + 2 '='.
        assert_eq!(QuotaBar::new(6, 4, Some(10)).text(12), "[####==....]");
        // Used below reserved: the mark shows where reserved ends.
        assert_eq!(QuotaBar::new(2, 4, Some(10)).text(12), "[##.|......]");
        // Over max (a quota cut below usage): '!' closes the bar.
        assert_eq!(QuotaBar::new(12, 0, Some(10)).text(12), "[==========!");
        assert_eq!(QuotaBar::new(0, 0, None).text(6), "[....]");
        assert_eq!(QuotaBar::new(5, 5, None).text(2), "");
    }

    #[test]
    fn quota_bar_renders_into_a_buffer() {
        let mut buf = Buffer::empty(Rect::new(0, 0, 12, 1));
        QuotaBar::new(6, 4, Some(10)).render(Rect::new(0, 0, 12, 1), &mut buf);
        let line: String = (0..12).map(|x| buf[(x, 0)].symbol().to_string()).collect();
        assert_eq!(line, "[####==....]");
    }

    #[test]
    fn gpu_grid_and_spark() {
        let g = GpuGrid {
            cells: vec![
                GpuCell::Full,
                GpuCell::Partial(40),
                GpuCell::Free,
                GpuCell::Cordoned,
                GpuCell::Unhealthy,
            ],
        };
        assert_eq!(g.text(), "█▄·cx");
        assert_eq!(spark([0, 50, 100], 100), "▁▅█");
        assert_eq!(spark([], 100), "");
    }

    #[test]
    fn window_keeps_the_selection_visible() {
        assert_eq!(window(100, 0, 10), (0, 10));
        assert_eq!(window(100, 9, 10), (0, 10));
        assert_eq!(window(100, 10, 10), (1, 11));
        assert_eq!(window(100, 99, 10), (90, 100));
        assert_eq!(window(3, 2, 10), (0, 3));
        assert_eq!(window(0, 0, 10), (0, 0));
    }
}
