//! `lab compare --proto radius`: `firehose serve --proto radius` against FreeRADIUS, like
//! for like: the same generated clients.conf and users file, the same server CPUs
//! (FreeRADIUS's thread pool sized to the worker count), the same generator (`firehose
//! load --proto radius`, PAP, a Message-Authenticator on every request, every 4th user
//! rejected by `Auth-Type := Reject`) pinned to the client CPU, interleaved repetitions
//! ([`ServedCompare`]), on loopback or across the lab's veth pair.

use super::served::{Row, Served, ServedCompare, Spec, Start, Trial};
use crate::peers::freeradius;
use crate::peers::radius_server::RadiusServer;
use crate::proc::Proc;
use crate::server::{ServerKind, RADIUS_SERVERS};
use crate::study::Lab;
use crate::topology::Side;
use crate::{LabError, LabResult};
use firehose_load::LoadReport;
use serde::Serialize;
use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::net::{IpAddr, SocketAddr};
use std::path::PathBuf;
use std::time::Duration;

/// The shared secret of the generated clients.conf (the lab's own hosts only).
pub const SECRET: &str = "firehose-lab";

/// The RADIUS comparison.
pub type RadiusCompare = ServedCompare<Radius>;

impl Default for RadiusCompare {
    fn default() -> Self {
        ServedCompare::new(Radius::default())
    }
}

/// RADIUS as [`ServedCompare`] serves it.
#[derive(Debug, Clone)]
pub struct Radius {
    /// Users in the generated users file.
    pub users: usize,
    /// Set in `prepare`: the clients.conf and users files.
    files: Option<(PathBuf, PathBuf)>,
}

impl Default for Radius {
    fn default() -> Self {
        Radius {
            users: 1000,
            files: None,
        }
    }
}

/// Responses by code (Access-Accept, Access-Reject), of one run or summed over a cell's.
#[derive(Debug, Clone, Serialize)]
pub struct Codes {
    pub codes: BTreeMap<String, u64>,
}

/// A row of the RADIUS comparison.
pub type RadiusRow = Row<Codes>;

/// A clients.conf with one client, the generator's address (this host's loopback, or the
/// client end of the veth pair), that must sign every Access-Request with a
/// Message-Authenticator (both servers' BlastRADIUS defence).
pub fn clients_conf(client: IpAddr) -> String {
    format!(
        "client lab {{\n\tipaddr = {client}\n\tsecret = {SECRET}\n\trequire_message_authenticator = yes\n}}\n"
    )
}

/// A users file of `n` users (`userI`, password `pwI`) with two reply attributes each;
/// every 4th is rejected by `Auth-Type := Reject` with a Reply-Message.
pub fn users_file(n: usize) -> String {
    let mut u = String::new();
    for i in 0..n {
        if i % 4 == 3 {
            let _ = writeln!(
                u,
                "user{i}\tCleartext-Password := \"pw{i}\", Auth-Type := Reject\n\tReply-Message = \"account disabled\"\n"
            );
        } else {
            let _ = writeln!(
                u,
                "user{i}\tCleartext-Password := \"pw{i}\"\n\tReply-Message = \"Hello, user{i}\",\n\tSession-Timeout = 3600\n"
            );
        }
    }
    u
}

impl Radius {
    fn files(&self) -> &(PathBuf, PathBuf) {
        self.files.as_ref().expect("prepared")
    }
}

impl Served for Radius {
    type Figures = Codes;
    type RowFigures = Codes;

    fn spec(&self) -> Spec {
        Spec {
            proto: "radius",
            title: "RADIUS",
            servers: RADIUS_SERVERS.to_vec(),
            requests: "PAP with a Message-Authenticator",
            unit: "request",
            rate: "Access-Requests/s",
            rate_column: "req/s median (min-max)",
            widths: (10, 13),
            goal: (ServerKind::FreeRadius, 5.0),
            id_bits: 8,
            latency: ("p99", 1),
        }
    }

    fn prepare(
        &mut self,
        lab: &Lab<'_>,
        client: IpAddr,
        _servers: &[ServerKind],
    ) -> LabResult<Vec<String>> {
        if self.users == 0 {
            return Err(LabError::Usage("users must be positive".into()));
        }
        let clients = lab.workdir.join("clients.conf");
        std::fs::write(&clients, clients_conf(client))
            .map_err(|e| LabError::io(clients.display(), e))?;
        let users = lab.workdir.join("users");
        std::fs::write(&users, users_file(self.users))
            .map_err(|e| LabError::io(users.display(), e))?;
        self.files = Some((clients, users));
        Ok(vec![format!(
            "both servers read the same generated clients.conf (one client, {client}, Message-Authenticator required) and users file ({} users, every 4th rejected by Auth-Type); FreeRADIUS runs its files, pap and chap modules only, reject_delay 0, its thread pool fixed at the worker count, confined to the same CPUs",
            self.users
        )])
    }

