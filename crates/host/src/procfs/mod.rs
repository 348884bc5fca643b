//! Parsers for the /proc files that measure UDP work: CPU time, softirqs, softnet backlog
//! drops, UDP counters, per-process CPU and per-socket drops.
//!
//! Each submodule has a `parse(&str)` that never touches the file system; [`read`] is the one
//! place that reads a file and hands its text to a parser.

pub mod pidstat;
pub mod pidstatus;
pub mod snmp;
pub mod socket_owners;
pub mod softirqs;
pub mod softnet;
pub mod stat;
pub mod udp_sockets;

use std::path::PathBuf;

/// A file's text did not have the shape its parser expects.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum ParseError {
    /// One line could not be read; `line` counts from 1.
    #[error("{file} line {line}: {what}")]
    Line {
        /// Which kind of file, e.g. `/proc/stat`.
        file: &'static str,
        /// 1-based line number.
        line: usize,
        /// What was wrong.
        what: String,
    },
    /// Something the file must contain was not there at all.
    #[error("{file}: {what}")]
    Missing {
        /// Which kind of file, e.g. `/proc/net/snmp`.
        file: &'static str,
        /// What was missing.
        what: String,
    },
}

impl ParseError {
    pub(crate) fn line(file: &'static str, line: usize, what: impl Into<String>) -> Self {
        ParseError::Line {
            file,
            line,
            what: what.into(),
        }
    }

    pub(crate) fn missing(file: &'static str, what: impl Into<String>) -> Self {
        ParseError::Missing {
            file,
            what: what.into(),
        }
    }
}

/// Reading a file failed, or its text did not parse.
#[derive(Debug, thiserror::Error)]
pub enum ReadError {
    /// The file could not be read (absent on this kernel, no permission, ...).
    #[error("cannot read {path}: {source}")]
    Io {
        /// The path that was read.
        path: PathBuf,
        /// The OS error.
        source: std::io::Error,
    },
    /// The file was read but its text did not parse.
    #[error("{path}: {source}")]
    Parse {
        /// The path that was read.
        path: PathBuf,
        /// What the parser found wrong.
        source: ParseError,
    },
}

/// Reads a file into the parser; the only I/O in this module.
pub fn read<T>(path: &str, parse: fn(&str) -> Result<T, ParseError>) -> Result<T, ReadError> {
    let text = std::fs::read_to_string(path).map_err(|source| ReadError::Io {
        path: path.into(),
        source,
    })?;
    parse(&text).map_err(|source| ReadError::Parse {
        path: path.into(),
        source,
    })
}

/// Parses a decimal field, naming it in the error.
pub(crate) fn dec(file: &'static str, line: usize, name: &str, s: &str) -> Result<u64, ParseError> {
    s.parse()
        .map_err(|_| ParseError::line(file, line, format!("{name}: not a number: {s:?}")))
}

/// Parses a hexadecimal field (no `0x`), naming it in the error.
pub(crate) fn hex(file: &'static str, line: usize, name: &str, s: &str) -> Result<u64, ParseError> {
    u64::from_str_radix(s, 16)
        .map_err(|_| ParseError::line(file, line, format!("{name}: not hexadecimal: {s:?}")))
}
