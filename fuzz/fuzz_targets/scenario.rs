//! See maar::fuzzing::scenario.
#![no_main]
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    maar::fuzzing::scenario(data);
});
