//! What every result carries so it can be traced (the version, the commit it was built
//! from, the host it ran on), and the one JSON convention of every subcommand: `--json`
//! (`-J`) writes the document to stdout, `--json-file FILE` to a file (`-` is stdout), and
//! no file is written unless asked.

use anyhow::{Context, Result};
use clap::Args;
use firehose_host::document::{Build, Document};
use serde::Serialize;
use serde_json::Value;
use std::io::Write;
use std::path::{Path, PathBuf};

/// The commit firehose was built from (`-dirty` when it differed), or "unknown".
pub const COMMIT: &str = env!("FIREHOSE_COMMIT");

/// `firehose -V`.
pub const VERSION: &str = concat!(
    env!("CARGO_PKG_VERSION"),
    " (",
    env!("FIREHOSE_COMMIT"),
    ")"
);

/// `firehose --version`.
pub const LONG_VERSION: &str = concat!(
    env!("CARGO_PKG_VERSION"),
    "\ncommit: ",
    env!("FIREHOSE_COMMIT"),
    "\nrustc:  ",
    env!("FIREHOSE_RUSTC"),
    "\ntarget: ",
    env!("FIREHOSE_TARGET"),
);

/// This build, as recorded in every JSON document.
pub fn build() -> Build {
    Build {
        version: env!("CARGO_PKG_VERSION").into(),
        commit: COMMIT.into(),
        rustc: env!("FIREHOSE_RUSTC").into(),
        target: env!("FIREHOSE_TARGET").into(),
    }
}

/// `--json` and `--json-file`, flattened into every subcommand that writes a document.
#[derive(Debug, Clone, Default, Args)]
pub struct JsonArgs {
    /// Write the results as one JSON document to stdout; the text goes to stderr.
    #[arg(short = 'J', long)]
    pub json: bool,
    /// Write the results as one JSON document to FILE (`-`: stdout).
    #[arg(long, value_name = "FILE", conflicts_with = "json")]
    pub json_file: Option<PathBuf>,
}

/// Where the document goes, decided once at start.
pub enum JsonOut {
    None,
    /// The original stdout; fd 1 now points at stderr.
    Stdout(std::fs::File),
    File(PathBuf),
}

impl JsonArgs {
    /// True when the document goes to stdout.
    fn to_stdout(&self) -> bool {
        self.json || self.json_file.as_deref() == Some(Path::new("-"))
    }

    /// Decides where the document goes. With stdout, every other print from here on lands
    /// on stderr, so stdout carries the document alone (as `iperf3 -J` does).
    pub fn open(&self) -> Result<JsonOut> {
        if self.to_stdout() {
            let f = firehose_sys::stdio::stdout_to_stderr().context("keeping stdout for JSON")?;
            return Ok(JsonOut::Stdout(f));
        }
        Ok(match &self.json_file {
            Some(p) => JsonOut::File(p.clone()),
            None => JsonOut::None,
        })
    }
}

impl JsonOut {
    /// True when a document was asked for.
    pub fn wanted(&self) -> bool {
        !matches!(self, JsonOut::None)
    }

    /// The file's path, to say where the results went.
    pub fn path(&self) -> Option<&Path> {
        match self {
            JsonOut::File(p) => Some(p),
            _ => None,
        }
    }

    /// Writes `doc` with the traceability fields added ([`document`]).
    pub fn write<T: Serialize>(&mut self, doc: &T) -> Result<()> {
        let text = serde_json::to_string_pretty(&document(doc)?)? + "\n";
        match self {
            JsonOut::None => Ok(()),
            JsonOut::Stdout(f) => {
                let r = f.write_all(text.as_bytes()).and_then(|_| f.flush());
                match r {
                    Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => Ok(()),
                    r => r.context("writing the JSON document to stdout"),
                }
            }
            JsonOut::File(p) => std::fs::write(&*p, text)
                .with_context(|| format!("writing --json-file {}", p.display())),
        }
    }
}

/// `doc` in its envelope ([`Document`]: `schema_version`, `firehose`, the build) and,
/// for a body that records none, `environment` (the host's facts).
pub fn document<T: Serialize>(doc: &T) -> Result<Value> {
    let v =
        serde_json::to_value(Document::new(build(), doc)).context("encoding the JSON document")?;
    let Value::Object(mut out) = v else {
        anyhow::bail!("a JSON document must be an object");
    };
    if !out.contains_key("environment") {
        let env = firehose_host::env::Environment::capture();
        out.insert("environment".into(), serde_json::to_value(env)?);
    }
    Ok(Value::Object(out))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_document_is_traceable() {
        #[derive(Serialize)]
        struct D {
            tps: f64,
        }
        let v = document(&D { tps: 5.0 }).unwrap();
        assert_eq!(v["schema_version"], firehose_host::document::SCHEMA_VERSION);
        assert_eq!(v["firehose"]["version"], env!("CARGO_PKG_VERSION"));
        assert!(v["firehose"]["commit"].is_string());
        assert!(v["environment"]["kernel"].is_string());
        assert_eq!(v["tps"], 5.0);
        assert!(document(&5).is_err());
    }
}
