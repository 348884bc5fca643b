//! Starting the two sides of a cell in the lab's namespaces: the receiver (a sink, a peer,
//! the XDP_DROP holder or iperf3's server) and the sender (a flood or a peer).

use super::{payload_of, trafgen_conf, Cell, StudyOptions, Subject, FLOWS_PER_QUEUE};
use crate::proc::{self, Proc};
use crate::sample;
use crate::topology::{Side, Topology, VETH_CLIENT_ADDR, VETH_SERVER_ADDR};
use crate::{LabError, LabResult};
use std::path::PathBuf;
use std::sync::atomic::AtomicBool;
use std::time::{Duration, Instant};

/// The veth topology of a study with its settings applied.
pub(super) struct Lab<'a> {
    pub(super) topo: Topology,
    pub(super) o: &'a StudyOptions,
    pub(super) stop: &'a AtomicBool,
}

impl Lab<'_> {
    pub(super) fn exec(&self, side: Side, args: &[&str]) -> LabResult<String> {
        self.topo.exec(side, args)
    }

    /// `ethtool -L DEV rx Q tx Q` on both ends.
    pub(super) fn set_queues(&self, q: usize) -> LabResult<()> {
        let q = q.to_string();
        for side in [Side::Server, Side::Client] {
            let dev = self.topo.dev(side);
            self.exec(side, &["ethtool", "-L", &dev, "rx", &q, "tx", &q])?;
        }
        Ok(())
    }

    pub(super) fn tx_packets(&self) -> LabResult<u64> {
        let dev = self.topo.dev(Side::Client);
        let path = format!("/sys/class/net/{dev}/statistics/tx_packets");
        let t = self.exec(Side::Client, &["cat", &path])?;
        t.trim()
            .parse()
            .map_err(|_| LabError::Command(format!("{path}: not a number: {t}")))
    }

    pub(super) fn logs(&self) -> &std::path::Path {
        &self.o.workdir
    }

    /// Starts a program in one side's namespace, pinned to `cpus`.
    pub(super) fn spawn(
        &self,
        side: Side,
        cpus: &[usize],
        args: &[String],
        tag: &str,
    ) -> LabResult<Proc> {
        let mut c = self.topo.command(side, cpus, &args[0]);
        c.args(&args[1..]);
        Proc::spawn(c, tag, self.logs())
    }

    pub(super) fn firehose(&self, args: &[&str]) -> Vec<String> {
        std::iter::once(self.o.bin.to_string_lossy().into_owned())
            .chain(args.iter().map(|s| s.to_string()))
            .collect()
    }
}

fn strings(v: &[&str]) -> Vec<String> {
    v.iter().map(|s| s.to_string()).collect()
}

