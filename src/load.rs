//! Reading the files users give maar: scenarios and job manifests.
//!
//! Every failure names the file, and the line and column where the YAML reader knows
//! them (syntax, unknown fields, bad quantities, contradictions caught while reading),
//! or the field path for cross-references checked afterwards.

use std::fmt;
use std::path::Path;

use maar_demo::Scenario;
use maar_scheduler::limits::MAX_INPUT_BYTES;
use maar_scheduler::manifest::Manifest;
use maar_scheduler::JobSpec;

/// The scenario built into the binary, used when no `--scenario` is given.
pub const BUILTIN_LAB: &str = maar_demo::LAB_YAML;

/// The name the built-in scenario is reported under.
pub const BUILTIN_NAME: &str = "<built-in demo/lab.yaml>";

/// Bad input: what, where.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InputError {
    pub file: String,
    pub line: Option<u64>,
    pub column: Option<u64>,
    pub field: Option<String>,
    pub message: String,
}

impl fmt::Display for InputError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.file)?;
        if let Some(l) = self.line {
            write!(f, ":{l}")?;
            if let Some(c) = self.column {
                write!(f, ":{c}")?;
            }
        }
        if let Some(field) = &self.field {
            write!(f, ": {field}")?;
        }
        write!(f, ": {}", self.message)
    }
}

impl std::error::Error for InputError {}

/// A YAML reading error as an [`InputError`] with file, line, column and field.
pub fn yaml_error(file: &str, text: &str, e: serde_saphyr::Error) -> InputError {
    let loc = e.location();
    let line = loc.map(|l| l.line()).filter(|&l| l > 0);
    let column = loc.map(|l| l.column()).filter(|&c| c > 0);
    // The library's own text repeats the location and may carry a snippet: keep the
    // first line, without the `error: line N column M:` prefix.
    let full = e.to_string();
    let mut message = full
        .lines()
        .find(|l| !l.trim().is_empty())
        .unwrap_or("invalid YAML")
        .trim();
    message = message.strip_prefix("error: ").unwrap_or(message);
    if let (Some(l), Some(c)) = (line, column) {
        let prefix = format!("line {l} column {c}: ");
        message = message.strip_prefix(prefix.as_str()).unwrap_or(message);
    }
    InputError {
        file: file.to_string(),
        line,
        column,
        field: line.and_then(|l| yaml_path_at(text, l as usize, column.unwrap_or(1) as usize)),
        message: message.to_string(),
    }
}

/// The dotted key path of the value at `line`:`column` (1-based) in a block-style YAML
/// document, e.g. `spec.resources.gpu.memory`; list items appear as `[]`. Best effort:
/// flow mappings on the line itself are followed to the key before the column.
pub fn yaml_path_at(text: &str, line: usize, column: usize) -> Option<String> {
    let lines: Vec<&str> = text.lines().collect();
    let target = *lines.get(line.checked_sub(1)?)?;
    let key_of = |l: &str| -> Option<(usize, String)> {
        let indent = l.len() - l.trim_start().len();
        let mut body = l.trim_start();
        let mut indent = indent;
        while let Some(rest) = body.strip_prefix("- ") {
            indent += 2;
            body = rest.trim_start();
        }
        if body.starts_with('#') {
            return None;
        }
        let colon = body.find(':')?;
        let key = body[..colon].trim();
        if key.is_empty() || key.contains(' ') && !key.starts_with('"') || key.starts_with('{') {
            return None;
        }
        Some((indent, key.trim_matches('"').to_string()))
    };
    let mut path: Vec<String> = Vec::new();
    // Keys inside a flow mapping on the target line, up to the column.
    let upto: String = target.chars().take(column.saturating_sub(1) + 1).collect();
    let mut inner = Vec::new();
    if let Some(brace) = upto.find('{') {
        let flow = &upto[brace + 1..];
        if let Some(k) = flow
            .rsplit(',')
            .next()
            .and_then(|seg| seg.split(':').next())
        {
            let k = k.trim().trim_start_matches('{').trim();
            if !k.is_empty() {
                inner.push(k.to_string());
            }
        }
    }
    let own_indent = key_of(target).map(|(i, k)| {
        path.push(k);
        i
    });
    let mut limit = own_indent.unwrap_or(target.len() - target.trim_start().len());
    for l in lines[..line - 1].iter().rev() {
        if l.trim().is_empty() {
            continue;
        }
        if let Some((i, k)) = key_of(l) {
            if i < limit {
                path.push(k);
                limit = i;
                if i == 0 {
                    break;
                }
            }
        }
    }
    path.reverse();
    path.extend(inner);
    if path.is_empty() {
        None
    } else {
        Some(path.join("."))
    }
}

