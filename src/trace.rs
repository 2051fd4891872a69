//! Reading the Alibaba GPU trace's CSV files (cluster-trace-gpu-v2023 family).
//!
//! Columns are found by header name, so pod lists with only the first five columns
//! (`name,cpu_milli,memory_mib,num_gpu,gpu_milli`) read as well as the full ones. A bad
//! row is an error naming the file, line and column.

use std::path::Path;

use maar_scheduler::limits::{
    echo, MAX_BYTES, MAX_CPU_MILLI, MAX_GPUS_PER_NODE, MAX_MODELS_PER_POD, MAX_MODEL_CHARS,
    MAX_NODES, MAX_TRACE_PODS,
};
use maar_scheduler::replay::{TraceNode, TracePod};

use crate::load::InputError;

fn err(
    file: &str,
    line: Option<u64>,
    field: Option<&str>,
    message: impl Into<String>,
) -> InputError {
    InputError {
        file: file.to_string(),
        line,
        column: None,
        field: field.map(str::to_string),
        message: message.into(),
    }
}

struct Table {
    file: String,
    headers: Vec<String>,
    rows: Vec<(u64, csv::StringRecord)>,
}

impl Table {
    fn read(path: &Path, max_rows: usize) -> Result<Table, InputError> {
        // At most the input size limit, whatever the file is (a pipe, /dev/zero).
        let text = crate::load::read(path)?;
        Table::parse(&path.display().to_string(), &text, max_rows)
    }

    fn parse(file: &str, text: &str, max_rows: usize) -> Result<Table, InputError> {
        let file = file.to_string();
        let mut rdr = csv::ReaderBuilder::new()
            .trim(csv::Trim::All)
            .from_reader(text.as_bytes());
        let headers: Vec<String> = rdr
            .headers()
            .map_err(|e| err(&file, Some(1), None, e.to_string()))?
            .iter()
            .map(str::to_string)
            .collect();
        let mut rows = Vec::new();
        for rec in rdr.records() {
            let rec = rec.map_err(|e| {
                let line = e.position().map(|p| p.line());
                err(&file, line, None, e.to_string())
            })?;
            let line = rec.position().map(|p| p.line()).unwrap_or(0);
            if rows.len() == max_rows {
                return Err(err(
                    &file,
                    Some(line),
                    None,
                    format!("more than the limit of {max_rows} rows"),
                ));
            }
            rows.push((line, rec));
        }
        Ok(Table {
            file,
            headers,
            rows,
        })
    }

    fn col(&self, name: &str) -> Result<usize, InputError> {
        self.headers.iter().position(|h| h == name).ok_or_else(|| {
            err(
                &self.file,
                Some(1),
                Some(name),
                format!(
                    "missing column `{name}` (header: {})",
                    self.headers.join(",")
                ),
            )
        })
    }

    fn opt_col(&self, name: &str) -> Option<usize> {
        self.headers.iter().position(|h| h == name)
    }

    fn num<T: std::str::FromStr + Default>(
        &self,
        line: u64,
        rec: &csv::StringRecord,
        col: usize,
        allow_empty: bool,
    ) -> Result<T, InputError> {
        let v = rec.get(col).unwrap_or("");
        if v.is_empty() && allow_empty {
            return Ok(T::default());
        }
        v.parse().map_err(|_| {
            err(
                &self.file,
                Some(line),
                Some(&self.headers[col]),
                format!("`{}` is not a non-negative integer", echo(v)),
            )
        })
    }

    /// A number no larger than `max`.
    fn bounded(
        &self,
        line: u64,
        rec: &csv::StringRecord,
        col: usize,
        max: u64,
    ) -> Result<u64, InputError> {
        let v: u64 = self.num(line, rec, col, false)?;
        if v > max {
            return Err(err(
                &self.file,
                Some(line),
                Some(&self.headers[col]),
                format!("{v} is above the limit of {max}"),
            ));
        }
        Ok(v)
    }
}

