//! `maar`: see `maar --help`.

use std::process::ExitCode;

use clap::Parser;

use maar::cli::{run, Cli, Cmd, ScenarioArgs, SimOutput};

fn main() -> ExitCode {
    let cli = Cli::parse();
    // Without a subcommand: run the built-in demo cluster for an hour and show it.
    let cmd = cli.command.unwrap_or(Cmd::Sim {
        scenario: ScenarioArgs {
            scenario: None,
            seed: None,
        },
        until: 3600,
        output: SimOutput::Table,
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
