//! `lab compare --proto ntp`: `firehose serve --proto ntp` against chronyd and ntpsec's ntpd,
//! like for like: all serve this host's clock as a stratum 10 server with no rate limit, on
//! the same server CPUs (firehose's workers, as many chronyd instances on one SO_REUSEPORT
//! port as chrony's documentation advises for several cores, one per CPU; ntpd is one
//! process on port 123, so it runs on veth only, at one worker: `peers/ntpd.rs`), and the
//! same generator (`firehose load --proto ntp`: client requests with random transmit
//! timestamps, every answer checked) pinned to the client CPU, interleaved repetitions
//! ([`ServedCompare`]), on loopback or across the lab's veth pair.
//! Besides rate and latency, each trial keeps what ntpperf looks at: the server's hold time
//! (transmit - receive) and the offset the client measures.
//!
//! With `--io socket,xdp,uring` our server runs once per I/O path, each a row beside the
//! peers under the same generator: AF_XDP (`serve --io xdp --profile xdp` on the server's
//! veth: copy mode, the XDP program and the copy into the socket's ring run in the veth's
//! receive softirq on the sending CPU, so the total host CPU per response is the figure to
//! compare) on veth only, and io_uring.

use super::served::{self, Row, Served, ServedCompare, Spec, Start, Trial};
use crate::peers::chronyd::{self, ChronydConf};
use crate::peers::ntpd::{self, NtpdConf};
use crate::proc::Proc;
use crate::server::{ServerKind, NTP_SERVERS};
use crate::stats::Summary;
use crate::study::Lab;
use crate::topology::{Kind, Side};
use crate::{LabError, LabResult};
use firehose_load::LoadReport;
use serde::Serialize;
use std::net::{IpAddr, SocketAddr};
use std::time::Duration;

/// The stratum every server claims (chronyd's `local stratum`, ntpd's orphan stratum,
/// firehose's `--ntp-local-stratum`): none needs a synchronised host clock.
pub const STRATUM: u8 = 10;

/// The NTP comparison.
pub type NtpCompare = ServedCompare<Ntp>;

impl Default for NtpCompare {
    fn default() -> Self {
        ServedCompare::new(Ntp::default())
    }
}

/// NTP as [`ServedCompare`] serves it.
#[derive(Debug, Clone)]
pub struct Ntp {
    /// The generator's address, the one client chronyd allows (set in `prepare`).
    client: String,
}

impl Default for Ntp {
    fn default() -> Self {
        Ntp {
            client: "127.0.0.1".into(),
        }
    }
}

/// The server's hold time (its transmit - receive timestamps) and the offset the client
/// computes, µs, over the measured window; `None` with no valid answer.
#[derive(Debug, Clone, Serialize)]
pub struct NtpFigures {
    pub hold_p50_us: Option<f64>,
    pub hold_p99_us: Option<f64>,
    pub offset_p50_us: Option<f64>,
    pub offset_p99_us: Option<f64>,
}

/// [`NtpFigures`] over a cell's repetitions.
#[derive(Debug, Clone, Serialize)]
pub struct NtpRowFigures {
    pub hold_p50_us: Option<Summary>,
    pub hold_p99_us: Option<Summary>,
    pub offset_p50_us: Option<Summary>,
    pub offset_p99_us: Option<Summary>,
}

/// A row of the NTP comparison.
pub type NtpRow = Row<NtpRowFigures>;

impl Served for Ntp {
    type Figures = NtpFigures;
    type RowFigures = NtpRowFigures;

    fn spec(&self) -> Spec {
        Spec {
            proto: "ntp",
            title: "NTP",
            servers: NTP_SERVERS.to_vec(),
            requests: "NTPv4 client requests with random transmit timestamps",
            unit: "response",
            rate: "responses/s",
            rate_column: "resp/s median (min-max)",
            widths: (9, 24),
            goal: (ServerKind::Chronyd, 4.0),
            id_bits: 16,
            latency: ("hold-time p99 (transmit - receive)", 2),
        }
    }

