//! Local mode as a live backend of the application (`maar local`): its options, its
//! state file's name, and how this machine's cluster is opened, fresh from the agents'
//! first samples or continued from its record (jobs whose processes still run adopted).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use maar_scheduler::kit::{Backend, OpenError, Opened, Prior};
use maar_scheduler::{Core, Driver};

use crate::{LocalDriver, LocalOptions};

/// `maar local`: this machine (and other agents' nodes, watched).
pub struct Local;

/// `maar local`'s own options.
#[derive(clap::Args, Debug, Clone)]
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
    /// Where jobs run (their working folder; its filesystem is the node's disk).
    #[arg(long, value_name = "DIR")]
    pub workdir: Option<PathBuf>,
}

fn duration(s: &str) -> Result<u64, String> {
    maar_scheduler::quantity::parse_duration_s(s).map_err(|e| e.to_string())
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

/// This machine's host name (`localhost` when it has none).
pub fn hostname() -> String {
    nix::unistd::gethostname()
        .ok()
        .and_then(|h| h.into_string().ok())
        .filter(|h| !h.is_empty())
        .unwrap_or_else(|| "localhost".into())
}

impl LocalArgs {
    /// The options of a run recorded at `state`: the work folder checked (the current
    /// one when none is given), the job logs beside the state file, this program as
    /// each replica's shim.
    pub fn options(&self, state: &Path) -> Result<LocalOptions, OpenError> {
        let workdir = match &self.workdir {
            Some(d) => d.clone(),
            None => std::env::current_dir()
                .map_err(|e| OpenError::Usage(format!("no working folder: {e}")))?,
        };
        if !workdir.is_dir() {
            return Err(OpenError::Usage(format!(
                "--workdir {}: not a folder",
                workdir.display()
            )));
        }
        Ok(LocalOptions {
            agents: self.agents.clone(),
            labels: self.labels.iter().cloned().collect::<BTreeMap<_, _>>(),
            every_s: self.interval.max(1),
            workdir,
            logs: crate::logs_folder(state),
            shim: std::env::current_exe()
                .map_err(|e| OpenError::Usage(format!("cannot find maar's own program: {e}")))?,
        })
    }
}

impl Backend for Local {
    const NAME: &'static str = "local";
    type Args = LocalArgs;

    fn state_name(_: &LocalArgs) -> Result<String, OpenError> {
        Ok(format!("local-{}", hostname()))
    }

    fn offline() -> maar_scheduler::kit::Offline {
        crate::offline()
    }

    /// The record's cluster when there is one (jobs whose processes still run are
    /// adopted, those that ended while no maar ran are recorded as they ended:
    /// `LocalDriver::adopt`; agents not answering now join when they do), else a new
    /// cluster from the agents' first samples.
    fn open(args: &LocalArgs, state: &Path, prior: Option<Prior<'_>>) -> Result<Opened, OpenError> {
        let opts = args.options(state)?;
        let mut feeds = LocalDriver::feeds(&opts);
        let fail = |why: String| OpenError::Usage(format!("{}: {why}", state.display()));
        if let Some(prior) = prior {
            let (mut core, saved) = (prior.restore)().map_err(OpenError::Usage)?;
            let names: Vec<String> = feeds
                .iter_mut()
                .map(|f| f.sample().map(|s| s.hostname).unwrap_or_default())
                .collect();
            let mut driver = LocalDriver::new(feeds, names, &opts);
            let events = driver.adopt(&mut core, &saved);
            return Ok(Opened {
                core,
                driver: Box::new(driver) as Box<dyn Driver>,
                cluster: prior.cluster,
                events,
                fresh: false,
                what: "this machine's cluster".into(),
                note: Some(format!(
                    "this machine's cluster, continued from {}",
                    state.display()
                )),
            });
        }
        let (cluster, names) = crate::build(&mut feeds, &opts).map_err(fail)?;
        let name = format!("local-{}", names[0]);
        let driver = LocalDriver::new(feeds, names, &opts);
        Ok(Opened {
            core: Core::new(cluster),
            driver: Box::new(driver),
            cluster: name,
            events: Vec::new(),
            fresh: true,
            what: "this machine's cluster".into(),
            note: None,
        })
    }
}
