//! Rows the screens show, computed from a snapshot once per view (no drawing, no
//! console state): the app keeps them, the view draws them.

use maar_widgets::GpuCell;

/// The GPUs of one model across the cluster: a cell per card, and counts.
#[derive(Clone, Debug, Default)]
pub struct ModelRow {
    pub model: String,
    pub cells: Vec<GpuCell>,
    pub total: u32,
    pub used: u32,
    /// Unhealthy, or on a NotReady node.
    pub down: u32,
    pub cordoned: u32,
}

/// GPUs by model (the overview's summary), computed once per snapshot.
pub fn model_rows(s: &maar_scheduler::metrics::Snapshot) -> Vec<ModelRow> {
    use std::collections::BTreeMap;
    let mut by: BTreeMap<String, ModelRow> = BTreeMap::new();
    for n in &s.nodes {
        if !n.gpu_labelled {
            continue;
        }
        for (g, cell) in n.gpus.iter().zip(gpu_cells(n)) {
            let e = by.entry(g.model.clone()).or_insert_with(|| ModelRow {
                model: g.model.clone(),
                ..Default::default()
            });
            // Counted as drawn: the label's `2x` and `16c` are the grid's glyphs.
            e.total += 1;
            e.used += u32::from(!g.holders.is_empty());
            e.down += u32::from(cell == GpuCell::Unhealthy);
            e.cordoned += u32::from(cell == GpuCell::Cordoned);
            e.cells.push(cell);
        }
    }
    by.into_values().collect()
}

/// Each GPU's state as a grid cell, the same on every screen: a card on a NotReady
/// node is as unusable as an unhealthy one; a free card of a cordoned node takes
/// nothing new.
pub fn gpu_cells(n: &maar_scheduler::metrics::NodeView) -> Vec<GpuCell> {
    let down = n.condition != "Ready";
    n.gpus
        .iter()
        .map(|g| {
            if g.health != "Healthy" || down {
                GpuCell::Unhealthy
            } else if g.cordoned || (g.holders.is_empty() && n.cordoned) {
                GpuCell::Cordoned
            } else if g.holders.is_empty() {
                GpuCell::Free
            } else if g.mem_allocated >= g.memory {
                GpuCell::Full
            } else {
                GpuCell::Partial((g.mem_allocated * 100 / g.memory.max(1)) as u8)
            }
        })
        .collect()
}

/// One cluster of several, as the overview sums it.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct SiteRow {
    pub name: String,
    pub nodes: usize,
    /// GPUs allocated and in all (thousandths of a card).
    pub gpu_used_milli: u64,
    pub gpu_total_milli: u64,
    pub pending: u64,
    pub running: u64,
    /// Its cluster time.
    pub time_s: u64,
    /// Why it is not usable now: its engine stopped (it lost its state file), or its
    /// world does not answer (a Kubernetes API server out of reach).
    pub down: Option<String>,
}

/// A cluster's totals from its view.
pub fn site_row(name: &str, v: &crate::engine::View) -> SiteRow {
    let m = &v.snapshot.metrics;
    SiteRow {
        name: name.to_string(),
        nodes: v.snapshot.nodes.len(),
        gpu_used_milli: m.allocated.gpu_milli,
        gpu_total_milli: m.total.gpu_milli,
        pending: m.jobs.pending as u64,
        running: m.jobs.running as u64,
        time_s: v.snapshot.time_s,
        down: v
            .status
            .fatal
            .as_ref()
            .map(|f| format!("stopped: {f}"))
            .or_else(|| {
                v.status
                    .unreachable
                    .as_ref()
                    .map(|u| format!("not answering: {u}"))
            }),
    }
}

/// GPUs by model over several clusters from each one's own rows (computed once per
/// view of that cluster): the counts summed, the cards one after another.
pub fn merge_model_rows(per_site: &[&[ModelRow]]) -> Vec<ModelRow> {
    use std::collections::BTreeMap;
    let mut by: BTreeMap<&str, ModelRow> = BTreeMap::new();
    for r in per_site.iter().flat_map(|rows| rows.iter()) {
        let e = by.entry(r.model.as_str()).or_insert_with(|| ModelRow {
            model: r.model.clone(),
            ..Default::default()
        });
        e.cells.extend_from_slice(&r.cells);
        e.total += r.total;
        e.used += r.used;
        e.down += r.down;
        e.cordoned += r.cordoned;
    }
    by.into_values().collect()
}
