//! `firehose lab stream`: the Bloomberg netdev 0x18 talk's matrix on the veth topology.
//! A group of cells is one set of link settings (MTU, GRO, TSO/GSO, BIG TCP), applied on
//! both veth ends inside the namespaces, read back, and restored when the group ends;
//! inside it every sender x receiver mode of `firehose stream` runs, and iperf3 (its copy
//! path and its sendfile `-Z` path) beside it. Repetitions are interleaved: the whole plan
//! runs once, then again.
//!
//! Both tools are measured alike, from outside: process CPU is what each child used over
//! its life (read from our own cutime/cstime around reaping it), host CPU is wall time
//! less /proc/stat idle on the CPUs the run used, from the sender's start to its exit, and throughput is what
//! the receiving side counted. ROI = (Gbit/s)^2 / CPU cores, as in the talk.

mod report;
mod trial;

pub use report::{MatrixRow, Ranked};
pub use trial::{Engine, MatrixTrial};

use crate::linkset::{self, Applied, LinkSettings, LinkState, NO_BIG_TCP};
use crate::report::Page;
use crate::study::{Lab, Outcome, Plan, Ran, Study};
use crate::topology::{run_id, Topology};
use crate::{cmd, LabError, LabResult};
use serde::Serialize;
use std::net::IpAddr;
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
pub struct StreamMatrix {
    pub mtus: Vec<u32>,
    pub profiles: Vec<Profile>,
    /// Firehose mode pairs and iperf3 peers, in the order they run inside a block.
    pub engines: Vec<Engine>,
    /// Sending time per run, whole seconds (iperf3 -t).
    pub duration: Duration,
    pub flows: usize,
    pub msg_size: usize,
    /// One record per block, in plan order; filled as the blocks are entered.
    blocks: Vec<BlockRecord>,
    /// The block entered last and its settings in force.
    current: Option<(usize, Applied)>,
    /// The server's IPv6 address, added in `plan`.
    addr: Option<IpAddr>,
    port: u16,
}

impl StreamMatrix {
    pub fn new(mtus: Vec<u32>, profiles: Vec<Profile>, engines: Vec<Engine>) -> StreamMatrix {
        StreamMatrix {
            mtus,
            profiles,
            engines,
            duration: Duration::from_secs(5),
            flows: 16,
            msg_size: 512 << 10,
            blocks: Vec::new(),
            current: None,
            addr: None,
            port: 5300,
        }
    }
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

/// One cell: a block's settings and who moves the bytes.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Cell {
    pub mtu: u32,
    pub profile: Profile,
    pub engine: Engine,
}

/// The name of one cell.
pub fn cell_name(mtu: u32, p: Profile, e: &Engine) -> String {
    format!("{mtu} {} {}", p.name(), e.name())
}

impl StreamMatrix {
    fn block_of(&self, c: &Cell) -> usize {
        self.blocks
            .iter()
            .position(|b| b.mtu == c.mtu && b.profile == c.profile)
            .expect("planned")
    }
}

impl Study for StreamMatrix {
    type Cell = Cell;
    type Measured = MatrixTrial;
    type Trial = MatrixTrial;
    type Row = MatrixRow;

    fn name(&self) -> String {
        "stream".into()
    }

    fn plan(&mut self, lab: &mut Lab<'_>) -> LabResult<Plan<Cell>> {
        if let Some(m) = linkset::tools_missing() {
            return Err(LabError::Usage(m));
        }
        if self.engines.iter().any(|e| e.is_peer()) && !cmd::installed("iperf3") {
            return Err(LabError::Usage(format!(
                "iperf3 is not installed ({}); or leave it out with --peers none",
                cmd::install_hint("iperf3")
            )));
        }
        let p = &lab.placement;
        let queues = p.server_cpus.len().max(p.client_cpus.len()).max(1);
        lab.topo = Topology::veth(&run_id(None), queues)?;
        self.addr = Some(lab.topo.add_ipv6()?);
        let mut cells = Vec::new();
        for &mtu in &self.mtus {
            for &profile in &self.profiles {
                self.blocks.push(BlockRecord {
                    mtu,
                    profile,
                    requested: profile.settings(mtu),
                    applied: Vec::new(),
                    before: Vec::new(),
                    restored: Vec::new(),
                    error: None,
                });
                for &engine in &self.engines {
                    cells.push(Cell {
                        mtu,
                        profile,
                        engine,
                    });
                }
            }
        }
        Ok(Plan::of(cells))
    }

