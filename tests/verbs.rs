//! Each operator command is declared once (`maar_scheduler::verbs`) and every face
//! follows: the CLI's subcommands, the console's `:` line and its help, the shell
//! completions and the man page all read the same words to the same command.

use clap::{CommandFactory, Parser};

use maar::cli::{Cli, Cmd};
use maar_scheduler::verbs::{self, Build, VERBS};
use maar_scheduler::Command;

/// A line of every verb that reads its words, as an operator would type it.
const LINES: &[&str] = &[
    "cordon a100-01",
    "cordon a100-01 --gpu 3",
    "uncordon a100-01 --gpu=2",
    "cordon-gpu a100-01 3",
    "uncordon-gpu a100-01 3",
    "uncordon a100-01",
    "drain a100-01",
    "priority ml-prod/gpt high",
    "priority gpt -20",
    "requeue gpt",
    "cancel ml-prod/gpt",
    "scale chat 3",
    "autoscale chat",
    "request-quota ml-prod training-gpu --gpu 4 --reserved --reason quarter-end",
    "approve 7",
    "reject #7",
    "reject 7 --reason no-budget",
    "label a100-01 crater.ai/node-role=gpu --overwrite team-",
    "label node a100-01 a=b",
    "ack oom/ml-prod/gpt",
    "keep ml-prod/gpt",
];

fn words(line: &str) -> Vec<String> {
    line.split_whitespace().map(str::to_string).collect()
}

/// The command the CLI makes of a line.
fn cli(line: &str) -> Result<Command, String> {
    let args = std::iter::once("maar".to_string()).chain(words(line));
    match Cli::try_parse_from(args) {
        Ok(Cli {
            command: Some(Cmd::Act(op)),
        }) => Ok(op.command),
        Ok(other) => Err(format!("not an operator command: {other:?}")),
        Err(e) => Err(e.to_string()),
    }
}

/// The command the console's `:` line (and every other reader of words) makes of it.
fn core(line: &str) -> Result<Command, String> {
    let (v, g) = verbs::read_line(&words(line))?;
    v.command(&g)
}

#[test]
fn the_cli_and_the_console_read_every_line_alike() {
    let mut covered = std::collections::BTreeSet::new();
    for line in LINES {
        let c = core(line).unwrap_or_else(|e| panic!("{line}: {e}"));
        assert_eq!(cli(line).as_ref(), Ok(&c), "{line}");
        covered.insert(c.verb().name);
    }
    // Every verb that reads words is in the list above (submit reads a file).
    for v in VERBS.iter().filter(|v| matches!(v.build, Build::Words(_))) {
        assert!(covered.contains(v.name), "no line for {}", v.name);
    }
}

#[test]
fn the_cli_refuses_what_the_core_refuses_with_the_same_reason() {
    for line in [
        "approve seven",
        "priority gpt 1000000001",
        "request-quota ml-prod training-gpu --gpu 0",
        "cordon a100-01 --gpu x",
        "label a100-01 notalabel",
        "scale chat many",
    ] {
        let want = core(line).expect_err(line);
        let got = cli(line).expect_err(line);
        assert!(
            got.contains(&want),
            "{line}: CLI said {got:?}, core {want:?}"
        );
    }
    // Missing words and unknown options are clap's to report on the CLI.
    assert!(cli("cordon").is_err());
    assert!(cli("drain a100-01 --force").is_err());
}

#[test]
fn every_verb_is_a_subcommand_with_its_doc_and_arguments() {
    let cmd = Cli::command();
    for v in VERBS {
        let sub = cmd
            .find_subcommand(v.name)
            .unwrap_or_else(|| panic!("maar {} missing", v.name));
        if matches!(v.build, Build::Words(_)) {
            assert_eq!(
                sub.get_about().map(|a| a.to_string()).as_deref(),
                Some(maar::verbs_cli::sentence(v.doc))
            );
            for a in v.args {
                assert!(
                    sub.get_arguments().any(|x| x.get_id() == a.name),
                    "maar {} has no {}",
                    v.name,
                    a.name
                );
            }
            // Every act can be previewed and reported as JSON.
            assert!(sub.get_arguments().any(|x| x.get_id() == "what_if"));
        }
    }
}

