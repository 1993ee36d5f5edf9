//! The Python client (clients/python, stdlib only) against the real
//! `cordon serve`: its own unittest suite, run here so `cargo test` and CI
//! run it. Skips loudly without `python3`; with
//! `CORDON_E2E_REQUIRE_PYTHON=1` (set by scripts/test.sh on CI) that fails.

use crate::common;

#[test]
fn the_python_client_drives_cordon_serve() {
    let test = "the_python_client_drives_cordon_serve";
    if common::python_usable(test) {
        common::python_suite(test, "clients/python", "test_cordon_client", 7);
    }
}