    fn start(&self, lab: &Lab<'_>, s: &Start<'_>) -> LabResult<Vec<Proc>> {
        let (clients, users) = self.files();
        let argv = RadiusServer {
            kind: s.kind,
            firehose: &lab.bin,
            workers: s.workers,
            dir: s.dir,
            listen: s.listen,
            clients,
            users,
        }
        .argv()?;
        Ok(vec![lab.spawn(Side::Server, s.cpus, &argv, s.tag)?])
    }

    fn answers(&self, addr: SocketAddr, n: u64, timeout: Duration) -> bool {
        freeradius::answers_status(addr, SECRET.as_bytes(), n as u8, timeout)
    }

    fn load_args(&self) -> Vec<String> {
        let (clients, users) = self.files();
        [
            "--proto",
            "radius",
            "--radius-users",
            &users.display().to_string(),
            "--radius-clients",
            &clients.display().to_string(),
        ]
        .map(String::from)
        .to_vec()
    }

    fn figures(&self, r: &LoadReport) -> Codes {
        Codes {
            codes: r.codes.clone(),
        }
    }

    fn row_figures(&self, trials: &[Trial<Codes>]) -> Codes {
        let mut codes = BTreeMap::new();
        for t in trials {
            for (k, v) in &t.measured.proto.codes {
                *codes.entry(k.clone()).or_insert(0) += v;
            }
        }
        Codes { codes }
    }

    fn columns(&self) -> Vec<(&'static str, usize, bool)> {
        vec![("accept/reject", 15, false)]
    }

    fn cells(&self, f: &Codes) -> Vec<String> {
        let code = |k: &str| f.codes.get(k).copied().unwrap_or(0);
        vec![format!(
            "{}/{}",
            code("Access-Accept"),
            code("Access-Reject")
        )]
    }

    fn latency(&self, r: &RadiusRow) -> Option<f64> {
        r.p99_us.map(|s| s.median)
    }

    fn extra(&self, m: &mut serde_json::Map<String, serde_json::Value>) {
        m.insert("users".into(), self.users.into());
    }
}

#[cfg(test)]
mod tests {
    use super::super::served::{self, per_request, row_of, Cell, Measured, PerRequest};
    use super::*;

    fn measured(completed: u64, server_s: f64, host_s: f64, client_s: f64) -> Measured<Codes> {
        Measured {
            rps: completed as f64 / 2.0,
            completed,
            lost: 0,
            unsent: 0,
            invalid: BTreeMap::new(),
            p50_us: 50.0,
            p99_us: 90.0,
            proto: Codes {
                codes: BTreeMap::new(),
            },
            server_s,
            host_s,
            client_s,
            wall_s: 2.2,
            load_s: 2.0,
            client_window_util: 0.5,
            server_drops: 0,
            rcvbuf_errors: 0,
            loss: None,
        }
    }

    #[test]
    fn figures_per_request_and_utilisation() {
        let t = per_request(measured(200_000, 2.0, 3.0, 1.0));
        assert_eq!(t.server_cpu_us_per_req, Some(10.0));
        assert_eq!(t.host_cpu_us_per_req, Some(15.0));
        assert_eq!(t.client_cpu_us_per_req, Some(5.0));
        assert_eq!((t.server_util, t.client_util), (1.0, 0.5));
        let none = per_request(measured(0, 2.0, 3.0, 1.0));
        assert_eq!(
            none.server_cpu_us_per_req, None,
            "no request, no cost per request"
        );
    }

