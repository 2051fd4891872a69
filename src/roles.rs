//! Who may do what: roles from a file mapping Unix users and groups to roles.
//!
//! Roles are read by the process that runs the engine (a console, a headless maar, or
//! a command applied by the state file's owner while none runs), never by a caller
//! that reaches a running maar through its socket: callers are known by the kernel's
//! peer credentials and judged by the engine's roles. The file is the engine owner's
//! `$MAAR_ROLES` when set, else `/etc/maar/roles.yaml`, else the owner's
//! `$XDG_CONFIG_HOME/maar/roles.yaml` (`~/.config/maar/roles.yaml`):
//!
//! ```yaml
//! users:            # Unix user names
//!   alice: admin
//!   bob: operator
//! groups:           # Unix groups (a user gets the highest role of all its groups)
//!   gpu-ops: operator
//! default: viewer   # optional: anyone not named above
//! socket:           # optional: who may connect to a running maar (the owner alone
//!   group: gpu-ops  #   when absent); `everyone: true` lets every local user in
//! clusters:         # optional: roles that differ in one cluster, by its name (the
//!   site-b:         #   overview's row: a demo's scenario, a Kubernetes context)
//!     users: {carol: operator}
//!     default: viewer
//! ```
//!
//! In a cluster with an entry under `clusters:`, a user named there (by user or
//! group) has that role, else its `default` when it has one; anyone else is judged by
//! the rest of the file.
//!
//! A user named nowhere (and no `default`) is a viewer on a shared state file and an
//! admin on one's own (a state file owned by the user, or none at all). maar's own
//! actors (the scenario, a dry run) act as admin. The engine checks every command
//! against the role of its actor; `--read-only` caps a session at viewer.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::Deserialize;

use maar_scheduler::{Actor, Role};

use crate::load::InputError;

/// Where the roles file is looked for when `$MAAR_ROLES` is not set.
pub const DEFAULT_PATH: &str = "/etc/maar/roles.yaml";

#[derive(Clone, Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct File {
    #[serde(default)]
    users: BTreeMap<String, Role>,
    #[serde(default)]
    groups: BTreeMap<String, Role>,
    #[serde(default)]
    default: Option<Role>,
    #[serde(default)]
    socket: SocketAccess,
    /// Roles that differ in one cluster, by its name.
    #[serde(default)]
    clusters: BTreeMap<String, InCluster>,
}

/// One cluster's own roles (a user not named here is judged by the rest of the file).
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct InCluster {
    #[serde(default)]
    users: BTreeMap<String, Role>,
    #[serde(default)]
    groups: BTreeMap<String, Role>,
    #[serde(default)]
    default: Option<Role>,
}

/// The roles in force, and where they came from.
#[derive(Clone, Debug, Default)]
pub struct Roles {
    file: File,
    /// The file read (None: there was none).
    path: Option<PathBuf>,
    /// The cluster they are for ([`Roles::in_cluster`]): its entry under `clusters:`
    /// comes first.
    cluster: Option<String>,
}

/// A person's role and why they have it (for refusals and the console).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Grant {
    pub role: Role,
    pub why: String,
}

/// A role decided outside the roles file, for one request: a Kubernetes user's, by
/// the API server's RBAC (`kube_api.rs`). None: not even a viewer.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Judged {
    pub role: Option<Role>,
    pub why: String,
}

impl Judged {
    /// The role, capped at `cap` (a read-only handle).
    pub fn capped(&self, cap: Option<Role>) -> Judged {
        Judged {
            role: match (self.role, cap) {
                (Some(r), Some(c)) => Some(r.min(c)),
                (r, _) => r,
            },
            why: self.why.clone(),
        }
    }
}

