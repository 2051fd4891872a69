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

/// Whether a memory label agrees with the cards (their largest, as NVML counts it):
/// within a tenth. Cards are sold by a rounder number than NVML reports and operators
/// label them as sold: an H200 "141GB" holds 140.4 GiB, an L40S "48GB" 45 GiB, a T4
/// "16GB" 15 GiB. A label twice or half the card (a 40 GB A100 labelled 80Gi) is
/// still named; a label that is no quantity is compared as written.
fn memory_agrees(label: &str, card_bytes: Option<u64>) -> bool {
    let (Some(said), Some(card)) = (label_bytes(label), card_bytes) else {
        return false;
    };
    let card = card as f64;
    (said - card).abs() <= card / 10.0
}

/// A memory label's bytes, as Kubernetes quantities write them (`80Gi`, `48G`,
/// `81920Mi`; `GB` too, as cards are sold). The agent knows nothing of the scheduler,
/// whose `quantity` module reads the same forms for jobs.
fn label_bytes(label: &str) -> Option<f64> {
    let t = label.trim();
    let split = t
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(t.len());
    let (n, unit) = t.split_at(split);
    let n: f64 = n.parse().ok()?;
    let k = match unit.trim_end_matches('B') {
        "" => 1.0,
        "Ki" => 1024.0,
        "Mi" => 1024.0f64.powi(2),
        "Gi" => 1024.0f64.powi(3),
        "Ti" => 1024.0f64.powi(4),
        "k" | "K" => 1e3,
        "M" => 1e6,
        "G" => 1e9,
        "T" => 1e12,
        _ => return None,
    };
    Some(n * k).filter(|b| b.is_finite())
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
    let card_bytes = sample.gpus.iter().map(|g| g.memory_total_bytes).max();
    for k in [MODEL, COUNT, MEMORY, VENDOR] {
        match (labels.get(k), want.get(k)) {
            (Some(have), Some(_)) if k == MEMORY && memory_agrees(have, card_bytes) => {}
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

    #[test]
    fn a_memory_label_as_cards_are_sold_agrees_and_one_of_another_card_does_not() {
        // NVML's totals: H200 143,771 MiB, L40S 46,068 MiB, T4 15,360 MiB, A100 40GB
        // 40,960 MiB.
        let mib = |m: u64| Some(m << 20);
        for (label, card) in [
            ("141Gi", mib(143_771)),
            ("140Gi", mib(143_771)),
            ("48Gi", mib(46_068)),
            ("48G", mib(46_068)),
            ("16Gi", mib(15_360)),
            ("40960Mi", mib(40_960)),
        ] {
            assert!(memory_agrees(label, card), "{label}");
        }
        for (label, card) in [
            ("80Gi", mib(40_960)),
            ("16Gi", mib(32_768)),
            ("lots", mib(40_960)),
            ("80Gi", None),
            ("", mib(40_960)),
        ] {
            assert!(!memory_agrees(label, card), "{label}");
        }
        assert_eq!(label_bytes("1.5Ti"), Some(1.5 * 1024f64.powi(4)));
        assert_eq!(label_bytes("80 Gi"), None);
    }
}
