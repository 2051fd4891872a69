//! The operator's commands, each declared once: its name, arguments, doc, the role it
//! needs, whether it takes work away, its keys on the console's screens, and how its
//! words become a [`Command`]. The CLI (`maar NAME ...`, clap built from [`VERBS`]),
//! the console's `:` line, its keys and its help, the roles check and the audit all
//! follow from this table; a backend's write mapping matches on [`Command`] with no
//! catch-all, so a new command a backend cannot carry out does not compile there.
//!
//! Adding a command: a [`Command`] variant and its logic (`command.rs`), and one
//! [`Verb`] here.

use std::collections::BTreeMap;

use crate::command::{Command, Role};
use crate::limits::echo;

/// How an argument is written.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum How {
    /// One word in its place (`NODE`).
    Word,
    /// Every remaining word (at least one), options allowed among them.
    Words,
    /// `--name` alone.
    Flag,
    /// `--name VALUE` (or `--name=VALUE`); `default` when absent.
    Opt {
        required: bool,
        default: Option<&'static str>,
    },
}

/// One argument of a verb.
#[derive(Clone, Copy, Debug)]
pub struct Arg {
    /// Its name: the option's long name (`--gpu`), the key in [`Given`].
    pub name: &'static str,
    /// How its value is shown in usage lines (`NODE`, `INDEX`).
    pub value: &'static str,
    pub doc: &'static str,
    pub how: How,
}

/// What a console key fills in from the selected row.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Fill {
    /// The row's object (node, job, request id, alert key) as the first word.
    Row,
    /// The job, and its priority one step up (`true`) or down.
    PriorityStep(bool),
}

/// A key that gives the verb on one console screen, for the selected row.
#[derive(Clone, Copy, Debug)]
pub struct Key {
    /// The screen's name as the console's `:SCREEN` takes it (`nodes`, `jobs`).
    pub screen: &'static str,
    pub key: char,
    /// What it does, for the help.
    pub does: &'static str,
    pub fill: Fill,
}

/// How the words become a command.
#[derive(Clone, Copy)]
pub enum Build {
    /// From the words alone (pure).
    Words(fn(&Given) -> Result<Command, String>),
    /// The face reads the job file named by the first argument (I/O is a face's) and
    /// submits what it holds.
    JobFile,
}

/// One operator command as every face knows it.
pub struct Verb {
    /// `maar NAME` and `:NAME`.
    pub name: &'static str,
    pub args: &'static [Arg],
    /// One line: what it does.
    pub doc: &'static str,
    /// The least role that may give it.
    pub role: Role,
    /// It takes work away or stops something (a drain, a cancel): the console says so
    /// in its question.
    pub destructive: bool,
    /// Done at once without a preview (an acknowledgement); everything else is
    /// previewed on a copy and confirmed first in the console.
    pub at_once: bool,
    pub keys: &'static [Key],
    pub build: Build,
}

impl std::fmt::Debug for Verb {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name)
    }
}

/// The words given to a verb, by argument name.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Given {
    values: BTreeMap<&'static str, Vec<String>>,
}

impl Given {
    pub fn set(&mut self, name: &'static str, values: Vec<String>) {
        self.values.insert(name, values);
    }

    /// The one value of a word or option (absent: `None`).
    pub fn word(&self, name: &str) -> Option<&str> {
        self.values
            .get(name)
            .and_then(|v| v.first())
            .map(String::as_str)
    }

    pub fn words(&self, name: &str) -> &[String] {
        self.values.get(name).map(Vec::as_slice).unwrap_or(&[])
    }

    pub fn flag(&self, name: &str) -> bool {
        self.values.contains_key(name)
    }

    fn need(&self, name: &str) -> Result<String, String> {
        self.word(name)
            .map(str::to_string)
            .ok_or_else(|| format!("missing {}", name.to_uppercase()))
    }
}

fn gpu_index(s: &str) -> Result<u32, String> {
    s.parse()
        .map_err(|_| format!("`{}` is not a GPU index (0, 1, 2, ...)", echo(s)))
}

/// A quota request's id, `7` or `#7` as the tables show it.
pub fn request_id(s: &str) -> Result<u32, String> {
    s.trim_start_matches('#').parse().map_err(|_| {
        format!(
            "`{}` is not a request id (a number, as `maar get quotas` lists them)",
            echo(s)
        )
    })
}

