//! A job manifest: read (and, when valid, turned into a job) without panicking.
#![no_main]
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    maar::fuzzing::manifest(data);
});
