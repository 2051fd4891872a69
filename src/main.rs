//! `maar`: see `maar --help`.

use std::io::IsTerminal;
use std::process::ExitCode;

use clap::Parser;

use maar::cli::{run, Cli, Cmd, ScenarioArgs, SimOutput};

fn main() -> ExitCode {
    let cli = Cli::parse();
    // Without a subcommand: the console on the built-in demo cluster; when stdout is not
    // a terminal, an hour of the demo headless instead.
    let demo = ScenarioArgs {
        scenario: None,
        seed: None,
    };
    let cmd = cli.command.unwrap_or(if std::io::stdout().is_terminal() {
        Cmd::Demo {
            scenario: demo,
            speed: 60.0,
            mouse: false,
            theme: None,
        }
    } else {
        Cmd::Sim {
            scenario: demo,
            until: 3600,
            output: SimOutput::Table,
        }
    });
    let stdout = std::io::stdout();
    let mut lock = stdout.lock();
    match run(cmd, &mut lock) {
        Ok(code) => ExitCode::from(code as u8),
        Err(e) => {
            eprintln!("maar: error: {e}");
            ExitCode::from(2)
        }
    }
}