impl Roles {
    /// The roles file in force: `$MAAR_ROLES`, else [`DEFAULT_PATH`]; none there is
    /// fine (the defaults apply), a file that does not parse is an input error naming
    /// it and the line.
    pub fn load() -> Result<Roles, InputError> {
        match std::env::var_os("MAAR_ROLES") {
            Some(p) if !p.is_empty() => Roles::from_path(Path::new(&p), true),
            _ if Path::new(DEFAULT_PATH).exists() => {
                Roles::from_path(Path::new(DEFAULT_PATH), false)
            }
            _ => match owner_config() {
                Some(p) => Roles::from_path(&p, false),
                None => Ok(Roles::default()),
            },
        }
    }

    /// These roles as they stand in the cluster `name` (an engine's own: its entry
    /// under `clusters:` first, then the rest of the file).
    pub fn in_cluster(&self, name: &str) -> Roles {
        Roles {
            cluster: Some(name.to_string()),
            ..self.clone()
        }
    }

    /// The file these roles were read from, if any.
    pub fn file_path(&self) -> Option<&Path> {
        self.path.as_deref()
    }

    /// The roles file at `path` as it stands now, for `cluster`: removed, the
    /// defaults (no roles file).
    pub fn read_again(path: &Path, cluster: Option<String>) -> Result<Roles, InputError> {
        let mut r = if path.exists() {
            Roles::from_path(path, true)?
        } else {
            Roles::default()
        };
        r.cluster = cluster;
        Ok(r)
    }

    /// The cluster these roles are for, if one.
    pub fn cluster(&self) -> Option<&str> {
        self.cluster.as_deref()
    }

    /// Who may connect to the engine's socket.
    pub fn socket_access(&self) -> SocketAccess {
        self.file.socket.clone()
    }

    /// Reads a roles file; a missing one is an error only when `required`.
    pub fn from_path(path: &Path, required: bool) -> Result<Roles, InputError> {
        if !required && !path.exists() {
            return Ok(Roles::default());
        }
        // Whoever could write it could make themselves admin: a file others may write
        // or replace is refused, as a state file's folders are.
        if path.exists() {
            let me = nix::unistd::geteuid().as_raw();
            crate::record::file_trusted(path, me, "roles file").map_err(|why| InputError {
                file: path.display().to_string(),
                line: None,
                column: None,
                field: None,
                message: format!("not trusted: {why}"),
            })?;
        }
        let text = crate::load::read(path)?;
        Roles::parse(path, &text)
    }

    /// Roles from the text of a roles file.
    pub fn parse(path: &Path, text: &str) -> Result<Roles, InputError> {
        let name = path.display().to_string();
        let file: File = if text.trim().is_empty() {
            File::default()
        } else {
            crate::load::yaml(&name, text)?
        };
        Ok(Roles {
            file,
            path: Some(path.to_path_buf()),
            cluster: None,
        })
    }

    fn source(&self) -> String {
        match &self.path {
            Some(p) => p.display().to_string(),
            None => format!("no roles file ({DEFAULT_PATH} or $MAAR_ROLES)"),
        }
    }

    /// Why a user gets the default: not named in the file, or there is no file.
    fn unnamed(&self, user: &str) -> String {
        match &self.path {
            Some(p) => format!("{user} is not named in {}", p.display()),
            None => format!("there is no roles file ({DEFAULT_PATH} or $MAAR_ROLES)"),
        }
    }

    /// The role of `actor` on a state file owned by `owner` (None: no state file, or
    /// maar's own actors), capped at `cap`.
    pub fn grant(&self, actor: &Actor, owner: Option<u32>, cap: Option<Role>) -> Grant {
        let mut g = self.uncapped(actor, owner);
        if let Some(c) = cap {
            if c < g.role {
                g = Grant {
                    role: c,
                    why: format!(
                        "this session is read-only (--read-only); otherwise {} would be {} ({})",
                        actor.user, g.role, g.why
                    ),
                };
            }
        }
        g
    }

