//! Every input the fuzzers (fuzz/) found troublesome, and the hostile inputs found by
//! hand, kept in fuzz/regressions/<target>/: each is read without a panic or a hang,
//! and each of these is refused.

use std::time::{Duration, Instant};

/// A fuzz target: reads bytes, says whether it accepted them.
type Target = fn(&[u8]) -> bool;

#[test]
fn every_kept_input_is_read_without_panic_or_hang() {
    let targets: [(&str, Target); 5] = [
        ("manifest", maar::fuzzing::manifest),
        ("scenario", maar::fuzzing::scenario),
        ("node_csv", maar::fuzzing::node_csv),
        ("pod_csv", maar::fuzzing::pod_csv),
        ("state_file", maar::fuzzing::state_file),
    ];
    let mut n = 0;
    for (target, f) in targets {
        let dir = std::path::Path::new("fuzz/regressions").join(target);
        let mut files: Vec<_> = std::fs::read_dir(&dir)
            .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
            .map(|e| e.unwrap().path())
            .collect();
        files.sort();
        assert!(!files.is_empty(), "{} is empty", dir.display());
        for p in files {
            let data = std::fs::read(&p).unwrap();
            let t = Instant::now();
            let accepted = std::panic::catch_unwind(|| f(&data))
                .unwrap_or_else(|_| panic!("{} panicked", p.display()));
            assert!(
                t.elapsed() < Duration::from_secs(10),
                "{} took {:?}",
                p.display(),
                t.elapsed()
            );
            assert!(!accepted, "{} was accepted; these are all bad", p.display());
            n += 1;
        }
    }
    assert!(n >= 20, "{n} inputs");
}
