//! The exec sandbox's launcher as a program of its own: `acp-sandbox [--network] [--write PATH]…
//! [--hide PATH]… -- PROGRAM ARGS…` (see `acp::sandbox::launch`). The agent starts it for every
//! sandboxed command; being small, it starts in a fraction of the time `acp __sandbox` takes,
//! which does the same.

fn main() -> std::process::ExitCode {
    acp::sandbox::launch::main(std::env::args_os().skip(1))
}
