//! `maar kube` on the command line without a cluster: a bad kubeconfig or context is a
//! usage error (exit 2) naming the file or the context; a server that does not answer is
//! a no (exit 1) naming the context and the address; never a hang.

use std::process::Command;
use std::time::{Duration, Instant};

fn maar(args: &[&str], state: &std::path::Path) -> (i32, String, Duration) {
    let start = Instant::now();
    let o = Command::new(env!("CARGO_BIN_EXE_maar"))
        .args(args)
        .env("XDG_STATE_HOME", state)
        .env_remove("KUBECONFIG")
        .output()
        .expect("maar runs");
    (
        o.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&o.stderr).into_owned(),
        start.elapsed(),
    )
}

fn kubeconfig(dir: &std::path::Path, server: &str) -> std::path::PathBuf {
    let p = dir.join("kubeconfig");
    std::fs::write(
        &p,
        format!(
            "apiVersion: v1
kind: Config
clusters:
- name: c
  cluster: {{server: {server}, insecure-skip-tls-verify: true}}
users:
- name: u
  user: {{token: t}}
contexts:
- name: lab
  context: {{cluster: c, user: u}}
current-context: lab
"
        ),
    )
    .unwrap();
    p
}

#[test]
fn a_missing_or_broken_kubeconfig_or_an_unknown_context_is_a_usage_error() {
    let dir = tempfile_dir("kube-usage");
    let (code, err, _) = maar(
        &["kube", "--headless", "--kubeconfig", "/nonexistent/kc"],
        &dir,
    );
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("/nonexistent/kc"), "{err}");
    let broken = dir.join("broken");
    std::fs::write(&broken, "clusters: [\n").unwrap();
    let (code, err, _) = maar(
        &[
            "kube",
            "--headless",
            "--kubeconfig",
            broken.to_str().unwrap(),
        ],
        &dir,
    );
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("broken"), "{err}");
    let kc = kubeconfig(&dir, "https://127.0.0.1:1");
    let (code, err, _) = maar(
        &[
            "kube",
            "--headless",
            "--kubeconfig",
            kc.to_str().unwrap(),
            "--context",
            "nope",
        ],
        &dir,
    );
    assert_eq!(code, 2, "{err}");
    assert!(
        err.contains("no context `nope`") && err.contains("lab"),
        "{err}"
    );
}

#[test]
fn a_server_that_does_not_answer_is_one_line_naming_the_context_and_address() {
    let dir = tempfile_dir("kube-down");
    // Nothing listens on port 1 of this machine.
    let kc = kubeconfig(&dir, "https://127.0.0.1:1");
    let (code, err, took) = maar(
        &[
            "kube",
            "--headless",
            "--kubeconfig",
            kc.to_str().unwrap(),
            "--timeout",
            "3s",
        ],
        &dir,
    );
    assert_eq!(code, 1, "{err}");
    assert!(
        err.starts_with("maar: error: context lab: the API server at https://127.0.0.1:1/"),
        "{err}"
    );
    assert_eq!(err.trim_end().lines().count(), 1, "{err}");
    assert!(took < Duration::from_secs(10), "took {took:?}");
}

fn tempfile_dir(name: &str) -> std::path::PathBuf {
    let d = std::env::temp_dir().join(format!("maar-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}