    fn uncapped(&self, actor: &Actor, owner: Option<u32>) -> Grant {
        let src = self.source();
        // This cluster's own entry first.
        if let Some((name, c)) = self
            .cluster
            .as_ref()
            .and_then(|n| self.file.clusters.get(n).map(|c| (n, c)))
        {
            let there = format!("{src} (clusters: {name})");
            if let Some(g) = named(&c.users, &c.groups, actor, &there) {
                return g;
            }
            if let Some(r) = c.default {
                return Grant {
                    role: r,
                    why: format!(
                        "{} is not named for cluster {name} in {src}; its default there is {r}",
                        actor.user
                    ),
                };
            }
        }
        if let Some(g) = named(&self.file.users, &self.file.groups, actor, &src) {
            return g;
        }
        if let Some(r) = self.file.default {
            return Grant {
                role: r,
                why: format!("{} is not named in {src}; its default is {r}", actor.user),
            };
        }
        match (owner, actor.uid) {
            (None, _) => Grant {
                role: Role::Admin,
                why: format!(
                    "{} runs this cluster alone (no shared state file)",
                    actor.user
                ),
            },
            (Some(o), Some(u)) if o == u => Grant {
                role: Role::Admin,
                why: format!(
                    "{}, and {} owns the state file",
                    self.unnamed(&actor.user),
                    actor.user
                ),
            },
            _ => Grant {
                role: Role::Viewer,
                why: format!(
                    "{}, and the state file is shared (another user owns it)",
                    self.unnamed(&actor.user)
                ),
            },
        }
    }
}

/// The highest role `actor` has by name or by group in these lists (`src` says where).
fn named(
    users: &BTreeMap<String, Role>,
    groups: &BTreeMap<String, Role>,
    actor: &Actor,
    src: &str,
) -> Option<Grant> {
    let mut best: Option<(Role, String)> = None;
    let mut consider = |role: Role, why: String| {
        if best.as_ref().is_none_or(|b| role > b.0) {
            best = Some((role, why));
        }
    };
    if let Some(&r) = users.get(&actor.user) {
        consider(r, format!("user {} is {r} in {src}", actor.user));
    }
    if !groups.is_empty() {
        for g in unix_groups(&actor.user) {
            if let Some(&r) = groups.get(&g) {
                consider(r, format!("group {g} is {r} in {src}"));
            }
        }
    }
    best.map(|(role, why)| Grant { role, why })
}

/// The engine owner's own roles file: `$XDG_CONFIG_HOME/maar/roles.yaml`, else
/// `~/.config/maar/roles.yaml`.
fn owner_config() -> Option<PathBuf> {
    let base = std::env::var_os("XDG_CONFIG_HOME")
        .filter(|v| !v.is_empty())
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".config")))?;
    Some(base.join("maar").join("roles.yaml"))
}

/// The Unix groups a user belongs to (by name), from the system's user database.
fn unix_groups(user: &str) -> Vec<String> {
    use nix::unistd::{getgrouplist, Group, User};
    let Ok(Some(u)) = User::from_name(user) else {
        return Vec::new();
    };
    let Ok(name) = std::ffi::CString::new(user) else {
        return Vec::new();
    };
    getgrouplist(&name, u.gid)
        .unwrap_or_else(|_| vec![u.gid])
        .into_iter()
        .filter_map(|g| Group::from_gid(g).ok().flatten().map(|g| g.name))
        .collect()
}

