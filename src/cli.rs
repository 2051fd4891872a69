//! The command line.
//!
//! Exit codes: 0 success; 1 the answer is "no" (a refused command, a dry-run job that
//! cannot run now, a state file in use, a failed write); 2 bad input or usage (the
//! message names the file, line and field).

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use clap::{CommandFactory, Parser, Subcommand, ValueEnum};

use maar_demo::Demo;
use maar_scheduler::metrics::Snapshot;
use maar_scheduler::quantity::fmt_duration;
use maar_scheduler::{Actor, Command, Phase};

use crate::args::duration;
pub use crate::args::{
    kube_state, ActArgs, ScenarioArgs, SimOutput, SourceArgs, StateArg, TextOrJson,
};
use crate::backend;
use crate::engine::{self, EngineOptions, Refusal};
pub use crate::failure::{kube_failure, Failure};
pub use crate::live_cli::LiveArgs;
use crate::live_cli::{console_theme, face, metrics_listen, metrics_serve};
use crate::load::{load_manifest, load_scenario, scenario_text};
use crate::out::{Out, WriteFailure};
use crate::output::*;
use crate::record::{self, AuditFilter, Record, RecordError};

#[derive(Parser, Debug)]
#[command(
    name = "maar",
    version,
    about = "Operations console and scheduler for heterogeneous GPU clusters",
    after_help = "Without a command: the console on the demo cluster (an hour of it headless when stdout is not a terminal)."
)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Option<Cmd>,
}

fn speed(s: &str) -> Result<f64, String> {
    let v: f64 = s
        .parse()
        .map_err(|_| format!("`{}` is not a number", maar_scheduler::limits::echo(s)))?;
    if (1.0..=86_400.0).contains(&v) {
        Ok(v)
    } else {
        Err(format!("{v} must be within 1..=86400"))
    }
}

#[derive(Copy, Clone, Debug, ValueEnum, PartialEq, Eq)]
pub enum GetOutput {
    Table,
    Wide,
    Json,
    Yaml,
}

#[derive(Copy, Clone, Debug, ValueEnum, PartialEq, Eq)]
pub enum AuditOutput {
    Table,
    Json,
    Csv,
}

#[derive(Copy, Clone, Debug, ValueEnum, PartialEq, Eq)]
pub enum Resource {
    Nodes,
    Gpus,
    Jobs,
    Quotas,
    Events,
    Alerts,
    Costs,
    Metrics,
}

#[derive(Subcommand, Debug)]
pub enum StateCmd {
    /// Restore the newest checkpoint and rebuild from every command, and compare.
    Verify(StateArg),
    /// What the state file holds: the cluster, its commands, who runs it.
    Show(StateArg),
}

#[derive(Subcommand, Debug)]
pub enum Cmd {
    /// Open the console on the simulated demo cluster (the default).
    Demo {
        #[command(flatten)]
        scenario: ScenarioArgs,
        /// Simulated seconds per real second (1-86400).
        #[arg(long, default_value = "60", value_parser = speed)]
        speed: f64,
        /// Let the mouse scroll and click (off by default, so terminal selection works).
        #[arg(long)]
        mouse: bool,
        /// dark, light, high-contrast, mono, or a theme file (themes/*.yaml shows the form).
        #[arg(long, value_name = "NAME|FILE")]
        theme: Option<String>,
        /// Continue the last demo (its state file) instead of starting a fresh one.
        #[arg(long)]
        resume: bool,
        /// State file; `$XDG_STATE_HOME/maar/<scenario name>.db` when absent.
        #[arg(long, value_name = "PATH")]
        state: Option<PathBuf>,
        /// Keep nothing on disk (no state file, nothing to resume).
        #[arg(long, conflicts_with_all = ["state", "resume"])]
        no_state: bool,
        /// Start paused.
        #[arg(long)]
        paused: bool,
        /// Run the demo without a console (commands reach it through --state) until
        /// interrupted.
        #[arg(long)]
        headless: bool,
        /// Look only: this console session acts as a viewer whatever the roles file
        /// says (docs/roles.md).
        #[arg(long)]
        read_only: bool,
        /// Serve Prometheus metrics (/metrics) and probes (/healthz, /readyz) on this
        /// address, e.g. 127.0.0.1:9464.
        #[arg(long, value_name = "ADDR")]
        metrics: Option<std::net::SocketAddr>,
        /// How many simulated clusters: 2 adds the second site (demo/site-b.yaml, its
        /// state file beside the first's), both in one console: `C` shows the other,
        /// `:submit FILE` sends a job where it starts first.
        #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u8).range(1..=2))]
        clusters: u8,
    },
    /// Open the console on every cluster of the config file's `clusters:` list
    /// (docs/clusters.md): a demo's state file continued, a Kubernetes context watched
    /// and scheduled; each with its own engine, state file and lease.
    Clusters {
        /// Simulated seconds per real second of the demo clusters (1-86400).
        #[arg(long, default_value = "60", value_parser = speed)]
        speed: f64,
        /// Let the mouse scroll and click.
        #[arg(long)]
        mouse: bool,
        /// dark, light, high-contrast, mono, or a theme file.
        #[arg(long, value_name = "NAME|FILE")]
        theme: Option<String>,
        /// Run them without a console until interrupted.
        #[arg(long)]
        headless: bool,
        /// Look only: a viewer's console (docs/roles.md).
        #[arg(long)]
        read_only: bool,
    },
    /// Run a scenario headless at full speed and print the final state.
    Sim {
        #[command(flatten)]
        scenario: ScenarioArgs,
        /// Simulated time to run, e.g. 90s, 30m, 24h (at most 366d).
        #[arg(long, value_parser = duration, default_value = "1h")]
        until: u64,
        #[arg(long, value_enum, default_value_t = SimOutput::Table)]
        output: SimOutput,
    },
    /// Explain why a job is (not) running.
    Explain {
        /// Job name, or project/name.
        job: String,
        #[command(flatten)]
        source: SourceArgs,
        #[arg(short = 'o', long, value_enum, default_value_t = TextOrJson::Text)]
        output: TextOrJson,
    },
    /// Submit a job manifest; with --dry-run, only say where it would run now or why not.
    Submit {
        /// TrainJob or InferenceService YAML.
        #[arg(short = 'f', long = "file", value_name = "JOB.yaml")]
        file: PathBuf,
        /// Place it on a copy and report, changing nothing.
        #[arg(long)]
        dry_run: bool,
        /// Say what submitting it would do to the cluster (jobs evicted, started, still
        /// Pending, quota changes), changing nothing.
        #[arg(long, conflicts_with = "dry_run")]
        what_if: bool,
        #[command(flatten)]
        source: SourceArgs,
        #[arg(short = 'o', long, value_enum, default_value_t = TextOrJson::Text)]
        output: TextOrJson,
    },
    /// List nodes, GPUs, jobs, quotas, events, costs or metrics.
    Get {
        #[arg(value_enum)]
        resource: Resource,
        #[command(flatten)]
        source: SourceArgs,
        #[arg(short = 'o', long, value_enum, default_value_t = GetOutput::Table)]
        output: GetOutput,
    },
    /// The operator's commands (cordon, drain, priority, approve, label, ...), each
    /// built from its one declaration (`maar_scheduler::verbs`).
    #[command(flatten)]
    Act(crate::verbs_cli::Operator),
    /// Who did what, when, from where, and the result.
    Audit {
        /// Only this user.
        #[arg(long)]
        actor: Option<String>,
        /// Only this action, e.g. cordon_node, set_priority, approve_quota.
        #[arg(long)]
        action: Option<String>,
        /// Only objects containing this text, e.g. node/a100-01 or a job name.
        #[arg(long)]
        object: Option<String>,
        /// From this time: 2026-11-30T09:00:00Z, or local time as the table shows it
        /// (2026-11-30 09:00:00, 2026-11-30 09:00, 2026-11-30).
        #[arg(long, value_parser = since)]
        since: Option<String>,
        /// Up to the end of this time (the whole second, minute or day written).
        #[arg(long, value_parser = until)]
        until: Option<String>,
        /// Only the last N.
        #[arg(long, value_name = "N")]
        last: Option<usize>,
        #[arg(short = 'o', long, value_enum, default_value_t = AuditOutput::Table)]
        output: AuditOutput,
        #[command(flatten)]
        state: StateArg,
    },
    /// Inspect or check a state file.
    #[command(subcommand)]
    State(StateCmd),
    #[command(flatten)]
    Live(crate::backends::LiveCmd),
    /// The node agent: sample this machine (CPU, memory, filesystems, load, and every
    /// NVIDIA GPU through NVML) and serve /metrics (DCGM names), /healthz and /sample.
    Agent(crate::agent_cli::AgentArgs),
    /// Replay a GPU cluster trace (Alibaba openb format) under a placement policy.
    Replay(crate::replay_cli::ReplayArgs),
    /// Print a completion script for a shell, from the same declarations as the
    /// commands: `maar completions bash > ~/.local/share/bash-completion/completions/maar`,
    /// `maar completions zsh > ~/.zfunc/_maar`, `maar completions fish >
    /// ~/.config/fish/completions/maar.fish`.
    Completions {
        #[arg(value_enum)]
        shell: clap_complete::Shell,
    },
    /// Print the man page (roff): `maar man | man -l -`; with --dir, write maar.1 and a
    /// page for every command (maar-cordon.1, ...) there.
    Man {
        #[arg(long, value_name = "DIR")]
        dir: Option<PathBuf>,
    },
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
}