fn count(s: &str, what: &str, least: u32, most: u32) -> Result<u32, String> {
    s.parse::<u32>()
        .ok()
        .filter(|n| (least..=most).contains(n))
        .ok_or_else(|| {
            format!(
                "`{}` is not a number of {what} from {least} to {most}",
                echo(s)
            )
        })
}

const NODE: Arg = Arg {
    name: "node",
    value: "NODE",
    doc: "The node's name.",
    how: How::Word,
};
const JOB: Arg = Arg {
    name: "job",
    value: "JOB",
    doc: "The job: its name, or project/name.",
    how: How::Word,
};
const GPU_OPT: Arg = Arg {
    name: "gpu",
    value: "INDEX",
    doc: "Only this GPU of the node (0, 1, ...).",
    how: How::Opt {
        required: false,
        default: None,
    },
};
const GPU_WORD: Arg = Arg {
    name: "index",
    value: "INDEX",
    doc: "The GPU's index on the node (0, 1, ...).",
    how: How::Word,
};
const REQUEST: Arg = Arg {
    name: "request",
    value: "ID",
    doc: "The quota request's id, as `maar get quotas` lists it.",
    how: How::Word,
};

fn cordon(g: &Given, on: bool) -> Result<Command, String> {
    let node = g.need("node")?;
    let gpu = g
        .word("gpu")
        .or(g.word("index"))
        .map(gpu_index)
        .transpose()?;
    Ok(match (gpu, on) {
        (Some(gpu), true) => Command::CordonGpu { node, gpu },
        (Some(gpu), false) => Command::UncordonGpu { node, gpu },
        (None, true) => Command::CordonNode { node },
        (None, false) => Command::UncordonNode { node },
    })
}

