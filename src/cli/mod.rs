//! The command-line tool: argument parsing ([`args`]), the case flags ([`case`]),
//! file I/O ([`io`], [`npy`]) and the subcommands: [`run`], [`bench`], [`model`],
//! [`demo`], [`inspect`] and [`convert`] (checkpoints through [`source`]).
//!
//! Every invalid input ends the process with exit code 2 and one line on stderr
//! naming the violated rule; nothing is written then. `dq demo` and `dq model
//! --verify` exit with 1 when a backend differs from the reference.

mod args;
mod bench;
mod case;
mod choices;
pub mod cleanup;
mod convert;
mod demo;
mod error;
mod folder;
mod inspect;
mod inspect_hf;
mod io;
mod limits;
mod model;
mod model_file;
mod roofline;
mod run;
pub mod source;
mod text;
mod unsupported;

use std::process::ExitCode;

use clap::FromArgMatches;
use clap::error::ErrorKind;

use args::{Cli, Command};
use error::CliError;

/// Parses the command line and runs the subcommand.
pub fn main() -> ExitCode {
    cleanup::install();
    choices::remember();
    let matches = match args::command().try_get_matches() {
        Ok(m) => m,
        Err(e) => return clap_error(e),
    };
    let cli = match Cli::from_arg_matches(&matches) {
        Ok(c) => c,
        Err(e) => return clap_error(e),
    };
    let result = match &cli.command {
        Command::Run(a) => run::run(a).map(|()| ExitCode::SUCCESS),
        Command::Bench(a) => bench::bench(a).map(|()| ExitCode::SUCCESS),
        Command::Demo(a) => demo::demo(a),
        Command::Model(a) => match &a.file {
            Some(path) => {
                return model_file::run(a, path).unwrap_or_else(|e| fail(&e));
            }
            None => model::model(a),
        },
        Command::Convert(a) => {
            return convert::convert(a).map_or_else(|e| fail(&e), |()| ExitCode::SUCCESS);
        }
        Command::Inspect(a) => {
            return inspect::inspect(a).map_or_else(|e| fail(&e), |()| ExitCode::SUCCESS);
        }
    };
    result.unwrap_or_else(|e| fail(&e))
}

/// Runs `dq convert ARGS...` (`args` without the program and subcommand names)
/// as the CLI does, in this process: the same parsing, defaults, checks, output
/// files, progress and summary lines. Used by the Python package's `dq.convert`.
///
/// # Errors
/// The one line the CLI would print after `dq: error: ` (a usage error ends with
/// `(see --help)`); no output file exists then.
pub fn convert_command<I, T>(args: I) -> Result<(), String>
where
    I: IntoIterator<Item = T>,
    T: Into<std::ffi::OsString> + Clone,
{
    cleanup::install();
    let argv = ["dq".into(), "convert".into()]
        .into_iter()
        .chain(args.into_iter().map(Into::into));
    let parsed = args::command()
        .try_get_matches_from(argv)
        .and_then(|m| Cli::from_arg_matches(&m));
    let cli = parsed.map_err(|e| usage_line(&e))?;
    match &cli.command {
        Command::Convert(a) => convert::convert(a).map_err(|e| e.to_string()),
        _ => Err("not a convert command".into()),
    }
}

/// Prints one line (what the input put in it escaped: [`text::escape`]) and returns
/// exit code 2.
fn fail(e: &dyn std::fmt::Display) -> ExitCode {
    eprintln!("dq: error: {}", text::escape(&e.to_string()));
    ExitCode::from(2)
}

/// Help and version go to stdout (exit 0); usage errors become one line (exit 2).
fn clap_error(e: clap::Error) -> ExitCode {
    match e.kind() {
        ErrorKind::DisplayHelp
        | ErrorKind::DisplayVersion
        | ErrorKind::DisplayHelpOnMissingArgumentOrSubcommand => {
            print!("{}", e.render());
            ExitCode::SUCCESS
        }
        _ => fail(&CliError::Usage(usage_line(&e))),
    }
}

/// A clap error as one line: the message is the first paragraph; clap lists
/// missing flags on indented lines below the first, which are joined into it.
fn usage_line(e: &clap::Error) -> String {
    let text = e.render().to_string();
    let para: Vec<&str> = text
        .lines()
        .take_while(|l| !l.trim().is_empty())
        .map(str::trim)
        .collect();
    let msg = para.join(" ");
    let msg = msg.strip_prefix("error: ").unwrap_or(&msg);
    format!("{msg} (see --help)")
}
