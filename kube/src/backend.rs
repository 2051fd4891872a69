//! Kubernetes as a live backend of the application (`maar kube`): its options, its
//! state file's name (by context), and how the cluster is opened: connected, watched,
//! built from the first lists; the state file's history and audit continued when it
//! holds this context's cluster (the cluster itself is always Kubernetes', the truth).

use std::path::{Path, PathBuf};
use std::time::Duration;

use maar_scheduler::kit::{Backend, OpenError, Opened, Prior};
use maar_scheduler::{Core, Input};

use crate::{ConnectOptions, KubeDriver, KubeError};

/// `maar kube`: a Kubernetes cluster, maar a second scheduler in it.
pub struct Kube;

/// `maar kube`'s own options.
#[derive(clap::Args, Debug, Clone)]
pub struct KubeArgs {
    /// The kubeconfig; else $KUBECONFIG, ~/.kube/config, or the in-cluster config.
    #[arg(long, value_name = "PATH")]
    pub kubeconfig: Option<PathBuf>,
    /// A context of the kubeconfig; else its current context. Repeated: several
    /// clusters in one console, each with its own state file and lease.
    #[arg(long = "context", value_name = "NAME")]
    pub contexts: Vec<String>,
    /// Watch and schedule in this namespace only (its project).
    #[arg(
        short = 'n',
        long,
        value_name = "NS",
        conflicts_with = "all_namespaces"
    )]
    pub namespace: Option<String>,
    /// Watch and schedule in every namespace (the default).
    #[arg(short = 'A', long)]
    pub all_namespaces: bool,
    /// How long to wait for the API server, e.g. 10s.
    #[arg(long, default_value = "10s", value_parser = duration)]
    pub timeout: u64,
    /// Serve maar's API behind the API server (APIService v1alpha1.ops.maar.crater.ai,
    /// deploy/api.yaml) on this address, e.g. 0.0.0.0:8443: operators then act with
    /// their Kubernetes identity (`maar cordon --context NAME`), judged by RBAC.
    #[arg(long, value_name = "ADDR")]
    pub api_listen: Option<std::net::SocketAddr>,
    /// With --api-listen: the server's certificate (PEM); self-signed when absent.
    #[arg(long, value_name = "PATH", requires_all = ["api_listen", "tls_key"])]
    pub tls_cert: Option<PathBuf>,
    /// With --api-listen: the server's key (PEM).
    #[arg(long, value_name = "PATH", requires_all = ["api_listen", "tls_cert"])]
    pub tls_key: Option<PathBuf>,
}

fn duration(s: &str) -> Result<u64, String> {
    maar_scheduler::quantity::parse_duration_s(s).map_err(|e| e.to_string())
}

/// A Kubernetes error as an opening failure: a bad kubeconfig or context is a usage
/// error, a cluster that does not answer or refuses is a no.
pub fn open_error(e: KubeError) -> OpenError {
    if e.is_usage() {
        OpenError::Usage(e.to_string())
    } else {
        OpenError::No(e.to_string())
    }
}

/// The name of the state file that records a context's cluster.
pub fn state_name(context: &str) -> String {
    format!("kube-{context}")
}

impl KubeArgs {
    /// How to connect: the kubeconfig and context, the namespace, the timeout.
    pub fn connect_options(&self) -> ConnectOptions {
        ConnectOptions {
            kubeconfig: self.kubeconfig.clone(),
            context: self.contexts.first().cloned(),
            namespace: self.namespace.clone(),
            timeout: Duration::from_secs(self.timeout.max(1)),
        }
    }
}

impl Backend for Kube {
    const NAME: &'static str = "kube";
    type Args = KubeArgs;

    /// `kube-CONTEXT`, the context the kubeconfig names (its current one when none is
    /// given).
    fn state_name(args: &KubeArgs) -> Result<String, OpenError> {
        let rt = tokio::runtime::Builder::new_current_thread()
            .build()
            .map_err(|e| OpenError::No(e.to_string()))?;
        let (_, context) = rt
            .block_on(crate::connect::config(&args.connect_options()))
            .map_err(open_error)?;
        Ok(state_name(&context))
    }

    fn each(args: &KubeArgs) -> Vec<KubeArgs> {
        if args.contexts.len() < 2 {
            return vec![args.clone()];
        }
        args.contexts
            .iter()
            .map(|c| KubeArgs {
                contexts: vec![c.clone()],
                ..args.clone()
            })
            .collect()
    }

    fn offline() -> maar_scheduler::kit::Offline {
        crate::driver::offline()
    }

    fn open(args: &KubeArgs, state: &Path, prior: Option<Prior<'_>>) -> Result<Opened, OpenError> {
        let opts = args.connect_options();
        let (world, conn) = crate::world::World::connect(&opts).map_err(open_error)?;
        if let Some(p) = &prior {
            if p.cluster != conn.context {
                return Err(OpenError::Usage(format!(
                    "{}: holds the kube cluster {}, not the Kubernetes context {}; give another --state",
                    state.display(),
                    p.cluster,
                    conn.context
                )));
            }
        }
        // Binds go through the API server at its pace (thousands may queue in a burst);
        // a bind is taken back only after 5 minutes without an answer (the watch also
        // tells where each pod went).
        let config = maar_scheduler::SchedConfig {
            bind_timeout_s: 300,
            ..Default::default()
        };
        let mut cluster = maar_scheduler::Cluster::new(config);
        // The record's events and clock go on where they stopped.
        if let Some(p) = &prior {
            cluster.continue_events(p.next_event);
        }
        let mut core = Core::new(cluster);
        let mut first = Vec::new();
        let from = prior.map_or(0, |p| p.latest);
        if from > 0 {
            first = core.apply(Input::Advance { to: from }).events;
        }
        let mut driver = KubeDriver::new(world);
        let (seen, complete, listed) = driver.first_lists(&mut core, opts.timeout * 3);
        // What the first lists caused (nodes joined, pools and projects seen, jobs
        // found, troubles) is history too: every event, not only the core's newest
        // (50,000 pods listed are 50,000 events).
        first.extend(listed);
        let note = format!(
            "Kubernetes {} ({}, {}): {} nodes, {} jobs{}",
            conn.context,
            conn.url,
            conn.version,
            core.cluster().nodes.len(),
            core.cluster().jobs.len(),
            if complete {
                String::new()
            } else {
                format!(" (the first lists are not complete yet: {seen} objects so far)")
            }
        );
        Ok(Opened {
            core,
            driver: Box::new(driver),
            cluster: conn.context.clone(),
            events: first,
            fresh: true,
            what: format!("Kubernetes context {} ({})", conn.context, conn.url),
            note: Some(note),
        })
    }
}
