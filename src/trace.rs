//! Reading the Alibaba GPU trace's CSV files (cluster-trace-gpu-v2023 family).
//!
//! Columns are found by header name, so pod lists with only the first five columns
//! (`name,cpu_milli,memory_mib,num_gpu,gpu_milli`) read as well as the full ones. A bad
//! row is an error naming the file, line and column.

use std::path::Path;

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
    fn read(path: &Path) -> Result<Table, InputError> {
        let file = path.display().to_string();
        let mut rdr = csv::ReaderBuilder::new()
            .trim(csv::Trim::All)
            .from_path(path)
            .map_err(|e| err(&file, None, None, format!("cannot read: {e}")))?;
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
                format!("`{v}` is not a non-negative integer"),
            )
        })
    }
}

/// Reads a node list (`sn,cpu_milli,memory_mib,gpu,model`).
pub fn read_nodes(path: &Path) -> Result<Vec<TraceNode>, InputError> {
    let t = Table::read(path)?;
    let (sn, cpu, mem, gpu, model) = (
        t.col("sn")?,
        t.col("cpu_milli")?,
        t.col("memory_mib")?,
        t.col("gpu")?,
        t.col("model")?,
    );
    let mut out = Vec::with_capacity(t.rows.len());
    for (line, rec) in &t.rows {
        let n = TraceNode {
            name: rec.get(sn).unwrap_or("").to_string(),
            cpu_milli: t.num(*line, rec, cpu, false)?,
            memory_mib: t.num(*line, rec, mem, false)?,
            gpus: t.num(*line, rec, gpu, false)?,
            model: rec.get(model).unwrap_or("").to_string(),
        };
        if n.name.is_empty() {
            return Err(err(&t.file, Some(*line), Some("sn"), "empty node name"));
        }
        if n.gpus > 0 && n.model.is_empty() {
            return Err(err(
                &t.file,
                Some(*line),
                Some("model"),
                "a node with GPUs needs a model",
            ));
        }
        if n.gpus > 64 {
            return Err(err(
                &t.file,
                Some(*line),
                Some("gpu"),
                format!("{} GPUs on one node is not plausible", n.gpus),
            ));
        }
        out.push(n);
    }
    if out.is_empty() {
        return Err(err(&t.file, None, None, "no nodes"));
    }
    Ok(out)
}

/// Reads a pod list; `gpu_spec` is optional (`|`-separated allowed models).
pub fn read_pods(path: &Path) -> Result<Vec<TracePod>, InputError> {
    let t = Table::read(path)?;
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
            cpu_milli: t.num(*line, rec, cpu, false)?,
            memory_mib: t.num(*line, rec, mem, false)?,
            num_gpu: t.num(*line, rec, ng, false)?,
            gpu_milli: t.num(*line, rec, gm, false)?,
            gpu_spec: spec
                .and_then(|c| rec.get(c))
                .unwrap_or("")
                .split('|')
                .map(str::trim)
                .filter(|s| !s.is_empty())
                .map(str::to_string)
                .collect(),
        };
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