    fn ios(&self) -> &'static [&'static str] {
        &["socket", "xdp", "uring"]
    }

    fn io_cannot(&self, io: &str, topology: Kind) -> Option<String> {
        (io == "xdp" && topology == Kind::Loopback).then(|| {
            "AF_XDP serves a device's queues: it runs with --topology veth, on the server namespace's veth".to_string()
        })
    }

    fn io_note(&self, ios: &[String]) -> Option<String> {
        let flags: Vec<String> = ios
            .iter()
            .map(|io| match io.as_str() {
                "socket" => "socket: `serve --proto ntp` as above (recvmmsg/sendmmsg)".to_string(),
                "xdp" => "xdp: `--io xdp --iface DEV --profile xdp` on the server's veth (copy mode: the XDP program and the copy into the AF_XDP ring run in the veth's receive softirq, on the sending CPU, so compare total host CPU per response)".to_string(),
                other => format!("{other}: `--io {other}`"),
            })
            .collect();
        Some(format!(
            "firehose runs once per I/O path, each its own row, on the same CPUs and workers under the same generator; {}",
            flags.join("; ")
        ))
    }

    fn prepare(
        &mut self,
        lab: &Lab<'_>,
        client: IpAddr,
        servers: &[ServerKind],
    ) -> LabResult<Vec<String>> {
        self.client = client.to_string();
        let mut notes = vec![format!(
            "all serve this host's clock at stratum {STRATUM} with no rate limit (firehose: --ntp-local-stratum {STRATUM}; chronyd: `local stratum {STRATUM}`, `noclientlog`, no `ratelimit`, -x so it never touches the clock); chronyd runs one instance per worker on one SO_REUSEPORT port, each pinned to one of the same server CPUs firehose's workers use"
        )];
        if servers.contains(&ServerKind::Ntpd) && lab.topo.kind() == Kind::Veth {
            notes.push(format!(
                "ntpd (ntpsec) runs as one process on port {port} (it has no option for another port, and binds it without SO_REUSEPORT, so never one instance per CPU), pinned to the first server CPU; orphan mode at stratum {STRATUM} (`tos orphan {STRATUM} orphanwait 0`: run this way, ntpsec 1.2.2's local clock driver never became its source in 150 s), `unrestrict default limited` (no rate limit; `noquery` stays), `disable monitor` (no client log), `disable ntp`, `disable kernel`, and no CAP_SYS_TIME (setpriv), so it never touches the clock",
                port = ntpd::PORT
            ));
        }
        Ok(notes)
    }

    fn cannot(&self, kind: &ServerKind, workers: usize, topology: Kind) -> Option<String> {
        if *kind != ServerKind::Ntpd {
            return None;
        }
        if topology == Kind::Loopback {
            return Some(format!(
                "ntpd serves port {} only (ntpsec has no option for another port), which on loopback is this host's NTP port: it runs with --topology veth, in the lab's server namespace",
                ntpd::PORT
            ));
        }
        (workers > 1).then(|| {
            format!(
                "ntpd is one process on port {} without SO_REUSEPORT: it cannot run one instance per CPU (it runs at --workers 1)",
                ntpd::PORT
            )
        })
    }

    fn fixed_port(&self, kind: &ServerKind) -> Option<u16> {
        (*kind == ServerKind::Ntpd).then_some(ntpd::PORT)
    }

    fn start(&self, lab: &Lab<'_>, s: &Start<'_>) -> LabResult<Vec<Proc>> {
        match s.kind {
            ServerKind::Chronyd => {
                let conf = ChronydConf {
                    listen: s.listen,
                    allow: &self.client,
                    stratum: STRATUM,
                };
                chronyd::start(
                    lab,
                    Side::Server,
                    s.cpus,
                    s.dir,
                    &conf,
                    s.workers,
                    Duration::from_secs(15),
                )
            }
            ServerKind::Ntpd => {
                let program = ntpd::find().ok_or_else(|| {
                    LabError::Run(format!(
                        "ntpd is gone ({})",
                        crate::cmd::install_hint(ntpd::PROGRAM)
                    ))
                })?;
                let argv = NtpdConf {
                    dir: s.dir,
                    stratum: STRATUM,
                }
                .write(&program)
                .map_err(|e| LabError::io(s.dir.display(), e))?;
                Ok(vec![lab.spawn(Side::Server, s.cpus, &argv, s.tag)?])
            }
            _ => {
                let args = serve_args(s.listen, s.workers, s.io, s.iface.as_deref())?;
                let args: Vec<&str> = args.iter().map(String::as_str).collect();
                let argv = lab.firehose(&args);
                Ok(vec![lab.spawn(Side::Server, s.cpus, &argv, s.tag)?])
            }
        }
    }

    fn answers(&self, addr: SocketAddr, n: u64, timeout: Duration) -> bool {
        chronyd::answers(addr, (1u64 << 62) + n, timeout)
    }

    fn load_args(&self) -> Vec<String> {
        vec!["--proto".into(), "ntp".into()]
    }

    fn figures(&self, r: &LoadReport) -> NtpFigures {
        let m = |name: &str, f: fn(&firehose_load::report::LatencyUs) -> f64| {
            r.measures.get(name).filter(|_| r.completed > 0).map(f)
        };
        NtpFigures {
            hold_p50_us: m("hold", |l| l.p50),
            hold_p99_us: m("hold", |l| l.p99),
            offset_p50_us: m("offset", |l| l.p50),
            offset_p99_us: m("offset", |l| l.p99),
        }
    }

    fn row_figures(&self, trials: &[Trial<NtpFigures>]) -> NtpRowFigures {
        let sum = |f: fn(&NtpFigures) -> Option<f64>| {
            Summary::of(trials.iter().filter_map(|t| f(&t.measured.proto)))
        };
        NtpRowFigures {
            hold_p50_us: sum(|f| f.hold_p50_us),
            hold_p99_us: sum(|f| f.hold_p99_us),
            offset_p50_us: sum(|f| f.offset_p50_us),
            offset_p99_us: sum(|f| f.offset_p99_us),
        }
    }

    fn columns(&self) -> Vec<(&'static str, usize, bool)> {
        vec![("hold p99 us", 11, false), ("offset p50 us", 13, false)]
    }

    fn cells(&self, f: &NtpRowFigures) -> Vec<String> {
        vec![
            served::median(&f.hold_p99_us, 2),
            served::median(&f.offset_p50_us, 2),
        ]
    }

    fn latency(&self, r: &NtpRow) -> Option<f64> {
        r.proto.hold_p99_us.map(|s| s.median)
    }

    fn extra(&self, m: &mut serde_json::Map<String, serde_json::Value>) {
        m.insert("stratum".into(), STRATUM.into());
    }
}