/// Every operator command, in the order the help lists them.
pub static VERBS: &[Verb] = &[
    Verb {
        name: "cordon",
        args: &[NODE, GPU_OPT],
        doc: "Cordon a node, or one of its GPUs: running work stays, nothing new is placed.",
        role: Role::Operator,
        destructive: true,
        at_once: false,
        keys: &[Key {
            screen: "nodes",
            key: 'c',
            does: "cordon the node",
            fill: Fill::Row,
        }],
        build: Build::Words(|g| cordon(g, true)),
    },
    Verb {
        name: "uncordon",
        args: &[NODE, GPU_OPT],
        doc: "Uncordon a node, or one of its GPUs.",
        role: Role::Operator,
        destructive: false,
        at_once: false,
        keys: &[Key {
            screen: "nodes",
            key: 'u',
            does: "uncordon the node",
            fill: Fill::Row,
        }],
        build: Build::Words(|g| cordon(g, false)),
    },
    Verb {
        name: "cordon-gpu",
        args: &[NODE, GPU_WORD],
        doc: "Cordon one GPU of a node (as `cordon NODE --gpu INDEX`).",
        role: Role::Operator,
        destructive: false,
        at_once: false,
        keys: &[],
        build: Build::Words(|g| cordon(g, true)),
    },
    Verb {
        name: "uncordon-gpu",
        args: &[NODE, GPU_WORD],
        doc: "Uncordon one GPU of a node (as `uncordon NODE --gpu INDEX`).",
        role: Role::Operator,
        destructive: false,
        at_once: false,
        keys: &[],
        build: Build::Words(|g| cordon(g, false)),
    },
    Verb {
        name: "drain",
        args: &[NODE],
        doc: "Cordon a node and requeue every job on it.",
        role: Role::Operator,
        destructive: true,
        at_once: false,
        keys: &[Key {
            screen: "nodes",
            key: 'd',
            does: "drain the node",
            fill: Fill::Row,
        }],
        build: Build::Words(|g| {
            Ok(Command::DrainNode {
                node: g.need("node")?,
            })
        }),
    },
    Verb {
        name: "priority",
        args: &[
            JOB,
            Arg {
                name: "level",
                value: "LEVEL",
                doc: "high, medium, low, or a number within ±1000000000 (Kubernetes' highest user-definable PriorityClass value).",
                how: How::Word,
            },
        ],
        doc: "Set a job's priority: high, medium, low or a number.",
        role: Role::Operator,
        destructive: false,
        at_once: false,
        keys: &[
            Key {
                screen: "jobs",
                key: '+',
                does: "priority up",
                fill: Fill::PriorityStep(true),
            },
            Key {
                screen: "jobs",
                key: '-',
                does: "priority down",
                fill: Fill::PriorityStep(false),
            },
        ],
        build: Build::Words(|g| {
            Ok(Command::SetPriority {
                job: g.need("job")?,
                priority: crate::model::parse_priority(&g.need("level")?)?,
            })
        }),
    },
    Verb {
        name: "requeue",
        args: &[JOB],
        doc: "Put a running, failed or cancelled job back in the queue.",
        role: Role::Operator,
        destructive: true,
        at_once: false,
        keys: &[Key {
            screen: "jobs",
            key: 'r',
            does: "requeue the job",
            fill: Fill::Row,
        }],
        build: Build::Words(|g| Ok(Command::Requeue { job: g.need("job")? })),
    },
    Verb {
        name: "keep",
        args: &[JOB],
        doc: "Run a job held for the federation here (its file asks for another cluster or auto).",
        role: Role::Operator,
        destructive: false,
        at_once: false,
        keys: &[],
        build: Build::Words(|g| Ok(Command::Keep { job: g.need("job")?, why: None })),
    },
    Verb {
        name: "cancel",
        args: &[JOB],
        doc: "Cancel a job.",
        role: Role::Operator,
        destructive: true,
        at_once: false,
        keys: &[Key {
            screen: "jobs",
            key: 'x',
            does: "cancel the job",
            fill: Fill::Row,
        }],
        build: Build::Words(|g| Ok(Command::Cancel { job: g.need("job")?, why: None })),
    },
    Verb {
        name: "scale",
        args: &[
            JOB,
            Arg {
                name: "replicas",
                value: "N",
                doc: "How many replicas.",
                how: How::Word,
            },
        ],
        doc: "Set an inference service's replicas (its autoscaler pauses until resumed).",
        role: Role::Operator,
        destructive: false,
        at_once: false,
        keys: &[],
        build: Build::Words(|g| {
            Ok(Command::Scale {
                job: g.need("job")?,
                replicas: count(&g.need("replicas")?, "replicas", 0, crate::limits::MAX_REPLICAS)?,
            })
        }),
    },
    Verb {
        name: "autoscale",
        args: &[JOB],
        doc: "Hand an inference service back to its autoscaler.",
        role: Role::Operator,
        destructive: false,
        at_once: false,
        keys: &[],
        build: Build::Words(|g| Ok(Command::ResumeAutoscale { job: g.need("job")? })),
    },
    Verb {
        name: "submit",
        args: &[Arg {
            name: "file",
            value: "JOB.yaml",
            doc: "TrainJob, InferenceService, or a Deployment (+ HPA) YAML.",
            how: How::Word,
        }],
        doc: "Submit a job manifest.",
        role: Role::Operator,
        destructive: false,
        at_once: false,
        keys: &[],
        build: Build::JobFile,
    },
    Verb {
        name: "request-quota",
        args: &[
            Arg {
                name: "project",
                value: "PROJECT",
                doc: "The project that needs it.",
                how: How::Word,
            },
            Arg {
                name: "pool",
                value: "POOL",
                doc: "The pool it is for.",
                how: How::Word,
            },
            Arg {
                name: "gpu",
                value: "N",
                doc: "Extra GPUs.",
                how: How::Opt {
                    required: true,
                    default: None,
                },
            },
            Arg {
                name: "reserved",
                value: "",
                doc: "Reserve them (never lent to others) rather than only raise the maximum.",
                how: How::Flag,
            },
            Arg {
                name: "reason",
                value: "TEXT",
                doc: "Why, for the admin who decides.",
                how: How::Opt {
                    required: false,
                    default: Some(""),
                },
            },
        ],
        doc: "Ask for more quota for a project in a pool (an admin approves it).",
        role: Role::Operator,
        destructive: false,
        at_once: false,
        keys: &[],
        build: Build::Words(|g| {
            Ok(Command::RequestQuota {
                project: g.need("project")?,
                pool: g.need("pool")?,
                gpus: count(
                    &g.need("gpu")?,
                    "GPUs",
                    1,
                    crate::limits::MAX_QUOTA_GPUS as u32,
                )?,
                reserved: g.flag("reserved"),
                reason: g.word("reason").unwrap_or_default().to_string(),
            })
        }),
    },
    Verb {
        name: "approve",
        args: &[REQUEST],
        doc: "Approve a quota request.",
        role: Role::Admin,
        destructive: false,
        at_once: false,
        keys: &[Key {
            screen: "quotas",
            key: 'a',
            does: "approve the selected request",
            fill: Fill::Row,
        }],
        build: Build::Words(|g| {
            Ok(Command::ApproveQuota {
                id: request_id(&g.need("request")?)?,
            })
        }),
    },
    Verb {
        name: "reject",
        args: &[
            REQUEST,
            Arg {
                name: "reason",
                value: "TEXT",
                doc: "Why, for the one who asked.",
                how: How::Opt {
                    required: false,
                    default: Some("rejected by operator"),
                },
            },
        ],
        doc: "Reject a quota request.",
        role: Role::Admin,
        destructive: true,
        at_once: false,
        keys: &[Key {
            screen: "quotas",
            key: 'r',
            does: "reject the selected request",
            fill: Fill::Row,
        }],
        build: Build::Words(|g| {
            Ok(Command::RejectQuota {
                id: request_id(&g.need("request")?)?,
                reason: g.word("reason").unwrap_or_default().to_string(),
            })
        }),
    },
    Verb {
        name: "label",
        args: &[
            Arg {
                name: "args",
                value: "NODE KEY=VALUE|KEY-",
                doc: "`[node] NODE KEY=VALUE ... KEY- ...`; options may come anywhere among them, as kubectl takes them.",
                how: How::Words,
            },
            Arg {
                name: "overwrite",
                value: "",
                doc: "Accepted as kubectl takes it (maar always overwrites).",
                how: How::Flag,
            },
        ],
        doc: "Set or remove a node's labels as `kubectl label node` takes them (the node moves to the pool its labels now select).",
        role: Role::Operator,
        destructive: false,
        at_once: false,
        keys: &[],
        build: Build::Words(|g| crate::command::parse_label_args(g.words("args"))),
    },
    Verb {
        name: "ack",
        args: &[Arg {
            name: "alert",
            value: "ALERT",
            doc: "The alert's key, as `maar get alerts` lists it (oom/ml-prod/gpt, disk/a100-03).",
            how: How::Word,
        }],
        doc: "Acknowledge an open alert by its key: it leaves the open list until it happens again.",
        role: Role::Operator,
        destructive: false,
        at_once: true,
        keys: &[Key {
            screen: "alerts",
            key: 'a',
            does: "acknowledge the alert",
            fill: Fill::Row,
        }],
        build: Build::Words(|g| {
            Ok(Command::AckAlert {
                alert: g.need("alert")?,
            })
        }),
    },
];

