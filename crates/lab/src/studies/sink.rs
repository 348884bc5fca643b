//! `lab sink` and `lab flood`: the packet-rate study of the Red Hat article on UDP receive
//! and the NFV testing and tuning sheet, on the veth topology.
//!
//! `lab sink`: one `firehose sink` (one worker, on the server CPU) receives from a `firehose
//! flood --io sendmmsg` in the client namespace with one thread per receive queue and 16
//! flows per thread (source ports spread the flows over the queues), for each receive queue
//! count (a group of cells: `ethtool -L` on both veth ends, GRO on the receiving end so that
//! each rx queue has its own NAPI) and each receive mode; beside them udp_sink and `sockperf
//! sr` where installed. After the measured repetitions, one more run per mode samples the
//! receiving CPU with perf for the kernel symbols that bound it.
//!
//! `lab flood`: each send mode of `firehose flood` (one thread, on the client CPU) at each
//! RFC 2544 frame size into a receiver that costs nothing: an XDP_DROP program on the
//! receiving veth, held by `firehose lab xdp-drop` inside the server namespace (its BPF
//! link, and so the program, goes with that process however it ends); the client has a
//! permanent neighbour entry for the server, since ARP replies never come. Beside them
//! trafgen (AF_PACKET, bypassing the qdisc like `--io packet`), `iperf3 -u` (which needs its
//! TCP control connection, so its cells run with the program off and iperf3's server
//! receiving) and `sockperf tp`.
//!
//! Every cell runs once per repetition, in turn (interleaved); two host samples around the
//! measured window give the processes' and the host's CPU time and the kernel's drop
//! counters; medians with min-max over the repetitions.

mod report;
mod start;

pub use report::{flood_targets, sink_targets, Profile, Row};

use crate::cputime::{self, Scope};
use crate::loss::LossAttribution;
use crate::peers::perf::{Recording, Symbol};
use crate::peers::udp_sink;
use crate::report::Page;
use crate::sample::{HostSample, Watch, Window};
use crate::stats::Summary;
use crate::study::{Event, Lab, Outcome, Plan, Ran, Study};
use crate::topology::{run_id, Side, Topology, VETH_SERVER_ADDR};
use crate::{cmd, LabError, LabResult};
use serde::Serialize;
use start::{mac, Running};
use std::time::{Duration, Instant};

/// RFC 2544 frame sizes (bytes on the wire, FCS included).
pub const RFC2544_FRAMES: [usize; 7] = [64, 128, 256, 512, 1024, 1280, 1518];

/// Flows of the generator per receive queue: enough source ports that the hash spreads
/// them over every queue.
const FLOWS_PER_QUEUE: usize = 16;

/// Which study.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Kind {
    Sink,
    Flood,
}

impl Kind {
    pub fn name(self) -> &'static str {
        match self {
            Kind::Sink => "sink",
            Kind::Flood => "flood",
        }
    }
}

/// What is measured in a cell: a receiver (lab sink) or a sender (lab flood).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Subject {
    /// `firehose sink --io MODE`.
    Sink(String),
    /// udp_sink --recvmsg.
    UdpSink,
    /// `sockperf sr`, the receiving side of sockperf's throughput mode.
    Sockperf,
    /// `firehose flood --io MODE`.
    Flood(String),
    /// trafgen (netsniff-ng): AF_PACKET TX ring, qdisc bypassed.
    Trafgen,
    /// `iperf3 -u -b 0`.
    Iperf3,
    /// `sockperf tp`: sockperf's throughput mode, the sending side (no answers needed).
    SockperfTp,
}

impl Subject {
    /// The name in tables: the mode, or the peer's name.
    pub fn name(&self) -> String {
        match self {
            Subject::Sink(m) | Subject::Flood(m) => m.clone(),
            Subject::UdpSink => "udp_sink".into(),
            Subject::Sockperf => "sockperf sr".into(),
            Subject::Trafgen => "trafgen".into(),
            Subject::Iperf3 => "iperf3 -u".into(),
            Subject::SockperfTp => "sockperf tp".into(),
        }
    }

    /// The program a peer needs, `None` for firehose itself.
    pub fn program(&self) -> Option<&'static str> {
        match self {
            Subject::Sink(_) | Subject::Flood(_) => None,
            Subject::UdpSink => Some("udp_sink"),
            Subject::Sockperf | Subject::SockperfTp => Some("sockperf"),
            Subject::Trafgen => Some("trafgen"),
            Subject::Iperf3 => Some("iperf3"),
        }
    }
}