/// Waits until `pid` holds `port` (its socket is bound), or fails with its stderr.
fn wait_bound(p: &mut Proc, port: u16, stop: &AtomicBool) -> LabResult<()> {
    let by = Instant::now() + Duration::from_secs(15);
    while !sample::port_bound(p.pid(), port) {
        proc::check(Some(stop))?;
        if p.exited().is_some() || Instant::now() > by {
            return Err(LabError::Run(format!(
                "{} did not bind port {port}: {}",
                p.name(),
                p.stderr_tail()
            )));
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    Ok(())
}

/// The sides of a running trial and what is read at its end.
pub(super) struct Running {
    pub(super) receiver: Proc,
    pub(super) sender: Proc,
    pub(super) sink_json: Option<PathBuf>,
}

/// Starts the receiver and sender of a lab sink cell.
pub(super) fn start_sink_cell(
    lab: &Lab<'_>,
    cell: &Cell,
    port: u16,
    tag: &str,
    total_s: u64,
) -> LabResult<Running> {
    let o = lab.o;
    let listen = format!("{VETH_SERVER_ADDR}:{port}");
    let json = o.workdir.join(format!("{tag}-sink.json"));
    let (args, sink_json) = match &cell.subject {
        Subject::Sink(mode) => {
            let limit = (total_s + 10).to_string();
            let mut a = lab.firehose(&["sink", "--listen", &listen, "--io", mode, "--quiet"]);
            // AF_XDP takes one worker per receive queue (a queue without a socket would
            // drop its share); every other mode is one receiving worker.
            if mode != "xdp" {
                a.extend(strings(&["--workers", "1"]));
            }
            a.extend(strings(&["--duration", &limit, "--json-file"]));
            a.push(json.to_string_lossy().into_owned());
            (a, Some(json))
        }
        Subject::UdpSink => {
            // udp_sink times rounds of --count datagrams: many short rounds, line-buffered
            // so that those finished are in its output when it is stopped.
            let p = port.to_string();
            let a = [
                "stdbuf",
                "-oL",
                "udp_sink",
                "--recvmsg",
                "-l",
                &p,
                "-c",
                "20000",
            ];
            (strings(&[&a[..], &["-r", "100000"]].concat()), None)
        }
        Subject::Sockperf => {
            let a = VETH_SERVER_ADDR.to_string();
            (
                strings(&["sockperf", "sr", "-i", &a, "-p", &port.to_string()]),
                None,
            )
        }
        other => return Err(LabError::Run(format!("{other:?} is not a receiver"))),
    };
    let mut receiver = lab.spawn(Side::Server, &[o.server_cpu], &args, &format!("{tag}-recv"))?;
    wait_bound(&mut receiver, port, lab.stop)?;
    let q = cell.queues.to_string();
    let flows = (cell.queues * FLOWS_PER_QUEUE).to_string();
    let frame = cell.frame.to_string();
    let secs = total_s.to_string();
    let send = lab.firehose(&[
        "flood",
        "--target",
        &listen,
        "--io",
        "sendmmsg",
        "--threads",
        &q,
        "--flows",
        &flows,
        "--frame",
        &frame,
        "--duration",
        &secs,
        "--quiet",
    ]);
    let sender = lab.spawn(Side::Client, &o.client_cpus, &send, &format!("{tag}-send"))?;
    Ok(Running {
        receiver,
        sender,
        sink_json,
    })
}

/// Starts the receiver and sender of a lab flood cell. The receiver is the XDP_DROP holder
/// (or, for iperf3, its server).
pub(super) fn start_flood_cell(
    lab: &Lab<'_>,
    cell: &Cell,
    port: u16,
    tag: &str,
    total_s: u64,
) -> LabResult<Running> {
    let o = lab.o;
    let sdev = lab.topo.dev(Side::Server);
    let target = format!("{VETH_SERVER_ADDR}:{port}");
    let receiver = if cell.subject == Subject::Iperf3 {
        let args = strings(&[
            "iperf3",
            "-s",
            "-1",
            "--forceflush",
            "-p",
            &port.to_string(),
        ]);
        let mut p = lab.spawn(Side::Server, &[o.server_cpu], &args, &format!("{tag}-recv"))?;
        let by = Instant::now() + Duration::from_secs(10);
        p.wait_for_output("listening", by, Some(lab.stop))?;
        p
    } else {
        let args = lab.firehose(&["lab", "xdp-drop", "--iface", &sdev]);
        let mut p = lab.spawn(Side::Server, &[o.server_cpu], &args, &format!("{tag}-xdp"))?;
        let by = Instant::now() + Duration::from_secs(10);
        p.wait_for_output("drops every packet", by, Some(lab.stop))?;
        p
    };
    let secs = total_s.to_string();
    let frame = cell.frame.to_string();
    let payload = payload_of(cell.frame).to_string();
    let cpu = &o.client_cpus[..1];
    let args = match &cell.subject {
        Subject::Flood(mode) => lab.firehose(&[
            "flood",
            "--target",
            &target,
            "--io",
            mode,
            "--frame",
            &frame,
            "--duration",
            &secs,
            "--quiet",
        ]),
        Subject::Iperf3 => {
            let a = VETH_SERVER_ADDR.to_string();
            let p = port.to_string();
            strings(&[
                "iperf3", "-c", &a, "-p", &p, "-u", "-b", "0", "-l", &payload, "-t", &secs,
            ])
        }
        // sockperf's throughput client sends flat out with one sendto() per message and
        // waits for no answer, so XDP_DROP suits it like firehose's own senders.
        Subject::SockperfTp => {
            let a = VETH_SERVER_ADDR.to_string();
            let p = port.to_string();
            strings(&[
                "sockperf", "tp", "-i", &a, "-p", &p, "-m", &payload, "-t", &secs, "--mps", "max",
            ])
        }
        Subject::Trafgen => {
            let conf = o.workdir.join(format!("{tag}.trafgen"));
            let text = trafgen_conf(
                cell.frame,
                mac(lab, Side::Client)?,
                mac(lab, Side::Server)?,
                (VETH_CLIENT_ADDR, 40000),
                (VETH_SERVER_ADDR, port),
            )
            .ok_or_else(|| LabError::Usage(format!("frame {} is too small", cell.frame)))?;
            std::fs::write(&conf, text).map_err(|e| LabError::io(conf.display(), e))?;
            let dev = lab.topo.dev(Side::Client);
            let c = conf.to_string_lossy().into_owned();
            // One process; -A and -Q: leave the host's socket memory sysctls and IRQ
            // affinities alone (trafgen tunes both by default); -C: no CPU table.
            strings(&[
                "trafgen",
                "--dev",
                &dev,
                "--conf",
                &c,
                "--cpus",
                "1",
                "--no-sock-mem",
                "--notouch-irq",
                "--no-cpu-stats",
            ])
        }
        other => return Err(LabError::Run(format!("{other:?} is not a sender"))),
    };
    let sender = lab.spawn(Side::Client, cpu, &args, &format!("{tag}-send"))?;
    Ok(Running {
        receiver,
        sender,
        sink_json: None,
    })
}

/// The MAC address of one side's veth.
pub(super) fn mac(lab: &Lab<'_>, side: Side) -> LabResult<[u8; 6]> {
    let dev = lab.topo.dev(side);
    let t = lab.exec(side, &["cat", &format!("/sys/class/net/{dev}/address")])?;
    firehose_frame::parse_mac(t.trim())
        .ok_or_else(|| LabError::Command(format!("{dev}: unreadable MAC '{}'", t.trim())))
}
