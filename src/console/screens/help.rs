//! The Help screen: the keys of the screen it was asked on first, then the console's
//! own keys and `:` commands, each screen's operator keys and every `:` command, from
//! their declarations ([`maar_scheduler::verbs::VERBS`]); dimmed with the role needed
//! where the user lacks it.

use ratatui::layout::Rect;
use ratatui::style::{Modifier, Style};
use ratatui::Frame;

use maar_widgets::columns::Column;
use maar_widgets::window;

use super::super::screen::Screen;
use super::super::state::App;
use super::super::table::{fitted, plain, Cells};
pub use super::still::key;

/// The screen's own keys.
pub const KEYS: &[(&str, &str)] = &[];

/// The console's own keys and `:` commands (the operator's commands and their keys
/// come from their declarations, [`maar_scheduler::verbs::VERBS`]).
pub const HELP: &[(&str, &str)] = &[
    ("q, ctrl-c", "quit"),
    ("Tab / shift-Tab", "next / previous screen"),
    (
        "C  :cluster NAME|all",
        "with several clusters: the next one, one by name, or all (every cluster's jobs and nodes with a CLUSTER column; acting on a row acts in its cluster); :submit goes where the job starts first",
    ),
    (
        ":SCREEN  1-9  Tab",
        "go to a screen: overview nodes jobs quotas events alerts cost logs help (1-9 in that order, Tab the next)",
    ),
    ("/", "filter the current table (Esc clears)"),
    ("j k, arrows, g G, PgUp PgDn", "move"),
    (
        "Enter",
        "jobs: explain; nodes: show GPUs; alerts: go to its job or node",
    ),
    ("A", "alerts: show acknowledged and resolved too"),
    ("space, < >", "pause, slower, faster"),
    (
        "[ ]  { }",
        "time travel: back / forward 5 minutes, 1 hour (actions are off in the past)",
    ),
    (
        ":at 2h15m  :now",
        "look at the cluster at a moment of its history; back to now",
    ),
    (":explain JOB", "why a job waits, as `maar explain JOB` (Enter on its row too)"),
    (":speed X", "set the speed (1-86400)"),
    (":pause  :resume", "pause or resume the simulation"),
    (
        "y  n/Esc  j k",
        "each action first shows what it would do (acknowledging an alert is done at once): y does it, n or Esc keeps things, j/k scroll",
    ),
    (
        "? or Esc on this screen",
        "back to the screen you came from",
    ),
    (
        "GPU bars",
        "█ used  ▄ partly used (shared)  · free  x unhealthy or on a NotReady node  c cordoned (a card, or a free card of a cordoned node)",
    ),
];

/// A verb's key on a screen in words: "cordon the node (previewed first)".
fn key_does(v: &maar_scheduler::verbs::Verb, does: &str) -> String {
    if v.at_once {
        does.to_string()
    } else if v.destructive {
        format!("{does} (previewed, confirm; takes work away)")
    } else {
        format!("{does} (previewed, confirm)")
    }
}

