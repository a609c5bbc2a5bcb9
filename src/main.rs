//! The `dq` command-line tool (see `dq --help` and `docs/cli.md`):
//! `dq run` dequantizes one tensor from files, `dq bench` times the backends,
//! `dq model` dequantizes a model preset's weights, `dq demo` checks two built-in
//! cases against the reference.

fn main() -> std::process::ExitCode {
    dq::cli::main()
}
