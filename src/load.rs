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

/// A YAML reading error as an [`InputError`] with file, line, column and field, in
/// maar's words: the location once, long values cut, no parser option names, and a
/// missing field reported at the mapping that lacks it.
pub fn yaml_error(file: &str, text: &str, e: serde_saphyr::Error) -> InputError {
    use serde_saphyr::MessageFormatter;
    let loc = e.location();
    let mut line = loc.map(|l| l.line() as usize).filter(|&l| l > 0);
    let mut column = loc.map(|l| l.column() as usize).filter(|&c| c > 0);
    let raw = serde_saphyr::UserMessageFormatter
        .format_message(e.without_snippet())
        .into_owned();
    let mut message = plain_message(&raw);
    let mut field = line.and_then(|l| yaml_path_at(text, l, column.unwrap_or(1)));
    if let (Some(l), true) = (line, message.starts_with("missing field")) {
        // The reader stops at the last key of the mapping that lacks the field: name
        // that mapping, where it starts.
        let m = mapping_at(text, l, column.unwrap_or(1));
        line = Some(m.line);
        column = Some(m.column);
        field = m.path;
        if field.is_none() {
            message = format!("{message} at the top level");
        }
    }
    InputError {
        file: file.to_string(),
        line: line.map(|l| l as u64),
        column: column.map(|c| c as u64),
        field,
        message,
    }
}

/// How deep YAML structure may nest (block mappings and sequences): Kubernetes
/// objects go about 15 deep. Deeper input is refused before the parser sees it (a 40 MB
/// file of nested `- - - ...` took the parser to 24 GB).
pub const MAX_YAML_DEPTH: usize = 100;

/// Reads YAML into `T`, refusing structure nested deeper than [`MAX_YAML_DEPTH`] first.
pub fn yaml<T: serde::de::DeserializeOwned>(file: &str, text: &str) -> Result<T, InputError> {
    yaml_depth(file, text)?;
    serde_saphyr::from_str(text).map_err(|e| yaml_error(file, text, e))
}

/// A cheap pass over YAML text that bounds its block nesting: the indentation levels
/// open at a line plus the `- `/`? ` entries that start it (compact nesting). Block
/// scalars' text (after `|` or `>`) is skipped; flow collections are left to the parser
/// (it has its own limit). The line where the limit is passed is named.
pub fn yaml_depth(file: &str, text: &str) -> Result<(), InputError> {
    let mut levels: Vec<usize> = Vec::new();
    let mut scalar_above: Option<usize> = None;
    for (n, line) in text.lines().enumerate() {
        let body = line.trim_start_matches(' ');
        let indent = line.len() - body.len();
        if body.is_empty() || body.starts_with('#') {
            continue;
        }
        if let Some(i) = scalar_above {
            if indent > i {
                continue;
            }
            scalar_above = None;
        }
        if body.starts_with("---") || body.starts_with("...") {
            levels.clear();
            continue;
        }
        while levels.last().is_some_and(|&l| l >= indent) {
            levels.pop();
        }
        levels.push(indent);
        let mut rest = body;
        let mut entries = 0;
        while let Some(r) = rest
            .strip_prefix("- ")
            .or_else(|| rest.strip_prefix("? "))
            .or_else(|| (rest == "-").then_some(""))
        {
            entries += 1;
            rest = r.trim_start_matches(' ');
            if levels.len() + entries > MAX_YAML_DEPTH {
                break;
            }
        }
        if levels.len() + entries > MAX_YAML_DEPTH {
            return Err(InputError {
                file: file.to_string(),
                line: Some(n as u64 + 1),
                column: Some(indent as u64 + 1),
                field: None,
                message: format!(
                    "nested more than {MAX_YAML_DEPTH} levels deep; maar reads YAML up to that depth"
                ),
            });
        }
        let t = rest.trim_end();
        let t = t.split(" #").next().unwrap_or(t).trim_end();
        let last = t.rsplit(' ').next().unwrap_or(t);
        if (last.starts_with('|') || last.starts_with('>'))
            && last[1..]
                .chars()
                .all(|c| c == '-' || c == '+' || c.is_ascii_digit())
        {
            scalar_above = Some(indent);
        }
    }
    Ok(())
}