/// One configuration.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Cell {
    pub subject: Subject,
    /// Receive queues of both veth ends (lab flood: 1).
    pub queues: usize,
    /// Frame size on the wire.
    pub frame: usize,
}

impl Cell {
    pub fn name(&self) -> String {
        match self.subject {
            Subject::Sink(_) | Subject::UdpSink | Subject::Sockperf => {
                format!("{} q{}", self.subject.name(), self.queues)
            }
            _ => format!("{} {}B", self.subject.name(), self.frame),
        }
    }
}

/// What to run.
#[derive(Debug, Clone)]
pub struct PacketStudy {
    pub kind: Kind,
    /// Receive (sink) or send (flood) modes, by their command-line names.
    pub modes: Vec<String>,
    /// The modes this build has (the targets say when one is not in it).
    pub available: Vec<String>,
    /// Peers to run beside them (absent ones are reported, not run).
    pub peers: Vec<Subject>,
    /// Receive queue counts (lab sink); veth ends get the largest.
    pub queues: Vec<usize>,
    /// Frame sizes (lab flood; lab sink uses the first).
    pub frames: Vec<usize>,
    /// The measured window of each trial (any fraction of a second, at least 1 s).
    pub duration: Duration,
    pub warmup: Duration,
    /// Sample the receiving CPU with perf once per mode (lab sink).
    pub profile: bool,
    /// The receiving CPU's profile per mode, or why there is none (after the repetitions).
    profiles: Vec<Profile>,
    next_port: u16,
}

impl PacketStudy {
    pub fn new(kind: Kind, modes: Vec<String>, peers: Vec<Subject>) -> PacketStudy {
        PacketStudy {
            kind,
            available: modes.clone(),
            modes,
            peers,
            queues: vec![1],
            frames: vec![64],
            duration: Duration::from_secs(3),
            warmup: Duration::from_secs(1),
            profile: false,
            profiles: Vec::new(),
            next_port: 7400,
        }
    }
}

/// The plan: every cell of the study.
pub fn cells(o: &PacketStudy) -> Vec<Cell> {
    let mut out = Vec::new();
    let (outer, subjects): (Vec<(usize, usize)>, Vec<Subject>) = match o.kind {
        Kind::Sink => {
            let frame = o.frames.first().copied().unwrap_or(64);
            (
                o.queues.iter().map(|&q| (q, frame)).collect(),
                o.modes.iter().map(|m| Subject::Sink(m.clone())).collect(),
            )
        }
        Kind::Flood => (
            o.frames.iter().map(|&f| (1, f)).collect(),
            o.modes.iter().map(|m| Subject::Flood(m.clone())).collect(),
        ),
    };
    for (queues, frame) in outer {
        for subject in subjects.iter().chain(&o.peers) {
            out.push(Cell {
                subject: subject.clone(),
                queues,
                frame,
            });
        }
    }
    out
}

/// UDP payload of an IPv4 frame of `frame` bytes on the wire.
pub fn payload_of(frame: usize) -> usize {
    frame.saturating_sub(14 + 20 + 8 + 4)
}

/// Why a peer is not run here (the reason after "not measured: "), `None` when it can be.
pub fn peer_absent(s: &Subject) -> Option<String> {
    let prog = s.program()?;
    if cmd::installed(prog) {
        return None;
    }
    Some(match s {
        Subject::UdpSink => format!("udp_sink not installed: {}", udp_sink::HINT),
        Subject::Trafgen => "trafgen not installed: apt-get install netsniff-ng".into(),
        _ => format!("{prog} not installed: apt-get install {prog}"),
    })
}

/// What one trial saw: the window between two host samples, what the measured side
/// counted, and the sender's process tree CPU over the window.
#[derive(Debug, Clone)]
pub struct Measured {
    pub window: Window,
    pub pps: f64,
    /// The receiver's own count of what it lost (socket drops, ring drops).
    pub own_drops: u64,
    /// Udp InErrors (RcvbufErrors included; server namespace) and softnet dropped.
    pub kernel_drops: u64,
    pub sender_cpu_s: Option<f64>,
    /// Where the sink's drops went (as root).
    pub loss: Option<LossAttribution>,
}

