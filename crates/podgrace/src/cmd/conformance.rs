//! `podgrace conformance [FILE]`: evaluates upstream-derived vectors against the engine.

use crate::{input, out::Out, Outcome};
use anyhow::Context;
use podgrace_core::conformance::{self, BUILTIN_VECTORS};
use std::io::Write as _;
use std::path::PathBuf;

#[derive(clap::Args)]
pub struct Args {
    /// A JSON Lines vector file (`-` for stdin); default: the vectors compiled into podgrace.
    file: Option<PathBuf>,
}

pub fn run(args: Args) -> anyhow::Result<Outcome> {
    let (name, text) = match &args.file {
        Some(path) => {
            let doc = input::read_one(path)?;
            (doc.name, doc.text)
        }
        None => ("(built in)".to_string(), BUILTIN_VECTORS.to_string()),
    };
    let report = conformance::run(&text)
        .map_err(|e| crate::BadInput(format!("{name}: {e}")))
        .context("cannot evaluate the vectors")?;
    write!(Out, "{}", crate::render::conformance::render(&report))?;
    Ok(if report.failed() == 0 {
        Outcome::Success
    } else {
        Outcome::CheckFailed
    })
}
