//! `maar local` and `maar kube`: a live cluster's engine started in real time and
//! served (the console, or headless until a signal), with the options both share
//! (`LiveArgs`: headless, logs, placement, read-only, mouse, theme, metrics); and the
//! face (the console or a headless wait) and its exit code, which `maar demo` uses too.

use std::path::{Path, PathBuf};
use std::time::Duration;

use clap::Args;

use crate::args::duration;
use crate::args::kube_state;
use crate::backend;
use crate::engine::{self, EngineOptions};
use crate::failure::{kube_failure, Failure};
use crate::out::Out;
use crate::record::{self, Record};

#[derive(Args, Debug, Clone)]
pub struct LocalArgs {
    /// Also watch the node of another agent (`maar agent --listen ...` there), e.g.
    /// gpu-02:9400; repeatable. Jobs run on this machine only.
    #[arg(long = "agent", value_name = "HOST:PORT")]
    pub agents: Vec<String>,
    /// A label this machine's node carries (as `kubectl label node` writes it), e.g.
    /// crater.ai/node-role=gpu; repeatable. Labels that disagree with the hardware
    /// raise an alert.
    #[arg(long = "label", value_name = "KEY=VALUE", value_parser = label_arg)]
    pub labels: Vec<(String, String)>,
    /// How often to sample, e.g. 1s, 5s.
    #[arg(long, default_value = "1s", value_parser = duration)]
    pub interval: u64,
    /// State file; `$XDG_STATE_HOME/maar/local-<host>.db` when absent (continued when
    /// it exists).
    #[arg(long, value_name = "PATH")]
    pub state: Option<PathBuf>,
    /// Where jobs run (their working folder; its filesystem is the node's disk).
    #[arg(long, value_name = "DIR")]
    pub workdir: Option<PathBuf>,
    #[command(flatten)]
    pub live: LiveArgs,
}

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

/// `--metrics ADDR` taken at once (a port in use is a usage error before anything
/// starts), with the metrics the engine will feed.
type MetricsDoor = (
    std::net::TcpListener,
    std::sync::Arc<crate::observe::Observe>,
);

pub(crate) fn metrics_listen(
    addr: Option<std::net::SocketAddr>,
) -> Result<Option<MetricsDoor>, Failure> {
    addr.map(|a| {
        std::net::TcpListener::bind(a)
            .map(|l| (l, crate::observe::Observe::new()))
            .map_err(|e| Failure::Usage(format!("--metrics {a}: {e}")))
    })
    .transpose()
}

pub(crate) fn metrics_serve(
    m: Option<MetricsDoor>,
    handle: &engine::EngineHandle,
) -> Result<(), Failure> {
    if let Some((listener, observe)) = m {
        crate::metrics_server::serve(listener, observe, handle.clone()).map_err(|e| {
            handle.shutdown();
            Failure::No(format!("metrics server: {e}"))
        })?;
    }
    Ok(())
}

impl LiveArgs {
    /// Before anything is opened: the log to stderr when headless, else the theme
    /// chosen and the terminal checked (so a bad theme or no terminal fails first).
    fn start(&self) -> Result<Option<crate::console::theme::Theme>, Failure> {
        if self.headless {
            crate::logging::to_stderr(self.log_format);
        }
        console_theme(self.headless, self.theme.as_deref())
    }

    fn live(
        &self,
        roles: std::sync::Arc<crate::roles::Roles>,
        theme: Option<crate::console::theme::Theme>,
        api: Option<KubeApiStart>,
    ) -> Result<Live, Failure> {
        Ok(Live {
            metrics: metrics_listen(self.metrics)?,
            roles,
            read_only: self.read_only,
            mouse: self.mouse,
            theme,
            placement: self.placement,
            api,
        })
    }
}

/// The state file's folder made where it is missing.
fn state_folder(path: &std::path::Path) -> Result<(), Failure> {
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir)
            .map_err(|e| Failure::Usage(format!("{}: {e}", dir.display())))?;
    }
    Ok(())
}