/// The figures of one trial.
#[derive(Debug, Clone, Serialize)]
pub struct Figures {
    pub pps: f64,
    /// Receiving process CPU per packet (lab sink).
    pub receiver_cpu_us_per_packet: Option<f64>,
    /// Sending process CPU per packet.
    pub sender_cpu_us_per_packet: Option<f64>,
    /// Every CPU's busy time (/proc/stat) per packet.
    pub host_cpu_us_per_packet: Option<f64>,
    pub own_drops: u64,
    pub kernel_drops: u64,
    /// Listed once in the document, under `loss_attribution`.
    #[serde(skip)]
    pub loss: Option<LossAttribution>,
}

/// A trial's figures (or why the cell cannot run here), and the receiving CPU's profile
/// when one was asked for.
type TrialResult = (Outcome<Measured>, Option<Result<Vec<Symbol>, String>>);

impl PacketStudy {
    /// Runs one trial; `profile` records the receiving CPU over the window.
    fn run_trial(
        &mut self,
        lab: &Lab<'_>,
        cell: &Cell,
        tag: &str,
        profile: bool,
    ) -> LabResult<TrialResult> {
        if let Some(why) = peer_absent(&cell.subject) {
            return Ok((Outcome::Skip(why), None));
        }
        self.next_port += 1;
        let port = self.next_port;
        // Whole seconds for the senders and receivers (peers take no fractions): long
        // enough to cover the warm-up and the window.
        let total_s = (self.warmup + self.duration).as_secs_f64().ceil() as u64 + 1;
        let started = match self.kind {
            Kind::Sink => start::sink_cell(lab, cell, port, tag, total_s),
            Kind::Flood => start::flood_cell(lab, cell, port, tag, total_s),
        };
        let mut run = match started {
            Ok(r) => r,
            // A mode the kernel refuses: the cell cannot run here.
            Err(LabError::Run(why)) => return Ok((Outcome::Skip(why), None)),
            Err(e) => return Err(e),
        };
        let watch = Watch {
            server_pid: run.receiver.pid(),
            client_pid: run.sender.pid(),
            port,
            separate_ns: true,
        };
        let t0 = Instant::now();
        lab.sleep_until(t0 + self.warmup + Duration::from_millis(300))?;
        if let Some(st) = run.sender.exited() {
            let why = format!(
                "the sender exited early ({st}): {}",
                run.sender.stderr_tail()
            );
            return Ok((Outcome::Skip(why), None));
        }
        // The window opens once the sender sends: a peer's own start-up (sockperf's warm-up
        // stage takes over a second) would otherwise be measured as 0 pps.
        if !start::sending(lab, Duration::from_secs(10))? {
            let why = format!(
                "the sender sent nothing within 10 s: {}",
                run.sender.stderr_tail()
            );
            return Ok((Outcome::Skip(why), None));
        }
        let server_cpu = lab.placement.server_cpus[0];
        let window = self.duration.saturating_sub(Duration::from_millis(500));
        let rec = profile
            .then(|| Recording::start(server_cpu, window, &lab.workdir, tag))
            .flatten();
        let tx0 = start::tx_packets(lab)?;
        // The sender's whole process tree: trafgen sends from a forked child.
        let tree = |pid| cputime::seconds(pid, Scope::Tree).ok();
        let send0 = tree(watch.client_pid);
        let before = HostSample::take(&watch)?;
        lab.sleep_until(Instant::now() + window)?;
        let after = HostSample::take(&watch)?;
        let send1 = tree(watch.client_pid);
        let tx1 = start::tx_packets(lab)?;
        let w = Window::between(&before, &after);
        let sent = if cell.subject == Subject::Trafgen {
            // trafgen has no time limit: it sends until told to stop.
            Some(run.sender.stop("INT", Duration::from_secs(5)))
        } else {
            let by = t0 + Duration::from_secs(total_s + 10);
            run.sender.wait_until(by, Some(lab.stop))?
        };
        let profile = rec.map(|r| r.finish(8));
        // The receiver prints its summary on SIGINT (udp_sink's partial round is lost: it
        // reports finished rounds only).
        run.receiver.stop("INT", Duration::from_secs(5));
        let sender_ok = match sent {
            Some(s) => s.success() || cell.subject == Subject::Trafgen,
            None => false,
        };
        if !sender_ok {
            let why = format!("the sender failed: {}", run.sender.stderr_tail());
            return Ok((Outcome::Skip(why), profile));
        }
        let counted = match counted(cell, &run, &w, tx1.saturating_sub(tx0))? {
            Ok(c) => c,
            Err(why) => return Ok((Outcome::Skip(why), profile)),
        };
        let (pps, own_drops, kernel_drops) = counted;
        let loss = match (&cell.subject, &run.sink_json) {
            (Subject::Sink(_), Some(p)) => std::fs::read_to_string(p)
                .ok()
                .and_then(|t| serde_json::from_str::<serde_json::Value>(&t).ok())
                .and_then(|v| LossAttribution::from_document("sink", own_drops, &v)),
            _ => None,
        };
        let m = Measured {
            loss,
            window: w,
            pps,
            own_drops,
            kernel_drops,
            sender_cpu_s: send0.zip(send1).map(|(a, b)| b - a),
        };
        Ok((Outcome::Done(m), profile))
    }
}

