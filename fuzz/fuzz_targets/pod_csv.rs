//! See maar::fuzzing::pod_csv.
#![no_main]
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    maar::fuzzing::pod_csv(data);
});