/// A wall-clock time as `maar audit` takes it: RFC 3339 (`2026-11-30T09:00:00Z`), or
/// local time as its table shows it (`2026-11-30 09:00:00`, `2026-11-30T09:00`,
/// `2026-11-30`). Returns the start and the end of what was written (a second, a
/// minute, a day), in UTC, RFC 3339 with milliseconds.
fn time_span(s: &str) -> Result<(String, String), String> {
    use chrono::{Duration as D, LocalResult, NaiveDate, NaiveDateTime, TimeZone};
    let fmt =
        |t: chrono::DateTime<chrono::Utc>| t.to_rfc3339_opts(chrono::SecondsFormat::Millis, true);
    if let Ok(t) = chrono::DateTime::parse_from_rfc3339(s) {
        let t = t.with_timezone(&chrono::Utc);
        let end = if s.contains('.') {
            t
        } else {
            t + D::milliseconds(999)
        };
        return Ok((fmt(t), fmt(end)));
    }
    let local = |n: NaiveDateTime| match chrono::Local.from_local_datetime(&n) {
        LocalResult::Single(t) | LocalResult::Ambiguous(t, _) => Ok(t.with_timezone(&chrono::Utc)),
        LocalResult::None => Err(format!("`{s}` does not exist in the local time zone")),
    };
    let t = s.replace('T', " ");
    for (f, step) in [
        ("%Y-%m-%d %H:%M:%S", D::milliseconds(999)),
        ("%Y-%m-%d %H:%M", D::seconds(59) + D::milliseconds(999)),
    ] {
        if let Ok(n) = NaiveDateTime::parse_from_str(&t, f) {
            let a = local(n)?;
            return Ok((fmt(a), fmt(a + step)));
        }
    }
    if let Ok(d) = NaiveDate::parse_from_str(&t, "%Y-%m-%d") {
        let a = local(d.and_hms_opt(0, 0, 0).expect("midnight"))?;
        return Ok((fmt(a), fmt(a + D::days(1) - D::milliseconds(1))));
    }
    Err(format!(
        "`{}` is not a time: write 2026-11-30T09:00:00Z, or local time as 2026-11-30 09:00:00, 2026-11-30 09:00 or 2026-11-30",
        maar_scheduler::limits::echo(s)
    ))
}

/// `--since`: from the start of the time written.
fn since(s: &str) -> Result<String, String> {
    time_span(s).map(|t| t.0)
}

/// `--until`: to the end of the time written (the whole second, minute or day).
fn until(s: &str) -> Result<String, String> {
    time_span(s).map(|t| t.1)
}

fn demo_at(args: &ScenarioArgs, at: u64, keep_events: bool) -> Result<(Demo, String), Failure> {
    let sc = load_scenario(args.scenario.as_deref())?;
    let name = sc.name.clone();
    let mut demo = Demo::new(sc, args.seed).map_err(|e| Failure::Usage(e.to_string()))?;
    if keep_events {
        demo = demo.keep_events();
    }
    demo.run_until(at);
    Ok((demo, name))
}

fn json<T: serde::Serialize>(v: &T) -> String {
    let mut s = serde_json::to_string_pretty(v).expect("state serialises to JSON");
    s.push('\n');
    s
}

fn yaml<T: serde::Serialize>(v: &T) -> String {
    serde_saphyr::to_string(v).unwrap_or_else(|e| format!("# cannot render YAML: {e}\n"))
}

/// The state file of the built-in demo.
pub fn default_state() -> PathBuf {
    record::default_path("lab")
}

fn state_path(a: &StateArg) -> PathBuf {
    a.state_file().unwrap_or_else(default_state)
}

/// A running maar could not be reached, as the command line says it.
fn api_failure(e: crate::api::ClientError) -> Failure {
    Failure::No(e.to_string())
}

/// Where a reader reads a recorded cluster: through the maar that runs it (its
/// socket; no access to the file needed), or, when none runs, the file itself (read
/// only, unless this user owns it).
enum Reader {
    File(Record),
    Remote(crate::api::Remote),
}

/// The maar serving its API behind the API server of the kubeconfig context
/// `context` (`maar kube --api-listen`): reached with the operator's own Kubernetes
/// identity. When the API server serves no maar API (or this kubeconfig has no such
/// context) and the local state file `path` exists, None, saying so on stderr: the
/// caller uses that file (a `maar kube --context` run on this machine).
fn through_kube(context: &str, path: &Path) -> Result<Option<crate::api::Remote>, Failure> {
    use maar_kube::ops::{OpsClient, OpsError};
    let opts = maar_kube::ConnectOptions {
        context: Some(context.to_string()),
        ..Default::default()
    };
    match OpsClient::connect(&opts) {
        Ok(c) => Ok(Some(crate::api::Remote::through_kube(c))),
        Err(e @ (OpsError::NoApi { .. } | OpsError::Kube(maar_kube::KubeError::Config(_))))
            if path.exists() =>
        {
            eprintln!(
                "maar: {}; using the local state file {}",
                crate::out::clean(&e.to_string()),
                path.display()
            );
            Ok(None)
        }
        Err(OpsError::Kube(k)) => Err(kube_failure(k)),
        Err(e) => Err(Failure::No(e.to_string())),
    }
}

/// The running maar a command line reaches: behind the API server with --context
/// (see [`through_kube`]), else through the socket of `path`.
fn running(path: &Path, context: Option<&str>) -> Result<Option<crate::api::Remote>, Failure> {
    if let Some(c) = context {
        if let Some(r) = through_kube(c, path)? {
            return Ok(Some(r));
        }
    }
    crate::api::Remote::connect(path).map_err(api_failure)
}

impl Reader {
    fn open(path: &Path, context: Option<&str>) -> Result<Reader, Failure> {
        if let Some(r) = running(path, context)? {
            return Ok(Reader::Remote(r));
        }
        let owner = crate::roles::owner(path);
        // Not read where another user could have swapped it or planted its journal.
        if let Some(o) = owner {
            crate::record::folder_safe(path, o).map_err(|why| {
                Failure::Record(RecordError::UnsafeToRead {
                    path: path.display().to_string(),
                    why,
                })
            })?;
        }
        let mine = owner == Some(nix::unistd::getuid().as_raw());
        let r = if mine {
            Record::open(path)?
        } else {
            Record::open_read_only(path)?
        };
        // Damage is said, not read as a shorter history (a page of commands zeroed
        // read as none: an empty audit, exit 0).
        r.check()?;
        Ok(Reader::File(r))
    }

    fn history(&self) -> &dyn record::History {
        match self {
            Reader::File(r) => r,
            Reader::Remote(r) => r,
        }
    }

    fn audit(&self, f: &AuditFilter) -> Result<Vec<record::CommandRow>, Failure> {
        Ok(match self {
            Reader::File(r) => r.audit(f)?,
            Reader::Remote(r) => r.audit(f)?,
        })
    }

    fn command_count(&self) -> Result<i64, Failure> {
        Ok(match self {
            Reader::File(r) => r.command_count()?,
            Reader::Remote(r) => r.command_count()?,
        })
    }

    fn holder(&self) -> Result<Option<record::Holder>, Failure> {
        Ok(match self {
            Reader::File(r) => r.holder()?,
            Reader::Remote(r) => r.holder()?,
        })
    }
}

/// Opens a recorded cluster for reading (restored from its newest checkpoint; a
/// running maar writes a fresh one first, so the reader sees the cluster as it is
/// now, not up to a few seconds ago).
fn recorded(path: &Path, context: Option<&str>) -> Result<backend::Loaded, Failure> {
    let reader = Reader::open(path, context)?;
    if let Reader::Remote(r) = &reader {
        r.fresh().map_err(api_failure)?;
    }
    Ok(backend::restore(reader.history(), false)?)
}