/// (pps, the receiver's own drops, the kernel's drops) of a trial; `Ok(Err(why))` when
/// the measured side counted nothing it could report.
fn counted(
    cell: &Cell,
    run: &Running,
    w: &Window,
    sent: u64,
) -> LabResult<Result<(f64, u64, u64), String>> {
    let secs = w.seconds.max(1e-9);
    if sent == 0 {
        return Ok(Err("nothing left the sender over the window".into()));
    }
    // InErrors holds RcvbufErrors.
    let window_drops = w.udp_server.in_errors + w.softnet_dropped();
    Ok(Ok(match &cell.subject {
        Subject::Sink(_) => {
            let p = run.sink_json.as_ref().expect("sink cells write JSON");
            let r = start::read_sink(p)
                .map_err(|e| LabError::Run(format!("{e}: {}", run.receiver.stderr_tail())))?;
            // The sink's host figures leave out what packet mode's port-holding socket
            // discards by design.
            (
                r.rates.pps,
                r.socket_drops + r.ring_drops,
                r.host.udp_in_errors + r.host.softnet_dropped,
            )
        }
        Subject::UdpSink => match Summary::of(udp_sink::rates(&run.receiver.stdout())) {
            Some(s) => (s.median, 0, window_drops),
            None => {
                return Ok(Err(format!(
                    "udp_sink finished no round: {}",
                    run.receiver.stderr_tail()
                )))
            }
        },
        // sockperf sr keeps no count of its own: the datagrams the kernel queued to sockets
        // in the server namespace, which in steady state is what the reader took.
        Subject::Sockperf => (
            w.udp_server.in_datagrams as f64 / secs,
            w.socket_drops,
            window_drops,
        ),
        // Senders: what the client veth transmitted over the window.
        _ => (sent as f64 / secs, 0, window_drops),
    }))
}

impl Study for PacketStudy {
    type Cell = Cell;
    type Measured = Measured;
    type Trial = Figures;
    type Row = Row;

    fn name(&self) -> String {
        self.kind.name().into()
    }

    fn plan(&mut self, lab: &mut Lab<'_>) -> LabResult<Plan<Cell>> {
        if self.modes.is_empty() && self.peers.is_empty() {
            return Err(LabError::Usage(
                "nothing to run: give at least one mode or peer".into(),
            ));
        }
        if lab.placement.client_cpus.is_empty() {
            return Err(LabError::Usage(
                "the sender needs a CPU apart from the receiver's".into(),
            ));
        }
        let max_q = self.queues.iter().copied().max().unwrap_or(1);
        lab.topo = Topology::veth(&run_id(None), max_q)?;
        match self.kind {
            // Each rx queue its own NAPI instance: veth polls per queue only with GRO (or XDP).
            Kind::Sink => {
                let sdev = lab.topo.dev(Side::Server);
                lab.topo
                    .exec(Side::Server, &["ethtool", "-K", &sdev, "gro", "on"])?;
            }
            // The XDP_DROP receiver never answers ARP: a permanent neighbour entry instead.
            Kind::Flood => {
                let m = mac(lab, Side::Server)?
                    .iter()
                    .map(|b| format!("{b:02x}"))
                    .collect::<Vec<_>>()
                    .join(":");
                let cdev = lab.topo.dev(Side::Client);
                let addr = VETH_SERVER_ADDR.to_string();
                lab.topo.exec(
                    Side::Client,
                    &[
                        "ip",
                        "neigh",
                        "replace",
                        &addr,
                        "lladdr",
                        &m,
                        "dev",
                        &cdev,
                        "nud",
                        "permanent",
                    ],
                )?;
            }
        }
        let note = match self.kind {
            Kind::Sink => "on veth the receive softirq runs on the sender's CPUs: the receiving CPU's time is the receive call's; host CPU per packet holds both",
            Kind::Flood => "receiver: XDP_DROP on the server veth (iperf3 -u: its own server, the program off)",
        };
        let mut plan = Plan::of(cells(self));
        plan.notes.push(note.into());
        Ok(plan)
    }

