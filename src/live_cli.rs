//! `maar local`, `maar kube` and any live backend of `crate::backends`: its cluster
//! opened and its engine started in real time and served (the console, or headless
//! until a signal), with the options every live run shares (`Run`: the state file;
//! `LiveArgs`: headless, logs, placement, read-only, mouse, theme, metrics); and the
//! face (the console or a headless wait) and its exit code, which `maar demo` uses too.

use std::path::Path;

use maar_scheduler::kit::Backend;

pub use crate::args::{LiveArgs, Run};
use crate::backend;
use crate::backends::Visit;
use crate::engine::{self, EngineHandle, EngineOptions};
use crate::failure::Failure;
use crate::out::Out;
use crate::record::{self, Record};

/// What the application serves beside a backend's engine, by the backend's name,
/// kept until the run ends: Kubernetes' `--api-listen` (maar's API behind the API
/// server). It reads the backend's own options.
type Beside =
    fn(&dyn std::any::Any, &EngineHandle, &Path) -> Result<Option<Box<dyn std::any::Any>>, Failure>;

const BESIDE: &[(&str, Beside)] = &[("kube", crate::kube_api::beside)];

/// Runs the live backend `maar NAME` asks for.
pub(crate) struct Runner<'o, 'w>(pub &'o mut Out<'w>);

impl Visit for Runner<'_, '_> {
    type Out = Result<i32, Failure>;

    fn visit<B: Backend>(self, run: Run<B::Args>) -> Self::Out
    where
        B::Args: clap::Args + std::any::Any,
    {
        run_live::<B>(run, self.0)
    }
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
    ) -> Result<Live, Failure> {
        Ok(Live {
            metrics: metrics_listen(self.metrics)?,
            roles,
            read_only: self.read_only,
            mouse: self.mouse,
            theme,
            placement: self.placement,
        })
    }
}

/// The state file's folder made where it is missing.
fn state_folder(path: &std::path::Path) -> Result<(), Failure> {
    if let Some(dir) = path.parent() {
        // Writable by its owner alone, whatever the umask (record::guard_write).
        std::os::unix::fs::DirBuilderExt::mode(std::fs::DirBuilder::new().recursive(true), 0o755)
            .create(dir)
            .map_err(|e| Failure::Usage(format!("{}: {e}", dir.display())))?;
    }
    Ok(())
}

