//! `firehose lab stream`: the Bloomberg netdev 0x18 talk's matrix on the veth topology.
//! Each block of cells is one set of link settings (MTU, GRO, TSO/GSO, BIG TCP), applied
//! on both veth ends inside the namespaces, read back, and restored when the block ends;
//! inside a block every sender x receiver mode of `firehose stream` runs, and iperf3 (its
//! copy path and its sendfile `-Z` path) beside it. Repetitions are interleaved: the whole
//! plan runs once, then again.
//!
//! Both tools are measured alike, from outside: process CPU is what each child used over
//! its life (read from our own cutime/cstime around reaping it), host CPU is /proc/stat
//! over the CPUs the run used, from the sender's start to its exit, and throughput is what
//! the receiving side counted. ROI = (Gbit/s)^2 / CPU cores, as in the talk.

mod report;
mod trial;

pub use report::{Ranked, StreamMatrixReport};
pub use trial::{Engine, MatrixTrial};

use crate::env::Environment;
use crate::linkset::{self, Applied, LinkSettings, LinkState, NO_BIG_TCP};
use crate::proc;
use crate::topology::{run_id, Topology};
use crate::{LabError, LabResult};
use serde::Serialize;
use std::path::PathBuf;
use std::sync::atomic::AtomicBool;
use std::sync::Arc;
use std::time::Duration;

/// A set of link settings, by the name `--cells` uses (the MTU comes from `--mtus`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Profile {
    /// GRO on, TSO/GSO on, gso/gro_max_size 65536.
    Base,
    /// The receiver without GRO.
    GroOff,
    /// The sender without TSO and GSO: the stack segments every MSS.
    TsoOff,
    /// BIG TCP, gso/gro_max_size 131072.
    BigTcp128k,
    /// BIG TCP, gso/gro_max_size 185000 (the largest the talk used).
    BigTcp185k,
}

impl Profile {
    pub const ALL: [Profile; 5] = [
        Profile::Base,
        Profile::GroOff,
        Profile::TsoOff,
        Profile::BigTcp128k,
        Profile::BigTcp185k,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Profile::Base => "base",
            Profile::GroOff => "gro-off",
            Profile::TsoOff => "tso-off",
            Profile::BigTcp128k => "big-tcp-128k",
            Profile::BigTcp185k => "big-tcp-185k",
        }
    }

    pub fn from_name(s: &str) -> Option<Profile> {
        Profile::ALL.into_iter().find(|p| p.name() == s)
    }

    /// The settings of this profile at `mtu`.
    pub fn settings(self, mtu: u32) -> LinkSettings {
        let mut s = LinkSettings {
            mtu,
            gro: true,
            tso: true,
            max_size: NO_BIG_TCP,
        };
        match self {
            Profile::Base => {}
            Profile::GroOff => s.gro = false,
            Profile::TsoOff => s.tso = false,
            Profile::BigTcp128k => s.max_size = 131072,
            Profile::BigTcp185k => s.max_size = 185000,
        }
        s
    }
}

/// What to run.
#[derive(Debug, Clone)]
pub struct StreamMatrixOptions {
    /// The `firehose` binary (runs `firehose stream` on both sides).
    pub firehose: PathBuf,
    pub mtus: Vec<u32>,
    pub profiles: Vec<Profile>,
    /// Firehose mode pairs and iperf3 peers, in the order they run inside a block.
    pub engines: Vec<Engine>,
    pub repetitions: usize,
    /// Sending time per run, whole seconds (iperf3 -t).
    pub duration: Duration,
    pub flows: usize,
    pub msg_size: usize,
    pub server_cpus: Vec<usize>,
    pub client_cpus: Vec<usize>,
    /// Logs of every child go here (created; removed by the caller if it wants).
    pub logs: PathBuf,
    /// Set by SIGINT/SIGTERM: the run stops, restores the links and deletes the namespaces.
    pub stop: Option<Arc<AtomicBool>>,
}

/// One block's settings: what was asked, what the kernel read back, and whether the
/// restore after each of its repetitions read back as before.
#[derive(Debug, Clone, Serialize)]
pub struct BlockRecord {
    pub mtu: u32,
    pub profile: Profile,
    pub requested: LinkSettings,
    /// Server end then client end, as read back after setting (first repetition).
    pub applied: Vec<LinkState>,
    /// Both ends as read back before the block was applied (first repetition).
    pub before: Vec<LinkState>,
    /// Both ends as read back after each repetition's restore.
    pub restored: Vec<Vec<LinkState>>,
    /// Why the kernel refused these settings, if it did (the block's cells did not run).
    pub error: Option<String>,
}