/// The verb of this name.
pub fn verb(name: &str) -> Option<&'static Verb> {
    VERBS.iter().find(|v| v.name == name)
}

/// The verb a key gives on a screen.
pub fn key(screen: &str, key: char) -> Option<(&'static Verb, &'static Key)> {
    VERBS.iter().find_map(|v| {
        v.keys
            .iter()
            .find(|k| k.screen == screen && k.key == key)
            .map(|k| (v, k))
    })
}

impl Verb {
    /// `cordon NODE [--gpu INDEX]`.
    pub fn usage(&self) -> String {
        let mut s = self.name.to_string();
        for a in self.args {
            s.push(' ');
            match a.how {
                How::Word => s.push_str(a.value),
                How::Words => {
                    s.push_str(a.value);
                    s.push_str("...");
                }
                How::Flag => s.push_str(&format!("[--{}]", a.name)),
                How::Opt { required: true, .. } => s.push_str(&format!("--{} {}", a.name, a.value)),
                How::Opt { .. } => s.push_str(&format!("[--{} {}]", a.name, a.value)),
            }
        }
        s
    }

    /// The command its words give (after defaults are filled in); a face reading a job
    /// file ([`Build::JobFile`]) builds that one itself.
    pub fn command(&self, given: &Given) -> Result<Command, String> {
        match self.build {
            Build::Words(f) => f(&self.defaults(given)),
            Build::JobFile => Err(format!("{} reads a file: the face builds it", self.name)),
        }
    }