/// Every help row as (keys, what, the role it needs): the screen's keys first, then
/// the console's, then each screen's operator keys, then every `:` command.
pub fn help_entries(on: Screen) -> Vec<(String, String, Option<maar_scheduler::Role>)> {
    use maar_scheduler::verbs::VERBS;
    let mut out: Vec<(String, String, Option<maar_scheduler::Role>)> = super::keys(on)
        .iter()
        .map(|(k, v)| (k.to_string(), format!("{v} (on {})", on.name()), None))
        .collect();
    for v in VERBS {
        for k in v.keys.iter().filter(|k| k.screen == on.name()) {
            out.push((
                k.key.to_string(),
                format!("{} (on {})", key_does(v, k.does), on.name()),
                Some(v.role),
            ));
        }
    }
    out.extend(
        HELP.iter()
            .map(|(k, v)| (k.to_string(), v.to_string(), None)),
    );
    for s in Screen::ALL {
        let keys: Vec<_> = VERBS
            .iter()
            .flat_map(|v| v.keys.iter().map(move |k| (v, k)))
            .filter(|(_, k)| k.screen == s.name())
            .collect();
        if keys.is_empty() {
            continue;
        }
        let role = keys.iter().map(|(v, _)| v.role).max();
        out.push((
            keys.iter()
                .map(|(_, k)| k.key.to_string())
                .collect::<Vec<_>>()
                .join(" "),
            format!(
                "{}: {}",
                s.name(),
                keys.iter()
                    .map(|(_, k)| k.does)
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
            role,
        ));
    }
    for v in VERBS {
        out.push((format!(":{}", v.usage()), v.doc.to_string(), Some(v.role)));
    }
    out
}

/// The help's rows: the keys of the screen it was asked on, then every key; each with
/// the role it needs when the user lacks it.
pub fn help_rows(app: &App) -> Vec<Cells> {
    let row = |k: String, v: String, need: Option<maar_scheduler::Role>| -> Cells {
        match need.filter(|need| *need > app.grant.role) {
            Some(need) => {
                let dim = Style::default().add_modifier(Modifier::DIM | Modifier::CROSSED_OUT);
                vec![(k, dim), (format!("{v} — needs {need}"), dim)]
            }
            None => vec![plain(k), plain(v)],
        }
    };
    std::iter::once(vec![
        plain("you are"),
        plain(format!(
            "{} {} ({})",
            app.actor.user, app.grant.role, app.grant.why
        )),
    ])
    .chain(
        help_entries(app.help_for)
            .into_iter()
            .map(|(k, v, need)| row(k, v, need)),
    )
    .collect()
}

pub fn draw(f: &mut Frame, app: &App, area: Rect) {
    let all = help_rows(app);
    // The selected line whole beneath the table where a narrow terminal cuts it (at 80
    // columns a few keys' explanations ended mid-sentence).
    let selected: Option<String> = all.get(app.selected).map(|r| {
        r.iter()
            .map(|c| c.0.as_str())
            .collect::<Vec<_>>()
            .join(": ")
    });
    let whole = selected.filter(|t| {
        maar_widgets::columns::width_of(t) + 4 > area.width as usize && area.height > 8
    });
    let area = match &whole {
        Some(t) => {
            let [table, below] = ratatui::layout::Layout::vertical([
                ratatui::layout::Constraint::Min(4),
                ratatui::layout::Constraint::Length(3),
            ])
            .areas(area);
            f.render_widget(
                ratatui::widgets::Paragraph::new(t.clone())
                    .wrap(ratatui::widgets::Wrap { trim: true })
                    .style(Style::default().add_modifier(Modifier::DIM)),
                below,
            );
            table
        }
        None => area,
    };
    let (start, end) = window(
        all.len(),
        app.selected,
        area.height.saturating_sub(2) as usize,
    );
    let n = all.len();
    let rows: Vec<Cells> = all.into_iter().skip(start).take(end - start).collect();
    // The keys give way to what they do: at 80 columns the longest `:` command took
    // 60 and left each line its first 20 characters.
    let cols = vec![
        Column::new("KEYS", 10).soft(),
        Column::new("WHAT", 40).grow(),
    ];
    f.render_widget(
        fitted(
            app,
            cols,
            rows,
            Some(app.selected.saturating_sub(start)),
            format!(
                " help — lines {}-{} of {n}, j/k PgUp/PgDn scroll, ? or Esc back ",
                start + 1,
                end
            ),
            area.width,
        ),
        area,
    );
}

/// A row by its place: the help's rows do not reorder, and the selection (which
/// scrolls the help) must stay where it was when a new view comes (with the empty
/// name of a screen without rows, it went back to the first line five times a second:
/// j, PgDn and G seemed to do nothing, and half the help could not be read at 80x24).
pub fn row_key(_app: &App, i: usize) -> String {
    i.to_string()
}

/// Its rows: the "you are" line, then every entry.
pub fn rows(app: &App) -> Vec<usize> {
    (0..1 + help_entries(app.help_for).len()).collect()
}
