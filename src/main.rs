//! The `dq` command-line tool (see `dq --help` and the README's "Command line"):
//! `dq run` dequantizes one tensor from files, `dq bench` times the backends,
//! `dq model` dequantizes a model preset's weights, `dq demo` checks two built-in
//! cases against the reference.

mod cli;

fn main() -> std::process::ExitCode {
    cli::main()
}