#[derive(Args, Debug, Clone)]
pub struct KubeArgs {
    /// The kubeconfig; else $KUBECONFIG, ~/.kube/config, or the in-cluster config.
    #[arg(long, value_name = "PATH")]
    pub kubeconfig: Option<PathBuf>,
    /// A context of the kubeconfig; else its current context.
    #[arg(long, value_name = "NAME")]
    pub context: Option<String>,
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
    /// State file (history, audit); `$XDG_STATE_HOME/maar/kube-<context>.db` when
    /// absent (continued when it exists).
    #[arg(long, value_name = "PATH")]
    pub state: Option<PathBuf>,
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

pub(crate) fn run_kube(a: KubeArgs, o: &mut Out) -> Result<i32, Failure> {
    let theme = a.live.start()?;
    let opts = maar_kube::ConnectOptions {
        kubeconfig: a.kubeconfig,
        context: a.context.clone(),
        namespace: a.namespace,
        timeout: Duration::from_secs(a.timeout.max(1)),
    };
    // The state file is named by the context, known once the kubeconfig is read.
    let path = match a.state {
        Some(p) => p,
        None => {
            let rt = tokio::runtime::Builder::new_current_thread()
                .build()
                .map_err(|e| Failure::No(e.to_string()))?;
            let (_, context) = rt
                .block_on(maar_kube::connect::config(&opts))
                .map_err(kube_failure)?;
            kube_state(&context)
        }
    };
    state_folder(&path)?;
    let roles = std::sync::Arc::new(crate::roles::Roles::load()?);
    let (loaded, rec, conn) = backend::open_kube(&path, &opts)?;
    let note = loaded.note.clone();
    let line = format!(
        "maar: Kubernetes context {} ({}) on {} (pid {}); {}; interrupt to stop\n",
        conn.context,
        conn.url,
        path.display(),
        std::process::id(),
        note.clone().unwrap_or_default()
    );
    let api = a.api_listen.map(|listen| KubeApiStart {
        connect: opts.clone(),
        opts: crate::kube_api::ApiOptions {
            listen,
            cert: a.tls_cert.clone(),
            key: a.tls_key.clone(),
        },
    });
    let live = a.live.live(roles, theme, api)?;
    serve(loaded, rec, live, note, &line, o)
}

/// maar's API behind the API server (`--api-listen`), and the connection it asks the
/// API server with (maar's own credentials: TokenReview, SubjectAccessReview).
struct KubeApiStart {
    connect: maar_kube::ConnectOptions,
    opts: crate::kube_api::ApiOptions,
}

impl KubeApiStart {
    fn start(
        &self,
        handle: &engine::EngineHandle,
        state: &Path,
    ) -> Result<crate::kube_api::KubeApi, Failure> {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .map_err(|e| Failure::No(e.to_string()))?;
        let (cfg, _) = rt
            .block_on(maar_kube::connect::config(&self.connect))
            .map_err(kube_failure)?;
        drop(rt);
        crate::kube_api::KubeApi::start(handle.clone(), state, cfg, &self.opts).map_err(Failure::No)
    }
}

/// How a live cluster (this machine, a Kubernetes cluster) is served.
struct Live {
    roles: std::sync::Arc<crate::roles::Roles>,
    read_only: bool,
    mouse: bool,
    /// The console's theme; none when headless.
    theme: Option<crate::console::theme::Theme>,
    /// How nodes are chosen (`--placement`).
    placement: maar_scheduler::placement::Policy,
    /// maar's API behind the Kubernetes API server (`maar kube --api-listen`).
    api: Option<KubeApiStart>,
    /// `--metrics`.
    metrics: Option<MetricsDoor>,
}

/// A live cluster's engine started in real time and served: the console (as a viewer
/// with `read_only`), or, headless, `line` printed and a wait for a signal (views then
/// published seldom: nothing draws them). The engine is shut down after; the exit code
/// is 0, or 128 + the signal.
fn serve(
    mut loaded: backend::Loaded,
    rec: Record,
    live: Live,
    note: Option<String>,
    line: &str,
    o: &mut Out,
) -> Result<i32, Failure> {
    let Live {
        roles,
        read_only,
        mouse,
        theme,
        placement,
        api,
        metrics,
    } = live;
    let state = rec.path().to_path_buf();
    loaded.core.set_placement(placement);
    let access = roles.socket_access();
    let handle = engine::start(
        loaded,
        Some(rec),
        EngineOptions {
            speed: 1.0,
            paused: false,
            roles,
            publish_every: if theme.is_none() {
                engine::HEADLESS_PUBLISH_EVERY
            } else {
                EngineOptions::default().publish_every
            },
            observe: metrics.as_ref().map(|m| m.1.clone()),
        },
    );
    crate::api::serve(&handle, &state, access);
    metrics_serve(metrics, &handle)?;
    let _api = match api.map(|a| a.start(&handle, &state)).transpose() {
        Ok(a) => a,
        Err(e) => {
            handle.shutdown();
            return Err(e);
        }
    };
    face(&handle, read_only, mouse, theme, note, line, o)
}

/// Without `headless`: the console's theme chosen and the terminal checked (a bad
/// theme or no terminal fails before anything starts); headless: no theme.
pub(crate) fn console_theme(
    headless: bool,
    theme: Option<&str>,
) -> Result<Option<crate::console::theme::Theme>, Failure> {
    if headless {
        return Ok(None);
    }
    let theme = crate::console::theme::choose(theme)?;
    crate::console::run::check_terminal().map_err(|e| Failure::Usage(e.to_string()))?;
    Ok(Some(theme))
}

/// A started engine's face until it ends: the console (a viewer's with `read_only`)
/// when there is a theme, else `line` printed and a headless wait for a signal; the
/// engine is shut down after either.
pub(crate) fn face(
    handle: &engine::EngineHandle,
    read_only: bool,
    mouse: bool,
    theme: Option<crate::console::theme::Theme>,
    note: Option<String>,
    line: &str,
    o: &mut Out,
) -> Result<i32, Failure> {
    let r = match theme {
        Some(theme) => {
            let face = if read_only {
                handle.capped(maar_scheduler::Role::Viewer)
            } else {
                handle.clone()
            };
            console_exit(crate::console::run::run(face, mouse, theme, note))
        }
        None => {
            o.put(line);
            o.flush();
            headless_exit(handle)
        }
    };
    handle.shutdown();
    r
}

/// How a console session ends, as an exit code: 0 on quit, 128 + a signal, 1 with the
/// reason when its engine lost the state file.
fn console_exit(r: std::io::Result<crate::console::run::Ended>) -> Result<i32, Failure> {
    use crate::console::run::Ended;
    match r.map_err(|e| Failure::Usage(format!("console: {e}")))? {
        Ended::Quit => Ok(0),
        Ended::Signal(n) => Ok(128 + n),
        Ended::Lost(why) => Err(Failure::No(why)),
    }
}

/// A headless run until a stop signal (128 + it), or until its engine loses the state
/// file (exit 1 with the reason).
fn headless_exit(handle: &engine::EngineHandle) -> Result<i32, Failure> {
    crate::console::run::wait_headless(handle)
        .map(|sig| 128 + sig)
        .map_err(Failure::No)
}

fn label_arg(s: &str) -> Result<(String, String), String> {
    match s.split_once('=') {
        Some((k, v)) if !k.is_empty() => Ok((k.to_string(), v.to_string())),
        _ => Err(format!(
            "`{}` is not KEY=VALUE",
            maar_scheduler::limits::echo(s)
        )),
    }
}

/// The state file of this machine's cluster.
pub fn local_state() -> PathBuf {
    let host = sysinfo_hostname();
    record::default_path(&format!("local-{host}"))
}

fn sysinfo_hostname() -> String {
    nix::unistd::gethostname()
        .ok()
        .and_then(|h| h.into_string().ok())
        .filter(|h| !h.is_empty())
        .unwrap_or_else(|| "localhost".into())
}

pub(crate) fn run_local(a: LocalArgs, o: &mut Out) -> Result<i32, Failure> {
    let theme = a.live.start()?;
    let workdir = match a.workdir {
        Some(d) => d,
        None => std::env::current_dir()
            .map_err(|e| Failure::Usage(format!("no working folder: {e}")))?,
    };
    if !workdir.is_dir() {
        return Err(Failure::Usage(format!(
            "--workdir {}: not a folder",
            workdir.display()
        )));
    }
    let path = a.state.unwrap_or_else(local_state);
    let opts = crate::local::LocalOptions {
        agents: a.agents,
        labels: a.labels.into_iter().collect(),
        every_s: a.interval.max(1),
        workdir,
        logs: crate::local::logs_folder(&path),
        shim: std::env::current_exe()
            .map_err(|e| Failure::Usage(format!("cannot find maar's own program: {e}")))?,
    };
    state_folder(&path)?;
    let roles = std::sync::Arc::new(crate::roles::Roles::load()?);
    let (loaded, rec) = backend::open_local(&path, &opts)?;
    let note = loaded.note.clone();
    let line = format!(
        "maar: this machine's cluster on {} (pid {}); interrupt to stop\n",
        path.display(),
        std::process::id()
    );
    let live = a.live.live(roles, theme, None)?;
    serve(loaded, rec, live, note, &line, o)
}
