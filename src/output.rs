//! Printing state for people (tables) and programs (JSON, YAML).

use comfy_table::{presets, Cell, ContentArrangement, Table};
use serde::Serialize;

use maar_scheduler::metrics::{Costs, JobView, Metrics, NodeView, QuotaView, Snapshot};
use maar_scheduler::model::{Dim, Resources};
use maar_scheduler::quantity::{fmt_bytes, fmt_cpu, fmt_duration};
use maar_scheduler::Event;

/// `maar sim --output json`: the final state of a run. Fields are documented in
/// `docs/sim-json.md`.
#[derive(Serialize)]
pub struct SimReport<'a> {
    pub scenario: &'a str,
    pub seed: u64,
    pub time_s: u64,
    pub jobs: &'a [JobView],
    pub nodes: &'a [NodeView],
    pub quotas: &'a [QuotaView],
    pub quota_requests: &'a [maar_scheduler::metrics::QuotaRequestView],
    pub metrics: &'a Metrics,
    pub costs: &'a Costs,
    pub events: &'a [Event],
}

impl<'a> SimReport<'a> {
    pub fn new(scenario: &'a str, seed: u64, s: &'a Snapshot) -> Self {
        SimReport {
            scenario,
            seed,
            time_s: s.time_s,
            jobs: &s.jobs,
            nodes: &s.nodes,
            quotas: &s.quotas,
            quota_requests: &s.quota_requests,
            metrics: &s.metrics,
            costs: &s.costs,
            events: &s.events,
        }
    }
}

/// A plain, borderless table with these column headers (every listing uses it).
pub(crate) fn table(header: &[&str]) -> Table {
    let mut t = Table::new();
    t.load_preset(presets::NOTHING)
        .set_content_arrangement(ContentArrangement::Disabled)
        .set_header(header.iter().copied().map(Cell::new));
    t
}

/// A table as text: no left margin, no trailing spaces, ending in a newline. Each
/// cell is one line: a newline or tab in a value (a name or a message anyone may
/// write) is shown escaped, as are Unicode's invisible format characters (a bidi
/// override), so that no value can draw a row of its own (an audit row that reads as
/// another user's).
pub(crate) fn render(t: Table) -> String {
    let cells = |r: &comfy_table::Row| -> Vec<String> {
        r.cell_iter()
            .map(|c| one_line(&c.content()).into_owned())
            .collect()
    };
    let mut safe = Table::new();
    safe.load_preset(presets::NOTHING)
        .set_content_arrangement(ContentArrangement::Disabled);
    if let Some(h) = t.header() {
        safe.set_header(cells(h));
    }
    for r in t.row_iter() {
        safe.add_row(cells(r));
    }
    // comfy-table pads the left of each line with one space in this preset.
    let s = safe.to_string();
    let mut out: String = s
        .lines()
        .map(|l| l.strip_prefix(' ').unwrap_or(l).trim_end())
        .collect::<Vec<_>>()
        .join("\n");
    out.push('\n');
    out
}

/// A value as one line of visible text: newline, tab and carriage return escaped
/// (`\n`), and Unicode's format characters (bidi overrides and isolates, zero-width
/// marks, line and paragraph separators) as `\u{202e}`. Other control characters
/// are escaped where the text is written (`out::clean`).
pub fn one_line(s: &str) -> std::borrow::Cow<'_, str> {
    let hidden = |c: char| {
        matches!(c, '\n' | '\t' | '\r')
            || matches!(c as u32, 0x200b..=0x200f | 0x2028..=0x202e | 0x2060..=0x2069 | 0xfeff)
    };
    if !s.chars().any(hidden) {
        return std::borrow::Cow::Borrowed(s);
    }
    let mut out = String::with_capacity(s.len() + 8);
    for c in s.chars() {
        match c {
            '\n' => out.push_str("\\n"),
            '\t' => out.push_str("\\t"),
            '\r' => out.push_str("\\r"),
            c if hidden(c) => out.push_str(&format!("\\u{{{:x}}}", c as u32)),
            c => out.push(c),
        }
    }
    std::borrow::Cow::Owned(out)
}