/// A recorded cluster as it was at cluster time `t` (its history).
fn recorded_at(path: &Path, context: Option<&str>, t: u64) -> Result<backend::Loaded, Failure> {
    let reader = Reader::open(path, context)?;
    let l = backend::restore_at(reader.history(), t)?;
    if let Some(n) = &l.note {
        eprintln!("maar: note: {}", crate::out::clean(n));
    }
    Ok(l)
}

/// What a reading command looks at.
enum Source {
    Scenario(Box<Demo>),
    Recorded(Box<backend::Loaded>),
}

impl Source {
    fn open(s: &SourceArgs) -> Result<Source, Failure> {
        let scenario_asked = s.scenario.scenario.is_some() || s.scenario.seed.is_some();
        s.check_cluster().map_err(Failure::Usage)?;
        let context = s.context();
        let context = context.as_deref();
        let recorded = |p: &Path| match s.at {
            Some(t) => recorded_at(p, context, t),
            None => recorded(p, context),
        };
        match &s.state_file() {
            Some(p) => Ok(Source::Recorded(Box::new(recorded(p)?))),
            // The demo the operator runs (and acts on with `maar cordon ...`).
            None if !scenario_asked && default_state().exists() => {
                Ok(Source::Recorded(Box::new(recorded(&default_state())?)))
            }
            None => Ok(Source::Scenario(Box::new(
                demo_at(&s.scenario, s.at.unwrap_or(0), false)?.0,
            ))),
        }
    }

    /// The core and its driver.
    fn into_parts(self) -> (maar_scheduler::Core, Box<dyn maar_scheduler::Driver>) {
        match self {
            Source::Scenario(d) => {
                let d = *d;
                (d.core, Box::new(d.sim))
            }
            Source::Recorded(l) => {
                let l = *l;
                (l.core, l.driver)
            }
        }
    }

    fn cluster(&self) -> &maar_scheduler::Cluster {
        match self {
            Source::Scenario(d) => d.cluster(),
            Source::Recorded(l) => l.core.cluster(),
        }
    }

    /// Where, in words, for "no such job" messages.
    fn moment(&self, s: &SourceArgs) -> String {
        match (self, &s.state_file()) {
            (_, Some(p)) => match s.at {
                Some(t) => format!("in {} at {}", p.display(), fmt_duration(t)),
                None => format!("in {}", p.display()),
            },
            (Source::Recorded(_), None) => match s.at {
                Some(t) => format!("in {} at {}", default_state().display(), fmt_duration(t)),
                None => format!("in {}", default_state().display()),
            },
            (Source::Scenario(_), None) => {
                format!("at {} in this scenario", fmt_duration(s.at.unwrap_or(0)))
            }
        }
    }
}

/// Runs a command, writing to `out`. Returns the exit code.
pub fn run(cmd: Cmd, out: &mut dyn std::io::Write) -> Result<i32, Failure> {
    let mut o = Out::new(out);
    let code = run_on(cmd, &mut o)?;
    o.finish()?;
    Ok(code)
}

