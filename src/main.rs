//! The `dq` command-line tool: `dq run`, `dq bench`, `dq demo` (see `dq --help`).

mod cli;

fn main() -> std::process::ExitCode {
    cli::main()
}