/// Reads a node list (`sn,cpu_milli,memory_mib,gpu,model`).
pub fn read_nodes(path: &Path) -> Result<Vec<TraceNode>, InputError> {
    nodes_of(Table::read(path, MAX_NODES as usize)?)
}

/// Parses a node list from text (`file` names it in errors).
pub fn parse_nodes(file: &str, text: &str) -> Result<Vec<TraceNode>, InputError> {
    nodes_of(Table::parse(file, text, MAX_NODES as usize)?)
}

fn nodes_of(t: Table) -> Result<Vec<TraceNode>, InputError> {
    let (sn, cpu, mem, gpu, model) = (
        t.col("sn")?,
        t.col("cpu_milli")?,
        t.col("memory_mib")?,
        t.col("gpu")?,
        t.col("model")?,
    );
    let mut out = Vec::with_capacity(t.rows.len());
    let mut seen: std::collections::HashMap<String, u64> = std::collections::HashMap::new();
    for (line, rec) in &t.rows {
        let n = TraceNode {
            name: rec.get(sn).unwrap_or("").to_string(),
            cpu_milli: t.bounded(*line, rec, cpu, MAX_CPU_MILLI)?,
            memory_mib: t.bounded(*line, rec, mem, MAX_BYTES >> 20)?,
            gpus: t.bounded(*line, rec, gpu, MAX_GPUS_PER_NODE as u64)? as u32,
            model: rec.get(model).unwrap_or("").to_string(),
        };
        if n.name.is_empty() {
            return Err(err(&t.file, Some(*line), Some("sn"), "empty node name"));
        }
        if let Some(first) = seen.insert(n.name.clone(), *line) {
            return Err(err(
                &t.file,
                Some(*line),
                Some("sn"),
                format!(
                    "node `{}` is listed twice, on lines {first} and {line}",
                    echo(&n.name)
                ),
            ));
        }
        if n.model.chars().count() > MAX_MODEL_CHARS {
            return Err(err(
                &t.file,
                Some(*line),
                Some("model"),
                format!(
                    "a GPU model of {} characters (`{}`); at most {MAX_MODEL_CHARS}",
                    n.model.chars().count(),
                    echo(&n.model)
                ),
            ));
        }
        if n.gpus > 0 && n.model.is_empty() {
            return Err(err(
                &t.file,
                Some(*line),
                Some("model"),
                "a node with GPUs needs a model",
            ));
        }
        out.push(n);
    }
    if out.is_empty() {
        return Err(err(&t.file, None, None, "no nodes"));
    }
    Ok(out)
}

/// A pod's times in the trace (seconds): created, deleted, and scheduled (empty in
/// the list: at creation).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PodTimes {
    pub created: u64,
    pub deleted: u64,
    pub scheduled: u64,
}

/// Reads the times of a pod list (`creation_time`, `deletion_time`, optional
/// `scheduled_time`), one per row, in the order of [`read_pods`].
pub fn read_pod_times(path: &Path) -> Result<Vec<PodTimes>, InputError> {
    let t = Table::read(path, MAX_TRACE_PODS)?;
    let (c, d) = (t.col("creation_time")?, t.col("deletion_time")?);
    let s = t.opt_col("scheduled_time");
    let mut out = Vec::with_capacity(t.rows.len());
    for (line, rec) in &t.rows {
        let created: u64 = t.num(*line, rec, c, false)?;
        let scheduled = match s {
            Some(s) if !rec.get(s).unwrap_or("").is_empty() => t.num(*line, rec, s, false)?,
            _ => created,
        };
        out.push(PodTimes {
            created,
            deleted: t.num(*line, rec, d, false)?,
            scheduled,
        });
    }
    Ok(out)
}

/// Reads a pod list; `gpu_spec` is optional (`|`-separated allowed models).
pub fn read_pods(path: &Path) -> Result<Vec<TracePod>, InputError> {
    pods_of(Table::read(path, MAX_TRACE_PODS)?)
}