/// Reads a text file of at most [`MAX_INPUT_BYTES`], whatever it is (a regular file,
/// a pipe, a device such as /dev/zero): never more than the limit is read.
pub fn read(path: &Path) -> Result<String, InputError> {
    use std::io::Read;
    let fail = |message: String| InputError {
        file: path.display().to_string(),
        line: None,
        column: None,
        field: None,
        message,
    };
    let f = std::fs::File::open(path).map_err(|e| fail(format!("cannot read: {e}")))?;
    if let Ok(m) = f.metadata() {
        if m.is_dir() {
            return Err(fail("cannot read: it is a directory".into()));
        }
        if m.is_file() && m.len() > MAX_INPUT_BYTES {
            return Err(fail(format!(
                "{} bytes is larger than the limit of {} MiB for an input file",
                m.len(),
                MAX_INPUT_BYTES >> 20
            )));
        }
    }
    let mut buf = Vec::new();
    f.take(MAX_INPUT_BYTES + 1)
        .read_to_end(&mut buf)
        .map_err(|e| fail(format!("cannot read: {e}")))?;
    if buf.len() as u64 > MAX_INPUT_BYTES {
        return Err(fail(format!(
            "larger than the limit of {} MiB for an input file (not a regular file?)",
            MAX_INPUT_BYTES >> 20
        )));
    }
    String::from_utf8(buf).map_err(|e| {
        fail(format!(
            "not UTF-8 text (invalid byte at offset {})",
            e.utf8_error().valid_up_to()
        ))
    })
}

/// Parses a scenario from text and checks its references.
pub fn parse_scenario(file: &str, text: &str) -> Result<Scenario, InputError> {
    let sc: Scenario = serde_saphyr::from_str(text).map_err(|e| yaml_error(file, text, e))?;
    // Build once to check references (pools, nodes, projects) with field paths.
    sc.build().map_err(|e| InputError {
        file: file.to_string(),
        line: None,
        column: None,
        field: Some(e.field),
        message: e.message,
    })?;
    Ok(sc)
}

/// Loads a scenario file, or the built-in lab when `path` is None or `lab`.
pub fn load_scenario(path: Option<&Path>) -> Result<Scenario, InputError> {
    scenario_text(path).map(|(_, sc)| sc)
}

/// A scenario and its text (the text is what a demo's record keeps).
pub fn scenario_text(path: Option<&Path>) -> Result<(String, Scenario), InputError> {
    let text = match path {
        None => BUILTIN_LAB.to_string(),
        Some(p) if p.as_os_str() == "lab" && !p.exists() => BUILTIN_LAB.to_string(),
        Some(p) => read(p)?,
    };
    let name = match path {
        Some(p) if p.as_os_str() != "lab" || p.exists() => p.display().to_string(),
        _ => BUILTIN_NAME.to_string(),
    };
    let sc = parse_scenario(&name, &text)?;
    Ok((text, sc))
}

/// Parses a TrainJob or InferenceService manifest.
pub fn parse_manifest(file: &str, text: &str) -> Result<JobSpec, InputError> {
    let m: Manifest = serde_saphyr::from_str(text).map_err(|e| yaml_error(file, text, e))?;
    m.to_job_spec().map_err(|e| InputError {
        file: file.to_string(),
        line: None,
        column: None,
        field: Some(e.field),
        message: e.message,
    })
}

pub fn load_manifest(path: &Path) -> Result<JobSpec, InputError> {
    parse_manifest(&path.display().to_string(), &read(path)?)
}