/// A progress line for the terminal.
pub struct Progress<'a> {
    pub done: usize,
    pub total: usize,
    pub cell: &'a str,
    pub repetition: usize,
}

/// The name of one cell.
pub fn cell_name(mtu: u32, p: Profile, e: &Engine) -> String {
    format!("{mtu} {} {}", p.name(), e.name())
}

/// Runs the matrix. Needs root (namespaces); an interruption returns `Interrupted` after
/// putting everything back.
pub fn run(
    o: &StreamMatrixOptions,
    progress: &mut dyn FnMut(&Progress<'_>),
) -> LabResult<StreamMatrixReport> {
    if let Some(m) = linkset::tools_missing() {
        return Err(LabError::Usage(m));
    }
    if o.engines.iter().any(|e| matches!(e, Engine::Iperf3 { .. }))
        && !crate::cmd::installed("iperf3")
    {
        return Err(LabError::Usage(format!(
            "iperf3 is not installed ({}); or leave it out with --peers none",
            crate::cmd::install_hint("iperf3")
        )));
    }
    std::fs::create_dir_all(&o.logs).map_err(|e| LabError::io(o.logs.display(), e))?;
    let started_unix = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    let environment = Environment::capture();
    let queues = o.server_cpus.len().max(o.client_cpus.len()).max(1);
    let topo = Topology::veth(&run_id(None), queues)?;
    let addr = topo.add_ipv6()?;
    let stop = o.stop.as_deref();
    let blocks: Vec<(u32, Profile)> = o
        .mtus
        .iter()
        .flat_map(|&m| o.profiles.iter().map(move |&p| (m, p)))
        .collect();
    let mut records: Vec<BlockRecord> = blocks
        .iter()
        .map(|&(mtu, profile)| BlockRecord {
            mtu,
            profile,
            requested: profile.settings(mtu),
            applied: Vec::new(),
            before: Vec::new(),
            restored: Vec::new(),
            error: None,
        })
        .collect();
    let mut trials: Vec<MatrixTrial> = Vec::new();
    // (cell, reason) for cells the kernel refused: they are not run again.
    let mut unsupported: Vec<(String, String)> = Vec::new();
    let mut failed: Vec<(String, String)> = Vec::new();
    let total = blocks.len() * o.engines.len() * o.repetitions;
    let mut done = 0;
    let mut port: u16 = 5300;
    for rep in 1..=o.repetitions {
        for (b, &(mtu, profile)) in blocks.iter().enumerate() {
            proc::check(stop)?;
            let rec = &mut records[b];
            if rec.error.is_some() {
                done += o.engines.len();
                continue;
            }
            let applied = match Applied::apply(&topo, &rec.requested) {
                Ok(a) => a,
                Err(e @ LabError::Command(_)) => {
                    rec.error = Some(e.to_string());
                    done += o.engines.len();
                    continue;
                }
                Err(e) => return Err(e),
            };
            if rec.applied.is_empty() {
                rec.applied = applied.state.to_vec();
                rec.before = applied.saved().to_vec();
            }
            for e in &o.engines {
                let cell = cell_name(mtu, profile, e);
                progress(&Progress {
                    done,
                    total,
                    cell: &cell,
                    repetition: rep,
                });
                done += 1;
                if unsupported.iter().any(|(c, _)| *c == cell) {
                    continue;
                }
                port = if port >= 60000 { 5300 } else { port + 1 };
                let spec = trial::Spec {
                    topo: &topo,
                    addr,
                    port,
                    opts: o,
                    cell: &cell,
                    repetition: rep,
                };
                match trial::run(&spec, e) {
                    Ok(trial::Outcome::Done(t)) => trials.push(*t),
                    Ok(trial::Outcome::Unsupported(why)) => unsupported.push((cell, why)),
                    Err(LabError::Interrupted) => return Err(LabError::Interrupted),
                    Err(err) => failed.push((cell, err.to_string())),
                }
            }
            rec.restored.push(applied.restore()?.to_vec());
        }
    }
    let mut rep = StreamMatrixReport::build(o, records, trials, &unsupported, &failed);
    rep.environment = Some(environment);
    rep.started_unix = started_unix;
    Ok(rep)
}