/// Parses a pod list from text (`file` names it in errors).
pub fn parse_pods(file: &str, text: &str) -> Result<Vec<TracePod>, InputError> {
    pods_of(Table::parse(file, text, MAX_TRACE_PODS)?)
}

fn pods_of(t: Table) -> Result<Vec<TracePod>, InputError> {
    let (name, cpu, mem, ng, gm) = (
        t.col("name")?,
        t.col("cpu_milli")?,
        t.col("memory_mib")?,
        t.col("num_gpu")?,
        t.col("gpu_milli")?,
    );
    let spec = t.opt_col("gpu_spec");
    let mut out = Vec::with_capacity(t.rows.len());
    for (line, rec) in &t.rows {
        let p = TracePod {
            name: rec.get(name).unwrap_or("").to_string(),
            cpu_milli: t.bounded(*line, rec, cpu, MAX_CPU_MILLI)?,
            memory_mib: t.bounded(*line, rec, mem, MAX_BYTES >> 20)?,
            num_gpu: t.bounded(*line, rec, ng, MAX_GPUS_PER_NODE as u64)? as u32,
            gpu_milli: t.bounded(*line, rec, gm, 1000)? as u32,
            gpu_spec: spec
                .and_then(|c| rec.get(c))
                .unwrap_or("")
                .split('|')
                .map(str::trim)
                .filter(|s| !s.is_empty())
                .map(str::to_string)
                .collect(),
        };
        if p.gpu_spec.len() > MAX_MODELS_PER_POD {
            return Err(err(
                &t.file,
                Some(*line),
                Some("gpu_spec"),
                format!(
                    "{} GPU models; at most {MAX_MODELS_PER_POD}",
                    p.gpu_spec.len()
                ),
            ));
        }
        if let Some(m) = p
            .gpu_spec
            .iter()
            .find(|m| m.chars().count() > MAX_MODEL_CHARS)
        {
            return Err(err(
                &t.file,
                Some(*line),
                Some("gpu_spec"),
                format!(
                    "a GPU model of {} characters (`{}`); at most {MAX_MODEL_CHARS}",
                    m.chars().count(),
                    echo(m)
                ),
            ));
        }
        if p.gpu_milli > 1000 {
            return Err(err(
                &t.file,
                Some(*line),
                Some("gpu_milli"),
                format!("{} > 1000 milli per GPU", p.gpu_milli),
            ));
        }
        if p.num_gpu > 1 && p.gpu_milli < 1000 {
            return Err(err(
                &t.file,
                Some(*line),
                Some("gpu_milli"),
                "only single-GPU pods may share a GPU (gpu_milli < 1000)",
            ));
        }
        if p.num_gpu == 0 && p.gpu_milli > 0 {
            return Err(err(
                &t.file,
                Some(*line),
                Some("gpu_milli"),
                "gpu_milli without num_gpu",
            ));
        }
        if p.num_gpu > 0 && p.gpu_milli == 0 {
            return Err(err(
                &t.file,
                Some(*line),
                Some("gpu_milli"),
                "num_gpu without gpu_milli",
            ));
        }
        out.push(p);
    }
    if out.is_empty() {
        return Err(err(&t.file, None, None, "no pods"));
    }
    Ok(out)
}

/// Writes a pod list with the full header (`gpu_spec` as a `|`-separated list).
pub fn write_pods(out: &mut dyn std::io::Write, pods: &[TracePod]) -> std::io::Result<()> {
    let mut w = csv::Writer::from_writer(out);
    w.write_record([
        "name",
        "cpu_milli",
        "memory_mib",
        "num_gpu",
        "gpu_milli",
        "gpu_spec",
    ])?;
    for p in pods {
        w.write_record([
            p.name.clone(),
            p.cpu_milli.to_string(),
            p.memory_mib.to_string(),
            p.num_gpu.to_string(),
            p.gpu_milli.to_string(),
            p.gpu_spec.join("|"),
        ])?;
    }
    w.flush()
}