/// The owner of a state file (its uid).
pub fn owner(path: &Path) -> Option<u32> {
    use std::os::unix::fs::MetadataExt;
    std::fs::metadata(path).ok().map(|m| m.uid())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn actor(user: &str, uid: u32) -> Actor {
        Actor {
            user: user.into(),
            uid: Some(uid),
            from: None,
        }
    }

    #[test]
    fn a_clusters_own_entry_comes_first_then_the_rest_of_the_file() {
        let text = "users: {alice: admin, bob: operator}\ndefault: viewer\nclusters:\n  b:\n    users: {bob: viewer, carol: operator}\n  c:\n    default: operator\n";
        let r = Roles::parse(Path::new("roles.yaml"), text).unwrap();
        let role = |cluster: Option<&str>, user: &str| {
            let r = match cluster {
                Some(c) => r.in_cluster(c),
                None => r.clone(),
            };
            r.grant(&actor(user, 6000), Some(0), None)
        };
        // Named in the cluster's entry: that role, even below the file's.
        assert_eq!(role(Some("b"), "bob").role, Role::Viewer);
        assert!(role(Some("b"), "bob")
            .why
            .contains("roles.yaml (clusters: b)"));
        assert_eq!(role(Some("b"), "carol").role, Role::Operator);
        // Not named there: the rest of the file.
        assert_eq!(role(Some("b"), "alice").role, Role::Admin);
        assert_eq!(role(Some("b"), "dave").role, Role::Viewer);
        // The cluster's default before the file's.
        assert_eq!(role(Some("c"), "dave").role, Role::Operator);
        assert!(role(Some("c"), "dave")
            .why
            .contains("default there is operator"));
        assert_eq!(role(Some("c"), "bob").role, Role::Operator);
        // Elsewhere, and with no cluster, the file alone.
        assert_eq!(role(Some("a"), "carol").role, Role::Viewer);
        assert_eq!(role(None, "bob").role, Role::Operator);
        // A misspelt key is refused, naming it.
        let bad = Roles::parse(
            Path::new("roles.yaml"),
            "clusters:\n  b:\n    user: {x: admin}\n",
        );
        assert!(bad.is_err());
    }

    #[test]
    fn users_groups_default_and_ownership_decide() {
        let me = crate::actor::current();
        let my_group = unix_groups(&me.user).into_iter().next();
        let text = format!(
            "users: {{alice: admin, bob: operator}}\ngroups: {{{}: operator}}\n",
            my_group.clone().unwrap_or_else(|| "nogroup-here".into())
        );
        let r = Roles::parse(Path::new("roles.yaml"), &text).unwrap();
        assert_eq!(
            r.grant(&actor("alice", 5001), Some(0), None).role,
            Role::Admin
        );
        let bob = r.grant(&actor("bob", 5002), Some(0), None);
        assert_eq!(bob.role, Role::Operator);
        assert!(bob.why.contains("user bob is operator in roles.yaml"));
        // Capped by --read-only.
        let capped = r.grant(&actor("alice", 5001), Some(0), Some(Role::Viewer));
        assert_eq!(capped.role, Role::Viewer);
        assert!(capped.why.contains("read-only"));
        // Nobody named: viewer on a shared file, admin on one's own or with none.
        assert_eq!(
            r.grant(&actor("carol", 5003), Some(0), None).role,
            Role::Viewer
        );
        assert_eq!(
            r.grant(&actor("carol", 5003), Some(5003), None).role,
            Role::Admin
        );
        assert_eq!(r.grant(&actor("carol", 5003), None, None).role, Role::Admin);
        // A group of the current user (from the system's user database) counts.
        if my_group.is_some() && me.user != "alice" && me.user != "bob" {
            let g = r.grant(&me, Some(u32::MAX), None);
            assert_eq!(g.role, Role::Operator, "{}", g.why);
            assert!(g.why.starts_with("group "));
        }
        let d = Roles::parse(Path::new("r.yaml"), "default: operator\n").unwrap();
        assert_eq!(
            d.grant(&actor("carol", 5003), Some(0), None).role,
            Role::Operator
        );
    }

    #[test]
    fn a_bad_roles_file_names_the_file_and_line() {
        let e = Roles::parse(
            Path::new("/etc/maar/roles.yaml"),
            "users:\n  alice: superuser\n",
        )
        .unwrap_err()
        .to_string();
        assert!(e.contains("/etc/maar/roles.yaml"), "{e}");
        assert!(e.contains('2'), "{e}");
        let e = Roles::parse(Path::new("r.yaml"), "admins: [alice]\n")
            .unwrap_err()
            .to_string();
        assert!(e.contains("admins"), "{e}");
    }
}

/// Who may connect to the socket (the roles file's `socket:`).
#[derive(Clone, Debug, Default, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SocketAccess {
    /// Members of this Unix group may connect (mode 0660).
    #[serde(default)]
    pub group: Option<String>,
    /// Every local user may connect (mode 0666); users not named are viewers.
    #[serde(default)]
    pub everyone: bool,
}
