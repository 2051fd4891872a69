//! `maar`: see `maar --help`.

use std::io::IsTerminal;
use std::process::ExitCode;

use clap::Parser;

use maar::cli::{run, Cli, Cmd, ScenarioArgs, SimOutput};

/// mimalloc rather than the C library's allocator: the Kubernetes path allocates and
/// frees a buffer or a string for every frame, header and JSON field it reads, and
/// glibc's malloc (its free-list walks and the pages it hands back and faults in again)
/// was about a sixth of maar's CPU a pod bound (BENCHMARKS.md, issue #21).
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() -> ExitCode {
    // `maar __local-shim ...`: the process that runs one replica of a local job.
    let mut args = std::env::args_os();
    if args
        .nth(1)
        .is_some_and(|a| a == maar::local::supervise::SHIM_ARG)
    {
        let code = maar::local::supervise::shim_main(args.collect());
        return ExitCode::from(code.clamp(0, 255) as u8);
    }
    let cli = Cli::parse();
    // Without a subcommand: the console on the built-in demo cluster; when stdout is not
    // a terminal, an hour of the demo headless instead.
    let demo = ScenarioArgs::default();
    let cmd = cli.command.unwrap_or(if std::io::stdout().is_terminal() {
        Cmd::Demo {
            scenario: demo,
            speed: 60.0,
            mouse: false,
            theme: None,
            resume: false,
            state: None,
            no_state: false,
            paused: false,
            headless: false,
            read_only: false,
            metrics: None,
            clusters: 1,
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
        Ok(code) => ExitCode::from(code.clamp(0, 255) as u8),
        Err(e) => {
            if !e.quiet() {
                eprintln!("maar: error: {}", maar::out::clean(&e.to_string()));
            }
            ExitCode::from(e.exit_code())
        }
    }
}
