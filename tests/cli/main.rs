//! The `dq` binary: `dq run`, `inspect`, `convert`, `model`, `bench` and `demo`,
//! their error classes and exit codes, and hostile command lines and files.

#[path = "../support/mod.rs"]
mod support;

#[cfg(unix)]
mod files;

mod cli;
mod cli_fuzz;
mod cli_hostile;
mod convert;
mod convert_coded;
mod float_cli;
#[cfg(unix)]
mod folder;
#[cfg(unix)]
mod folder_ckpt;
#[cfg(unix)]
mod folder_kill;
#[cfg(unix)]
mod folder_tokenizer;
mod model;
mod split;
#[cfg(all(unix, feature = "jit"))]
mod tuning;
