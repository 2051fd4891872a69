//! The config file: `$XDG_CONFIG_HOME/maar/config.yaml` (`~/.config/maar/config.yaml`):
//! the console's `theme:`, and the `clusters:` an operator works with (docs/clusters.md):
//! each a name and its state file or its Kubernetes context, so that `maar submit
//! --cluster NAME` reaches it and `--cluster auto` sends a job where it starts first.

use std::path::{Path, PathBuf};

use serde::Deserialize;

use crate::load::InputError;

/// The config file's path, if a home is known.
pub fn path() -> Option<PathBuf> {
    let base = std::env::var_os("XDG_CONFIG_HOME")
        .filter(|v| !v.is_empty())
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".config")))?;
    Some(base.join("maar").join("config.yaml"))
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Config {
    /// The console's theme (`--theme` comes first).
    #[serde(default)]
    pub theme: Option<String>,
    /// The clusters an operator works with, in order (ties in a dispatch go to the
    /// first).
    #[serde(default)]
    pub clusters: Vec<Cluster>,
}

/// A cluster of the config: its name and where maar records it.
#[derive(Clone, Debug, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct Cluster {
    pub name: String,
    /// Its state file (a demo's, this machine's).
    #[serde(default)]
    pub state: Option<PathBuf>,
    /// Its Kubernetes context (the state file `maar kube --context NAME` records).
    #[serde(default)]
    pub context: Option<String>,
    /// This machine as `maar local` runs it (its agents, labels, workdir); its state
    /// file is `state` when given, else `maar local`'s own.
    #[serde(default)]
    pub local: Option<LocalEntry>,
}

/// `maar local`'s options, for a cluster of the list that is this machine.
#[derive(Clone, Debug, Default, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct LocalEntry {
    /// Other machines' agents (`maar agent --listen` there), `HOST:PORT` each.
    #[serde(default)]
    pub agents: Vec<String>,
    /// Labels this machine's node carries, as `maar local --label KEY=VALUE`.
    #[serde(default)]
    pub labels: std::collections::BTreeMap<String, String>,
    /// Where jobs run (`maar local --workdir`).
    #[serde(default)]
    pub workdir: Option<PathBuf>,
}

impl Cluster {
    /// Its state file: the one named, or the one of its context.
    pub fn state_file(&self) -> PathBuf {
        match (&self.state, &self.context) {
            (Some(p), _) => p.clone(),
            (None, Some(c)) => kube_state(c),
            (None, None) if self.local.is_some() => local_state(),
            (None, None) => PathBuf::new(),
        }
    }
}

/// The state file `maar kube --context NAME` records.
pub fn kube_state(context: &str) -> PathBuf {
    // default_path makes the name safe for a file.
    crate::record::default_path(&maar_kube::backend::state_name(context))
}

/// The state file `maar local` records on this machine.
pub fn local_state() -> PathBuf {
    crate::record::default_path(&format!("local-{}", maar_local::backend::hostname()))
}

/// The config file at `p` (none there: the defaults). A cluster must name a state file
/// or a context (or be this machine, `local:`), and names are unique: the error names
/// the file and the cluster.
pub fn read(p: &Path) -> Result<Config, InputError> {
    if !p.exists() {
        return Ok(Config::default());
    }
    let file = p.display().to_string();
    // It names the state files and agents maar acts on: one others could write would
    // point this user's maar at theirs.
    let me = nix::unistd::geteuid().as_raw();
    crate::record::file_trusted(p, me, "config file").map_err(|why| InputError {
        file: file.clone(),
        line: None,
        column: None,
        field: None,
        message: format!("not trusted: {why}"),
    })?;
    let text = crate::load::read(p)?;
    let mut c: Config = crate::load::yaml(&file, &text)?;
    // Paths as a shell and kubeconfig read them: `~/` is the home folder, and a
    // relative path is beside the config file (not wherever maar is started).
    let here = p.parent().unwrap_or(Path::new("."));
    for (i, cl) in c.clusters.iter_mut().enumerate() {
        let workdir = cl.local.as_mut().and_then(|l| l.workdir.as_mut());
        for path in [cl.state.as_mut(), workdir].into_iter().flatten() {
            *path = resolve(path, here).map_err(|why| {
                crate::load::field_error(&file, &text, format!("clusters[{i}]"), why)
            })?;
        }
    }
    for (i, cl) in c.clusters.iter().enumerate() {
        let bad =
            |why: String| crate::load::field_error(&file, &text, format!("clusters[{i}]"), why);
        if cl.local.is_some() && cl.context.is_some() {
            return Err(bad(format!(
                "cluster `{}`: `local` (this machine) and a Kubernetes `context` are two clusters; list them apart",
                maar_scheduler::limits::echo(&cl.name)
            )));
        }
        if cl.local.is_none() && cl.state.is_none() == cl.context.is_none() {
            return Err(bad(format!(
                "cluster `{}`: give its `state` (a state file) or its `context` (Kubernetes), one of them, or `local: {{}}` for this machine",
                maar_scheduler::limits::echo(&cl.name)
            )));
        }
        if cl.local.is_some() && c.clusters[..i].iter().any(|o| o.local.is_some()) {
            return Err(bad(
                "only one cluster may be `local` (this machine; other machines join it as its `agents`)".into(),
            ));
        }
        if cl.name == "auto" || cl.name.is_empty() {
            return Err(bad("a cluster's name may not be empty or `auto`".into()));
        }
        if c.clusters[..i].iter().any(|o| o.name == cl.name) {
            return Err(bad(format!(
                "cluster `{}` is listed twice",
                maar_scheduler::limits::echo(&cl.name)
            )));
        }
    }
    Ok(c)
}

