//! Columns that fit: widths from the terminal and the content, columns dropped (least
//! important first) rather than squeezed to nothing, and text cut with an ellipsis.
//!
//! Names are cut in the middle (`prod-tr…00019`), so names that differ only at the end
//! never look alike; other text is cut at the end (`quota exceeded: pro…`).

use unicode_width::{UnicodeWidthChar, UnicodeWidthStr};

/// One column of a table.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Column {
    pub header: &'static str,
    /// Widest content among the rows shown (and the header).
    pub want: u16,
    /// Narrowest it may be.
    pub min: u16,
    /// Takes whatever room is left (the last text column: REASON, MESSAGE).
    pub grow: bool,
    /// 0: always shown; otherwise dropped when the terminal is too narrow, highest
    /// first.
    pub drop: u8,
    /// Cut in the middle (names) rather than at the end.
    pub middle: bool,
    /// May be cut (with an ellipsis) down to `min` before other columns are dropped:
    /// long descriptive text such as a request.
    pub soft: bool,
}

impl Column {
    pub fn new(header: &'static str, min: u16) -> Column {
        Column {
            header,
            want: header.width() as u16,
            min: min.max(1),
            grow: false,
            drop: 0,
            middle: false,
            soft: false,
        }
    }
    pub fn soft(mut self) -> Column {
        self.soft = true;
        self
    }
    pub fn grow(mut self) -> Column {
        self.grow = true;
        self
    }
    pub fn drop(mut self, order: u8) -> Column {
        self.drop = order;
        self
    }
    pub fn name(mut self) -> Column {
        self.middle = true;
        self
    }
    /// Widens `want` to fit `text`.
    pub fn fit(&mut self, text: &str) {
        self.want = self.want.max(text.width().min(u16::MAX as usize) as u16);
    }
}

/// The width of each column (`None`: dropped) so that all fit in `width` with one space
/// between columns. Columns are dropped (highest `drop` first) while the others would
/// otherwise be cut below their content or the growing one below its minimum; only
/// when nothing more may be dropped is text cut.
pub fn layout(cols: &[Column], width: u16) -> Vec<Option<u16>> {
    let mut shown: Vec<bool> = vec![true; cols.len()];
    loop {
        let w = allocate(cols, &shown, width as u32);
        let short = cols.iter().enumerate().any(|(i, c)| {
            shown[i]
                && if c.grow || c.soft {
                    w[i] < c.min as u32
                } else {
                    w[i] < c.want as u32
                }
        });
        let victim = cols
            .iter()
            .enumerate()
            .filter(|(i, c)| shown[*i] && c.drop > 0)
            .max_by_key(|(i, c)| (c.drop, *i))
            .map(|x| x.0);
        match (short, victim) {
            (true, Some(i)) => shown[i] = false,
            _ => {
                return w
                    .into_iter()
                    .zip(&shown)
                    .map(|(w, s)| s.then_some(w.min(u16::MAX as u32) as u16))
                    .collect()
            }
        }
    }
}

/// Widths for the shown columns: each its minimum, then the fixed ones up to their
/// content (most important first), then the growing ones share the rest.
fn allocate(cols: &[Column], shown: &[bool], width: u32) -> Vec<u32> {
    let n = shown.iter().filter(|s| **s).count() as u32;
    let mut w: Vec<u32> = cols
        .iter()
        .zip(shown)
        .map(|(c, s)| if *s { c.min as u32 } else { 0 })
        .collect();
    let used: u32 = w.iter().sum::<u32>() + n.saturating_sub(1);
    let mut left = width.saturating_sub(used);
    let mut order: Vec<usize> = (0..cols.len())
        .filter(|&i| shown[i] && !cols[i].grow)
        .collect();
    order.sort_by_key(|&i| (cols[i].soft, cols[i].drop, i));
    for i in order {
        let more = (cols[i].want as u32).saturating_sub(w[i]).min(left);
        w[i] += more;
        left -= more;
    }
    let growing: Vec<usize> = (0..cols.len())
        .filter(|&i| shown[i] && cols[i].grow)
        .collect();
    if !growing.is_empty() {
        let each = left / growing.len() as u32;
        for (k, &i) in growing.iter().enumerate() {
            w[i] += if k + 1 == growing.len() {
                left - each * (growing.len() as u32 - 1)
            } else {
                each
            };
        }
    }
    w
}

/// `text` cut to `width` columns, ending with `…` when cut.
pub fn cut_end(text: &str, width: u16) -> String {
    let width = width as usize;
    if text.width() <= width {
        return text.to_string();
    }
    if width == 0 {
        return String::new();
    }
    let mut out = String::new();
    let mut used = 0;
    for c in text.chars() {
        let cw = c.width().unwrap_or(0);
        if used + cw + 1 > width {
            break;
        }
        out.push(c);
        used += cw;
    }
    out.push('…');
    out
}

/// How many terminal columns `text` takes (a wide character two).
pub fn width_of(text: &str) -> usize {
    text.width()
}