/// `maar NAME` of a live backend: the state file (given, or named by the backend's
/// cluster), the cluster opened or continued, its engine started in real time and
/// served, with what the application serves beside it (`beside`).
pub(crate) fn run_live<B: Backend + 'static>(r: Run<B::Args>, o: &mut Out) -> Result<i32, Failure>
where
    B::Args: clap::Args + std::any::Any,
{
    let theme = r.live.start()?;
    let each = B::each(&r.backend);
    if each.len() > 1 {
        return run_several::<B>(r, each, theme, o);
    }
    let path = match r.state {
        Some(p) => p,
        None => record::default_path(&B::state_name(&r.backend)?),
    };
    state_folder(&path)?;
    let roles = std::sync::Arc::new(crate::roles::Roles::load()?);
    let (loaded, rec, what) = backend::open_live::<B>(&path, &r.backend)?;
    let note = loaded.note.clone();
    let line = format!(
        "maar: {what} on {} (pid {}); {}interrupt to stop\n",
        path.display(),
        std::process::id(),
        note.as_ref().map(|n| format!("{n}; ")).unwrap_or_default()
    );
    let args = r.backend;
    let extra: Option<Extra<'_>> = BESIDE
        .iter()
        .find(|(name, _)| *name == B::NAME)
        .map(|&(_, f)| Box::new(move |h: &EngineHandle, p: &Path| f(&args, h, p)) as Extra<'_>);
    let live = r.live.live(roles, theme)?;
    serve(loaded, rec, live, extra, note, &line, o)
}

/// Several clusters of one backend in one console (`maar kube --context a --context
/// b`): each opened with its own state file (named by the cluster), engine, socket and
/// lease; then one console on all of them (`C` shows another, `:submit` sends a job
/// where it starts first), or headless until a signal. What serves one cluster only
/// (`--state`, `--metrics`) is refused; what is served beside one (`--api-listen`) is
/// the first's. The first must answer; a later one that does not is shown so while
/// the others go on, and tried again until it answers (`federation::Joining`).
fn run_several<B: Backend + 'static>(
    r: Run<B::Args>,
    each: Vec<B::Args>,
    theme: Option<crate::console::theme::Theme>,
    o: &mut Out,
) -> Result<i32, Failure>
where
    B::Args: clap::Args + std::any::Any + Send,
{
    if r.state.is_some() {
        return Err(Failure::Usage(format!(
            "--state names one cluster's state file; with {} clusters each has its own, named by the cluster (`$XDG_STATE_HOME/maar/{}-NAME.db`)",
            each.len(),
            B::NAME
        )));
    }
    if r.live.metrics.is_some() {
        return Err(Failure::Usage(
            "--metrics serves one cluster's metrics; with several clusters, run a headless maar per cluster for them".into(),
        ));
    }
    let mut paths = Vec::new();
    for a in &each {
        let p = record::default_path(&B::state_name(a)?);
        if paths.contains(&p) {
            return Err(Failure::Usage(format!(
                "{} is named twice: each cluster once",
                p.display()
            )));
        }
        state_folder(&p)?;
        paths.push(p);
    }
    let roles = std::sync::Arc::new(crate::roles::Roles::load()?);
    let mut sites: Vec<crate::console::app::Site> = Vec::new();
    let mut line = String::new();
    let mut notes = Vec::new();
    let joining = std::sync::Arc::new(crate::federation::Joining::default());
    let stop = |sites: &[crate::console::app::Site]| {
        joining.stop();
        sites.iter().for_each(|s| s.engine.shutdown())
    };
    for (i, (a, path)) in each.iter().zip(&paths).enumerate() {
        let (mut loaded, rec, what) = match backend::open_live::<B>(path, a) {
            Ok(x) => x,
            Err(Failure::No(why)) if i > 0 => {
                let name = waiting_name(path, B::NAME);
                line.push_str(&format!(
                    "maar: {name}: not answering, tried again every {} s: {why}\n",
                    crate::federation::RETRY_EVERY.as_secs()
                ));
                let (a, path, roles) = (a.clone(), path.clone(), roles.clone());
                let (headless, placement) = (theme.is_none(), r.live.placement);
                let federated = !r.live.read_only;
                joining.wait_for(
                    name,
                    why,
                    Box::new(move || {
                        let (mut loaded, rec, what) =
                            backend::open_live::<B>(&path, &a).map_err(|e| e.to_string())?;
                        loaded.core.set_placement(placement);
                        let name = loaded.meta.cluster.clone();
                        let federation = federated.then(|| name.clone());
                        let engine =
                            live_engine(loaded, rec, roles.clone(), headless, None, federation);
                        Ok((name, engine, what))
                    }),
                );
                continue;
            }
            Err(e) => {
                stop(&sites);
                return Err(e);
            }
        };
        loaded.core.set_placement(r.live.placement);
        let name = loaded.meta.cluster.clone();
        notes.extend(loaded.note.clone());
        line.push_str(&format!(
            "maar: {what} on {} (pid {})\n",
            path.display(),
            std::process::id()
        ));
        // Several clusters: the federation's mover runs unless the console is a
        // viewer's, and a job asking for a cluster waits for it.
        let federation = (!r.live.read_only).then(|| name.clone());
        let handle = live_engine(
            loaded,
            rec,
            roles.clone(),
            theme.is_none(),
            None,
            federation,
        );
        sites.push(crate::console::app::Site {
            name,
            engine: handle,
        });
    }
    let waiting = joining.waiting().len();
    line.push_str(&format!(
        "maar: {} cluster{}{}; interrupt to stop\n",
        sites.len(),
        if sites.len() == 1 { "" } else { "s" },
        if waiting == 0 {
            String::new()
        } else {
            format!(", {waiting} more when they answer")
        }
    ));
    let beside = BESIDE.iter().find(|(name, _)| *name == B::NAME);
    let _beside = match beside
        .map(|(_, f)| f(&each[0], &sites[0].engine, &paths[0]))
        .transpose()
    {
        Ok(b) => b,
        Err(e) => {
            stop(&sites);
            return Err(e);
        }
    };
    let note = (!notes.is_empty()).then(|| notes.join("; "));
    faces_joining(
        &sites,
        (waiting > 0).then_some(joining.clone()),
        r.live.read_only,
        r.live.mouse,
        theme,
        note,
        &line,
        o,
    )
}

