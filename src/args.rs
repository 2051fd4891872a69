//! The argument groups the command line's commands share (where to look, where to act,
//! how to report), apart from `cli.rs` so the commands built elsewhere
//! (`verbs_cli.rs`, `replay_cli.rs`, `agent_cli.rs`) use them without leaning on the
//! command line that uses them.

use std::path::PathBuf;

use clap::{Args, ValueEnum};

use maar_scheduler::quantity::parse_duration_s;

pub(crate) fn duration(s: &str) -> Result<u64, String> {
    parse_duration_s(s).map_err(|e| e.to_string())
}

#[derive(Args, Debug, Clone, Default)]
pub struct ScenarioArgs {
    /// Scenario file (docs/scenario.md); the built-in demo/lab.yaml when absent.
    #[arg(long, value_name = "FILE")]
    pub scenario: Option<PathBuf>,
    /// Seed for the scenario's randomness (overrides the file's).
    #[arg(long)]
    pub seed: Option<u64>,
}

/// Where a reading command looks: a recorded cluster (`--state`, or the demo's state
/// file when it exists and no scenario is asked for), or a scenario at a moment.
#[derive(Args, Debug, Clone, Default)]
pub struct SourceArgs {
    #[command(flatten)]
    pub scenario: ScenarioArgs,
    /// The moment at which to look, e.g. 90s, 30m, 2h15m (at most 366d): in the recorded
    /// cluster's history (--state, or the demo's state file when there is one), or in
    /// the scenario when --scenario or --seed is given.
    #[arg(long, value_parser = duration)]
    pub at: Option<u64>,
    /// A recorded cluster (a state file). Without --state, --scenario or --seed: the
    /// demo's state file when there is one, else the built-in scenario (at --at or 0s).
    #[arg(long, value_name = "PATH", conflicts_with_all = ["scenario", "seed"])]
    pub state: Option<PathBuf>,
    /// The Kubernetes cluster `maar kube --context NAME` records (its state file).
    #[arg(long, value_name = "NAME", conflicts_with_all = ["scenario", "seed", "state"])]
    pub context: Option<String>,
    /// A cluster of the config file's `clusters:` list, by name; `all` (get, explain):
    /// each of them, named in a CLUSTER column; `auto` (submit): the one where the job
    /// starts first (docs/clusters.md).
    #[arg(long, value_name = "NAME|all", conflicts_with_all = ["scenario", "seed", "state", "context"])]
    pub cluster: Option<String>,
}

impl SourceArgs {
    /// The state file asked for: --state, the one of --context, or of --cluster NAME.
    pub fn state_file(&self) -> Option<PathBuf> {
        self.state
            .clone()
            .or_else(|| self.context.as_deref().map(kube_state))
            .or_else(|| self.named().map(|c| c.state_file()))
    }

    /// The Kubernetes context asked for: --context, or --cluster NAME's.
    pub fn context(&self) -> Option<String> {
        self.context
            .clone()
            .or_else(|| self.named().and_then(|c| c.context))
    }

    /// --cluster NAME's entry in the config file (none for `all`, `auto`, or a name
    /// not there: [`SourceArgs::check_cluster`] says which).
    fn named(&self) -> Option<crate::config::Cluster> {
        match self.cluster.as_deref() {
            None | Some("all") | Some("auto") => None,
            Some(n) => crate::config::cluster_arg(n).ok(),
        }
    }

    /// A --cluster NAME that is in the config file's list (or `all`, `auto`, none);
    /// else the usage error that names the file and what it has.
    pub fn check_cluster(&self) -> Result<(), String> {
        match self.cluster.as_deref() {
            None | Some("all") | Some("auto") => Ok(()),
            Some(n) => crate::config::cluster_arg(n).map(|_| ()),
        }
    }
}

/// A recorded cluster.
#[derive(Args, Debug, Clone, Default)]
pub struct StateArg {
    /// State file; the demo's (`$XDG_STATE_HOME/maar/lab.db`) when absent.
    #[arg(long, value_name = "PATH")]
    pub state: Option<PathBuf>,
    /// The Kubernetes cluster `maar kube --context NAME` runs (its state file).
    #[arg(long, value_name = "NAME", conflicts_with = "state")]
    pub context: Option<String>,
    /// A cluster of the config file's `clusters:` list, by name (docs/clusters.md).
    #[arg(long, value_name = "NAME", value_parser = crate::config::cluster_arg, conflicts_with_all = ["state", "context"])]
    pub cluster: Option<crate::config::Cluster>,
}

impl StateArg {
    /// The state file asked for: --state, the one of --context, or of --cluster.
    pub fn state_file(&self) -> Option<PathBuf> {
        self.state
            .clone()
            .or_else(|| self.context.as_deref().map(kube_state))
            .or_else(|| self.cluster.as_ref().map(|c| c.state_file()))
    }

    /// The Kubernetes context asked for: --context, or --cluster's.
    pub fn context(&self) -> Option<&str> {
        self.context
            .as_deref()
            .or_else(|| self.cluster.as_ref().and_then(|c| c.context.as_deref()))
    }
}

