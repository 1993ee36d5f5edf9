//! Every end-to-end suite, one module per suite, linked into one test
//! binary (wasmtime's `tests/all` pattern): the host library, the `cordon`
//! binary, real runners and real components are linked once instead of
//! once per suite. Run one suite with `cargo test --test all bwrap::`.
//!
//! Suites that need a runner this machine lacks skip loudly; with
//! `CORDON_E2E_REQUIRE_BWRAP=1` / `CORDON_E2E_REQUIRE_LANDLOCK=1` (set by
//! `scripts/test.sh` on Linux CI) they fail instead.

mod common;

mod ahead;
mod audit;
mod bwrap;
mod cache;
mod cli;
mod component;
mod containment;
mod denials;
mod doctor;
mod escapes;
mod executors;
mod fail_closed;
mod grant;
mod hostile;
mod inspection;
mod landlock;
mod launcher;
mod layers;
mod limits;
mod mcp;
mod network;
mod ns_runner;
mod operations;
mod policy;
mod probe;
mod process;
mod properties;
mod python;
mod registry;
mod requests;
mod rpc;
mod rules_policy;
mod serve;
mod service;
mod sessions;
mod shell_diff;
mod tasks;
mod testkit;
mod trees;
mod typescript;
mod unprivileged;