    /// Session 4's quiet run (make bench-radius): firehose answered 142,883 requests/s for
    /// 5.0 s at 6.98 us of server CPU each, 99.7% of its one CPU, while the generator took
    /// 5.25 s from its start to its exit. The server limited the rate: over the 5.25 s its
    /// utilisation read 0.95 - 0.0002 and the row said "neither".
    #[test]
    fn a_server_busy_while_the_load_ran_is_the_bound() {
        let completed = 142_883 * 5;
        let us = |per_req: f64| per_req * 1e-6 * completed as f64;
        let mut m = measured(completed, us(6.98), us(12.18), us(4.98));
        m.rps = 142_883.0;
        (m.wall_s, m.load_s, m.client_window_util) = (5.25, 5.0, 0.70);
        let t = per_request(m);
        assert!((t.server_util - 0.9973).abs() < 1e-3, "{}", t.server_util);
        let fh = Cell {
            server: ServerKind::FirehoseRadius,
            workers: 1,
            io: None,
        };
        let row = row_of(&Radius::default(), &fh, &[t.clone(), t.clone(), t]).unwrap();
        assert_eq!(row.bound, "server", "{row:?}");
    }

    #[test]
    fn generated_files_reject_every_fourth_user() {
        let u = users_file(8);
        assert_eq!(u.matches("Auth-Type := Reject").count(), 2);
        assert!(u.starts_with("user0\tCleartext-Password := \"pw0\"\n\tReply-Message"));
        assert!(u.contains("user3\tCleartext-Password := \"pw3\", Auth-Type := Reject\n"));
        assert!(clients_conf(IpAddr::V4(std::net::Ipv4Addr::LOCALHOST))
            .contains("require_message_authenticator = yes"));
        let mut d = RadiusCompare::default();
        d.proto.files = Some(("/c".into(), "/u".into()));
        d.rate = Some(5000);
        let a = d.load_args();
        assert_eq!(a[..4], ["--proto", "radius", "--radius-users", "/u"]);
        assert!(a.ends_with(&["--rate".to_string(), "5000".to_string()]));
    }

    fn trial(rps: f64, server_us: f64, util: f64) -> Trial<Codes> {
        let codes = BTreeMap::from([
            ("Access-Accept".to_string(), 3),
            ("Access-Reject".to_string(), 1),
        ]);
        let mut m = measured(4, 0.0, 0.0, 0.0);
        m.rps = rps;
        m.lost = 1;
        m.p50_us = 40.0;
        m.p99_us = 100.0;
        m.proto = Codes { codes };
        m.server_drops = 2;
        PerRequest {
            measured: m,
            server_cpu_us_per_req: Some(server_us),
            host_cpu_us_per_req: Some(server_us * 2.0),
            client_cpu_us_per_req: Some(3.0),
            server_util: util,
            client_util: 0.5,
        }
    }

    #[test]
    fn rows_and_ratios() {
        let fh = Cell {
            server: ServerKind::FirehoseRadius,
            workers: 1,
            io: None,
        };
        let fr = Cell {
            server: ServerKind::FreeRadius,
            workers: 1,
            io: None,
        };
        let p = Radius::default();
        let a = row_of(
            &p,
            &fh,
            &[trial(500_000.0, 2.0, 1.0), trial(400_000.0, 2.5, 1.0)],
        )
        .unwrap();
        let b = row_of(
            &p,
            &fr,
            &[trial(50_000.0, 20.0, 0.6), trial(60_000.0, 18.0, 0.6)],
        )
        .unwrap();
        assert_eq!(
            (a.rps.median, a.rps.min, a.rps.max),
            (450_000.0, 400_000.0, 500_000.0)
        );
        assert_eq!(a.proto.codes["Access-Accept"], 6);
        assert_eq!((a.lost, a.server_drops), (2, 4));
        assert_eq!((a.bound, b.bound), ("server", "neither"));
        let d = RadiusCompare::default();
        let r = served::ratios(&d, &[a.clone(), b.clone()]);
        assert!(
            r[0].contains("firehose / FreeRADIUS, 1 CPU(s): 8.18x"),
            "{r:?}"
        );
        assert!(r[1].contains("19.00 / 2.25 us = 8.44x (goal"), "{r:?}");
        let mut open = RadiusCompare::default();
        open.rate = Some(1000);
        let r = served::ratios(&open, &[a, b]);
        assert!(
            r.iter().all(|l| !l.contains("Access-Requests/s per")),
            "{r:?}"
        );
        // At one offered load the CPU ratio is stated, the goal (at saturation) is not.
        assert!(r.iter().all(|l| !l.contains("goal >=")), "{r:?}");
        assert!(
            r.iter()
                .any(|l| l.contains("(same offered load, 1000 requests/s)")),
            "{r:?}"
        );
        assert!(
            r.last().unwrap().contains("p99 at 1000 requests/s"),
            "{r:?}"
        );
        assert!(row_of(&p, &fh, &[]).is_none());
    }
}