    fn cell_name(&self, c: &Cell) -> String {
        cell_name(c.mtu, c.profile, &c.engine)
    }

    fn group(&self, c: &Cell) -> Option<String> {
        Some(format!("{} {}", c.mtu, c.profile.name()))
    }

    fn enter(&mut self, lab: &mut Lab<'_>, c: &Cell) -> LabResult<Option<String>> {
        let b = self.block_of(c);
        if let Some(e) = &self.blocks[b].error {
            return Ok(Some(e.clone()));
        }
        match Applied::apply(&lab.topo, &self.blocks[b].requested) {
            Ok(a) => {
                let rec = &mut self.blocks[b];
                if rec.applied.is_empty() {
                    rec.applied = a.state.to_vec();
                    rec.before = a.saved().to_vec();
                }
                self.current = Some((b, a));
                Ok(None)
            }
            Err(e @ LabError::Command(_)) => {
                self.blocks[b].error = Some(e.to_string());
                Ok(Some(e.to_string()))
            }
            Err(e) => Err(e),
        }
    }

    fn leave(&mut self, lab: &mut Lab<'_>) -> LabResult<()> {
        if let Some((b, a)) = self.current.take() {
            self.blocks[b].restored.push(a.restore(&lab.topo)?.to_vec());
        }
        Ok(())
    }

    fn trial(
        &mut self,
        lab: &mut Lab<'_>,
        c: &Cell,
        rep: usize,
    ) -> LabResult<Outcome<MatrixTrial>> {
        self.port = if self.port >= 60000 {
            5300
        } else {
            self.port + 1
        };
        let spec = trial::Spec {
            addr: self.addr.expect("planned"),
            port: self.port,
            matrix: self,
            cell: &self.cell_name(c),
            repetition: rep + 1,
        };
        match trial::run(lab, &spec, &c.engine) {
            Ok(o) => Ok(o),
            Err(LabError::Interrupted) => Err(LabError::Interrupted),
            // A run that failed otherwise is kept in its row; the cell runs again next
            // repetition.
            Err(e) => Ok(Outcome::Failed(e.to_string())),
        }
    }

    fn metrics(&self, _c: &Cell, t: MatrixTrial) -> MatrixTrial {
        t
    }

    fn rows(&self, ran: &Ran<Cell, MatrixTrial>) -> Vec<MatrixRow> {
        report::rows(self, ran)
    }

    fn loss<'t>(&self, t: &'t MatrixTrial) -> Option<&'t crate::loss::LossAttribution> {
        t.loss.as_ref()
    }

    fn page(&self, ran: &Ran<Cell, MatrixTrial>, rows: &[MatrixRow]) -> Page {
        report::page(self, ran, rows)
    }

    fn extra(
        &self,
        _ran: &Ran<Cell, MatrixTrial>,
        rows: &[MatrixRow],
    ) -> serde_json::Map<String, serde_json::Value> {
        let mut m = serde_json::Map::new();
        m.insert("topology".into(), "veth".into());
        m.insert("family".into(), "ipv6".into());
        m.insert("duration_s".into(), self.duration.as_secs_f64().into());
        m.insert("flows".into(), self.flows.into());
        m.insert("msg_size".into(), self.msg_size.into());
        m.insert("blocks".into(), serde_json::json!(self.blocks));
        m.insert("ranking".into(), serde_json::json!(report::ranking(rows)));
        m.insert(
            "ratios".into(),
            serde_json::json!(report::peer_ratios(self, rows)),
        );
        m
    }
}
