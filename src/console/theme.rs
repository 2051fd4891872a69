//! Themes: the styles the console draws with, from `themes/*.yaml` (built in) or a file.
//!
//! Chosen by `--theme NAME|FILE`, else `theme:` in `$XDG_CONFIG_HOME/maar/config.yaml`
//! (or `~/.config/maar/config.yaml`), else `dark`. `NO_COLOR` forces `mono`. Built-in
//! themes use the 16 ANSI colour names so every terminal shows them; meaning never rests
//! on colour alone (selection is reverse video, severity is spelled out).

use std::path::{Path, PathBuf};
use std::str::FromStr;

use ratatui::style::{Color, Modifier, Style};
use serde::Deserialize;

use crate::load::InputError;

pub const BUILT_IN: [(&str, &str); 4] = [
    ("dark", include_str!("../../themes/dark.yaml")),
    ("light", include_str!("../../themes/light.yaml")),
    (
        "high-contrast",
        include_str!("../../themes/high-contrast.yaml"),
    ),
    ("mono", include_str!("../../themes/mono.yaml")),
];

/// A colour name (`red`, `lightblue`, `"#rrggbb"` — quoted, as `#` starts a YAML
/// comment — or a 256-colour index).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ColorName(pub Color);

impl<'de> Deserialize<'de> for ColorName {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = String::deserialize(d)?;
        Color::from_str(&s).map(ColorName).map_err(|_| {
            serde::de::Error::custom(format!(
                "unknown colour `{s}` (a name such as red or lightblue, #rrggbb, or 0-255)"
            ))
        })
    }
}

#[derive(Clone, Copy, Debug, Default, Deserialize, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
pub struct StyleSpec {
    #[serde(default)]
    pub fg: Option<ColorName>,
    #[serde(default)]
    pub bg: Option<ColorName>,
    #[serde(default)]
    pub bold: bool,
    #[serde(default)]
    pub italic: bool,
    #[serde(default)]
    pub underlined: bool,
    #[serde(default)]
    pub reverse: bool,
}

impl StyleSpec {
    pub fn style(&self) -> Style {
        let mut s = Style::default();
        if let Some(c) = self.fg {
            s = s.fg(c.0);
        }
        if let Some(c) = self.bg {
            s = s.bg(c.0);
        }
        for (on, m) in [
            (self.bold, Modifier::BOLD),
            (self.italic, Modifier::ITALIC),
            (self.underlined, Modifier::UNDERLINED),
            (self.reverse, Modifier::REVERSED),
        ] {
            if on {
                s = s.add_modifier(m);
            }
        }
        s
    }
}

#[derive(Clone, Debug, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct ThemeFile {
    pub name: String,
    pub header: StyleSpec,
    pub selection: StyleSpec,
    pub ok: StyleSpec,
    pub warn: StyleSpec,
    pub crit: StyleSpec,
    pub pending: StyleSpec,
    pub running: StyleSpec,
    pub restarting: StyleSpec,
    pub borrowed: StyleSpec,
    pub dim: StyleSpec,
}

/// Resolved styles.
#[derive(Clone, Debug, PartialEq)]
pub struct Theme {
    pub name: String,
    pub header: Style,
    pub selection: Style,
    pub ok: Style,
    pub warn: Style,
    pub crit: Style,
    pub pending: Style,
    pub running: Style,
    pub restarting: Style,
    pub borrowed: Style,
    pub dim: Style,
}

impl From<ThemeFile> for Theme {
    fn from(t: ThemeFile) -> Theme {
        Theme {
            name: t.name,
            header: t.header.style(),
            selection: t.selection.style(),
            ok: t.ok.style(),
            warn: t.warn.style(),
            crit: t.crit.style(),
            pending: t.pending.style(),
            running: t.running.style(),
            restarting: t.restarting.style(),
            borrowed: t.borrowed.style(),
            dim: t.dim.style(),
        }
    }
}

fn parse(file: &str, text: &str) -> Result<Theme, InputError> {
    let t: ThemeFile = crate::load::yaml(file, text)?;
    Ok(t.into())
}

/// A built-in theme by name.
pub fn built_in(name: &str) -> Option<Theme> {
    BUILT_IN.iter().find(|(n, _)| *n == name).map(|(n, text)| {
        parse(&format!("<built-in themes/{n}.yaml>"), text).expect("built-in themes parse")
    })
}