    fn defaults(&self, given: &Given) -> Given {
        let mut g = given.clone();
        for a in self.args {
            if let How::Opt {
                default: Some(d), ..
            } = a.how
            {
                g.values
                    .entry(a.name)
                    .or_insert_with(|| vec![d.to_string()]);
            }
        }
        g
    }

    /// Reads the words after the verb's name as the console's `:` line and scenario
    /// text give them: words in their places, `--name VALUE`, `--name=VALUE`, `--flag`.
    pub fn read(&self, words: &[String]) -> Result<Given, String> {
        let mut g = Given::default();
        let mut places = self
            .args
            .iter()
            .filter(|a| matches!(a.how, How::Word | How::Words));
        let mut rest: Option<&Arg> = None;
        let mut it = words.iter();
        // After a bare `--`, every word is a word (as a shell command takes it).
        let mut options_end = false;
        while let Some(w) = it.next() {
            if w == "--" && !options_end {
                options_end = true;
                continue;
            }
            let option = w
                .strip_prefix("--")
                .filter(|o| !options_end && !o.is_empty() && !o.starts_with('-'));
            if let Some(o) = option {
                let (name, inline) = match o.split_once('=') {
                    Some((n, v)) => (n, Some(v.to_string())),
                    None => (o, None),
                };
                let Some(arg) = self
                    .args
                    .iter()
                    .find(|a| a.name == name && matches!(a.how, How::Flag | How::Opt { .. }))
                else {
                    return Err(format!(
                        "`--{}` is not an option of {} (usage: {})",
                        echo(name),
                        self.name,
                        self.usage()
                    ));
                };
                if g.values.contains_key(arg.name) {
                    return Err(format!("--{} is given twice", arg.name));
                }
                if arg.how == How::Flag {
                    if inline.is_some() {
                        return Err(format!("--{} takes no value", arg.name));
                    }
                    g.set(arg.name, Vec::new());
                } else {
                    let v = match inline {
                        Some(v) => v,
                        None => it
                            .next()
                            .filter(|v| !v.starts_with("--"))
                            .cloned()
                            .ok_or_else(|| format!("--{} needs a {}", arg.name, arg.value))?,
                    };
                    g.set(arg.name, vec![v]);
                }
                continue;
            }
            if let Some(a) = rest {
                g.values.entry(a.name).or_default().push(w.clone());
                continue;
            }
            match places.next() {
                Some(a) if a.how == How::Words => {
                    rest = Some(a);
                    g.set(a.name, vec![w.clone()]);
                }
                Some(a) => g.set(a.name, vec![w.clone()]),
                None => {
                    return Err(format!(
                        "`{}` is one word too many (usage: {})",
                        echo(w),
                        self.usage()
                    ))
                }
            }
        }
        for a in self.args {
            let needed = matches!(
                a.how,
                How::Word | How::Words | How::Opt { required: true, .. }
            );
            if needed && !g.values.contains_key(a.name) {
                let what = match a.how {
                    How::Opt { .. } => format!("--{} {}", a.name, a.value),
                    _ => a.value.to_string(),
                };
                return Err(format!("missing {what} (usage: {})", self.usage()));
            }
        }
        Ok(g)
    }
}

/// Reads a command line (`cordon a100-01 --gpu 3`): the verb and its words.
pub fn read_line(words: &[String]) -> Result<(&'static Verb, Given), String> {
    let (head, rest) = words.split_first().ok_or("no command given")?;
    let v = verb(head).ok_or_else(|| format!("`{}` is not a command", echo(head)))?;
    Ok((v, v.read(rest)?))
}