fn run_on(cmd: Cmd, o: &mut Out) -> Result<i32, Failure> {
    match cmd {
        Cmd::Demo {
            scenario,
            speed,
            mouse,
            theme,
            resume,
            state,
            no_state,
            paused,
            headless,
            read_only,
            metrics,
            clusters,
        } => {
            let theme = console_theme(headless, theme.as_deref())?;
            let metrics = metrics_listen(metrics)?;
            // The second site's state file beside the first's.
            let second_state = match (&state, clusters) {
                (_, 1) => None,
                (Some(p), _) => Some(p.with_file_name("site-b.db")),
                (None, _) => Some(record::default_path("site-b")),
            };
            let (loaded, record) = open_demo(&scenario, state, no_state, resume)?;
            let name_a = loaded.meta.cluster.clone();
            let note = loaded.note.clone();
            let roles = std::sync::Arc::new(crate::roles::Roles::load()?);
            // A demo's engine at the speed asked, its socket beside its state file.
            // With two sites the federation's mover runs (unless the console is a
            // viewer's), and a job asking for a cluster waits for it.
            let federated = clusters >= 2 && !read_only;
            let start = |loaded: crate::backend::Loaded, record: Option<Record>, observe| {
                let door = record.as_ref().map(|r| r.path().to_path_buf());
                let access = roles.socket_access();
                let federation = federated.then(|| loaded.meta.cluster.clone());
                let handle = engine::start(
                    loaded,
                    record,
                    EngineOptions {
                        speed,
                        paused,
                        roles: roles.clone(),
                        observe,
                        federation,
                        ..Default::default()
                    },
                );
                if let Some(path) = &door {
                    crate::api::serve(&handle, path, access);
                }
                handle
            };
            let handle = start(loaded, record, metrics.as_ref().map(|m| m.1.clone()));
            metrics_serve(metrics, &handle)?;
            let at = handle
                .view()
                .status
                .state
                .as_ref()
                .map(|p| format!(" on {}", p.display()))
                .unwrap_or_default();
            let mut line = format!(
                "{}maar: demo running headless{at} (pid {}), {speed}x; interrupt to stop\n",
                note.as_ref()
                    .map(|n| format!("maar: {n}\n"))
                    .unwrap_or_default(),
                std::process::id()
            );
            if clusters < 2 {
                return face(&handle, read_only, mouse, theme, note, &line, o);
            }
            // The second site: its own engine and state file, the same roles and speed.
            let first_state = handle.view().status.state.clone();
            if second_state.is_some() && second_state == first_state {
                handle.shutdown();
                return Err(Failure::Usage(format!(
                    "the second site's state file would be the first's ({}): give the first another --state",
                    first_state.map(|p| p.display().to_string()).unwrap_or_default()
                )));
            }
            let site_b = ScenarioArgs {
                scenario: Some(PathBuf::from("site-b")),
                seed: None,
            };
            let (loaded_b, record_b) = match open_demo(&site_b, second_state, no_state, resume) {
                Ok(b) => b,
                Err(e) => {
                    handle.shutdown();
                    return Err(e);
                }
            };
            let name_b = loaded_b.meta.cluster.clone();
            let handle_b = start(loaded_b, record_b, None);
            if let Some(path) = &handle_b.view().status.state {
                line.push_str(&format!("maar: second site on {}\n", path.display()));
            }
            let sites = vec![
                crate::console::app::Site {
                    name: name_a,
                    engine: handle.clone(),
                },
                crate::console::app::Site {
                    name: name_b,
                    engine: handle_b.clone(),
                },
            ];
            crate::live_cli::faces(&sites, read_only, mouse, theme, note, &line, o)
        }
        Cmd::Clusters {
            speed,
            mouse,
            theme,
            headless,
            read_only,
        } => run_clusters(speed, mouse, theme, headless, read_only, o),
        Cmd::Replay(args) => crate::replay_cli::run_on(args, o),
        Cmd::Agent(args) => crate::agent_cli::run(args, o),
        Cmd::Live(live) => live.visit(crate::live_cli::Runner(o)),
        Cmd::Completions { shell } => {
            let mut buf = Vec::new();
            clap_complete::generate(shell, &mut Cli::command(), "maar", &mut buf);
            o.put(&String::from_utf8_lossy(&buf));
            Ok(0)
        }
        Cmd::Man { dir: None } => {
            let mut buf = Vec::new();
            clap_mangen::Man::new(Cli::command())
                .render(&mut buf)
                .map_err(|e| Failure::Write(WriteFailure::Failed(e)))?;
            o.put(&String::from_utf8_lossy(&buf));
            Ok(0)
        }
        Cmd::Man { dir: Some(dir) } => {
            std::fs::create_dir_all(&dir)
                .and_then(|_| clap_mangen::generate_to(Cli::command(), &dir))
                .map_err(|e| {
                    Failure::No(format!("cannot write man pages to {}: {e}", dir.display()))
                })?;
            o.put(&format!("man pages written to {}\n", dir.display()));
            Ok(0)
        }
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
            if kind.kind() == maar_scheduler::replay::VariantKind::Cpu {
                use maar_scheduler::limits::MAX_TRACE_PODS;
                let gpu = p.iter().filter(|p| p.num_gpu > 0).count();
                // What it would write, refused before it is made: the pods grow as
                // 1 / (1 - percent).
                match maar_scheduler::replay::cpu_variant_pods(gpu, percent) {
                    None if gpu > 0 => {
                        return Err(Failure::Usage(format!(
                            "--kind cpu --percent {percent}: CPU-only pods cannot be all of a trace that keeps its {gpu} GPU pods; give a percent below 100"
                        )))
                    }
                    Some(cpu) if gpu.saturating_add(cpu) > MAX_TRACE_PODS => {
                        return Err(Failure::Usage(format!(
                            "--kind cpu --percent {percent}: {gpu} GPU pods and {cpu} CPU-only pods would be more than the limit of {MAX_TRACE_PODS} pods a trace (docs/limits.md); give a smaller percent"
                        )))
                    }
                    _ => {}
                }
            }
            let v = maar_scheduler::replay::variant(&p, &n, kind.kind(), percent, seed);
            let mut buf = Vec::new();
            crate::trace::write_pods(&mut buf, &v)
                .map_err(|e| Failure::Write(WriteFailure::Failed(e)))?;
            o.put(&String::from_utf8_lossy(&buf));
            Ok(0)
        }
        Cmd::Sim {
            scenario,
            until,
            output,
        } => {
            let (demo, name) = demo_at(&scenario, until, output == SimOutput::Json)?;
            let mut snap = demo.cluster().snapshot();
            match output {
                SimOutput::Json => {
                    snap.events = demo.events().to_vec();
                    o.put(&json(&SimReport::new(&name, demo.seed(), &snap)))
                }
                SimOutput::Table => {
                    o.put(&format!(
                        "scenario {name}, seed {}, at {}\n\n",
                        demo.seed(),
                        fmt_duration(until)
                    ));
                    o.put(&metrics_text(&snap.metrics));
                    o.put("\nJOBS\n");
                    let active: Vec<_> = snap
                        .jobs
                        .iter()
                        .filter(|j| {
                            j.phase == "Pending" || j.phase == "Running" || j.phase == "Restarting"
                        })
                        .cloned()
                        .collect();
                    o.put(&jobs_table(&active, snap.time_s, false));
                    o.put("\nQUOTAS\n");
                    o.put(&quotas_table(&snap.quotas, false));
                    o.put("\nCOST\n");
                    o.put(&costs_table(&snap.costs));
                }
            }
            Ok(0)
        }
        Cmd::Explain {
            job,
            source,
            output,
        } => {
            if source.cluster.as_deref() == Some("all") {
                return explain_everywhere(&job, &source, output, o);
            }
            let src = Source::open(&source)?;
            let c = src.cluster();
            let id = c
                .job_id(&job)
                .map_err(|e| Failure::No(format!("{e} {}", src.moment(&source))))?;
            let ex = c.explain(id);
            match output {
                TextOrJson::Json => o.put(&json(&ex)),
                TextOrJson::Text => o.put(&ex.to_string()),
            }
            Ok(0)
        }
        Cmd::Submit {
            file,
            dry_run,
            what_if,
            source,
            output,
        } => {
            if let Some(name) = &source.cluster {
                if name == "all" {
                    return Err(Failure::Usage(
                        "--cluster all: a job is submitted to one cluster: --cluster NAME, or auto for the one where it starts first".into(),
                    ));
                }
                if what_if || source.at.is_some() {
                    return Err(Failure::Usage(
                        "--cluster goes with --dry-run or a real submit; --what-if and --at look at one recorded cluster (--state)".into(),
                    ));
                }
                let spec = load_manifest(&file)?;
                let asked = format!("--cluster {}", maar_scheduler::limits::echo(name));
                return submit_to_cluster(spec, &file, name, &asked, dry_run, output, o);
            }
            let spec = load_manifest(&file)?;
            // The file asks for a cluster (`crater.ai/cluster`) and none was named
            // here: where the config lists several, it goes as `--cluster` would send
            // it; alone, it goes where the job is submitted.
            if let Some(name) = spec.cluster.clone() {
                let chose_one = source.state.is_some()
                    || source.context.is_some()
                    || source.at.is_some()
                    || source.scenario.scenario.is_some();
                let listed = crate::config::load().is_ok_and(|c| !c.clusters.is_empty());
                if !chose_one && !what_if && listed {
                    let asked = format!(
                        "{}: crater.ai/cluster: {}",
                        file.display(),
                        maar_scheduler::limits::echo(&name)
                    );
                    return submit_to_cluster(spec, &file, &name, &asked, dry_run, output, o);
                }
            }
            if what_if {
                return preview(&source, Command::Submit(Box::new(spec)), output, o);
            }
            if !dry_run {
                if source.scenario.scenario.is_some() || source.at.is_some() {
                    return Err(Failure::Usage(
                        "a real submit goes to a recorded cluster (--state); --scenario and --at are for --dry-run".into(),
                    ));
                }
                let a = ActArgs {
                    target: StateArg {
                        state: source.state.clone(),
                        context: source.context.clone(),
                        cluster: None,
                    },
                    output,
                    ..ActArgs::default()
                };
                return act(&a, Command::Submit(Box::new(spec)), o);
            }
            dry_run_submit(spec, &file, &source, output, o)
        }
        Cmd::Get {
            resource,
            source,
            output,
        } => {
            if source.cluster.as_deref() == Some("all") {
                return get_everywhere(resource, &source, output, o);
            }
            let src = Source::open(&source)?;
            let c = src.cluster();
            let mut snap = c.snapshot();
            if resource == Resource::Jobs {
                // When each Pending job is expected to start: one forward run.
                let f = c.forecast(maar_scheduler::forecast::Reach::default(), None);
                c.fill_starts(&mut snap.jobs, &f);
            }
            o.put(&get_text(&snap, resource, output));
            Ok(0)
        }
        Cmd::Act(op) => act(&op.act, op.command, o),
        Cmd::Audit {
            actor,
            action,
            object,
            since,
            until,
            last,
            output,
            state,
        } => {
            let rec = Reader::open(&state_path(&state), state.context())?;
            let rows = rec.audit(&AuditFilter {
                actor,
                action,
                object,
                since,
                until,
                limit: last,
            })?;
            o.put(&match output {
                AuditOutput::Table => audit_table(&rows),
                AuditOutput::Json => json(&rows.iter().map(audit_json).collect::<Vec<_>>()),
                AuditOutput::Csv => audit_csv(&rows),
            });
            Ok(0)
        }
        Cmd::State(StateCmd::Verify(state)) => {
            let path = state_path(&state);
            let started = Instant::now();
            // One snapshot of the record: what a running maar writes meanwhile is not
            // half seen.
            let (result, commands) = match Reader::open(&path, state.context())? {
                Reader::File(mut rec) => {
                    rec.check()?;
                    rec.snapshot(|r| {
                        Ok::<_, backend::LoadError>((backend::verify(r)?, r.command_count()?))
                    })?
                }
                Reader::Remote(r) => match r.ask(&crate::api::Request::Verify) {
                    Ok(crate::api::Reply::Verified { result, commands }) => (result, commands),
                    Ok(other) => return Err(Failure::No(format!("unexpected answer {other:?}"))),
                    Err(e) => return Err(api_failure(e)),
                },
            };
            match result {
                Ok(at) => {
                    o.put(&format!(
                        "{}: ok: the state restored from the newest checkpoint equals a clean rebuild from all {} command(s), at {} ({} ms)\n",
                        path.display(),
                        commands,
                        fmt_duration(at),
                        started.elapsed().as_millis()
                    ));
                    Ok(0)
                }
                Err(diff) => Err(Failure::No(format!(
                    "{}: the restored state differs from a clean rebuild: {diff}",
                    path.display()
                ))),
            }
        }
        Cmd::State(StateCmd::Show(state)) => {
            let path = state_path(&state);
            let rec = Reader::open(&path, state.context())?;
            let meta = rec.history().meta()?;
            let cp = rec.history().checkpoint_before(None)?;
            o.put(&format!("state file  {}\n", path.display()));
            o.put(&format!(
                "cluster     {} ({})\n",
                meta.cluster, meta.backend
            ));
            o.put(&format!("created     {}\n", meta.created));
            if let Some(s) = meta.seed {
                o.put(&format!("seed        {s}\n"));
            }
            o.put(&format!("commands    {}\n", rec.command_count()?));
            match cp {
                Some(c) => o.put(&format!(
                    "checkpoint  after command {} at {} ({})\n",
                    c.after_seq,
                    fmt_duration(c.at_s),
                    c.wall
                )),
                None => o.put("checkpoint  none yet\n"),
            }
            match rec.holder()? {
                Some(h) => o.put(&format!(
                    "running     maar pid {} on {} since {}{}\n",
                    h.pid,
                    h.host,
                    h.since,
                    if h.kind == "cli" { " (a command)" } else { "" }
                )),
                None => o.put("running     no\n"),
            }
            if let Reader::Remote(_) = rec {
                o.put(&format!(
                    "socket      {}\n",
                    crate::api::socket_path(&path).display()
                ));
            }
            Ok(0)
        }
    }
}

