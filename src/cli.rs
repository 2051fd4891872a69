//! The command line: `maar sim`, `explain`, `submit --dry-run`, `get`.
//!
//! Exit codes: 0 success; 1 the answer is "no" (a dry-run job cannot run now);
//! 2 bad input or usage (the message names the file, line and field).

use std::io::Write;
use std::path::PathBuf;

use clap::{Parser, Subcommand, ValueEnum};

use maar_scheduler::quantity::parse_duration_s;
use maar_scheduler::{Phase, Sim};

use crate::load::{load_manifest, load_scenario, InputError};
use crate::output::*;

#[derive(Parser, Debug)]
#[command(
    name = "maar",
    version,
    about = "Operations console and scheduler for heterogeneous GPU clusters"
)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Option<Cmd>,
}

fn duration(s: &str) -> Result<u64, String> {
    parse_duration_s(s).map_err(|e| e.to_string())
}

#[derive(clap::Args, Debug, Clone)]
pub struct ScenarioArgs {
    /// Scenario file (docs/scenario.md); the built-in demo/lab.yaml when absent.
    #[arg(long, value_name = "FILE")]
    pub scenario: Option<PathBuf>,
    /// Seed for the scenario's randomness (overrides the file's).
    #[arg(long)]
    pub seed: Option<u64>,
}

#[derive(Copy, Clone, Debug, ValueEnum, PartialEq, Eq)]
pub enum SimOutput {
    Table,
    Json,
}

#[derive(Copy, Clone, Debug, ValueEnum, PartialEq, Eq)]
pub enum TextOrJson {
    Text,
    Json,
}

#[derive(Copy, Clone, Debug, ValueEnum, PartialEq, Eq)]
pub enum GetOutput {
    Table,
    Wide,
    Json,
    Yaml,
}

#[derive(Copy, Clone, Debug, ValueEnum, PartialEq, Eq)]
pub enum Resource {
    Nodes,
    Gpus,
    Jobs,
    Quotas,
    Events,
    Costs,
    Metrics,
}

#[derive(Subcommand, Debug)]
pub enum Cmd {
    /// Open the console on the simulated demo cluster (the default).
    Demo {
        #[command(flatten)]
        scenario: ScenarioArgs,
        /// Simulated seconds per real second.
        #[arg(long, default_value_t = 60.0)]
        speed: f64,
        /// Let the mouse scroll and click (off by default, so terminal selection works).
        #[arg(long)]
        mouse: bool,
        /// dark, light, high-contrast, mono, or a theme file (themes/*.yaml shows the form).
        #[arg(long, value_name = "NAME|FILE")]
        theme: Option<String>,
    },
    /// Run a scenario headless at full speed and print the final state.
    Sim {
        #[command(flatten)]
        scenario: ScenarioArgs,
        /// Simulated time to run, e.g. 90s, 30m, 24h.
        #[arg(long, value_parser = duration, default_value = "1h")]
        until: u64,
        #[arg(long, value_enum, default_value_t = SimOutput::Table)]
        output: SimOutput,
    },
    /// Explain why a job is (not) running at a moment of a scenario.
    Explain {
        /// Job name, or project/name.
        job: String,
        #[command(flatten)]
        scenario: ScenarioArgs,
        /// Simulated time at which to explain.
        #[arg(long, value_parser = duration, default_value = "0s")]
        at: u64,
        #[arg(short = 'o', long, value_enum, default_value_t = TextOrJson::Text)]
        output: TextOrJson,
    },
    /// Validate a job manifest and say where it would run now, or why it cannot.
    Submit {
        /// TrainJob or InferenceService YAML.
        #[arg(short = 'f', long = "file", value_name = "JOB.yaml")]
        file: PathBuf,
        #[command(flatten)]
        scenario: ScenarioArgs,
        #[arg(long, value_parser = duration, default_value = "0s")]
        at: u64,
        /// Only validate and place on a copy; required until a live backend is attached.
        #[arg(long)]
        dry_run: bool,
        #[arg(short = 'o', long, value_enum, default_value_t = TextOrJson::Text)]
        output: TextOrJson,
    },
    /// Replay a GPU cluster trace (Alibaba openb format) under a placement policy.
    Replay(crate::replay_cli::ReplayArgs),
    /// Write a workload variant of a pod list (seeded): more sharing, GPU-type
    /// constraints, multi-GPU or CPU-only pods.
    TraceVariant {
        #[arg(long, value_name = "CSV")]
        pods: PathBuf,
        /// Node list, for the GPU models of `gpu-spec` variants.
        #[arg(long, value_name = "CSV")]
        nodes: PathBuf,
        #[arg(long, value_enum)]
        kind: crate::replay_cli::VariantArg,
        /// Share of GPU pods (of all pods for `cpu`) of the chosen kind, 0-100.
        #[arg(long)]
        percent: f64,
        #[arg(long, default_value_t = 1)]
        seed: u64,
    },
    /// List nodes, GPUs, jobs, quotas, events, costs or metrics at a moment of a scenario.
    Get {
        #[arg(value_enum)]
        resource: Resource,
        #[command(flatten)]
        scenario: ScenarioArgs,
        #[arg(long, value_parser = duration, default_value = "0s")]
        at: u64,
        #[arg(short = 'o', long, value_enum, default_value_t = GetOutput::Table)]
        output: GetOutput,
    },
}

