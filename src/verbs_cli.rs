//! The operator's commands on the command line, built from their one declaration
//! ([`maar_scheduler::verbs::VERBS`]): each verb becomes a clap subcommand with its
//! arguments and doc, plus the options every act takes ([`ActArgs`]: where, how to
//! report, `--what-if`). `maar submit` keeps its own clap shape (it reads a file and
//! has `--dry-run`), declared beside the others for its role and audit.

use clap::error::ErrorKind;
use clap::{ArgAction, ArgMatches, Args, FromArgMatches, Subcommand};

use maar_scheduler::verbs::{self, Build, Given, How, Verb};
use maar_scheduler::Command;

use crate::args::ActArgs;

/// An operator command read from the command line, and how to deliver it.
#[derive(Debug, Clone)]
pub struct Operator {
    pub command: Command,
    pub act: ActArgs,
}

/// The verbs that are CLI subcommands built here (all but those reading a file).
fn on_cli(v: &Verb) -> bool {
    matches!(v.build, Build::Words(_))
}

/// A doc line as clap shows its derived ones: without the closing period.
pub fn sentence(doc: &str) -> &str {
    doc.strip_suffix('.').unwrap_or(doc)
}

fn subcommand(v: &'static Verb) -> clap::Command {
    // The act's own options first: their struct's doc would otherwise be the about.
    let mut c = ActArgs::augment_args(clap::Command::new(v.name))
        .about(sentence(v.doc))
        .allow_negative_numbers(true);
    for a in v.args {
        let arg = clap::Arg::new(a.name).help(sentence(a.doc));
        c = c.arg(match a.how {
            How::Word => arg.value_name(a.value).required(true),
            How::Words => arg
                .value_name(a.value)
                .required(true)
                .num_args(1..)
                .action(ArgAction::Append),
            How::Flag => arg.long(a.name).action(ArgAction::SetTrue),
            How::Opt { required, default } => {
                let arg = arg.long(a.name).value_name(a.value).required(required);
                match default {
                    Some(d) => arg.default_value(d),
                    None => arg,
                }
            }
        });
    }
    c
}

impl FromArgMatches for Operator {
    fn from_arg_matches(m: &ArgMatches) -> Result<Self, clap::Error> {
        let Some((name, sub)) = m.subcommand() else {
            return Err(clap::Error::new(ErrorKind::MissingSubcommand));
        };
        let Some(v) = verbs::verb(name).filter(|v| on_cli(v)) else {
            return Err(clap::Error::raw(
                ErrorKind::InvalidSubcommand,
                format!("`{name}` is not an operator command\n"),
            ));
        };
        let mut g = Given::default();
        for a in v.args {
            match a.how {
                How::Flag => {
                    if sub.get_flag(a.name) {
                        g.set(a.name, Vec::new());
                    }
                }
                _ => {
                    if let Some(vals) = sub.get_many::<String>(a.name) {
                        g.set(a.name, vals.cloned().collect());
                    }
                }
            }
        }
        // Said with the command's own usage line (the whole CLI's was given).
        let command = v.command(&g).map_err(|e| {
            clap::Error::raw(ErrorKind::ValueValidation, format!("maar {name}: {e}"))
                .format(&mut subcommand(v).bin_name(format!("maar {name}")))
        })?;
        Ok(Operator {
            command,
            act: ActArgs::from_arg_matches(sub)?,
        })
    }

    fn update_from_arg_matches(&mut self, m: &ArgMatches) -> Result<(), clap::Error> {
        *self = Self::from_arg_matches(m)?;
        Ok(())
    }
}

impl Subcommand for Operator {
    fn augment_subcommands(cmd: clap::Command) -> clap::Command {
        verbs::VERBS
            .iter()
            .filter(|v| on_cli(v))
            .fold(cmd, |c, v| c.subcommand(subcommand(v)))
    }

    fn augment_subcommands_for_update(cmd: clap::Command) -> clap::Command {
        Self::augment_subcommands(cmd)
    }

    fn has_subcommand(name: &str) -> bool {
        verbs::verb(name).is_some_and(on_cli)
    }
}