/// The parser's message in plain words, with long values cut.
fn plain_message(raw: &str) -> String {
    let first = raw
        .lines()
        .find(|l| !l.trim().is_empty())
        .unwrap_or("invalid YAML")
        .trim();
    // Drop a location the parser put in its text (ours is printed once, in front).
    let mut m = first.strip_prefix("error: ").unwrap_or(first).to_string();
    if let Some(i) = m.find(" at line ") {
        if m[i..].contains("column") {
            m.truncate(i);
        }
    }
    if let Some(rest) = m.strip_prefix("line ") {
        if let Some(i) = rest.find(": ") {
            if rest[..i].contains("column") {
                m = rest[i + 2..].to_string();
            }
        }
    }
    let m = if let Some(k) = m
        .strip_prefix("duplicate mapping key: ")
        .and_then(|r| r.strip_suffix(" not allowed here"))
    {
        format!("duplicate key `{}`", maar_scheduler::limits::echo(k))
    } else if m.starts_with("duplicate mapping key") {
        "duplicate key".to_string()
    } else if let Some(what) = m.strip_prefix("unexpected event: expected ") {
        let what = match what {
            "string scalar" | "scalar" => "a single value (text or number)",
            "mapping" | "mapping start" => "a mapping of `key: value` lines",
            "sequence" | "sequence start" => "a list",
            other => other,
        };
        format!("expected {what} here")
    } else if let Some(t) = m.strip_prefix("invalid ") {
        match t {
            "u8" | "u16" | "u32" | "u64" | "usize" => {
                "expected a whole number of 0 or more".to_string()
            }
            "i8" | "i16" | "i32" | "i64" | "isize" => "expected a whole number".to_string(),
            "f32" | "f64" => "expected a number".to_string(),
            _ => m.clone(),
        }
    } else {
        m
    };
    cut_values(&m)
}

/// Cuts every backquoted value (and the whole message) to a readable length.
fn cut_values(m: &str) -> String {
    let mut out = String::new();
    let mut rest = m;
    while let Some(a) = rest.find('`') {
        out.push_str(&rest[..=a]);
        rest = &rest[a + 1..];
        match rest.find('`') {
            Some(b) => {
                out.push_str(&maar_scheduler::limits::echo(&rest[..b]));
                out.push('`');
                rest = &rest[b + 1..];
            }
            None => break,
        }
    }
    out.push_str(rest);
    let max = 4 * maar_scheduler::limits::MAX_ECHO_CHARS;
    if out.chars().count() > max {
        out = out.chars().take(max).collect::<String>() + "…";
    }
    out
}

/// Where each node of a YAML document is, from the parser's own events: paths such as
/// `spec.resources.gpu.memory` or `nodes[2].gpu.count`, exact for block and flow style
/// alike. A document with a syntax error is located up to the error.
struct Locator {
    /// Nodes in document order: (line, column) of their start (1-based), path, and
    /// for keys, the mapping they belong to (index into `maps`).
    nodes: Vec<Node>,
    /// Mappings: start (line, column) and path.
    maps: Vec<((usize, usize), Vec<String>)>,
}

struct Node {
    at: (usize, usize),
    path: Vec<String>,
    key_of: Option<usize>,
    map_start: Option<usize>,
    /// A scalar with no text (an empty value).
    empty: bool,
}

enum Frame {
    Map {
        id: usize,
        path: Vec<String>,
        key: Option<String>,
    },
    Seq {
        path: Vec<String>,
        index: usize,
    },
}