#[test]
fn the_help_screen_lists_every_verb_with_the_role_it_needs() {
    use maar::console::app::Screen;
    for s in Screen::ALL {
        let rows = maar::console::screens::help::help_entries(s);
        for v in VERBS {
            let usage = format!(":{}", v.usage());
            let row = rows
                .iter()
                .find(|(k, _, _)| *k == usage)
                .unwrap_or_else(|| panic!("{usage} not in the help on {}", s.name()));
            assert_eq!(row.2, Some(v.role), "{usage}");
            for k in v.keys.iter().filter(|k| k.screen == s.name()) {
                assert!(
                    rows.iter()
                        .any(|(key, what, need)| *key == k.key.to_string()
                            && what.contains(k.does)
                            && *need == Some(v.role)),
                    "key {} of {} not on {}'s help",
                    k.key,
                    v.name,
                    s.name()
                );
            }
        }
    }
    // Every screen a key names exists.
    for v in VERBS {
        for k in v.keys {
            assert!(
                Screen::ALL.iter().any(|s| s.name() == k.screen),
                "{}: no screen {}",
                v.name,
                k.screen
            );
        }
    }
}

fn maar(args: &[&str]) -> std::process::Output {
    std::process::Command::new(env!("CARGO_BIN_EXE_maar"))
        .args(args)
        .output()
        .unwrap()
}

#[test]
fn completions_name_every_command_in_each_shell() {
    for shell in ["bash", "zsh", "fish"] {
        let o = maar(&["completions", shell]);
        assert!(o.status.success(), "{shell}: {o:?}");
        let text = String::from_utf8(o.stdout).unwrap();
        for v in VERBS {
            assert!(text.contains(v.name), "{shell}: no {}", v.name);
        }
        assert!(text.contains("what-if"), "{shell}");
    }
    if std::process::Command::new("bash")
        .arg("--version")
        .output()
        .is_ok()
    {
        // The bash script is valid bash and defines the completion function.
        let dir = std::env::temp_dir().join(format!("maar-compl-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let f = dir.join("maar.bash");
        std::fs::write(&f, maar(&["completions", "bash"]).stdout).unwrap();
        let o = std::process::Command::new("bash")
            .arg("-c")
            .arg(format!("source {} && complete -p maar", f.display()))
            .output()
            .unwrap();
        assert!(o.status.success(), "{o:?}");
        assert!(String::from_utf8_lossy(&o.stdout).contains("maar"));
        let _ = std::fs::remove_dir_all(&dir);
    }
    let o = maar(&["completions", "tcsh-or-so"]);
    assert_eq!(o.status.code(), Some(2));
}

#[test]
fn the_man_page_describes_every_command() {
    let o = maar(&["man"]);
    assert!(o.status.success(), "{o:?}");
    // roff writes a hyphen as `\-`.
    let page = String::from_utf8(o.stdout)
        .unwrap()
        .replace("\\-", "-")
        .replace("\\*(Aq", "'");
    assert!(
        page.starts_with(".ie") || page.contains(".TH maar"),
        "{}",
        &page[..200.min(page.len())]
    );
    for v in VERBS {
        assert!(page.contains(v.name), "no {}", v.name);
    }
    let dir = std::env::temp_dir().join(format!("maar-man-{}", std::process::id()));
    let o = maar(&["man", "--dir", dir.to_str().unwrap()]);
    assert!(o.status.success(), "{o:?}");
    for v in VERBS {
        let p = dir.join(format!("maar-{}.1", v.name));
        let text = std::fs::read_to_string(&p)
            .unwrap_or_else(|e| panic!("{}: {e}", p.display()))
            .replace("\\-", "-")
            .replace("\\*(Aq", "'");
        if matches!(v.build, Build::Words(_)) {
            assert!(
                text.contains(&v.doc[..v.doc.len().min(12)]),
                "{}",
                p.display()
            );
        }
    }
    let _ = std::fs::remove_dir_all(&dir);
}
