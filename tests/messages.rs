//! Error messages in maar's words: the location once, values cut to a readable length,
//! no parser option names, and a missing field named at the mapping that lacks it (on
//! every required field of the users' files and the demo lab, removed one at a time).

use maar::load::{parse_manifest, parse_scenario, yaml_path_at, InputError};

const TRAINJOB: &str = "# A training job as users write it today.
apiVersion: crater.ai/v1
kind: TrainJob
metadata:
  name: gpt-finetune-demo
  namespace: ml-prod
spec:
  image: registry.example.com/ai/pytorch-train:2.1
  resources:
    pool: training-gpu
    gpu:
      count: 2
      memory: 32Gi
    cpu:
      cores: 16
    memory:
      capacity: 64Gi
    disk:
      capacity: 100Gi
  priority: medium
  scheduler:
    affinity:
      gpuAffinity: same-node
";

fn indent(l: &str) -> usize {
    l.len() - l.trim_start().len()
}

/// Removes the block key on line `i` with everything nested under it.
fn without_block_key(text: &str, i: usize) -> String {
    let lines: Vec<&str> = text.lines().collect();
    let ind = indent(lines[i]);
    let mut j = i + 1;
    while j < lines.len() && (lines[j].trim().is_empty() || indent(lines[j]) > ind) {
        j += 1;
    }
    let mut out: Vec<&str> = lines[..i].to_vec();
    out.extend_from_slice(&lines[j..]);
    out.join("\n") + "\n"
}

/// Every `key: scalar` pair inside a flow mapping on a line: (byte range of the pair,
/// with its comma, and the key's column).
fn flow_pairs(l: &str) -> Vec<(std::ops::Range<usize>, usize)> {
    let mut out = Vec::new();
    let b = l.as_bytes();
    let mut depth = 0;
    let mut start = None;
    for (i, &c) in b.iter().enumerate() {
        match c {
            b'{' => {
                depth += 1;
                start = Some(i + 1);
            }
            b'[' => depth += 1,
            b'}' | b']' => {
                if let (Some(s), b'}') = (start, c) {
                    out.push((s..i, s));
                }
                depth -= 1;
                start = None;
            }
            b',' if start.is_some() => {
                let s = start.unwrap();
                out.push((s..i + 1, s));
                start = Some(i + 1);
            }
            _ => {}
        }
        let _ = depth;
    }
    out.into_iter()
        .filter(|(r, _)| {
            let t = &l[r.clone()];
            t.contains(':') && !t.contains('{') && !t.contains('[')
        })
        .map(|(r, s)| {
            let lead = l[s..].len() - l[s..].trim_start().len();
            (r, s + lead)
        })
        .collect()
}

/// Removes every key once; where the file then lacks a required field, the error must
/// name the mapping the key was in, and the field. Returns (required fields checked).
fn check_missing_fields(
    name: &str,
    text: &str,
    parse: impl Fn(&str) -> Result<(), InputError>,
) -> usize {
    let lines: Vec<&str> = text.lines().collect();
    let mut checked = 0;
    let mut wrong = Vec::new();
    let mut try_one = |mutated: String, line: usize, col: usize, key: &str| {
        let Err(e) = parse(&mutated) else { return };
        let want = format!("missing field `{key}`");
        if !e.message.starts_with(&want) {
            return;
        }
        checked += 1;
        let path = yaml_path_at(text, line + 1, col + 1).unwrap_or_default();
        let parent = match path.rfind('.') {
            Some(i) => path[..i].to_string(),
            None => String::new(),
        };
        let got = e.field.clone().unwrap_or_default();
        if got != parent {
            wrong.push(format!(
                "{name}:{}: removed `{path}`: told `{got}`: {e}",
                line + 1
            ));
        }
    };
    for (i, l) in lines.iter().enumerate() {
        let body = l.trim_start().trim_start_matches("- ");
        if body.starts_with('#') || body.is_empty() {
            continue;
        }
        // A block key (not a list item's first key, which would drop the item).
        if !l.trim_start().starts_with("- ") {
            if let Some(k) = body
                .split(':')
                .next()
                .filter(|k| !k.contains(' ') && !k.contains('{'))
            {
                if body.contains(':') {
                    try_one(without_block_key(text, i), i, indent(l), k.trim());
                }
            }
        }
        for (range, col) in flow_pairs(l) {
            let key = l[range.clone()]
                .split(':')
                .next()
                .unwrap()
                .trim()
                .to_string();
            let mut line = l.to_string();
            line.replace_range(range, "");
            let line = line.replace(", }", "}").replace(",}", "}");
            let mut all: Vec<String> = lines.iter().map(|s| s.to_string()).collect();
            all[i] = line;
            try_one(all.join("\n") + "\n", i, col, &key);
        }
    }
    assert!(
        wrong.is_empty(),
        "{} wrong of {checked}:\n{}",
        wrong.len(),
        wrong.join("\n")
    );
    checked
}

#[test]
fn a_missing_field_is_named_at_the_mapping_that_lacks_it() {
    let n = check_missing_fields("trainjob", TRAINJOB, |t| {
        parse_manifest("job.yaml", t).map(|_| ())
    });
    assert!(n >= 5, "{n} required fields in the job");
    let lab = maar::load::BUILTIN_LAB;
    let n = check_missing_fields("lab", lab, |t| parse_scenario("lab.yaml", t).map(|_| ()));
    assert!(n >= 40, "{n} required fields in the lab");
    for case in std::fs::read_dir("demo/cases").unwrap() {
        let p = case.unwrap().path();
        let text = std::fs::read_to_string(&p).unwrap();
        check_missing_fields(&p.display().to_string(), &text, |t| {
            parse_scenario("case.yaml", t).map(|_| ())
        });
    }
}

#[test]
fn messages_say_the_location_once_cut_long_values_and_name_no_parser_options() {
    let dup = TRAINJOB.replace(
        "  namespace: ml-prod\n",
        "  namespace: ml-prod\n  name: again\n",
    );
    let e = parse_manifest("job.yaml", &dup).unwrap_err();
    let text = e.to_string();
    assert_eq!(text, "job.yaml:7:3: metadata.name: duplicate key `name`");
    assert!(!text.contains("Options") && !text.contains("Policy"));
    let long = "x".repeat(1_000_000);
    for bad in [
        TRAINJOB.replace("kind: TrainJob", &format!("kind: {long}")),
        TRAINJOB.replace("memory: 32Gi", &format!("memory: {long}")),
        TRAINJOB.replace("priority: medium", &format!("priority: {long}")),
        TRAINJOB.replace("gpuAffinity: same-node", &format!("gpuAffinity: {long}")),
    ] {
        let text = parse_manifest("job.yaml", &bad).unwrap_err().to_string();
        assert!(text.len() < 400, "{} bytes: {}", text.len(), &text[..200]);
        assert!(text.contains('…'), "{text}");
        // The location once: in front, not again in the message.
        let after = text.split_once(": ").map(|x| x.1).unwrap_or("");
        assert!(!after.contains("line "), "{text}");
        assert!(!after.contains("column"), "{text}");
    }
    let e = parse_manifest("job.yaml", &TRAINJOB.replace("count: 2", "count: [2]"))
        .unwrap_err()
        .to_string();
    assert!(
        !e.contains("event") && !e.contains("scalar"),
        "parser words: {e}"
    );
}