/// The recorded cluster an operator command acts on, and how to report.
#[derive(Args, Debug, Clone, Default)]
pub struct ActArgs {
    #[command(flatten)]
    pub target: StateArg,
    /// `json` prints {result, message, seq, key, via} (also when refused: `key` finds
    /// it in `maar audit`, `via` says socket, kubernetes or file); with --what-if,
    /// {action, accepted, message, evicted, started, still_pending, quotas, job}.
    #[arg(short = 'o', long, value_enum, default_value_t = TextOrJson::Text)]
    pub output: TextOrJson,
    /// Say what the command would do (jobs evicted, started, still Pending, quota
    /// changes), computed on a copy; change nothing. Exit 0, or 1 if it would be refused.
    #[arg(long)]
    pub what_if: bool,
    /// With --what-if: preview on this scenario (at --at) instead of a recorded cluster.
    #[arg(
        long,
        value_name = "FILE",
        requires = "what_if",
        conflicts_with = "state"
    )]
    pub scenario: Option<PathBuf>,
    /// With --what-if: the scenario's seed.
    #[arg(long, requires = "what_if", conflicts_with = "state")]
    pub seed: Option<u64>,
    /// With --what-if: the moment to preview at, e.g. 2h15m (a scenario's time, or a
    /// recorded cluster's past).
    #[arg(long, value_parser = duration, requires = "what_if")]
    pub at: Option<u64>,
}

impl ActArgs {
    /// Where a --what-if looks.
    pub fn source(&self) -> SourceArgs {
        SourceArgs {
            scenario: ScenarioArgs {
                scenario: self.scenario.clone(),
                seed: self.seed,
            },
            at: self.at,
            // --cluster names its state file or its context.
            state: self
                .target
                .state
                .clone()
                .or_else(|| self.target.cluster.as_ref().and_then(|c| c.state.clone())),
            context: self.target.context().map(str::to_string),
            cluster: None,
        }
    }
}

#[derive(Copy, Clone, Debug, ValueEnum, PartialEq, Eq)]
pub enum SimOutput {
    Table,
    Json,
}

#[derive(Copy, Clone, Debug, Default, ValueEnum, PartialEq, Eq)]
pub enum TextOrJson {
    #[default]
    Text,
    Json,
}

/// The state file `maar kube --context NAME` records.
pub use crate::config::kube_state;

/// The options of a live cluster's run, the same under `maar local` and `maar kube`.
#[derive(Args, Debug, Clone)]
pub struct LiveArgs {
    /// No console: run until interrupted (commands reach it through the state file,
    /// or under `maar kube` through the cluster).
    #[arg(long)]
    pub headless: bool,
    /// With --headless: the log on stderr as plain lines or JSON objects.
    #[arg(long, value_enum, default_value = "plain", value_name = "FORMAT")]
    pub log_format: crate::logging::LogFormat,
    /// How a node is chosen among those that fit: maar (the default), or a published
    /// policy to compare on this cluster: random, dotprod, gpuclustering, gpupacking,
    /// bestfit, fgd.
    #[arg(long, value_name = "POLICY", value_parser = placement_arg, default_value = "maar")]
    pub placement: maar_scheduler::placement::Policy,
    /// Look only (the console session acts as a viewer).
    #[arg(long)]
    pub read_only: bool,
    /// Let the mouse scroll and click (off by default, so terminal selection works).
    #[arg(long)]
    pub mouse: bool,
    /// dark, light, high-contrast, mono, or a theme file (themes/*.yaml shows the form).
    #[arg(long, value_name = "NAME|FILE")]
    pub theme: Option<String>,
    /// Serve Prometheus metrics (/metrics) and probes (/healthz, /readyz) on this
    /// address, e.g. 127.0.0.1:9464 (in a pod: 0.0.0.0:9464, deploy/scheduler.yaml).
    #[arg(long, value_name = "ADDR")]
    pub metrics: Option<std::net::SocketAddr>,
}

/// A live backend's run (`maar NAME` of `crate::backends`): its own options and those
/// every live run shares.
#[derive(Args, Debug, Clone)]
pub struct Run<A: Args> {
    #[command(flatten)]
    pub backend: A,
    /// State file (history, audit); when absent `$XDG_STATE_HOME/maar/` and the
    /// cluster's name (`local-HOST.db`, `kube-CONTEXT.db`), continued when it exists.
    #[arg(long, value_name = "PATH")]
    pub state: Option<PathBuf>,
    #[command(flatten)]
    pub live: LiveArgs,
}

/// A placement policy by name.
fn placement_arg(s: &str) -> Result<maar_scheduler::placement::Policy, String> {
    maar_scheduler::placement::Policy::parse(s).ok_or_else(|| {
        let names: Vec<&str> = maar_scheduler::placement::Policy::ALL
            .iter()
            .map(|p| p.name())
            .collect();
        format!("`{s}` is not a placement policy ({})", names.join(", "))
    })
}