/// The core and record a `maar demo` runs on.
fn open_demo(
    scenario: &ScenarioArgs,
    state: Option<PathBuf>,
    no_state: bool,
    resume: bool,
) -> Result<(backend::Loaded, Option<Record>), Failure> {
    if resume {
        if scenario.seed.is_some() {
            return Err(Failure::Usage(
                "--resume continues the recorded demo with its own seed; --seed cannot be given with it".into(),
            ));
        }
        let path = match state {
            Some(p) => p,
            None => {
                let sc = load_scenario(scenario.scenario.as_deref())?;
                record::default_path(&sc.name)
            }
        };
        let mut rec = match Record::open(&path) {
            Err(RecordError::Missing { path }) => {
                return Err(Failure::Usage(format!(
                    "{path}: no demo to resume here; start one with `maar demo`"
                )))
            }
            r => r?,
        };
        // A command applied with no maar running holds the file for a moment: wait
        // for it, rather than refuse.
        let until = Instant::now() + INBOX_WAIT;
        loop {
            match rec.acquire() {
                Ok(()) => break,
                Err(RecordError::InUse { .. })
                    if Instant::now() < until && rec.holder()?.is_some_and(|h| h.kind == "cli") =>
                {
                    std::thread::sleep(Duration::from_millis(50));
                }
                Err(e) => return Err(e.into()),
            }
        }
        let loaded = backend::restore(&rec, false);
        let loaded = match loaded {
            Ok(l) => l,
            Err(e) => {
                let _ = rec.release();
                return Err(e.into());
            }
        };
        rec.drop_events_from(loaded.core.cluster().next_event_seq())?;
        tracing::info!(target: "maar", "resumed {} after {} command(s)", path.display(), loaded.after_seq);
        return Ok((loaded, Some(rec)));
    }
    let (text, sc) = scenario_text(scenario.scenario.as_deref())?;
    let path = if no_state {
        None
    } else {
        Some(state.unwrap_or_else(|| record::default_path(&sc.name)))
    };
    let (loaded, mut rec) = backend::fresh_demo(path.as_deref(), &text, sc, scenario.seed)?;
    if let Some(r) = &mut rec {
        r.acquire()?;
    }
    Ok((loaded, rec))
}

/// How long a command given on the command line waits for a running maar to answer.
const INBOX_WAIT: Duration = Duration::from_secs(20);

/// The answer to an operator command.
struct Answer {
    result: Result<String, String>,
    seq: Option<i64>,
    /// The key it was sent with (recorded with it: `maar audit` finds it).
    key: Option<String>,
    /// `socket` (through the running maar), `kubernetes` (through the API server to
    /// the maar behind it) or `file` (applied with none running).
    via: &'static str,
}

/// Applies an operator command to a recorded cluster: through the running maar that
/// holds it, or directly when none does. Prints the outcome; exit 1 when refused.
fn act(a: &ActArgs, command: Command, o: &mut Out) -> Result<i32, Failure> {
    if a.what_if {
        return preview(&a.source(), command, a.output, o);
    }
    let answer = deliver(&state_path(&a.target), a.target.context(), command)?;
    match a.output {
        TextOrJson::Json => {
            o.put(&json(&serde_json::json!({
                "result": if answer.result.is_ok() { "ok" } else { "refused" },
                "message": match &answer.result { Ok(m) | Err(m) => m },
                "seq": answer.seq,
                "key": answer.key,
                "via": answer.via,
            })));
            Ok(if answer.result.is_ok() { 0 } else { 1 })
        }
        TextOrJson::Text => match answer.result {
            Ok(m) => {
                o.put(&m);
                o.put("\n");
                Ok(0)
            }
            Err(why) => Err(Failure::No(format!("refused: {why}"))),
        },
    }
}

/// Gets a command applied and recorded; waits for its answer. A running maar is
/// reached through its socket (it knows who asks from the kernel, and records the
/// command at most once under this call's key, asked again after a lost answer);
/// with none running, only the state file's owner may apply it, taking the file for
/// the moment.
fn deliver(path: &Path, context: Option<&str>, command: Command) -> Result<Answer, Failure> {
    use crate::api::{ClientError, Remote, Reply, Request};
    let key = crate::api::new_key();
    let ssh = crate::actor::ssh_client(std::env::var("SSH_CONNECTION").ok().as_deref());
    // Behind the API server: the API server names the caller; one try (a retry with
    // the same key would be answered from the record all the same).
    if let Some(r) = context
        .map(|c| through_kube(c, path))
        .transpose()?
        .flatten()
    {
        let req = Request::Apply {
            command,
            key: key.clone(),
            ssh: None,
        };
        return match r.ask(&req) {
            Ok(Reply::Applied { result, seq }) => Ok(Answer {
                result,
                seq,
                key: Some(key),
                via: "kubernetes",
            }),
            Ok(other) => Err(Failure::No(format!("unexpected answer {other:?}"))),
            Err(e) => Err(api_failure(e)),
        };
    }
    let deadline = Instant::now() + INBOX_WAIT;
    let me = nix::unistd::getuid().as_raw();
    loop {
        let remote = Remote::connect(path).map_err(api_failure)?.filter(|_| {
            // A maar stopped past its lease (paused, or killed leaving its socket) is
            // not asked: the owner takes the file over, and the stopped one, if it
            // continues, finds its lease gone and acknowledges nothing.
            crate::roles::owner(path) != Some(me)
                || Record::open_read_only(path)
                    .and_then(|r| r.holder())
                    .map_or(true, |h| h.is_some())
        });
        if let Some(r) = remote {
            let asked = r.ask(&Request::Apply {
                command: command.clone(),
                key: key.clone(),
                ssh: ssh.clone(),
            });
            match asked {
                Ok(Reply::Applied { result, seq }) => {
                    return Ok(Answer {
                        result,
                        seq,
                        key: Some(key),
                        via: "socket",
                    })
                }
                Ok(other) => return Err(Failure::No(format!("unexpected answer {other:?}"))),
                Err(ClientError::Answer(e)) => {
                    return Err(Failure::No(format!("{}: {e}", path.display())))
                }
                // The connection broke (the maar stopped?): ask again with the same
                // key, through whoever holds the file next.
                Err(_) if Instant::now() < deadline => {
                    std::thread::sleep(Duration::from_millis(100));
                    continue;
                }
                Err(e) => return Err(api_failure(e)),
            }
        }
        // No maar serves the file: only its owner may change it without one (anyone
        // else could only claim to be someone).
        match crate::roles::owner(path) {
            None => {
                return Err(Record::open(path)
                    .err()
                    .map(Into::into)
                    .unwrap_or_else(|| Failure::No(format!("{}: cannot be read", path.display()))))
            }
            Some(o) if o != me => {
                let name = crate::actor::user_name(o);
                return Err(Failure::No(format!(
                    "{}: no maar is running on it, and only its owner ({name}) may change it without one; ask {name} to start it (`maar demo --resume`, `maar kube`, `maar local`), then act through it",
                    path.display()
                )));
            }
            Some(_) => {}
        }
        let mut rec = Record::open(path)?;
        match rec.acquire_as(record::LeaseKind::Cli) {
            Ok(()) => {}
            Err(RecordError::InUse { .. }) if Instant::now() < deadline => {
                // A maar is starting (its socket comes next) or another command holds
                // the file for a moment.
                std::thread::sleep(Duration::from_millis(50));
                continue;
            }
            Err(e) => return Err(e.into()),
        }
        // No maar holds the file now (one starting holds its lease: waited for above).
        let meta = match rec.meta() {
            Ok(m) => m,
            Err(e) => {
                let _ = rec.release();
                return Err(e.into());
            }
        };
        if crate::backends::offline(&meta.backend)
            .is_some_and(|o| maar_scheduler::Driver::world_read_anew(&o))
        {
            // Recorded now, it would be acknowledged and never done: only a running
            // maar carries a command out in such a world, and a start reads it anew.
            let _ = rec.release();
            return Err(Failure::No(format!(
                "{}: no maar is running on the {} cluster {}, and a command needs one: the running maar carries it out in the cluster, and a start reads the cluster anew, so one recorded now would never be done; start `maar {} --context {} --state {}` and act through it, or act in the cluster itself (`kubectl cordon`, `kubectl delete pod`)",
                path.display(),
                meta.backend,
                meta.cluster,
                meta.backend,
                meta.cluster,
                path.display()
            )));
        }
        let mut loaded = match backend::restore(&rec, false) {
            Ok(l) => l,
            Err(e) => {
                let _ = rec.release();
                return Err(e.into());
            }
        };
        if loaded.meta.backend == "demo" {
            // A demo is rerun: what happened after its checkpoint happens again.
            rec.drop_events_from(loaded.core.cluster().next_event_seq())?;
        } else {
            // A live world's events after the checkpoint (a maar killed since wrote
            // them) are history that nothing tells again: numbered on from, kept.
            loaded.core.continue_events(rec.next_event_seq()?);
        }
        let handle = engine::start(
            loaded,
            Some(rec),
            EngineOptions {
                speed: 1.0,
                paused: true,
                roles: std::sync::Arc::new(crate::roles::Roles::load()?),
                ..Default::default()
            },
        );
        let answer = match handle.apply_keyed(crate::actor::current(), command.clone(), key.clone())
        {
            Ok(ack) => Ok(Answer {
                result: Ok(ack.message),
                seq: ack.seq,
                key: Some(key),
                via: "file",
            }),
            Err(Refusal::Refused { why, seq }) => Ok(Answer {
                result: Err(why),
                seq,
                key: Some(key),
                via: "file",
            }),
            Err(e) => Err(Failure::No(e.to_string())),
        };
        handle.shutdown();
        return answer;
    }
}

