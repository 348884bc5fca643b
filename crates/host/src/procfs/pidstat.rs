//! /proc/<pid>/stat and /proc/<pid>/task/<tid>/stat: CPU time of a process or thread and the
//! CPU it last ran on.

use super::{dec, ParseError};

const FILE: &str = "/proc/<pid>/stat";

/// The fields of a stat line that measurements use. Times are in clock ticks.
#[derive(Debug, Clone, Default, PartialEq, serde::Serialize)]
pub struct PidStat {
    /// The command name; may contain spaces and ')'.
    pub comm: String,
    pub state: char,
    /// Field 4, the parent's pid: walks a process tree (NSD forks its servers).
    pub ppid: u32,
    pub utime: u64,
    pub stime: u64,
    /// Fields 16 and 17: CPU time of children this process has waited for, so a wrapper
    /// shell's line gives the CPU a finished child used.
    pub cutime: u64,
    pub cstime: u64,
    /// Field 39, the CPU last run on; absent on very old kernels.
    pub processor: Option<usize>,
}

/// Parses one stat line. `comm` is taken up to the LAST ')' because it may contain ')'.
pub fn parse(text: &str) -> Result<PidStat, ParseError> {
    let open = text
        .find('(')
        .ok_or_else(|| ParseError::line(FILE, 1, "no '(' before comm"))?;
    let close = text
        .rfind(')')
        .filter(|&c| c > open)
        .ok_or_else(|| ParseError::line(FILE, 1, "no ')' after comm"))?;
    let comm = text[open + 1..close].to_string();
    // Field N of proc(5) is rest[N - 3]: rest starts at field 3, the state.
    let rest: Vec<&str> = text[close + 1..].split_whitespace().collect();
    let field = |n: usize| rest.get(n - 3).copied();
    let state = field(3)
        .and_then(|s| s.chars().next())
        .ok_or_else(|| ParseError::line(FILE, 1, "no state field"))?;
    let need = |n: usize, name: &str| {
        let s = field(n).ok_or_else(|| ParseError::line(FILE, 1, format!("no {name} field")))?;
        dec(FILE, 1, name, s)
    };
    Ok(PidStat {
        comm,
        state,
        ppid: need(4, "ppid")? as u32,
        utime: need(14, "utime")?,
        stime: need(15, "stime")?,
        cutime: need(16, "cutime")?,
        cstime: need(17, "cstime")?,
        processor: match field(39) {
            Some(s) => Some(dec(FILE, 1, "processor", s)? as usize),
            None => None,
        },
    })
}