/// What the application serves beside an engine, started once the engine runs and
/// kept until the run ends.
type Extra<'a> = Box<
    dyn FnOnce(&engine::EngineHandle, &Path) -> Result<Option<Box<dyn std::any::Any>>, Failure>
        + 'a,
>;

/// How a live cluster (this machine, a Kubernetes cluster) is served.
struct Live {
    roles: std::sync::Arc<crate::roles::Roles>,
    read_only: bool,
    mouse: bool,
    /// The console's theme; none when headless.
    theme: Option<crate::console::theme::Theme>,
    /// How nodes are chosen (`--placement`).
    placement: maar_scheduler::placement::Policy,
    /// `--metrics`.
    metrics: Option<MetricsDoor>,
}

/// A cluster that did not answer at the start, named as it will be once it answers
/// (its cluster's name: a context), not by its state file (`kube-NAME.db`, see the
/// backends' `state_name`): a job naming it waits for it, and its row keeps its name
/// when it joins.
fn waiting_name(state: &Path, backend: &str) -> String {
    let stem = state
        .file_stem()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_default();
    stem.strip_prefix(&format!("{backend}-"))
        .map(str::to_string)
        .unwrap_or(stem)
}

/// One Kubernetes context's cluster opened and its engine started as `maar kube
/// --context NAME` would (its own state file and lease): for `maar clusters`.
pub(crate) fn open_kube(
    context: &str,
    roles: std::sync::Arc<crate::roles::Roles>,
    headless: bool,
    federation: Option<String>,
) -> Result<(engine::EngineHandle, String), Failure> {
    use maar_scheduler::kit::Backend;
    let args = maar_kube::KubeArgs {
        kubeconfig: None,
        contexts: vec![context.to_string()],
        namespace: None,
        all_namespaces: false,
        timeout: 10,
        api_listen: None,
        tls_cert: None,
        tls_key: None,
    };
    let path = record::default_path(&maar_kube::Kube::state_name(&args)?);
    state_folder(&path)?;
    let (loaded, rec, what) = backend::open_live::<maar_kube::Kube>(&path, &args)?;
    let what = format!("{what} on {}", path.display());
    Ok((
        live_engine(loaded, rec, roles, headless, None, federation),
        what,
    ))
}

/// This machine's cluster opened and its engine started as `maar local` would (with
/// the config entry's agents, labels and workdir, on `state`): for `maar clusters`.
pub(crate) fn open_local(
    entry: &crate::config::LocalEntry,
    state: &std::path::Path,
    roles: std::sync::Arc<crate::roles::Roles>,
    headless: bool,
    federation: Option<String>,
) -> Result<(engine::EngineHandle, String), Failure> {
    let args = maar_local::LocalArgs {
        agents: entry.agents.clone(),
        labels: entry
            .labels
            .iter()
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect(),
        interval: 1,
        workdir: entry.workdir.clone(),
    };
    state_folder(state)?;
    let (loaded, rec, what) = backend::open_live::<maar_local::Local>(state, &args)?;
    let what = format!("{what} on {}", state.display());
    Ok((
        live_engine(loaded, rec, roles, headless, None, federation),
        what,
    ))
}

/// A live cluster's engine started in real time and served: the console (as a viewer
/// with `read_only`), or, headless, `line` printed and a wait for a signal (views then
/// published seldom: nothing draws them). The engine is shut down after; the exit code
/// is 0, or 128 + the signal.
fn serve(
    mut loaded: backend::Loaded,
    rec: Record,
    live: Live,
    extra: Option<Extra<'_>>,
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
        metrics,
    } = live;
    let state = rec.path().to_path_buf();
    loaded.core.set_placement(placement);
    let observe = metrics.as_ref().map(|m| m.1.clone());
    let handle = live_engine(loaded, rec, roles, theme.is_none(), observe, None);
    metrics_serve(metrics, &handle)?;
    let _beside = match extra.map(|f| f(&handle, &state)).transpose() {
        Ok(a) => a,
        Err(e) => {
            handle.shutdown();
            return Err(e);
        }
    };
    face(&handle, read_only, mouse, theme, note, line, o)
}