/// Prints what a command would do on the source's cluster, changing nothing.
fn preview(
    source: &SourceArgs,
    command: Command,
    output: TextOrJson,
    o: &mut Out,
) -> Result<i32, Failure> {
    let actor = crate::actor::current();
    // The same role check the engine makes: a preview of a command one may not give
    // says so. A running maar judges (its roles); else this user's own.
    let state = match &source.state_file() {
        Some(p) => Some(p.clone()),
        None if source.scenario.scenario.is_none() && source.scenario.seed.is_none() => {
            Some(default_state()).filter(|p| p.exists())
        }
        None => None,
    };
    let remote = match &state {
        Some(p) => running(p, source.context().as_deref())?,
        None => None,
    };
    let grant = match remote {
        Some(r) => match r.ask(&crate::api::Request::Grant) {
            Ok(crate::api::Reply::Grant { role, why, .. }) => crate::roles::Grant { role, why },
            Ok(other) => return Err(Failure::No(format!("unexpected answer {other:?}"))),
            Err(e) => return Err(api_failure(e)),
        },
        None => {
            // As that cluster's engine would judge: its own roles first. With no maar
            // running only the file's owner acts on it, so the caller's own roles file
            // ($MAAR_ROLES, its config) counts only when the caller owns it; anyone
            // else is judged as on a shared file (docs/roles.md).
            let owner = state.as_deref().and_then(crate::roles::owner);
            match owner.filter(|&o| o != nix::unistd::getuid().as_raw()) {
                // Whatever a roles file says, with no maar running only the file's
                // owner acts on it.
                Some(o) => {
                    let who = crate::actor::user_name(o);
                    crate::roles::Grant {
                        role: maar_scheduler::Role::Viewer,
                        why: format!(
                            "no maar runs on this state file: only its owner, {who}, acts on it then; while {who}'s maar runs, its roles decide"
                        ),
                    }
                }
                None => {
                    let roles = crate::roles::Roles::load()?;
                    let cluster = state
                        .as_deref()
                        .and_then(|p| Record::open_read_only(p).ok())
                        .and_then(|r| r.meta().ok())
                        .map(|m| m.cluster);
                    match cluster {
                        Some(c) => roles.in_cluster(&c),
                        None => roles,
                    }
                    .grant(&actor, owner, None)
                }
            }
        }
    };
    let need = command.required_role();
    let (core, driver) = Source::open(source)?.into_parts();
    let mut p = maar_scheduler::whatif::what_if(&core, driver.as_ref(), actor.clone(), command);
    if grant.role < need {
        let why = format!(
            "{} needs the {need} role; {} is {} ({})",
            p.action, actor.user, grant.role, grant.why
        );
        p.refuse(why);
    }
    match output {
        TextOrJson::Json => o.put(&json(&p)),
        TextOrJson::Text => {
            o.put(&format!("what if, at {}: ", fmt_duration(p.at_s)));
            o.put(&p.text(20));
        }
    }
    Ok(if p.accepted { 0 } else { 1 })
}

/// `maar clusters`: one console on every cluster of the config file's list, each
/// opened as its own command would (`maar demo --resume --state FILE`, `maar kube
/// --context NAME`), named as the list names it.
fn run_clusters(
    speed: f64,
    mouse: bool,
    theme: Option<String>,
    headless: bool,
    read_only: bool,
    o: &mut Out,
) -> Result<i32, Failure> {
    let listed = listed_clusters("maar clusters")?;
    let theme = console_theme(headless, theme.as_deref())?;
    let roles = std::sync::Arc::new(crate::roles::Roles::load()?);
    let mut sites: Vec<crate::federation::Site> = Vec::new();
    let mut line = String::new();
    let joining = std::sync::Arc::new(crate::federation::Joining::default());
    let stop = |sites: &[crate::federation::Site]| {
        joining.stop();
        sites.iter().for_each(|s| s.engine.shutdown())
    };
    // Several clusters: the federation's mover runs unless the console is a viewer's,
    // and a job asking for a cluster waits for it.
    let federated = listed.len() > 1 && !read_only;
    for c in listed {
        let federation = federated.then(|| c.name.clone());
        let opened = match (&c.state, &c.context) {
            (_, Some(context)) => {
                crate::live_cli::open_kube(context, roles.clone(), headless, federation.clone())
            }
            _ if c.local.is_some() => crate::live_cli::open_local(
                c.local.as_ref().expect("local"),
                &c.state_file(),
                roles.clone(),
                headless,
                federation.clone(),
            ),
            (Some(p), None) => open_listed_state(p, speed, roles.clone(), federation.clone()),
            (None, None) => Err(Failure::Usage(format!(
                "cluster {}: neither a state file nor a context",
                c.name
            ))),
        };
        match opened {
            Ok((engine, what)) => {
                line.push_str(&format!("maar: {}: {what}\n", c.name));
                sites.push(crate::federation::Site {
                    name: c.name,
                    engine,
                });
            }
            // A Kubernetes cluster that does not answer: the others go on, and it is
            // tried again until it answers.
            Err(Failure::No(why)) if c.context.is_some() => {
                line.push_str(&format!(
                    "maar: {}: not answering, tried again every {} s: {why}\n",
                    c.name,
                    crate::federation::RETRY_EVERY.as_secs()
                ));
                let (name, context, roles) = (
                    c.name.clone(),
                    c.context.clone().unwrap_or_default(),
                    roles.clone(),
                );
                joining.wait_for(
                    c.name,
                    why,
                    Box::new(move || {
                        crate::live_cli::open_kube(
                            &context,
                            roles.clone(),
                            headless,
                            federation.clone(),
                        )
                        .map(|(engine, what)| (name.clone(), engine, what))
                        .map_err(|e| e.to_string())
                    }),
                );
            }
            Err(e) => {
                stop(&sites);
                return Err(match e {
                    Failure::Usage(m) => Failure::Usage(format!("cluster {}: {m}", c.name)),
                    Failure::No(m) => Failure::No(format!("cluster {}: {m}", c.name)),
                    other => other,
                });
            }
        }
    }
    let waiting = joining.waiting();
    if sites.is_empty() {
        stop(&sites);
        let why: Vec<String> = waiting.iter().map(|(n, w)| format!("{n}: {w}")).collect();
        return Err(Failure::No(format!(
            "no cluster of the list answers ({})",
            why.join("; ")
        )));
    }
    line.push_str(&format!(
        "maar: {} cluster{}{} (pid {}); interrupt to stop\n",
        sites.len(),
        if sites.len() == 1 { "" } else { "s" },
        if waiting.is_empty() {
            String::new()
        } else {
            format!(", {} more when they answer", waiting.len())
        },
        std::process::id()
    ));
    crate::live_cli::faces_joining(
        &sites,
        (!waiting.is_empty()).then_some(joining.clone()),
        read_only,
        mouse,
        theme,
        None,
        &line,
        o,
    )
}

/// A listed cluster named by its state file: a demo's is continued (its simulation
/// runs on); a live backend's runs only where its world is (`maar local` on its
/// machine, `maar kube --context`), so it is refused with that line.
fn open_listed_state(
    path: &Path,
    speed: f64,
    roles: std::sync::Arc<crate::roles::Roles>,
    federation: Option<String>,
) -> Result<(engine::EngineHandle, String), Failure> {
    let meta = Record::open_read_only(path)?.meta()?;
    if meta.backend != "demo" {
        return Err(Failure::Usage(format!(
            "{} holds the {} cluster {}: it runs where its world is (`maar {}`); list a Kubernetes cluster by its `context`, this machine as `local: {{}}` (with `state` naming this file)",
            path.display(),
            meta.backend,
            meta.cluster,
            meta.backend
        )));
    }
    let (loaded, record) = open_demo(
        &ScenarioArgs::default(),
        Some(path.to_path_buf()),
        false,
        true,
    )?;
    let access = roles.socket_access();
    let handle = engine::start(
        loaded,
        record,
        EngineOptions {
            speed,
            roles,
            federation,
            ..Default::default()
        },
    );
    crate::api::serve(&handle, path, access);
    Ok((
        handle,
        format!("demo {} continued on {}", meta.cluster, path.display()),
    ))
}

