//! See maar::fuzzing::node_csv.
#![no_main]
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    maar::fuzzing::node_csv(data);
});