impl Locator {
    fn new(text: &str) -> Locator {
        use serde_saphyr::granit_parser::{Event, Parser};
        let mut loc = Locator {
            nodes: Vec::new(),
            maps: Vec::new(),
        };
        let mut stack: Vec<Frame> = Vec::new();
        // The path of the node that comes next, and whether it is a key.
        fn next_path(stack: &[Frame]) -> (Vec<String>, Option<usize>) {
            match stack.last() {
                None => (Vec::new(), None),
                Some(Frame::Map { id, path, key }) => match key {
                    None => (path.clone(), Some(*id)),
                    Some(k) => {
                        let mut p = path.clone();
                        p.push(k.clone());
                        (p, None)
                    }
                },
                Some(Frame::Seq { path, index }) => {
                    let mut p = path.clone();
                    p.push(format!("[{index}]"));
                    (p, None)
                }
            }
        }
        // After a node is complete: a map's key is set or cleared, a list moves on.
        fn done(stack: &mut [Frame], key_text: Option<String>) {
            match stack.last_mut() {
                Some(Frame::Map { key, .. }) => {
                    *key = match key {
                        None => Some(key_text.unwrap_or_default()),
                        Some(_) => None,
                    }
                }
                Some(Frame::Seq { index, .. }) => *index += 1,
                None => {}
            }
        }
        for ev in Parser::new_from_str(text) {
            let Ok((ev, span)) = ev else { break };
            let at = (span.start.line(), span.start.col() + 1);
            match ev {
                Event::Scalar(v, ..) => {
                    let (path, key_of) = next_path(&stack);
                    let mut full = path;
                    if key_of.is_some() {
                        full.push(v.to_string());
                    }
                    loc.nodes.push(Node {
                        at,
                        path: full,
                        key_of,
                        map_start: None,
                        empty: matches!(v.as_ref(), "" | "~" | "null" | "Null" | "NULL"),
                    });
                    done(&mut stack, Some(v.to_string()));
                }
                Event::Alias(_) => {
                    let (path, key_of) = next_path(&stack);
                    loc.nodes.push(Node {
                        at,
                        path,
                        key_of,
                        map_start: None,
                        empty: false,
                    });
                    done(&mut stack, None);
                }
                Event::MappingStart(..) => {
                    let (path, _) = next_path(&stack);
                    let id = loc.maps.len();
                    loc.maps.push((at, path.clone()));
                    loc.nodes.push(Node {
                        at,
                        path: path.clone(),
                        key_of: None,
                        map_start: Some(id),
                        empty: false,
                    });
                    stack.push(Frame::Map {
                        id,
                        path,
                        key: None,
                    });
                }
                Event::SequenceStart(..) => {
                    let (path, _) = next_path(&stack);
                    loc.nodes.push(Node {
                        at,
                        path: path.clone(),
                        key_of: None,
                        map_start: None,
                        empty: false,
                    });
                    stack.push(Frame::Seq { path, index: 0 });
                }
                Event::MappingEnd | Event::SequenceEnd => {
                    stack.pop();
                    done(&mut stack, None);
                }
                _ => {}
            }
        }
        loc
    }

    /// Where the node at `path` (e.g. `nodes[2].gpu.count`) is, or its nearest
    /// ancestor that is written in the file.
    fn position_of(&self, path: &str) -> Option<(usize, usize)> {
        let mut p = path.to_string();
        loop {
            if let Some(n) = self
                .nodes
                .iter()
                .find(|n| join_path(&n.path).as_deref() == Some(p.as_str()))
            {
                return Some(n.at);
            }
            let cut = p.rfind(['.', '['])?;
            p.truncate(cut);
            if p.is_empty() {
                return None;
            }
        }
    }

    /// The last node starting at or before a position.
    fn node_at(&self, line: usize, column: usize) -> Option<&Node> {
        self.nodes.iter().rev().find(|n| n.at <= (line, column))
    }
}

/// `a.b[0].c` from its segments.
fn join_path(segments: &[String]) -> Option<String> {
    let mut out = String::new();
    for seg in segments {
        if !out.is_empty() && !seg.starts_with('[') {
            out.push('.');
        }
        out.push_str(seg);
    }
    (!out.is_empty()).then_some(out)
}

/// The dotted path of the value at `line`:`column` (1-based) in a YAML document, e.g.
/// `spec.resources.gpu.memory` or `nodes[2].gpu.count` (a key names its value).
pub fn yaml_path_at(text: &str, line: usize, column: usize) -> Option<String> {
    let loc = Locator::new(text);
    join_path(&loc.node_at(line, column)?.path)
}

/// Where a mapping that holds the key at `line`:`column` starts, and its path (None
/// for the whole document).
struct MappingAt {
    line: usize,
    column: usize,
    path: Option<String>,
}