/// `text` cut to its last `width` columns, starting with `…` when cut (a line being
/// typed, its end in sight).
pub fn cut_start(text: &str, width: u16) -> String {
    let width = width as usize;
    if text.width() <= width {
        return text.to_string();
    }
    if width == 0 {
        return String::new();
    }
    let mut kept: Vec<char> = Vec::new();
    let mut used = 0;
    for c in text.chars().rev() {
        let cw = c.width().unwrap_or(0);
        if used + cw + 1 > width {
            break;
        }
        kept.push(c);
        used += cw;
    }
    std::iter::once('…').chain(kept.into_iter().rev()).collect()
}

/// The first line of `text` within `width` columns, broken at the last space that fits
/// when there is one past half the width (a word is not cut in two), and the rest.
pub fn split_line(text: &str, width: u16) -> (String, String) {
    let width = width as usize;
    let mut used = 0;
    let mut end = text.len();
    let mut space = None;
    for (i, c) in text.char_indices() {
        let cw = c.width().unwrap_or(0);
        if used + cw > width {
            end = i;
            break;
        }
        if c == ' ' && used > width / 2 {
            space = Some(i);
        }
        used += cw;
    }
    if end == text.len() {
        return (text.to_string(), String::new());
    }
    let at = space.unwrap_or(end);
    (text[..at].to_string(), text[at..].trim_start().to_string())
}

/// `text` cut to `width` columns in the middle (`prod-tr…00019`), keeping its end.
pub fn cut_middle(text: &str, width: u16) -> String {
    let width = width as usize;
    if text.width() <= width {
        return text.to_string();
    }
    if width < 4 {
        return cut_end(text, width as u16);
    }
    let keep = width - 1;
    let tail_w = keep / 2;
    let head_w = keep - tail_w;
    let mut head = String::new();
    let mut used = 0;
    for c in text.chars() {
        let cw = c.width().unwrap_or(0);
        if used + cw > head_w {
            break;
        }
        head.push(c);
        used += cw;
    }
    let mut tail: Vec<char> = Vec::new();
    let mut used = 0;
    for c in text.chars().rev() {
        let cw = c.width().unwrap_or(0);
        if used + cw > tail_w {
            break;
        }
        tail.push(c);
        used += cw;
    }
    tail.reverse();
    format!("{head}…{}", tail.into_iter().collect::<String>())
}

/// A cell's text cut to its column.
pub fn cut(col: &Column, text: &str, width: u16) -> String {
    if col.middle {
        cut_middle(text, width)
    } else {
        cut_end(text, width)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_line_is_cut_at_its_start_or_split_between_words_by_width() {
        assert_eq!(cut_start("abcdef", 4), "…def");
        assert_eq!(cut_start("abc", 4), "abc");
        // Wide characters count two columns.
        assert_eq!(cut_start("ab日本語", 5), "…本語");
        assert_eq!(
            split_line("one two three four", 12),
            ("one two".into(), "three four".into())
        );
        assert_eq!(split_line("short", 12), ("short".into(), String::new()));
        assert_eq!(
            split_line("abcdefghij", 4),
            ("abcd".into(), "efghij".into())
        );
        let (a, _) = split_line("日本語日本語", 5);
        assert_eq!(a, "日本");
    }

    #[test]
    fn columns_fit_content_then_grow_then_drop() {
        let mut name = Column::new("NAME", 8).name();
        name.fit("prod-train-00019");
        let mut pool = Column::new("POOL", 6).drop(2);
        pool.fit("training-gpu");
        let reason = Column::new("REASON", 20).grow();
        // Wide: everything at its want, the reason takes the rest.
        let w = layout(&[name, pool, reason], 100);
        assert_eq!(w, vec![Some(16), Some(12), Some(100 - 16 - 12 - 2)]);
        // Narrower: the pool goes before the name is cut or the reason squeezed
        // below its minimum.
        let w = layout(&[name, pool, reason], 45);
        assert_eq!(w, vec![Some(16), None, Some(45 - 16 - 1)]);
        // A soft column is cut before anything is dropped for it.
        let mut req = Column::new("REQUEST", 10).soft().drop(1);
        req.fit("4x GPU [a100,h100], 32 CPU, 256Gi mem");
        let w = layout(&[name, req, reason], 60);
        assert_eq!(w, vec![Some(16), Some(60 - 16 - 20 - 2), Some(20)]);
        // Too narrow for even that: nothing more may go, so the name is cut.
        let w = layout(&[name, pool, reason], 30);
        assert_eq!(w[1], None);
        assert_eq!(w[0].unwrap() + w[2].unwrap() + 1, 30);
    }

    #[test]
    fn cut_names_keep_their_ends_and_text_ends_with_an_ellipsis() {
        assert_eq!(cut_middle("prod-train-00019", 11), "prod-…00019");
        assert_ne!(
            cut_middle("prod-train-00019", 11),
            cut_middle("prod-train-00018", 11)
        );
        assert_eq!(cut_end("quota exceeded", 8), "quota e…");
        assert_eq!(cut_end("short", 8), "short");
        assert_eq!(cut_middle("short", 8), "short");
        assert_eq!(cut_end("anything", 0), "");
    }
}