/// A failure with its exit code.
#[derive(Debug)]
pub enum Failure {
    Input(InputError),
    Usage(String),
}

impl std::fmt::Display for Failure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Failure::Input(e) => write!(f, "{e}"),
            Failure::Usage(m) => f.write_str(m),
        }
    }
}

impl From<InputError> for Failure {
    fn from(e: InputError) -> Self {
        Failure::Input(e)
    }
}

fn sim_at(args: &ScenarioArgs, at: u64) -> Result<(Sim, String), Failure> {
    let sc = load_scenario(args.scenario.as_deref())?;
    let name = sc.name.clone();
    let mut sim = Sim::new(sc, args.seed).map_err(|e| Failure::Usage(e.to_string()))?;
    sim.run_until(at);
    Ok((sim, name))
}

fn json<T: serde::Serialize>(v: &T) -> String {
    let mut s = serde_json::to_string_pretty(v).expect("state serialises to JSON");
    s.push('\n');
    s
}

fn yaml<T: serde::Serialize>(v: &T) -> String {
    serde_saphyr::to_string(v).unwrap_or_else(|e| format!("# cannot render YAML: {e}\n"))
}

/// Runs a command, writing to `out`. Returns the exit code.
pub fn run(cmd: Cmd, out: &mut dyn Write) -> Result<i32, Failure> {
    let cmd = match cmd {
        Cmd::Demo {
            scenario,
            speed,
            mouse,
            theme,
        } => {
            if !(1.0..=86_400.0).contains(&speed) {
                return Err(Failure::Usage(format!(
                    "--speed {speed} must be within 1..=86400"
                )));
            }
            let sc = load_scenario(scenario.scenario.as_deref())?;
            let theme = crate::console::theme::choose(theme.as_deref())?;
            let sim = Sim::new(sc, scenario.seed).map_err(|e| Failure::Usage(e.to_string()))?;
            crate::console::run::run(sim, speed, mouse, theme)
                .map_err(|e| Failure::Usage(format!("console: {e}")))?;
            return Ok(0);
        }
        Cmd::Replay(args) => return crate::replay_cli::run(args, out),
        Cmd::TraceVariant {
            pods,
            nodes,
            kind,
            percent,
            seed,
        } => {
            if !(0.0..=100.0).contains(&percent) {
                return Err(Failure::Usage(format!(
                    "--percent {percent} must be within 0..=100"
                )));
            }
            let p = crate::trace::read_pods(&pods)?;
            let n = crate::trace::read_nodes(&nodes)?;
            let v = maar_scheduler::replay::variant(&p, &n, kind.kind(), percent, seed);
            crate::trace::write_pods(out, &v)
                .map_err(|e| Failure::Usage(format!("cannot write: {e}")))?;
            return Ok(0);
        }
        other => other,
    };
    let mut w = |s: String| {
        let _ = out.write_all(s.as_bytes());
    };
    match cmd {
        Cmd::Demo { .. } | Cmd::Replay(_) | Cmd::TraceVariant { .. } => {
            unreachable!("handled above")
        }
        Cmd::Sim {
            scenario,
            until,
            output,
        } => {
            let (sim, name) = sim_at(&scenario, until)?;
            let snap = sim.cluster.snapshot();
            match output {
                SimOutput::Json => w(json(&SimReport::new(&name, sim.seed, &snap))),
                SimOutput::Table => {
                    w(format!(
                        "scenario {name}, seed {}, at {}\n\n",
                        sim.seed,
                        maar_scheduler::quantity::fmt_duration(until)
                    ));
                    w(metrics_text(&snap.metrics));
                    w("\nJOBS\n".into());
                    let active: Vec<_> = snap
                        .jobs
                        .iter()
                        .filter(|j| {
                            j.phase == "Pending" || j.phase == "Running" || j.phase == "Restarting"
                        })
                        .cloned()
                        .collect();
                    w(jobs_table(&active, false));
                    w("\nQUOTAS\n".into());
                    w(quotas_table(&snap.quotas, false));
                    w("\nCOST\n".into());
                    w(costs_table(&snap.costs));
                }
            }
            Ok(0)
        }
        Cmd::Explain {
            job,
            scenario,
            at,
            output,
        } => {
            let (sim, _) = sim_at(&scenario, at)?;
            let id = sim.cluster.job_id(&job).map_err(|e| {
                Failure::Usage(format!(
                    "{e} at {} in this scenario",
                    maar_scheduler::quantity::fmt_duration(at)
                ))
            })?;
            let ex = sim.cluster.explain(id);
            match output {
                TextOrJson::Json => w(json(&ex)),
                TextOrJson::Text => w(ex.to_string()),
            }
            Ok(0)
        }
        Cmd::Submit {
            file,
            scenario,
            at,
            dry_run,
            output,
        } => {
            let spec = load_manifest(&file)?;
            if !dry_run {
                return Err(Failure::Usage(
                    "submit needs --dry-run: no live backend is attached to the command line; submit from the console to run it".into(),
                ));
            }
            let (mut sim, _) = sim_at(&scenario, at)?;
            let mut spec = spec;
            let full = format!("{}/{}", spec.project, spec.name);
            if sim.cluster.job_id(&full).is_ok() {
                // Evaluate a copy under another name, and say what a real submit would do.
                w(format!(
                    "note: a job {full} already exists in this scenario; a real submit would be refused (evaluated as a copy)\n"
                ));
                spec.name = format!("{}-dry-run", spec.name);
            }
            let id = sim
                .submit(spec, None)
                .map_err(|e| Failure::Usage(format!("{}: {e}", file.display())))?;
            let ex = sim.cluster.explain(id);
            let running = sim.cluster.jobs[id as usize].phase == Phase::Running;
            match output {
                TextOrJson::Json => w(json(&ex)),
                TextOrJson::Text => {
                    if running {
                        w(format!(
                            "{}: valid; would run now on {}\n",
                            file.display(),
                            ex.placement.join("; ")
                        ));
                    } else {
                        w(format!("{}: valid, but cannot run now\n", file.display()));
                        w(ex.to_string());
                    }
                }
            }
            Ok(if running { 0 } else { 1 })
        }
        Cmd::Get {
            resource,
            scenario,
            at,
            output,
        } => {
            let (sim, _) = sim_at(&scenario, at)?;
            let snap = sim.cluster.snapshot();
            let wide = output == GetOutput::Wide;
            let text = match (resource, output) {
                (Resource::Nodes, GetOutput::Json) => json(&snap.nodes),
                (Resource::Nodes, GetOutput::Yaml) => yaml(&snap.nodes),
                (Resource::Nodes, _) => nodes_table(&snap.nodes, wide),
                (Resource::Gpus, GetOutput::Json) => json(
                    &snap
                        .nodes
                        .iter()
                        .map(|n| (&n.name, &n.gpus))
                        .collect::<Vec<_>>(),
                ),
                (Resource::Gpus, GetOutput::Yaml) => yaml(
                    &snap
                        .nodes
                        .iter()
                        .map(|n| (&n.name, &n.gpus))
                        .collect::<Vec<_>>(),
                ),
                (Resource::Gpus, _) => gpus_table(&snap.nodes, wide),
                (Resource::Jobs, GetOutput::Json) => json(&snap.jobs),
                (Resource::Jobs, GetOutput::Yaml) => yaml(&snap.jobs),
                (Resource::Jobs, _) => jobs_table(&snap.jobs, wide),
                (Resource::Quotas, GetOutput::Json) => json(&(&snap.quotas, &snap.quota_requests)),
                (Resource::Quotas, GetOutput::Yaml) => yaml(&(&snap.quotas, &snap.quota_requests)),
                (Resource::Quotas, _) => quotas_table(&snap.quotas, wide),
                (Resource::Events, GetOutput::Json) => json(&snap.events),
                (Resource::Events, GetOutput::Yaml) => yaml(&snap.events),
                (Resource::Events, _) => events_table(&snap.events),
                (Resource::Costs, GetOutput::Json) => json(&snap.costs),
                (Resource::Costs, GetOutput::Yaml) => yaml(&snap.costs),
                (Resource::Costs, _) => costs_table(&snap.costs),
                (Resource::Metrics, GetOutput::Json) => json(&snap.metrics),
                (Resource::Metrics, GetOutput::Yaml) => yaml(&snap.metrics),
                (Resource::Metrics, _) => metrics_text(&snap.metrics),
            };
            w(text);
            Ok(0)
        }
    }
}