    fn cell_name(&self, c: &Cell) -> String {
        c.name()
    }

    fn group(&self, c: &Cell) -> Option<String> {
        (self.kind == Kind::Sink).then(|| format!("q{}", c.queues))
    }

    /// `ethtool -L DEV rx Q tx Q` on both ends.
    fn enter(&mut self, lab: &mut Lab<'_>, c: &Cell) -> LabResult<Option<String>> {
        start::set_queues(lab, c.queues)?;
        Ok(None)
    }

    fn trial(&mut self, lab: &mut Lab<'_>, c: &Cell, rep: usize) -> LabResult<Outcome<Measured>> {
        Ok(self
            .run_trial(
                lab,
                c,
                &format!("r{rep}-{}", c.name().replace(' ', "-")),
                false,
            )?
            .0)
    }

    fn metrics(&self, _c: &Cell, m: Measured) -> Figures {
        let packets = m.pps * m.window.seconds;
        let per = |cpu_s: f64| (packets > 0.0 && cpu_s > 0.0).then(|| cpu_s * 1e6 / packets);
        Figures {
            pps: m.pps,
            receiver_cpu_us_per_packet: (self.kind == Kind::Sink)
                .then(|| per(m.window.server_cpu_s))
                .flatten(),
            sender_cpu_us_per_packet: m.sender_cpu_s.and_then(per),
            host_cpu_us_per_packet: m.window.host_cpu_s.and_then(per),
            own_drops: m.own_drops,
            kernel_drops: m.kernel_drops,
            loss: m.loss,
        }
    }

    fn loss<'t>(&self, t: &'t Figures) -> Option<&'t LossAttribution> {
        t.loss.as_ref()
    }

    /// lab sink: one more run per mode at the largest queue count, the receiving CPU
    /// recorded with perf (measured runs are never profiled).
    fn finish(
        &mut self,
        lab: &mut Lab<'_>,
        ran: &Ran<Cell, Figures>,
        progress: &mut dyn FnMut(Event<'_>),
    ) -> LabResult<()> {
        if !(self.profile && self.kind == Kind::Sink) {
            return Ok(());
        }
        let max_q = self.queues.iter().copied().max().unwrap_or(1);
        let cells: Vec<Cell> = ran
            .cells
            .iter()
            .filter(|c| c.cell.queues == max_q && c.skipped.is_none())
            .map(|c| c.cell.clone())
            .collect();
        if !cells.is_empty() {
            start::set_queues(lab, max_q)?;
        }
        for cell in cells {
            lab.check()?;
            let name = cell.name();
            progress(Event::Note(&format!("profiling the receiving CPU: {name}")));
            let tag = format!("prof-{}", name.replace(' ', "-"));
            let (_, prof) = self.run_trial(lab, &cell, &tag, true)?;
            let prof = prof.unwrap_or_else(|| {
                Err("perf is not installed (apt-get install linux-perf)".into())
            });
            self.profiles.push(Profile::of(name, prof));
        }
        Ok(())
    }

    fn rows(&self, ran: &Ran<Cell, Figures>) -> Vec<Row> {
        ran.cells
            .iter()
            .map(|c| Row::new(&c.cell, &c.trials, c.skipped.clone(), self.kind))
            .collect()
    }

    fn page(&self, ran: &Ran<Cell, Figures>, rows: &[Row]) -> Page {
        report::page(self, ran, rows)
    }

    fn extra(
        &self,
        _ran: &Ran<Cell, Figures>,
        rows: &[Row],
    ) -> serde_json::Map<String, serde_json::Value> {
        let mut m = serde_json::Map::new();
        m.insert("duration_s".into(), self.duration.as_secs_f64().into());
        m.insert(
            "targets".into(),
            serde_json::json!(report::targets(self, rows)),
        );
        m.insert("profiles".into(), serde_json::json!(self.profiles));
        m
    }
}

#[cfg(test)]
mod tests;