/// `firehose serve`'s arguments for our server on `listen` with `workers`, over I/O path
/// `io` (AF_XDP on `iface`).
pub fn serve_args(
    listen: SocketAddr,
    workers: usize,
    io: Option<&str>,
    iface: Option<&str>,
) -> LabResult<Vec<String>> {
    let mut a: Vec<String> = [
        "serve",
        "--proto",
        "ntp",
        "--ntp-local-stratum",
        &STRATUM.to_string(),
        "--listen",
        &listen.to_string(),
        "--workers",
        &workers.to_string(),
        "--cpus",
        "auto",
    ]
    .map(String::from)
    .to_vec();
    match io {
        None | Some("socket") => {}
        Some("xdp") => {
            let dev = iface.ok_or_else(|| {
                LabError::Usage("--io xdp serves a veth: use --topology veth".into())
            })?;
            a.extend(["--io", "xdp", "--iface", dev, "--profile", "xdp"].map(String::from));
        }
        Some(other) => a.extend(["--io".to_string(), other.to_string()]),
    }
    Ok(a)
}

#[cfg(test)]
mod tests {
    use super::super::served::{row_of, Cell, Measured, PerRequest};
    use super::*;
    use std::collections::BTreeMap;

    #[test]
    fn the_generator_is_told_the_same_for_every_server() {
        let mut d = NtpCompare::default();
        d.rate = Some(5000);
        d.timeout = Some(Duration::from_millis(200));
        let a = d.load_args();
        assert_eq!(a[..4], ["--proto", "ntp", "--threads", "1"]);
        assert!(a.windows(2).any(|w| w == ["--rate", "5000"]), "{a:?}");
        assert!(a.ends_with(&["--timeout".to_string(), "200ms".to_string()]));
        let closed = NtpCompare::default().load_args();
        assert!(!closed.contains(&"--rate".to_string()));
    }

