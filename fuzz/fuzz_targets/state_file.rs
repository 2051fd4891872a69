//! See maar::fuzzing::state_file.
#![no_main]
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    maar::fuzzing::state_file(data);
});