/// The config file's `clusters:` for `--cluster all` (a usage error naming the file
/// when it lists none).
fn listed_clusters(what: &str) -> Result<Vec<crate::config::Cluster>, Failure> {
    let clusters = crate::config::clusters()?;
    if clusters.is_empty() {
        let where_ = crate::config::path()
            .map(|p| p.display().to_string())
            .unwrap_or_else(|| "the config file".into());
        return Err(Failure::Usage(format!(
            "{what}: no `clusters:` in {where_} (each a name and its `state` or `context`: docs/clusters.md)"
        )));
    }
    Ok(clusters)
}

/// Each listed cluster's source at `--at`, by name; one that cannot be read is said
/// on stderr and left out (the second value counts them).
fn each_listed(source: &SourceArgs) -> Result<(Vec<(String, Source)>, usize), Failure> {
    let mut read = Vec::new();
    let mut failed = 0;
    for c in listed_clusters("--cluster all")? {
        let one = SourceArgs {
            cluster: Some(c.name.clone()),
            at: source.at,
            ..SourceArgs::default()
        };
        match Source::open(&one) {
            Ok(src) => read.push((c.name, src)),
            Err(e) => {
                eprintln!("maar: cluster {}: {e}", c.name);
                failed += 1;
            }
        }
    }
    Ok((read, failed))
}

/// `maar get RESOURCE --cluster all`: jobs, nodes, GPUs and quotas of every listed
/// cluster in one table with a CLUSTER column (a Pending job's STARTS on its own
/// cluster's clock); events, alerts, costs and metrics cluster by cluster.
fn get_everywhere(
    resource: Resource,
    source: &SourceArgs,
    output: GetOutput,
    o: &mut Out,
) -> Result<i32, Failure> {
    let (read, failed) = each_listed(source)?;
    let snaps: Vec<(String, Snapshot)> = read
        .into_iter()
        .map(|(name, src)| {
            let c = src.cluster();
            let mut snap = c.snapshot();
            if resource == Resource::Jobs {
                let f = c.forecast(maar_scheduler::forecast::Reach::default(), None);
                c.fill_starts(&mut snap.jobs, &f);
            }
            (name, snap)
        })
        .collect();
    let merged = matches!(
        resource,
        Resource::Jobs | Resource::Nodes | Resource::Gpus | Resource::Quotas
    );
    if merged {
        // One clock for the table: each cluster's starts moved onto the latest one.
        let now = snaps.iter().map(|(_, s)| s.time_s).max().unwrap_or(0);
        let base = Snapshot {
            time_s: now,
            ..Snapshot::default()
        };
        let all = Snapshot::of_clusters(&base, snaps.iter().map(|(n, s)| (n.as_str(), s)));
        o.put(&get_text(&all, resource, output));
    } else {
        match output {
            GetOutput::Json | GetOutput::Yaml => {
                let mut by: serde_json::Map<String, serde_json::Value> = Default::default();
                for (name, s) in &snaps {
                    let v = serde_json::from_str(&get_text(s, resource, GetOutput::Json))
                        .map_err(|e| Failure::No(format!("cluster {name}: {e}")))?;
                    by.insert(name.clone(), v);
                }
                o.put(&if output == GetOutput::Json {
                    json(&by)
                } else {
                    yaml(&by)
                });
            }
            _ => {
                for (i, (name, s)) in snaps.iter().enumerate() {
                    if i > 0 {
                        o.put("\n");
                    }
                    o.put(&format!("CLUSTER {name}\n"));
                    o.put(&get_text(s, resource, output));
                }
            }
        }
    }
    Ok(if failed > 0 { 1 } else { 0 })
}

/// `maar explain JOB --cluster all`: its explanation in each listed cluster that has
/// it (a job sent among clusters runs in one, but one moved leaves its withdrawn
/// self behind).
fn explain_everywhere(
    job: &str,
    source: &SourceArgs,
    output: TextOrJson,
    o: &mut Out,
) -> Result<i32, Failure> {
    let (read, failed) = each_listed(source)?;
    let mut found = Vec::new();
    for (name, src) in &read {
        let c = src.cluster();
        if let Ok(id) = c.job_id(job) {
            found.push((name.clone(), c.explain(id)));
        }
    }
    if found.is_empty() {
        let names: Vec<&str> = read.iter().map(|(n, _)| n.as_str()).collect();
        return Err(Failure::No(format!(
            "job {} is in none of the clusters read ({})",
            maar_scheduler::limits::echo(job),
            names.join(", ")
        )));
    }
    match output {
        TextOrJson::Json => o.put(&json(
            &found
                .iter()
                .map(|(n, ex)| serde_json::json!({"cluster": n, "explanation": ex}))
                .collect::<Vec<_>>(),
        )),
        TextOrJson::Text => {
            for (i, (name, ex)) in found.iter().enumerate() {
                if i > 0 {
                    o.put("\n");
                }
                o.put(&format!("CLUSTER {name}\n{ex}"));
            }
        }
    }
    Ok(if failed > 0 { 1 } else { 0 })
}

/// `maar submit --cluster NAME|auto`: to a cluster of the config file's list, or to
/// the one where it starts first: each cluster's prospect asked on its record (the
/// job as its world would take it), the choice and why printed and kept with the job.
#[allow(clippy::too_many_arguments)]
fn submit_to_cluster(
    spec: maar_scheduler::JobSpec,
    file: &Path,
    name: &str,
    asked: &str,
    dry_run: bool,
    output: TextOrJson,
    o: &mut Out,
) -> Result<i32, Failure> {
    let clusters = crate::config::clusters()?;
    let where_ = crate::config::path()
        .map(|p| p.display().to_string())
        .unwrap_or_else(|| "the config file".into());
    if clusters.is_empty() {
        return Err(Failure::Usage(format!(
            "{asked}: no `clusters:` in {where_} (each a name and its `state` or `context`: docs/clusters.md)"
        )));
    }
    let target = |c: &crate::config::Cluster| SourceArgs {
        state: c.state.clone(),
        context: c.context.clone(),
        ..SourceArgs::default()
    };
    if name != "auto" {
        let Some(c) = clusters.iter().find(|c| c.name == name) else {
            let names: Vec<&str> = clusters.iter().map(|c| c.name.as_str()).collect();
            return Err(Failure::Usage(format!(
                "{asked}: no such cluster in {where_} ({}, or auto)",
                names.join(", ")
            )));
        };
        if dry_run {
            return dry_run_submit(spec, file, &target(c), output, o);
        }
        return submit_in(c, spec, output, o);
    }
    let mut prospects = Vec::new();
    for c in &clusters {
        // A job is sent only when every cluster answers: one not read might hold it.
        let l = recorded(&c.state_file(), c.context.as_deref()).map_err(|e| {
            Failure::No(format!(
                "cluster {} cannot be read ({e}): a job is sent only when every cluster answers (it may be there already)",
                c.name
            ))
        })?;
        // As its world would take it (local mode: its one pool).
        let p = maar_scheduler::kit::localized(l.driver.as_ref(), &l.core, &spec)
            .and_then(|s| l.core.prospect(&s));
        prospects.push((c.name.clone(), p));
    }
    let Some(choice) = maar_scheduler::dispatch::choose(&prospects) else {
        let why: Vec<String> = prospects
            .iter()
            .map(|(n, p)| format!("{n}: {}", p.as_ref().err().cloned().unwrap_or_default()))
            .collect();
        return Err(Failure::No(format!(
            "{}: no cluster takes it: {}",
            file.display(),
            why.join("; ")
        )));
    };
    if output == TextOrJson::Json && dry_run {
        o.put(&json(&serde_json::json!({
            "cluster": choice.cluster,
            "why": choice.why,
            "prospects": prospects
                .iter()
                .map(|(n, p)| match p {
                    Ok(p) => serde_json::json!({"cluster": n, "prospect": p}),
                    Err(e) => serde_json::json!({"cluster": n, "refused": e}),
                })
                .collect::<Vec<_>>(),
        })));
    } else if output == TextOrJson::Text {
        o.put(&format!("{}\n", choice.why));
    }
    // With -o json, a real submit prints its answer alone (one JSON document); the
    // choice and why are recorded with the job.
    if dry_run {
        return Ok(0);
    }
    let mut spec = spec;
    spec.sent_start_in = prospects[choice.index]
        .1
        .as_ref()
        .ok()
        .and_then(|p| p.start_in);
    spec.dispatched = Some(choice.why);
    submit_in(&clusters[choice.index], spec, output, o)
}