impl Command {
    /// The verb that gives this command (for its role, its doc, its audit name).
    pub fn verb(&self) -> &'static Verb {
        let name = match self {
            Command::Submit(_) => "submit",
            Command::RequestQuota { .. } => "request-quota",
            Command::ApproveQuota { .. } => "approve",
            Command::RejectQuota { .. } => "reject",
            Command::SetPriority { .. } => "priority",
            Command::CordonGpu { .. } => "cordon-gpu",
            Command::UncordonGpu { .. } => "uncordon-gpu",
            Command::CordonNode { .. } => "cordon",
            Command::UncordonNode { .. } => "uncordon",
            Command::DrainNode { .. } => "drain",
            Command::Requeue { .. } => "requeue",
            Command::Keep { .. } => "keep",
            Command::Cancel { .. } => "cancel",
            Command::Scale { .. } => "scale",
            Command::ResumeAutoscale { .. } => "autoscale",
            Command::AckAlert { .. } => "ack",
            Command::LabelNode { .. } => "label",
        };
        verb(name).expect("every command has a verb (tested)")
    }

    /// The least role that may give this command (its verb's).
    pub fn required_role(&self) -> Role {
        self.verb().role
    }

    /// Whether it takes work away or stops something (its verb's).
    pub fn is_destructive(&self) -> bool {
        self.verb().destructive
    }

    /// The audit's action: the command's name in the state file (`cordon_node`).
    pub fn action(&self) -> &'static str {
        match self {
            Command::Submit(_) => "submit",
            Command::RequestQuota { .. } => "request_quota",
            Command::ApproveQuota { .. } => "approve_quota",
            Command::RejectQuota { .. } => "reject_quota",
            Command::SetPriority { .. } => "set_priority",
            Command::CordonGpu { .. } => "cordon_gpu",
            Command::UncordonGpu { .. } => "uncordon_gpu",
            Command::CordonNode { .. } => "cordon_node",
            Command::UncordonNode { .. } => "uncordon_node",
            Command::DrainNode { .. } => "drain_node",
            Command::Requeue { .. } => "requeue",
            Command::Keep { .. } => "keep",
            Command::Cancel { .. } => "cancel",
            Command::Scale { .. } => "scale",
            Command::ResumeAutoscale { .. } => "resume_autoscale",
            Command::AckAlert { .. } => "ack_alert",
            Command::LabelNode { .. } => "label_node",
        }
    }

    /// What it acts on, for the audit: `node/a100-01`, `gpu/a100-01/3`, `job/NAME`,
    /// `request/7`, `quota/PROJECT/POOL`, `alert/KEY`.
    pub fn object(&self) -> String {
        match self {
            Command::Submit(s) => format!("job/{}/{}", s.project, s.name),
            Command::RequestQuota { project, pool, .. } => format!("quota/{project}/{pool}"),
            Command::ApproveQuota { id } | Command::RejectQuota { id, .. } => {
                format!("request/{id}")
            }
            Command::SetPriority { job, .. }
            | Command::Requeue { job }
            | Command::Keep { job, .. }
            | Command::Cancel { job, .. }
            | Command::Scale { job, .. }
            | Command::ResumeAutoscale { job } => format!("job/{job}"),
            Command::CordonGpu { node, gpu } | Command::UncordonGpu { node, gpu } => {
                format!("gpu/{node}/{gpu}")
            }
            Command::CordonNode { node }
            | Command::UncordonNode { node }
            | Command::DrainNode { node }
            | Command::LabelNode { node, .. } => format!("node/{node}"),
            Command::AckAlert { alert } => format!("alert/{alert}"),
        }
    }

    /// The job it names, if it names one by the operator's words (the engine records
    /// it under its full name).
    pub fn job_named(&self) -> Option<&str> {
        match self {
            Command::SetPriority { job, .. }
            | Command::Requeue { job }
            | Command::Keep { job, .. }
            | Command::Cancel { job, .. }
            | Command::Scale { job, .. }
            | Command::ResumeAutoscale { job } => Some(job),
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn line(s: &str) -> Result<Command, String> {
        let words: Vec<String> = s.split_whitespace().map(str::to_string).collect();
        let (v, g) = read_line(&words)?;
        v.command(&g)
    }

    #[test]
    fn names_are_unique_and_every_command_has_its_verb() {
        for (i, v) in VERBS.iter().enumerate() {
            assert!(
                VERBS[..i].iter().all(|w| w.name != v.name),
                "{} twice",
                v.name
            );
            let mut names: Vec<_> = v.args.iter().map(|a| a.name).collect();
            names.sort();
            names.dedup();
            assert_eq!(names.len(), v.args.len(), "{}: an argument twice", v.name);
        }
        for l in [
            "cordon a --gpu 1",
            "uncordon a --gpu 1",
            "cordon a",
            "uncordon a",
            "drain a",
            "priority j high",
            "requeue j",
            "cancel j",
            "scale j 2",
            "autoscale j",
            "request-quota p q --gpu 2",
            "approve 1",
            "reject 1",
            "label a k=v",
            "ack oom/x/y",
        ] {
            let c = line(l).unwrap();
            assert!(
                l.starts_with(c.verb().name.split('-').next().unwrap()),
                "{l}"
            );
            // The audit's action is the command's name in the state file.
            let v = serde_json::to_value(&c).unwrap();
            assert_eq!(v.as_object().unwrap().keys().next().unwrap(), c.action());
        }
    }

    #[test]
    fn a_key_is_given_once_per_screen() {
        let mut seen = std::collections::BTreeSet::new();
        for v in VERBS {
            for k in v.keys {
                assert!(seen.insert((k.screen, k.key)), "{} {}", k.screen, k.key);
            }
        }
    }

    #[test]
    fn lines_read_as_the_cli_takes_them() {
        assert_eq!(
            line("cordon a100-01 --gpu 3"),
            Ok(Command::CordonGpu {
                node: "a100-01".into(),
                gpu: 3
            })
        );
        assert_eq!(line("cordon-gpu a100-01 3"), line("cordon a100-01 --gpu=3"));
        assert_eq!(
            line("request-quota ml pool --gpu 4 --reserved --reason=big"),
            Ok(Command::RequestQuota {
                project: "ml".into(),
                pool: "pool".into(),
                gpus: 4,
                reserved: true,
                reason: "big".into()
            })
        );
        assert_eq!(
            line("reject #3"),
            Ok(Command::RejectQuota {
                id: 3,
                reason: "rejected by operator".into()
            })
        );
        assert_eq!(
            line("priority j -5"),
            Ok(Command::SetPriority {
                job: "j".into(),
                priority: -5
            })
        );
        // Options among the label's words, as kubectl takes them.
        let l = line("label node gpu-07 a=b --overwrite c-").unwrap();
        assert_eq!(l.object(), "node/gpu-07");
    }

    #[test]
    fn bad_lines_say_what_is_wrong() {
        let e = line("cordon").unwrap_err();
        assert!(
            e.contains("missing NODE") && e.contains("cordon NODE [--gpu INDEX]"),
            "{e}"
        );
        let e = line("cordon a b").unwrap_err();
        assert!(e.contains("`b` is one word too many"), "{e}");
        let e = line("cordon a --gpu x").unwrap_err();
        assert!(e.contains("not a GPU index"), "{e}");
        let e = line("cordon a --force").unwrap_err();
        assert!(e.contains("`--force` is not an option of cordon"), "{e}");
        let e = line("request-quota p q").unwrap_err();
        assert!(e.contains("missing --gpu N"), "{e}");
        let e = line("request-quota p q --gpu 0").unwrap_err();
        assert!(e.contains("from 1 to"), "{e}");
        let e = line("approve seven").unwrap_err();
        assert!(e.contains("not a request id"), "{e}");
        let e = line("priority j 1000000001").unwrap_err();
        assert!(e.contains("within ±1000000000"), "{e}");
        assert!(line("frobnicate x").unwrap_err().contains("not a command"));
        assert!(line("cordon a --gpu").unwrap_err().contains("--gpu needs"));
        assert!(line("cordon a --gpu 1 --gpu 2")
            .unwrap_err()
            .contains("given twice"));
        assert!(line("reject 1 --reason --gpu")
            .unwrap_err()
            .contains("--reason needs"));
        // After `--`, words are words: a job named like an option.
        assert_eq!(
            line("cancel -- --odd"),
            Ok(Command::Cancel {
                job: "--odd".into(),
                why: None
            })
        );
    }

    #[test]
    fn roles_come_from_the_verbs() {
        assert_eq!(line("approve 1").unwrap().required_role(), Role::Admin);
        assert_eq!(line("reject 1").unwrap().required_role(), Role::Admin);
        assert_eq!(line("drain a").unwrap().required_role(), Role::Operator);
        assert!(line("drain a").unwrap().is_destructive());
        assert!(!line("uncordon a").unwrap().is_destructive());
    }
}