/// The headers with a CLUSTER column first when `on` (rows of several clusters).
fn clustered(h: Vec<&str>, on: bool) -> Vec<&str> {
    if on {
        std::iter::once("CLUSTER").chain(h).collect()
    } else {
        h
    }
}

pub fn gpus(milli: u64) -> String {
    Dim::Gpu.fmt(milli)
}

pub fn jobs_table(jobs: &[JobView], now: u64, wide: bool) -> String {
    let mut h = vec![
        "NAMESPACE",
        "NAME",
        "PHASE",
        "PRIORITY",
        "POOL",
        "REQUEST",
        "WAIT",
        "RUN",
        "STARTS",
    ];
    if wide {
        h.extend(["RESTARTS", "PLACEMENT"]);
    }
    h.push("REASON");
    let several = jobs.iter().any(|j| !j.cluster.is_empty());
    let mut t = table(&clustered(h, several));
    for j in jobs {
        let mut row = vec![
            j.project.clone(),
            j.name.clone(),
            j.phase.clone(),
            j.priority.clone(),
            j.pool.clone(),
            j.request.clone(),
            fmt_duration(j.wait_s),
            fmt_duration(j.run_s),
            maar_scheduler::forecast::starts_cell(
                now,
                j.expected_start_s,
                j.expected_start_basis.as_deref(),
            ),
        ];
        if wide {
            row.push(j.restarts.to_string());
            row.push(if j.placement.is_empty() {
                "-".into()
            } else {
                j.placement.join(" ")
            });
        }
        row.push(j.reasons.first().cloned().unwrap_or_default());
        if several {
            row.insert(0, j.cluster.clone());
        }
        t.add_row(row);
    }
    render(t)
}

pub fn nodes_table(nodes: &[NodeView], wide: bool) -> String {
    let mut h = vec![
        "NAME", "POOL", "ROLE", "STATUS", "GPUS", "MODEL", "CPU", "MEMORY", "DISK",
    ];
    if wide {
        h.push("LABELLED");
        h.push("IN USE (measured)");
    }
    let several = nodes.iter().any(|n| !n.cluster.is_empty());
    let mut t = table(&clustered(h, several));
    for n in nodes {
        let status = n.status();
        let model = n
            .gpus
            .first()
            .map(|g| g.model.clone())
            .unwrap_or_else(|| "-".into());
        let mut row = vec![
            n.name.clone(),
            n.pool.clone(),
            n.role.clone(),
            status,
            format!("{}/{}", n.gpus_used, n.gpus_total),
            model,
            format!("{}/{}", fmt_cpu(n.cpu_allocated), fmt_cpu(n.cpu_milli)),
            format!("{}/{}", fmt_bytes(n.memory_allocated), fmt_bytes(n.memory)),
            format!("{}%", (n.disk_used * 100).checked_div(n.disk).unwrap_or(0)),
        ];
        if wide {
            row.push(if n.gpu_labelled { "yes" } else { "no" }.into());
            row.push(n.host.map(|h| h.to_string()).unwrap_or_else(|| "-".into()));
        }
        if several {
            row.insert(0, n.cluster.clone());
        }
        t.add_row(row);
    }
    render(t)
}

pub fn gpus_table(nodes: &[NodeView], wide: bool) -> String {
    let mut h = vec![
        "NODE", "GPU", "MODEL", "MEMORY", "UTIL", "HEALTH", "CORDONED", "HOLDERS",
    ];
    if wide {
        h.push("MIG");
    }
    let several = nodes.iter().any(|n| !n.cluster.is_empty());
    let mut t = table(&clustered(h, several));
    for n in nodes {
        for g in &n.gpus {
            let mut row = vec![
                n.name.clone(),
                g.index.to_string(),
                g.model.clone(),
                format!("{}/{}", fmt_bytes(g.mem_allocated), fmt_bytes(g.memory)),
                format!("{}%", g.util_pct),
                g.health.clone(),
                if g.cordoned { "yes" } else { "no" }.into(),
                if g.holders.is_empty() {
                    "-".into()
                } else {
                    g.holders.join(",")
                },
            ];
            if wide {
                row.push(if g.mig { "yes" } else { "no" }.into());
            }
            if several {
                row.insert(0, n.cluster.clone());
            }
            t.add_row(row);
        }
    }
    render(t)
}