/// A path of the config file: `~` and `~/...` under `$HOME`, a relative one under
/// `dir` (the config file's folder), an absolute one as it is.
fn resolve(path: &Path, dir: &Path) -> Result<PathBuf, String> {
    if path.as_os_str().is_empty() {
        return Err("`state` or `workdir` is an empty path: name a file (`~/...`, or a path beside this config file)".into());
    }
    if let Ok(rest) = path.strip_prefix("~") {
        let home = std::env::var_os("HOME")
            .filter(|h| !h.is_empty())
            .ok_or_else(|| {
                format!(
                    "{}: `~` needs $HOME, which is not set: set it, or write the path in full",
                    path.display()
                )
            })?;
        return Ok(PathBuf::from(home).join(rest));
    }
    if path.is_relative() {
        return Ok(dir.join(path));
    }
    Ok(path.to_path_buf())
}

/// The config file of this user (none: the defaults).
pub fn load() -> Result<Config, InputError> {
    match path() {
        Some(p) => read(&p),
        None => Ok(Config::default()),
    }
}

/// The clusters the command line's `--cluster` reads: the config file's list; with
/// none listed, the default demo's two sites where `maar demo --clusters 2` recorded
/// both in the default state folder (`lab` and `site-b`), so what the demo's console
/// shows the command line reads too (it said "no `clusters:`" of them).
pub fn clusters() -> Result<Vec<Cluster>, InputError> {
    let cfg = load()?;
    if !cfg.clusters.is_empty() {
        return Ok(cfg.clusters);
    }
    let demo: Vec<Cluster> = ["lab", "site-b"]
        .into_iter()
        .map(|name| Cluster {
            name: name.to_string(),
            state: Some(crate::record::default_path(name)),
            context: None,
            local: None,
        })
        .collect();
    Ok(
        if demo
            .iter()
            .all(|c| c.state.as_ref().is_some_and(|p| p.exists()))
        {
            demo
        } else {
            Vec::new()
        },
    )
}

/// `--cluster NAME` as the command line takes it: the cluster of that name in the
/// config file's list (an unknown name, or no list, says which file and what it has).
pub fn cluster_arg(name: &str) -> Result<Cluster, String> {
    let file = path()
        .map(|p| p.display().to_string())
        .unwrap_or_else(|| "the config file".into());
    let clusters = clusters().map_err(|e| e.to_string())?;
    if clusters.is_empty() {
        return Err(format!(
            "no `clusters:` in {file} (each a name and its `state` or `context`: docs/clusters.md)"
        ));
    }
    clusters
        .iter()
        .find(|c| c.name == name)
        .cloned()
        .ok_or_else(|| {
            let names: Vec<&str> = clusters.iter().map(|c| c.name.as_str()).collect();
            format!("no such cluster in {file} ({})", names.join(", "))
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `~/` as a shell reads it, a relative path beside the config file.
    #[test]
    fn the_lists_paths_are_read_as_a_shell_and_kubeconfig_read_them() {
        let dir = std::env::temp_dir().join(format!("maar-config-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let f = dir.join("config.yaml");
        std::fs::write(
            &f,
            "clusters:\n  - {name: lab, state: ~/.local/state/maar/lab.db}\n  - {name: b, state: b.db}\n  - {name: c, state: /srv/c.db}\n  - {name: here, local: {workdir: jobs}}\n",
        )
        .unwrap();
        let c = read(&f).unwrap();
        let home = PathBuf::from(std::env::var_os("HOME").unwrap());
        assert_eq!(
            c.clusters[0].state_file(),
            home.join(".local/state/maar/lab.db")
        );
        assert_eq!(c.clusters[1].state_file(), dir.join("b.db"));
        assert_eq!(c.clusters[2].state_file(), PathBuf::from("/srv/c.db"));
        assert_eq!(
            c.clusters[3].local.as_ref().unwrap().workdir,
            Some(dir.join("jobs"))
        );
        std::fs::write(&f, "clusters:\n  - {name: lab, state: ''}\n").unwrap();
        let e = read(&f).unwrap_err().to_string();
        assert!(e.contains("is an empty path: name a file"), "{e}");
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