    fn trial(rps: f64, server_us: f64, util: f64, hold_p99: f64) -> Trial<NtpFigures> {
        PerRequest {
            measured: Measured {
                rps,
                completed: 4,
                lost: 1,
                unsent: 0,
                invalid: BTreeMap::from([("bad_origin".to_string(), 1)]),
                p50_us: 40.0,
                p99_us: 100.0,
                proto: NtpFigures {
                    hold_p50_us: Some(hold_p99 / 2.0),
                    hold_p99_us: Some(hold_p99),
                    offset_p50_us: Some(-1.5),
                    offset_p99_us: Some(3.0),
                },
                server_s: 0.0,
                host_s: 0.0,
                client_s: 0.0,
                wall_s: 1.1,
                load_s: 1.0,
                client_window_util: 0.5,
                server_drops: 2,
                rcvbuf_errors: 0,
                loss: None,
            },
            server_cpu_us_per_req: Some(server_us),
            host_cpu_us_per_req: Some(server_us * 2.0),
            client_cpu_us_per_req: Some(3.0),
            server_util: util,
            client_util: 0.5,
        }
    }

    #[test]
    fn each_path_serves_as_asked() {
        let at: SocketAddr = "10.199.0.1:4123".parse().unwrap();
        let socket = serve_args(at, 1, None, None).unwrap();
        assert_eq!(socket, serve_args(at, 1, Some("socket"), None).unwrap());
        assert!(!socket.contains(&"--io".to_string()), "{socket:?}");
        let xdp = serve_args(at, 2, Some("xdp"), Some("fhs1-s"))
            .unwrap()
            .join(" ");
        assert!(
            xdp.ends_with("--workers 2 --cpus auto --io xdp --iface fhs1-s --profile xdp"),
            "{xdp}"
        );
        let uring = serve_args(at, 1, Some("uring"), None).unwrap().join(" ");
        assert!(uring.ends_with("--io uring"), "{uring}");
        assert!(serve_args(at, 1, Some("xdp"), None).is_err());
        let n = Ntp::default();
        assert!(n.io_cannot("xdp", Kind::Loopback).is_some());
        assert!(n.io_cannot("xdp", Kind::Veth).is_none());
        assert!(n.io_cannot("uring", Kind::Loopback).is_none());
    }

