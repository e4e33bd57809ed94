//! Link options of the `acp` and `acp-sandbox` binaries.
//!
//! On Linux with glibc they are linked as position-dependent executables (`-no-pie`): a
//! position-independent one is relocated by the loader at every start, which writes (and so
//! copies) every page of its 0.8 MB of relocated read-only data — half the page faults of a start,
//! and most of what `acp serve` pays before it answers `initialize` beyond a bare tokio process.
//! Without PIE the executable's own code and data sit at a fixed address; the stack, the heap,
//! the shared libraries and every mapping stay randomised, and RELRO, NX and immediate binding
//! are unchanged. `ACP_PIE=1` at build time links a position-independent executable instead, its
//! relative relocations packed (`-z pack-relative-relocs`, GNU ld ≥ 2.38 or lld).

// Cargo reads a build script's instructions from its standard output.
#![allow(clippy::print_stdout)]

fn main() {
    println!("cargo::rerun-if-changed=build.rs");
    println!("cargo::rerun-if-env-changed=ACP_PIE");
    let target = |key: &str| std::env::var(key).unwrap_or_default();
    if target("CARGO_CFG_TARGET_OS") != "linux" || target("CARGO_CFG_TARGET_ENV") != "gnu" {
        return;
    }
    if std::env::var_os("ACP_PIE").is_some_and(|v| v == "1") {
        println!("cargo::rustc-link-arg-bins=-Wl,-z,pack-relative-relocs");
    } else {
        println!("cargo::rustc-link-arg-bins=-no-pie");
    }
}