fn mapping_at(text: &str, line: usize, column: usize) -> MappingAt {
    let loc = Locator::new(text);
    // A key left without a value where a mapping should be (`spec:`): that value.
    if let Some(i) = loc.nodes.iter().rposition(|n| n.at <= (line, column)) {
        let n = &loc.nodes[i];
        let empty_value = loc
            .nodes
            .get(i + 1)
            .is_some_and(|v| v.empty && v.key_of.is_none() && v.path == n.path);
        if n.key_of.is_some() && empty_value {
            return MappingAt {
                line: n.at.0,
                column: n.at.1,
                path: join_path(&n.path),
            };
        }
    }
    let map = match loc.node_at(line, column) {
        // The key the reader stopped at: its mapping lacks the field.
        Some(Node {
            key_of: Some(m), ..
        }) => Some(*m),
        // An empty mapping (no key to stop at): that one.
        Some(Node {
            map_start: Some(m), ..
        }) => Some(*m),
        _ => None,
    };
    match map.map(|m| &loc.maps[m]) {
        Some(((l, c), path)) if !path.is_empty() => MappingAt {
            line: *l,
            column: *c,
            path: join_path(path),
        },
        _ => MappingAt {
            line: 1,
            column: 1,
            path: None,
        },
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
    // A pipe is opened without waiting for a writer, and read for a while at most:
    // maar never hangs on an input.
    let fifo = {
        use std::os::unix::fs::FileTypeExt;
        std::fs::metadata(path).is_ok_and(|m| m.file_type().is_fifo())
    };
    if fifo {
        return read_pipe(path, &fail);
    }
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

/// An error found after reading (a reference, a limit), at the line of its field.
pub fn field_error(file: &str, text: &str, field: String, message: String) -> InputError {
    let at = Locator::new(text).position_of(&field);
    InputError {
        file: file.to_string(),
        line: at.map(|a| a.0 as u64),
        column: at.map(|a| a.1 as u64),
        field: Some(field),
        message: cut_values(&message),
    }
}

/// How long a pipe may take to deliver its input.
const PIPE_WAIT: std::time::Duration = std::time::Duration::from_secs(10);

fn read_pipe(path: &Path, fail: &dyn Fn(String) -> InputError) -> Result<String, InputError> {
    use std::io::Read;
    use std::os::unix::fs::OpenOptionsExt;
    let mut f = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(nix::libc::O_NONBLOCK)
        .open(path)
        .map_err(|e| fail(format!("cannot read: {e}")))?;
    let end = std::time::Instant::now() + PIPE_WAIT;
    let mut buf = Vec::new();
    let mut chunk = [0u8; 65536];
    let mut seen_writer = false;
    loop {
        match f.read(&mut chunk) {
            // End of input: the writer closed (or none came yet).
            Ok(0) if seen_writer || std::time::Instant::now() > end => break,
            Ok(0) => std::thread::sleep(std::time::Duration::from_millis(10)),
            Ok(n) => {
                seen_writer = true;
                buf.extend_from_slice(&chunk[..n]);
                if buf.len() as u64 > MAX_INPUT_BYTES {
                    return Err(fail(format!(
                        "larger than the limit of {} MiB for an input file (not a regular file?)",
                        MAX_INPUT_BYTES >> 20
                    )));
                }
            }
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
                seen_writer = true;
                if std::time::Instant::now() > end {
                    return Err(fail(format!(
                        "the pipe gave no end of input within {} s",
                        PIPE_WAIT.as_secs()
                    )));
                }
                std::thread::sleep(std::time::Duration::from_millis(10));
            }
            Err(e) => return Err(fail(format!("cannot read: {e}"))),
        }
    }
    if buf.is_empty() && !seen_writer {
        return Err(fail(format!(
            "nothing was written to the pipe within {} s",
            PIPE_WAIT.as_secs()
        )));
    }
    String::from_utf8(buf).map_err(|e| {
        fail(format!(
            "not UTF-8 text (invalid byte at offset {})",
            e.utf8_error().valid_up_to()
        ))
    })
}

/// Parses a scenario from text and checks its limits and references.
pub fn parse_scenario(file: &str, text: &str) -> Result<Scenario, InputError> {
    let sc: Scenario = yaml(file, text)?;
    // Build once to check limits and references (pools, nodes, projects).
    sc.build()
        .map_err(|e| field_error(file, text, e.field, e.message))?;
    Ok(sc)
}

/// Loads a scenario file, or a built-in one: the lab when `path` is None or `lab`, the
/// demo's second site for `site-b`.
pub fn load_scenario(path: Option<&Path>) -> Result<Scenario, InputError> {
    scenario_text(path).map(|(_, sc)| sc)
}

/// A scenario and its text (the text is what a demo's record keeps).
pub fn scenario_text(path: Option<&Path>) -> Result<(String, Scenario), InputError> {
    // The built-in scenarios by name (a file of that name here comes first).
    let builtin = |p: &Path| match p.to_str() {
        Some("lab") if !p.exists() => Some(BUILTIN_LAB),
        Some("site-b") if !p.exists() => Some(maar_demo::SITE_B_YAML),
        _ => None,
    };
    let text = match path {
        None => BUILTIN_LAB.to_string(),
        Some(p) => match builtin(p) {
            Some(t) => t.to_string(),
            None => read(p)?,
        },
    };
    let name = match path {
        None => BUILTIN_NAME.to_string(),
        Some(p) if p.as_os_str() == "lab" && builtin(p).is_some() => BUILTIN_NAME.to_string(),
        Some(p) if builtin(p).is_some() => format!("<built-in demo/{}.yaml>", p.display()),
        Some(p) => p.display().to_string(),
    };
    let sc = parse_scenario(&name, &text)?;
    Ok((text, sc))
}

/// The YAML documents of a file (split at `---` lines), each padded with blank lines
/// so the reader's line numbers are the file's.
fn documents(text: &str) -> Vec<String> {
    let mut docs = Vec::new();
    let mut cur = String::new();
    let mut pad = 0;
    for (i, line) in text.lines().enumerate() {
        if line.trim_end() == "---" {
            if !cur.trim().is_empty() {
                docs.push(std::mem::take(&mut cur));
            }
            cur.clear();
            pad = i + 1;
            continue;
        }
        if cur.is_empty() {
            cur.push_str(&"\n".repeat(pad));
        }
        cur.push_str(line);
        cur.push('\n');
    }
    if !cur.trim().is_empty() {
        docs.push(cur);
    }
    docs
}

/// The `kind:` of a YAML document, when it says one at the top level.
fn kind_of(doc: &str) -> Option<&str> {
    doc.lines()
        .find_map(|l| l.strip_prefix("kind:"))
        .map(|k| k.trim().trim_matches('"'))
}

/// Parses a TrainJob or InferenceService manifest, or a Kubernetes Deployment with
/// its HorizontalPodAutoscaler in the same file (an inference service with the HPA's
/// bounds, metric target and scale-down window).
pub fn parse_manifest(file: &str, text: &str) -> Result<JobSpec, InputError> {
    // Not a job, but files users hold beside their jobs: said as what they are.
    let whole = |message: String| InputError {
        file: file.to_string(),
        line: None,
        column: None,
        field: None,
        message,
    };
    if let Some((n, _)) = text
        .lines()
        .enumerate()
        .find(|(_, l)| l.trim_start().starts_with("kubectl label"))
    {
        return Err(InputError {
            line: Some(n as u64 + 1),
            ..whole(
                "a `kubectl label` script, not a job: run its lines as `maar label NODE KEY=VALUE ...` (or with kubectl against a cluster `maar kube` schedules)".into(),
            )
        });
    }
    let docs = documents(text);
    if docs.iter().any(|d| kind_of(d) == Some("List")) {
        return Err(whole(
            "a Kubernetes List: give its objects as YAML documents separated by `---` (a Deployment and its HorizontalPodAutoscaler, or one TrainJob)".into(),
        ));
    }
    if docs.iter().any(|d| kind_of(d) == Some("Deployment")) {
        return parse_deployment(file, text, &docs);
    }
    let m: Manifest = yaml(file, text)?;
    let mut spec = m
        .to_job_spec()
        .map_err(|e| field_error(file, text, e.field, e.message))?;
    // The object as written, for a backend that makes it in its world (Kubernetes).
    spec.manifest = yaml::<serde_json::Value>(file, text).ok();
    Ok(spec)
}

fn parse_deployment(file: &str, text: &str, docs: &[String]) -> Result<JobSpec, InputError> {
    use maar_scheduler::manifest::{Deployment, Hpa};
    let mut dep: Option<Deployment> = None;
    let mut hpa: Option<Hpa> = None;
    for d in docs {
        match kind_of(d) {
            Some("Deployment") if dep.is_none() => {
                dep = Some(yaml(file, d)?)
            }
            Some("HorizontalPodAutoscaler") if hpa.is_none() => {
                hpa = Some(yaml(file, d)?)
            }
            Some(k) => {
                return Err(field_error(
                    file,
                    text,
                    "kind".into(),
                    format!(
                        "`{}`: a Deployment file may hold one Deployment and its HorizontalPodAutoscaler",
                        maar_scheduler::limits::echo(k)
                    ),
                ))
            }
            None => {
                return Err(field_error(
                    file,
                    text,
                    "kind".into(),
                    "a document without `kind`".into(),
                ))
            }
        }
    }
    let dep = dep.expect("a Deployment document was found");
    dep.to_job_spec(hpa.as_ref())
        .map_err(|e| field_error(file, text, e.field, e.message))
}

pub fn load_manifest(path: &Path) -> Result<JobSpec, InputError> {
    parse_manifest(&path.display().to_string(), &read(path)?)
}