/// A live cluster's engine started in real time (views published seldom when
/// headless: nothing draws them), its socket beside its state file.
fn live_engine(
    loaded: backend::Loaded,
    rec: Record,
    roles: std::sync::Arc<crate::roles::Roles>,
    headless: bool,
    observe: Option<std::sync::Arc<crate::observe::Observe>>,
    federation: Option<String>,
) -> EngineHandle {
    let state = rec.path().to_path_buf();
    let access = roles.socket_access();
    let handle = engine::start(
        loaded,
        Some(rec),
        EngineOptions {
            speed: 1.0,
            paused: false,
            roles,
            publish_every: if headless {
                engine::HEADLESS_PUBLISH_EVERY
            } else {
                EngineOptions::default().publish_every
            },
            tick_publish_every: if headless {
                engine::HEADLESS_TICK_PUBLISH_EVERY
            } else {
                EngineOptions::default().tick_publish_every
            },
            // Headless, the cluster's views are built only for what reads them.
            snapshots: !headless || observe.is_some() || federation.is_some(),
            observe,
            federation,
        },
    );
    crate::api::serve(&handle, &state, access);
    handle
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
    let one = [crate::console::app::Site {
        name: String::new(),
        engine: handle.clone(),
    }];
    faces(&one, read_only, mouse, theme, note, line, o)
}

/// Several started engines' face until it ends (`maar demo --clusters 2`): one
/// console on all of them (each a viewer's with `read_only`), or `line` printed and a
/// headless wait for a signal; every engine is shut down after.
pub(crate) fn faces(
    sites: &[crate::console::app::Site],
    read_only: bool,
    mouse: bool,
    theme: Option<crate::console::theme::Theme>,
    note: Option<String>,
    line: &str,
    o: &mut Out,
) -> Result<i32, Failure> {
    faces_joining(sites, None, read_only, mouse, theme, note, line, o)
}

/// As [`faces`], with clusters that did not answer at the start and join when they do
/// (`federation::Joining`); they are stopped trying, and shut down, at the end.
#[allow(clippy::too_many_arguments)]
pub(crate) fn faces_joining(
    sites: &[crate::console::app::Site],
    joining: Option<std::sync::Arc<crate::federation::Joining>>,
    read_only: bool,
    mouse: bool,
    theme: Option<crate::console::theme::Theme>,
    note: Option<String>,
    line: &str,
    o: &mut Out,
) -> Result<i32, Failure> {
    // Jobs sent among the clusters are moved once when theirs cannot start them after
    // all: maar's own doing, so not from a viewer's console.
    let mover = (!read_only)
        .then(|| crate::federation::MoverThread::start(sites, joining.clone()))
        .flatten();
    let r = match theme {
        Some(theme) => {
            let shown = sites
                .iter()
                .map(|s| crate::console::app::Site {
                    name: s.name.clone(),
                    engine: if read_only {
                        s.engine.capped(maar_scheduler::Role::Viewer)
                    } else {
                        s.engine.clone()
                    },
                })
                .collect();
            console_exit(crate::console::run::run_sites(
                shown,
                joining.clone(),
                read_only,
                mouse,
                theme,
                note,
            ))
        }
        None => {
            o.put(line);
            o.flush();
            let engines: Vec<EngineHandle> = sites.iter().map(|s| s.engine.clone()).collect();
            crate::console::run::wait_headless_all(&engines)
                .map(|sig| 128 + sig)
                .map_err(Failure::No)
        }
    };
    drop(mover);
    if let Some(j) = &joining {
        j.stop();
    }
    for s in sites {
        s.engine.shutdown();
    }
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

#[cfg(test)]
mod tests {
    use super::*;

    /// A cluster of `maar kube --context a --context east` that does not answer yet is
    /// named `east` (as its engine names it once it joins, and as files name it in
    /// `crater.ai/cluster`), not by its state file.
    #[test]
    fn a_cluster_not_answering_yet_is_named_as_it_will_be() {
        let kube = maar_kube::backend::state_name("east");
        let path = Path::new("/state/maar").join(format!("{kube}.db"));
        assert_eq!(waiting_name(&path, "kube"), "east");
        assert_eq!(waiting_name(Path::new("/s/other.db"), "kube"), "other");
    }
}