fn limit(v: Option<u64>, d: Dim) -> String {
    v.map(|x| d.fmt(x)).unwrap_or_else(|| "-".into())
}

/// Quota requests (after the quotas): id, who, what, why, and where they stand.
pub fn requests_table(r: &[maar_scheduler::metrics::QuotaRequestView]) -> String {
    if r.is_empty() {
        return String::new();
    }
    let several = r.iter().any(|q| !q.cluster.is_empty());
    let mut t = table(&clustered(
        vec![
            "REQUEST", "PROJECT", "POOL", "GPUS", "RESERVED", "STATUS", "REASON",
        ],
        several,
    ));
    for q in r {
        let mut row = vec![
            q.id.to_string(),
            q.project.clone(),
            q.pool.clone(),
            format!("+{}", q.gpus),
            if q.reserved { "yes" } else { "no" }.to_string(),
            q.status.clone(),
            q.reason.clone(),
        ];
        if several {
            row.insert(0, q.cluster.clone());
        }
        t.add_row(row);
    }
    format!(
        "\nQUOTA REQUESTS (maar approve ID / maar reject ID)\n{}",
        render(t)
    )
}

pub fn quotas_table(q: &[QuotaView], wide: bool) -> String {
    let mut h = vec![
        "PROJECT",
        "DEPARTMENT",
        "POOL",
        "GPU USED",
        "RESERVED",
        "MAX",
    ];
    if wide {
        h.extend(["CPU USED/MAX", "MEMORY USED/MAX"]);
    }
    let several = q.iter().any(|v| !v.cluster.is_empty());
    let mut t = table(&clustered(h, several));
    for v in q {
        let mut row = vec![
            v.project.clone(),
            v.department.clone(),
            v.pool.clone(),
            gpus(v.used.gpu_milli),
            gpus(v.reserved.gpu_milli),
            limit(v.max.gpu_milli, Dim::Gpu),
        ];
        if wide {
            row.push(format!(
                "{}/{}",
                fmt_cpu(v.used.cpu_milli),
                limit(v.max.cpu_milli, Dim::Cpu)
            ));
            row.push(format!(
                "{}/{}",
                fmt_bytes(v.used.memory),
                limit(v.max.memory, Dim::Memory)
            ));
        }
        if several {
            row.insert(0, v.cluster.clone());
        }
        t.add_row(row);
    }
    render(t)
}

/// With several clusters' quotas: each project's GPUs over all of them (every pool of
/// every cluster), the budget a dispatch among them stays within (each cluster admits
/// within its own quota, so the sum bounds the project's whole use); empty for one.
pub fn quota_totals(q: &[QuotaView]) -> String {
    if !q.iter().any(|v| !v.cluster.is_empty()) {
        return String::new();
    }
    let mut t = table(&["PROJECT", "GPU USED", "RESERVED", "MAX", "CLUSTERS"]);
    for p in maar_scheduler::metrics::project_sums(q) {
        t.add_row(vec![
            p.project,
            gpus(p.used_gpu_milli),
            gpus(p.reserved_gpu_milli),
            limit(p.max_gpu_milli, Dim::Gpu),
            p.clusters.join(","),
        ]);
    }
    format!("\nPROJECTS OVER ALL CLUSTERS (summed)\n{}", render(t))
}

pub fn events_table(events: &[Event]) -> String {
    let mut t = table(&["TIME", "TYPE", "REASON", "OBJECT", "MESSAGE"]);
    for e in events {
        t.add_row(vec![
            fmt_duration(e.time),
            e.severity.name().into(),
            e.reason.to_string(),
            e.object.clone(),
            e.message.clone(),
        ]);
    }
    render(t)
}

