//! Labels from the hardware: the `crater.ai/*` labels a node should carry (vendor,
//! model, memory per card, count; the role is the operator's), printed as the
//! `kubectl label node` line users already run, and the labels that disagree with the
//! cards (a node labelled a100 whose NVML says V100 runs jobs on the wrong card).

use std::collections::BTreeMap;

use crate::reading::{GpuReading, NodeSample};

pub const VENDOR: &str = "crater.ai/gpu-vendor";
pub const MODEL: &str = "crater.ai/gpu-model";
pub const MEMORY: &str = "crater.ai/gpu-memory";
pub const COUNT: &str = "crater.ai/gpu-count";
pub const ROLE: &str = "crater.ai/node-role";

/// The short model name labels use, from NVML's name: `NVIDIA A100-SXM4-80GB` ->
/// `a100`, `Tesla V100-SXM2-32GB` -> `v100`, `NVIDIA GeForce RTX 4090` -> `rtx4090`,
/// `NVIDIA H200` -> `h200`.
pub fn model_slug(name: &str) -> String {
    let lower = name.to_lowercase();
    let words: Vec<&str> = lower
        .split_whitespace()
        .filter(|w| !matches!(*w, "nvidia" | "tesla" | "geforce" | "quadro"))
        .collect();
    let first = match words.as_slice() {
        ["rtx", next, ..] => format!("rtx{next}"),
        [w, ..] => w.to_string(),
        [] => return "unknown".into(),
    };
    first
        .split('-')
        .next()
        .unwrap_or(&first)
        .trim_matches(|c: char| !c.is_ascii_alphanumeric())
        .to_string()
}

/// Card memory as labels write it: whole GiB, rounded (`80Gi`).
pub fn memory_label(bytes: u64) -> String {
    let gib = (bytes as f64 / (1u64 << 30) as f64).round() as u64;
    format!("{gib}Gi")
}

/// The labels the node's GPUs call for (none without GPUs). Mixed models: the model
/// of most cards (a warning is the operator's to read in `mismatches`).
pub fn from_hardware(gpus: &[GpuReading]) -> BTreeMap<String, String> {
    let mut l = BTreeMap::new();
    if gpus.is_empty() {
        return l;
    }
    let mut by: BTreeMap<String, (usize, u64)> = BTreeMap::new();
    for g in gpus {
        let e = by.entry(model_slug(&g.name)).or_default();
        e.0 += 1;
        e.1 = e.1.max(g.memory_total_bytes);
    }
    let (model, (_, mem)) = by
        .iter()
        .max_by_key(|(m, (n, _))| (*n, std::cmp::Reverse((*m).clone())))
        .map(|(m, v)| (m.clone(), *v))
        .expect("some GPU");
    l.insert(VENDOR.into(), "nvidia".into());
    l.insert(MODEL.into(), model);
    l.insert(MEMORY.into(), memory_label(mem));
    l.insert(COUNT.into(), gpus.len().to_string());
    l
}

/// The `kubectl label node` line that sets them (the role left to the operator).
pub fn kubectl_line(node: &str, labels: &BTreeMap<String, String>) -> String {
    let mut s = format!("kubectl label node {node} --overwrite");
    for (k, v) in labels {
        s.push_str(&format!(" \\\n  {k}={v}"));
    }
    s
}

/// Where `labels` (as the node carries them) disagree with its cards, one line each.
pub fn mismatches(labels: &BTreeMap<String, String>, sample: &NodeSample) -> Vec<String> {
    let want = from_hardware(&sample.gpus);
    let mut out = Vec::new();
    for k in [MODEL, COUNT, MEMORY, VENDOR] {
        match (labels.get(k), want.get(k)) {
            (Some(have), Some(hw)) if !have.eq_ignore_ascii_case(hw) => {
                out.push(format!("{k} is {have} but the hardware says {hw}"))
            }
            (Some(have), None) if !sample.gpus.is_empty() || sample.gpu_status == "ok" => {
                out.push(format!("{k} is {have} but the node has no GPUs"))
            }
            _ => {}
        }
    }
    let models: std::collections::BTreeSet<String> =
        sample.gpus.iter().map(|g| model_slug(&g.name)).collect();
    if models.len() > 1 {
        out.push(format!(
            "the node mixes GPU models ({}); one label cannot describe them",
            models.into_iter().collect::<Vec<_>>().join(", ")
        ));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nvml_names_become_the_labels_users_write() {
        for (name, slug) in [
            ("NVIDIA A100-SXM4-80GB", "a100"),
            ("NVIDIA A100 80GB PCIe", "a100"),
            ("Tesla V100-SXM2-32GB", "v100"),
            ("Tesla T4", "t4"),
            ("NVIDIA GeForce RTX 4090", "rtx4090"),
            ("NVIDIA H100 80GB HBM3", "h100"),
            ("NVIDIA H200", "h200"),
            ("NVIDIA L4", "l4"),
        ] {
            assert_eq!(model_slug(name), slug, "{name}");
        }
        assert_eq!(memory_label(85_899_345_920), "80Gi");
        assert_eq!(memory_label(34_359_738_368), "32Gi");
    }
}