/// A submit to a cluster of the config's list, as `maar submit --state/--context` does.
fn submit_in(
    c: &crate::config::Cluster,
    spec: maar_scheduler::JobSpec,
    output: TextOrJson,
    o: &mut Out,
) -> Result<i32, Failure> {
    let a = ActArgs {
        target: StateArg {
            state: c.state.clone(),
            context: c.context.clone(),
            cluster: None,
        },
        output,
        ..ActArgs::default()
    };
    act(&a, Command::Submit(Box::new(spec)), o)
}

fn dry_run_submit(
    spec: maar_scheduler::JobSpec,
    file: &Path,
    source: &SourceArgs,
    output: TextOrJson,
    o: &mut Out,
) -> Result<i32, Failure> {
    let (mut core, mut driver) = Source::open(source)?.into_parts();
    // As its world would take it (local mode runs manifests in its one pool and
    // project), as a real submit does.
    let mut spec = maar_scheduler::kit::localized(driver.as_ref(), &core, &spec)
        .map_err(|why| Failure::Usage(format!("{}: {why}", file.display())))?;
    let full = format!("{}/{}", spec.project, spec.name);
    if core.cluster().job_id(&full).is_ok() {
        // Evaluate a copy under another name, and say what a real submit would do.
        o.put(&format!(
            "note: a job {full} already exists here; a real submit would be refused (evaluated as a copy)\n"
        ));
        spec.name = format!("{}-dry-run", spec.name);
    }
    let c = core.cluster();
    if spec.pool.is_empty() {
        // A Deployment names no pool: the one a real submit would choose.
        if let Ok(p) = c.default_pool(&spec) {
            spec.pool = p;
        }
    }
    let never = c.unknown_project_or_pool(&spec.project, &spec.pool);
    if let Some(why) = never {
        o.put(&format!(
            "{}: can never run here: {why}; a real submit would be refused\n",
            file.display()
        ));
        return Ok(1);
    }
    let out = driver.command(
        &mut core,
        Actor::system("dry-run"),
        Command::Submit(Box::new(spec.clone())),
    );
    if let Err(e) = out.result {
        return Err(Failure::Usage(format!("{}: {e}", file.display())));
    }
    let full = format!("{}/{}", spec.project, spec.name);
    let id = core
        .cluster()
        .job_id(&full)
        .map_err(|e| Failure::Usage(e.to_string()))?;
    if core.cluster().jobs[id as usize].phase == Phase::Pending {
        // A recorded live cluster's driver schedules nothing without its world: the
        // cycle its running maar would run, binds taken as done (the demo's has run).
        maar_scheduler::kit::Bare::settle(&mut core, &mut Vec::new(), &mut Vec::new());
    }
    let c = core.cluster();
    let ex = c.explain(id);
    let running = c.jobs[id as usize].phase == Phase::Running;
    match output {
        TextOrJson::Json => o.put(&json(&ex)),
        TextOrJson::Text => {
            if running {
                o.put(&format!(
                    "{}: valid; would run now on {}\n",
                    file.display(),
                    ex.placement.join("; ")
                ));
            } else {
                o.put(&format!("{}: valid, but cannot run now\n", file.display()));
                o.put(&ex.to_string());
            }
        }
    }
    Ok(if running { 0 } else { 1 })
}

fn get_text(snap: &Snapshot, resource: Resource, output: GetOutput) -> String {
    let wide = output == GetOutput::Wide;
    let gpus = || {
        snap.nodes
            .iter()
            .map(|n| (&n.name, &n.gpus))
            .collect::<Vec<_>>()
    };
    match (resource, output) {
        (Resource::Nodes, GetOutput::Json) => json(&snap.nodes),
        (Resource::Nodes, GetOutput::Yaml) => yaml(&snap.nodes),
        (Resource::Nodes, _) => nodes_table(&snap.nodes, wide),
        (Resource::Gpus, GetOutput::Json) => json(&gpus()),
        (Resource::Gpus, GetOutput::Yaml) => yaml(&gpus()),
        (Resource::Gpus, _) => gpus_table(&snap.nodes, wide),
        (Resource::Jobs, GetOutput::Json) => json(&snap.jobs),
        (Resource::Jobs, GetOutput::Yaml) => yaml(&snap.jobs),
        (Resource::Jobs, _) => jobs_table(&snap.jobs, snap.time_s, wide),
        (Resource::Quotas, GetOutput::Json) => json(&(&snap.quotas, &snap.quota_requests)),
        (Resource::Quotas, GetOutput::Yaml) => yaml(&(&snap.quotas, &snap.quota_requests)),
        (Resource::Quotas, _) => {
            quotas_table(&snap.quotas, wide)
                + &quota_totals(&snap.quotas)
                + &requests_table(&snap.quota_requests)
        }
        (Resource::Events, GetOutput::Json) => json(&snap.events),
        (Resource::Events, GetOutput::Yaml) => yaml(&snap.events),
        (Resource::Events, _) => events_table(&snap.events),
        (Resource::Alerts, GetOutput::Json) => json(&(&snap.alerts, &snap.resolved_alerts)),
        (Resource::Alerts, GetOutput::Yaml) => yaml(&(&snap.alerts, &snap.resolved_alerts)),
        (Resource::Alerts, _) => alerts_table(&snap.alerts, wide),
        (Resource::Costs, GetOutput::Json) => json(&snap.costs),
        (Resource::Costs, GetOutput::Yaml) => yaml(&snap.costs),
        (Resource::Costs, _) => costs_table(&snap.costs),
        (Resource::Metrics, GetOutput::Json) => json(&snap.metrics),
        (Resource::Metrics, GetOutput::Yaml) => yaml(&snap.metrics),
        (Resource::Metrics, _) => metrics_text(&snap.metrics),
    }
}

fn audit_json(r: &record::CommandRow) -> serde_json::Value {
    serde_json::json!({
        "seq": r.seq,
        "wall": r.wall,
        "cluster_time_s": r.at_s,
        "actor": r.actor.user,
        "uid": r.actor.uid,
        "from": r.actor.from,
        "action": r.action,
        "object": r.object,
        "command": r.command,
        "result": if r.result.is_ok() { "ok" } else { "refused" },
        "message": match &r.result { Ok(m) | Err(m) => m },
        "key": r.key,
    })
}

fn audit_table(rows: &[record::CommandRow]) -> String {
    let mut t = table(&[
        "SEQ", "WHEN", "AT", "WHO", "FROM", "ACTION", "OBJECT", "RESULT",
    ]);
    for r in rows {
        let (res, msg) = match &r.result {
            Ok(m) => ("ok", m.as_str()),
            Err(m) => ("refused", m.as_str()),
        };
        t.add_row([
            r.seq.to_string(),
            local_time(&r.wall),
            fmt_duration(r.at_s),
            r.actor.user.clone(),
            r.actor.from.clone().unwrap_or_else(|| "local".into()),
            r.action.clone(),
            r.object.clone(),
            format!("{res}: {msg}"),
        ]);
    }
    render(t)
}

fn local_time(rfc3339: &str) -> String {
    chrono::DateTime::parse_from_rfc3339(rfc3339)
        .map(|t| {
            t.with_timezone(&chrono::Local)
                .format("%Y-%m-%d %H:%M:%S")
                .to_string()
        })
        .unwrap_or_else(|_| rfc3339.to_string())
}

fn audit_csv(rows: &[record::CommandRow]) -> String {
    let mut w = csv::Writer::from_writer(Vec::new());
    let _ = w.write_record([
        "seq",
        "wall",
        "cluster_time_s",
        "actor",
        "uid",
        "from",
        "action",
        "object",
        "result",
        "message",
    ]);
    for r in rows {
        let (res, msg) = match &r.result {
            Ok(m) => ("ok", m.clone()),
            Err(m) => ("refused", m.clone()),
        };
        let _ = w.write_record([
            r.seq.to_string(),
            r.wall.clone(),
            r.at_s.to_string(),
            r.actor.user.clone(),
            r.actor.uid.map(|u| u.to_string()).unwrap_or_default(),
            r.actor.from.clone().unwrap_or_default(),
            r.action.clone(),
            r.object.clone(),
            res.to_string(),
            msg,
        ]);
    }
    String::from_utf8(w.into_inner().unwrap_or_default()).unwrap_or_default()
}