pub fn costs_table(c: &Costs) -> String {
    let mut t = table(&["PROJECT", "DEPARTMENT", "GPU-HOURS", "COST"]);
    for p in &c.projects {
        t.add_row(vec![
            p.project.clone(),
            p.department.clone(),
            format!("{:.1}", p.gpu_hours),
            format!("{:.2}", p.cost),
        ]);
    }
    for d in &c.departments {
        t.add_row(vec![
            "(department)".into(),
            d.department.clone(),
            format!("{:.1}", d.gpu_hours),
            format!("{:.2}", d.cost),
        ]);
    }
    let mut s = render(t);
    s.push_str(&format!("total: {:.2}\n", c.total));
    s
}

fn res(r: &Resources) -> String {
    format!(
        "{} GPUs, {} CPU, {} memory, {} disk",
        gpus(r.gpu_milli),
        fmt_cpu(r.cpu_milli),
        fmt_bytes(r.memory),
        fmt_bytes(r.disk)
    )
}

pub fn metrics_text(m: &Metrics) -> String {
    let mut s = String::new();
    s.push_str(&format!("time:        {}\n", fmt_duration(m.time_s)));
    s.push_str(&format!("total:       {}\n", res(&m.total)));
    s.push_str(&format!("allocated:   {}\n", res(&m.allocated)));
    s.push_str(&format!("idle:        {}\n", res(&m.idle)));
    for g in &m.by_model {
        s.push_str(&format!(
            "  {:<10} {:>3} GPUs, {:>5.1} allocated, {:>5.1} idle, {} unhealthy, {} cordoned\n",
            g.model, g.total, g.allocated, g.idle, g.unhealthy, g.cordoned
        ));
    }
    s.push_str(&format!(
        "fragmented:  {:.1} idle GPUs no queued job shape can use ({:.1}% of idle)\n",
        m.fragmented_gpus, m.fragmentation_pct
    ));
    let j = &m.jobs;
    s.push_str(&format!(
        "jobs:        {} pending, {} running, {} restarting, {} succeeded, {} failed, {} cancelled\n",
        j.pending, j.running, j.restarting, j.succeeded, j.failed, j.cancelled
    ));
    s.push_str(&format!(
        "waits:       mean {}, max {}; {} preemptions, {} OOM kills, {} restarts\n",
        fmt_duration(m.mean_wait_s as u64),
        fmt_duration(m.max_wait_s),
        m.preemptions,
        m.oom_kills,
        m.restarts
    ));
    s
}

/// Alerts whose condition holds: open first (critical first), then acknowledged.
pub fn alerts_table(alerts: &[maar_scheduler::alerts::AlertView], wide: bool) -> String {
    let mut h = vec!["KEY", "LEVEL", "STATE", "ALERT"];
    if wide {
        h.extend(["OBJECT", "SINCE", "COUNT"]);
    }
    let mut t = table(&h);
    for a in alerts {
        let state = match &a.acked_by {
            Some(by) => format!("acknowledged by {by}"),
            None => a.state.clone(),
        };
        let mut row = vec![a.key.clone(), a.severity.clone(), state, a.message.clone()];
        if wide {
            row.push(a.object.clone());
            row.push(a.since_s.map(fmt_duration).unwrap_or_else(|| "-".into()));
            row.push(a.count.to_string());
        }
        t.add_row(row);
    }
    render(t)
}

#[cfg(test)]
mod one_line_tests {
    use super::*;

    #[test]
    fn no_value_draws_a_row_of_its_own() {
        let mut t = table(&["WHO", "OBJECT"]);
        t.add_row(vec![
            "mallory".to_string(),
            "node/a100-01\n785  qa-owner  drain_node\tok\u{202e}".to_string(),
        ]);
        let s = render(t);
        assert_eq!(s.lines().count(), 2, "{s}");
        assert!(
            s.contains("node/a100-01\\n785  qa-owner  drain_node\\tok\\u{202e}"),
            "{s}"
        );
        assert_eq!(one_line("plain"), "plain");
    }
}