/// A theme by name or file path.
pub fn load(name_or_path: &str) -> Result<Theme, InputError> {
    if let Some(t) = built_in(name_or_path) {
        return Ok(t);
    }
    let p = Path::new(name_or_path);
    if !p.exists() {
        return Err(InputError {
            file: name_or_path.to_string(),
            line: None,
            column: None,
            field: None,
            message: format!(
                "no such theme: not a built-in ({}) and no such file",
                BUILT_IN.iter().map(|t| t.0).collect::<Vec<_>>().join(", ")
            ),
        });
    }
    let text = crate::load::read(p)?;
    parse(name_or_path, &text)
}

/// The config file, if any (`crate::config::path`).
pub fn config_path() -> Option<PathBuf> {
    crate::config::path()
}

/// The theme to use: NO_COLOR, then `--theme`, then the config file, then `dark`.
pub fn choose(flag: Option<&str>) -> Result<Theme, InputError> {
    let no_color = std::env::var_os("NO_COLOR").is_some_and(|v| !v.is_empty());
    choose_with(no_color, flag, config_path().as_deref())
}

/// [`choose`] with its inputs given (no environment read).
pub fn choose_with(
    no_color: bool,
    flag: Option<&str>,
    config: Option<&Path>,
) -> Result<Theme, InputError> {
    if no_color {
        return Ok(built_in("mono").expect("mono"));
    }
    if let Some(f) = flag {
        return load(f);
    }
    if let Some(p) = config.filter(|p| p.exists()) {
        let c = crate::config::read(p)?;
        if let Some(t) = c.theme {
            return load(&t);
        }
    }
    Ok(built_in("dark").expect("dark"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn built_in_themes_parse_and_differ() {
        let all: Vec<Theme> = BUILT_IN.iter().map(|(n, _)| built_in(n).unwrap()).collect();
        assert_eq!(all.len(), 4);
        for t in &all {
            // Selection must read without colour: reverse video or a background.
            assert!(
                t.selection.add_modifier.contains(Modifier::REVERSED) || t.selection.bg.is_some(),
                "{}",
                t.name
            );
        }
        let mono = built_in("mono").unwrap();
        for s in [
            mono.header,
            mono.selection,
            mono.ok,
            mono.warn,
            mono.crit,
            mono.pending,
            mono.running,
            mono.dim,
        ] {
            assert!(s.fg.is_none() && s.bg.is_none(), "mono has no colour");
        }
        assert_ne!(built_in("dark").unwrap(), built_in("light").unwrap());
    }

    #[test]
    fn choice_order_and_errors() {
        let dir = std::env::temp_dir().join(format!("maar-theme-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        assert_eq!(
            choose_with(true, Some("light"), None).unwrap().name,
            "mono",
            "NO_COLOR wins"
        );
        assert_eq!(
            choose_with(false, Some("light"), None).unwrap().name,
            "light"
        );
        assert_eq!(choose_with(false, None, None).unwrap().name, "dark");
        let cfg = dir.join("config.yaml");
        std::fs::write(&cfg, "theme: high-contrast\n").unwrap();
        assert_eq!(
            choose_with(false, None, Some(&cfg)).unwrap().name,
            "high-contrast"
        );
        let custom = dir.join("mine.yaml");
        let text = BUILT_IN[0]
            .1
            .replace("name: dark", "name: mine")
            .replace("fg: cyan", "fg: chartreuse");
        std::fs::write(&custom, &text).unwrap();
        let e = load(custom.to_str().unwrap()).unwrap_err();
        assert!(
            e.line.is_some() && e.message.contains("unknown colour `chartreuse`"),
            "{e}"
        );
        // Hex colours need quotes in YAML (an unquoted # starts a comment).
        std::fs::write(&custom, text.replace("chartreuse", "\"#ff8800\"")).unwrap();
        assert_eq!(load(custom.to_str().unwrap()).unwrap().name, "mine");
        assert!(load("no-such-theme")
            .unwrap_err()
            .message
            .contains("not a built-in"));
        std::fs::write(&cfg, "colour: red\n").unwrap();
        let e = choose_with(false, None, Some(&cfg)).unwrap_err();
        assert!(e.message.contains("unknown field"), "{e}");
    }
}