    /// With paths compared, each of ours is a row, named in its config and its ratios, and
    /// each other path is set against the first.
    #[test]
    fn rows_and_ratios_per_path() {
        let cell = |io: &str| Cell {
            server: ServerKind::FirehoseNtp,
            workers: 1,
            io: Some(io.into()),
        };
        let ch = Cell {
            server: ServerKind::Chronyd,
            workers: 1,
            io: None,
        };
        let n = Ntp::default();
        let rows = [
            row_of(&n, &cell("socket"), &[trial(100_000.0, 8.0, 1.0, 2.0)]).unwrap(),
            row_of(&n, &cell("xdp"), &[trial(200_000.0, 4.0, 1.0, 2.0)]).unwrap(),
            row_of(&n, &ch, &[trial(100_000.0, 10.0, 1.0, 2.0)]).unwrap(),
        ];
        assert_eq!(rows[1].config, "workers 1, --io xdp");
        let mut d = NtpCompare::default();
        d.ios = Some(vec!["socket".into(), "xdp".into()]);
        let r = served::ratios(&d, &rows);
        assert!(
            r.iter().any(|l| l.starts_with(
                "responses/s per server CPU, firehose --io xdp / chronyd, 1 CPU(s): 2.00x"
            )),
            "{r:?}"
        );
        assert!(
            r.iter().any(|l| l.contains("host CPU per response (all CPUs, generator included), chronyd / firehose --io xdp, 1 CPU(s): 20.00 / 8.00 us = 2.50x")),
            "{r:?}"
        );
        assert_eq!(
            r.last().unwrap(),
            "firehose --io socket / --io xdp, 1 CPU(s): server CPU per response 8.00 / 4.00 us = 2.00x; host CPU per response 16.00 / 8.00 us = 2.00x"
        );
        let v = serde_json::to_value(&rows[1]).unwrap();
        assert_eq!(v["io"], "xdp");
        assert!(serde_json::to_value(&rows[2]).unwrap().get("io").is_none());
    }

    #[test]
    fn rows_and_ratios() {
        let fh = Cell {
            server: ServerKind::FirehoseNtp,
            workers: 1,
            io: None,
        };
        let ch = Cell {
            server: ServerKind::Chronyd,
            workers: 1,
            io: None,
        };
        let a = row_of(
            &Ntp::default(),
            &fh,
            &[
                trial(800_000.0, 1.0, 1.0, 2.0),
                trial(600_000.0, 1.5, 1.0, 4.0),
            ],
        )
        .unwrap();
        let b = row_of(
            &Ntp::default(),
            &ch,
            &[
                trial(100_000.0, 8.0, 1.0, 10.0),
                trial(100_000.0, 10.0, 1.0, 12.0),
            ],
        )
        .unwrap();
        assert_eq!(
            (a.rps.median, a.rps.min, a.rps.max),
            (700_000.0, 600_000.0, 800_000.0)
        );
        assert_eq!((a.lost, a.invalid, a.server_drops), (2, 2, 4));
        assert_eq!(a.proto.hold_p99_us.unwrap().median, 3.0);
        assert_eq!(a.proto.offset_p50_us.unwrap().median, -1.5);
        assert_eq!((a.bound, b.bound), ("server", "server"));
        let r = served::ratios(&NtpCompare::default(), &[a.clone(), b.clone()]);
        assert!(
            r[0].contains("firehose / chronyd, 1 CPU(s): 7.00x (goal >= 4;"),
            "{r:?}"
        );
        assert!(r[1].contains("9.00 / 1.25 us = 7.20x (goal"), "{r:?}");
        assert!(r[3].contains("3.00 / 11.00 us = 0.27x"), "{r:?}");
        let mut open = NtpCompare::default();
        open.rate = Some(1000);
        let r = served::ratios(&open, &[a, b]);
        assert!(r.iter().all(|l| !l.contains("responses/s per")), "{r:?}");
        // At one offered load the CPU ratio is stated, the goal (at saturation) is not.
        assert!(r.iter().all(|l| !l.contains("goal >=")), "{r:?}");
        assert!(
            r.iter()
                .any(|l| l.contains("(same offered load, 1000 requests/s)")),
            "{r:?}"
        );
        assert!(r.last().unwrap().contains("at 1000 requests/s"), "{r:?}");
        assert!(row_of(&Ntp::default(), &fh, &[]).is_none());
        // The JSON keeps the row's fields flat.
        let v = serde_json::to_value(row_of(&Ntp::default(), &fh, &[trial(1.0, 1.0, 1.0, 2.0)]))
            .unwrap();
        for k in [
            "rps",
            "hold_p99_us",
            "offset_p50_us",
            "bound",
            "udp_rcvbuf_errors",
        ] {
            assert!(v.get(k).is_some(), "{k}: {v}");
        }
    }
}
