//! Test hosts. `loopback`: server and client on the host's 127.0.0.1, no root needed.
//! `veth`: two network namespaces (`fh-srv-<id>`, `fh-cli-<id>`) joined by a multi-queue veth
//! pair (`fhv0-<id>` in the server, `fhv1-<id>` in the client) with addresses from a private
//! range that exists only inside them, and the knobs the NTT talk turns: GRO, RPS and XPS
//! masks per queue, rp_filter. Every knob lives inside the namespaces, so deleting them (on
//! drop, Ctrl-C or failure) restores the host; [`down`] removes what a killed run left.
//!
//! `<id>` starts with the owning process's pid, so `down` can tell leftovers of dead runs
//! from a run in progress.

use crate::cmd::{self, run};
use crate::{LabError, LabResult};
use firehose_sys::cpu::CpuSet;
use serde::Serialize;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::process::Command;
use std::str::FromStr;

/// Server address inside the server namespace.
pub const VETH_SERVER_ADDR: Ipv4Addr = Ipv4Addr::new(10, 199, 0, 1);
/// Client address inside the client namespace.
pub const VETH_CLIENT_ADDR: Ipv4Addr = Ipv4Addr::new(10, 199, 0, 2);
/// Server IPv6 address (unique local range), added by [`Topology::add_ipv6`].
pub const VETH_SERVER_ADDR6: Ipv6Addr = Ipv6Addr::new(0xfd00, 0x199, 0, 0, 0, 0, 0, 1);
/// Client IPv6 address, added by [`Topology::add_ipv6`].
pub const VETH_CLIENT_ADDR6: Ipv6Addr = Ipv6Addr::new(0xfd00, 0x199, 0, 0, 0, 0, 0, 2);

/// Which test host to build.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Kind {
    Loopback,
    Veth,
}

impl Kind {
    pub fn name(self) -> &'static str {
        match self {
            Kind::Loopback => "loopback",
            Kind::Veth => "veth",
        }
    }
}

impl FromStr for Kind {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "loopback" => Ok(Kind::Loopback),
            "veth" => Ok(Kind::Veth),
            _ => Err(format!("unknown topology '{s}' (valid: loopback, veth)")),
        }
    }
}

/// The two ends of a test.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Side {
    Server,
    Client,
}

/// Knobs to set on a veth topology; `None` leaves the kernel's value.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct Knobs {
    /// GRO on both veth ends.
    pub gro: Option<bool>,
    /// RPS: every rx queue of the server's veth steers to the server CPUs (on), or none (off).
    pub rps: Option<bool>,
    /// XPS: tx queue i of each end is used by that side's CPU i (on), or by any CPU (off).
    pub xps: Option<bool>,
    /// net.ipv4.conf.{all,DEV}.rp_filter in the server namespace (0 off, 1 strict, 2 loose).
    pub rp_filter: Option<u8>,
}

/// What the knobs of a veth topology read back as, after setting them.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct KnobState {
    pub queues: usize,
    pub server_gro: bool,
    pub client_gro: bool,
    /// rps_cpus of each rx queue of the server veth, as the kernel prints it.
    pub server_rps_cpus: Vec<String>,
    /// xps_cpus of each tx queue of the server veth.
    pub server_xps_cpus: Vec<String>,
    /// xps_cpus of each tx queue of the client veth.
    pub client_xps_cpus: Vec<String>,
    /// Effective rp_filter of the server veth: max(all, DEV).
    pub server_rp_filter: u8,
}

/// A test host. Dropping it deletes its namespaces (and with them the veth pair).
#[derive(Debug)]
pub struct Topology {
    kind: Kind,
    id: String,
    queues: usize,
    /// Namespaces created so far, deleted on teardown.
    created: Vec<String>,
}

/// Server namespace name for a run id.
pub fn server_ns(id: &str) -> String {
    format!("fh-srv-{id}")
}

/// Client namespace name for a run id.
pub fn client_ns(id: &str) -> String {
    format!("fh-cli-{id}")
}

fn server_dev(id: &str) -> String {
    format!("fhv0-{id}")
}

fn client_dev(id: &str) -> String {
    format!("fhv1-{id}")
}

impl Topology {
    /// The host loopback: nothing to create.
    pub fn loopback() -> Topology {
        Topology {
            kind: Kind::Loopback,
            id: String::new(),
            queues: 1,
            created: Vec::new(),
        }
    }

    /// Two namespaces joined by a veth pair with `queues` tx and rx queues per end. `id`
    /// must start with this process's pid (see [`run_id`]). Needs root.
    pub fn veth(id: &str, queues: usize) -> LabResult<Topology> {
        if !firehose_sys::cpu::is_root() {
            return Err(LabError::Usage(
                "the veth topology needs root (it creates network namespaces): run as root, \
                 or use --topology loopback"
                    .into(),
            ));
        }
        if queues == 0 || queues > 256 {
            return Err(LabError::Usage(format!(
                "--queues {queues}: a veth needs 1 to 256 queues"
            )));
        }
        if server_dev(id).len() > 15 {
            return Err(LabError::Usage(format!(
                "run id '{id}' is too long for an interface name (15 bytes)"
            )));
        }
        let mut topo = Topology {
            kind: Kind::Veth,
            id: id.to_string(),
            queues,
            created: Vec::new(),
        };
        // On any error below, dropping `topo` deletes whatever was created.
        for ns in [server_ns(id), client_ns(id)] {
            run("ip", &["netns", "add", &ns])?;
            topo.created.push(ns);
        }
        let (sns, cns) = (server_ns(id), client_ns(id));
        let (sdev, cdev) = (server_dev(id), client_dev(id));
        let q = queues.to_string();
        run(
            "ip",
            &[
                "link",
                "add",
                &sdev,
                "netns",
                &sns,
                "numtxqueues",
                &q,
                "numrxqueues",
                &q,
                "type",
                "veth",
                "peer",
                "name",
                &cdev,
                "netns",
                &cns,
                "numtxqueues",
                &q,
                "numrxqueues",
                &q,
            ],
        )?;
        let saddr = format!("{VETH_SERVER_ADDR}/24");
        let caddr = format!("{VETH_CLIENT_ADDR}/24");
        for (ns, dev, addr) in [(&sns, &sdev, &saddr), (&cns, &cdev, &caddr)] {
            run("ip", &["-n", ns, "addr", "add", addr, "dev", dev])?;
            run("ip", &["-n", ns, "link", "set", "lo", "up"])?;
            run("ip", &["-n", ns, "link", "set", dev, "up"])?;
        }
        Ok(topo)
    }

    pub fn kind(&self) -> Kind {
        self.kind
    }

    /// Queues per veth end (1 for loopback).
    pub fn queues(&self) -> usize {
        self.queues
    }

    /// Where the server listens.
    pub fn server_addr(&self) -> IpAddr {
        match self.kind {
            Kind::Loopback => IpAddr::V4(Ipv4Addr::LOCALHOST),
            Kind::Veth => IpAddr::V4(VETH_SERVER_ADDR),
        }
    }

    /// The namespace of one side (`None` on loopback).
    pub fn netns(&self, side: Side) -> Option<String> {
        match (self.kind, side) {
            (Kind::Loopback, _) => None,
            (Kind::Veth, Side::Server) => Some(server_ns(&self.id)),
            (Kind::Veth, Side::Client) => Some(client_ns(&self.id)),
        }
    }

    /// The namespaces that exist right now (for tests and `down`).
    pub fn namespaces(&self) -> &[String] {
        &self.created
    }

    /// A command that runs `program` on one side, confined to `cpus` (taskset). `ip netns
    /// exec` and `taskset` both exec, so the child's pid is the program's pid.
    pub fn command(&self, side: Side, cpus: &[usize], program: &str) -> Command {
        let list = CpuSet::from(cpus).to_string();
        match self.netns(side) {
            None => {
                let mut c = Command::new("taskset");
                c.args(["-c", &list, program]);
                c
            }
            Some(ns) => {
                let mut c = Command::new("ip");
                c.args(["netns", "exec", &ns, "taskset", "-c", &list, program]);
                c
            }
        }
    }

    /// Adds [`VETH_SERVER_ADDR6`] and [`VETH_CLIENT_ADDR6`] to the veth ends (without
    /// duplicate address detection, so they are usable at once): BIG TCP beyond 64 KiB
    /// needs IPv6 on the kernels that predate its IPv4 form.
    pub fn add_ipv6(&self) -> LabResult<IpAddr> {
        for (side, addr) in [
            (Side::Server, VETH_SERVER_ADDR6),
            (Side::Client, VETH_CLIENT_ADDR6),
        ] {
            let a = format!("{addr}/64");
            let dev = self.dev(side);
            self.exec(side, &["ip", "addr", "add", &a, "dev", &dev, "nodad"])?;
        }
        Ok(IpAddr::V6(VETH_SERVER_ADDR6))
    }

    /// Runs a short command inside one side's namespace and returns its stdout.
    pub(crate) fn exec(&self, side: Side, args: &[&str]) -> LabResult<String> {
        let ns = self.netns(side).ok_or_else(|| {
            LabError::Usage("this needs the veth topology (--topology veth)".into())
        })?;
        let mut full = vec!["netns", "exec", ns.as_str()];
        full.extend_from_slice(args);
        run("ip", &full)
    }

    fn write_sys(&self, side: Side, path: &str, value: &str) -> LabResult<()> {
        self.exec(
            side,
            &[
                "sh",
                "-c",
                "printf '%s\\n' \"$1\" > \"$2\"",
                "sh",
                value,
                path,
            ],
        )
        .map(|_| ())
    }

    fn read_sys(&self, side: Side, path: &str) -> LabResult<String> {
        Ok(self.exec(side, &["cat", path])?.trim().to_string())
    }

    /// The veth device of one side.
    pub fn dev(&self, side: Side) -> String {
        match side {
            Side::Server => server_dev(&self.id),
            Side::Client => client_dev(&self.id),
        }
    }

    /// Sets the knobs (server CPUs for RPS and server XPS, client CPUs for client XPS) and
    /// reads everything back. On loopback any knob is a usage error: the lab changes knobs
    /// only inside namespaces it owns.
    pub fn set_knobs(
        &self,
        knobs: &Knobs,
        server_cpus: &[usize],
        client_cpus: &[usize],
    ) -> LabResult<Option<KnobState>> {
        if self.kind == Kind::Loopback {
            if *knobs != Knobs::default() {
                return Err(LabError::Usage(
                    "GRO, RPS, XPS and rp_filter are set only inside the lab's namespaces: \
                     use --topology veth"
                        .into(),
                ));
            }
            return Ok(None);
        }
        if let Some(on) = knobs.gro {
            let v = if on { "on" } else { "off" };
            for side in [Side::Server, Side::Client] {
                self.exec(side, &["ethtool", "-K", &self.dev(side), "gro", v])?;
            }
        }
        if let Some(on) = knobs.rps {
            let mask = if on {
                CpuSet::from(server_cpus).to_mask_hex()
            } else {
                "0".into()
            };
            for q in 0..self.queues {
                let p = format!(
                    "/sys/class/net/{}/queues/rx-{q}/rps_cpus",
                    self.dev(Side::Server)
                );
                self.write_sys(Side::Server, &p, &mask)?;
            }
        }
        if let Some(on) = knobs.xps {
            for (side, cpus) in [(Side::Server, server_cpus), (Side::Client, client_cpus)] {
                for q in 0..self.queues {
                    let mask = if on && !cpus.is_empty() {
                        // Queue q for the q-th CPU of the side; extra queues stay unused.
                        cpus.get(q)
                            .map(|&c| CpuSet::from(&[c][..]).to_mask_hex())
                            .unwrap_or_else(|| "0".into())
                    } else {
                        "0".into()
                    };
                    let p = format!("/sys/class/net/{}/queues/tx-{q}/xps_cpus", self.dev(side));
                    self.write_sys(side, &p, &mask)?;
                }
            }
        }
        if let Some(v) = knobs.rp_filter {
            let dev = self.dev(Side::Server);
            for key in ["all".to_string(), dev] {
                let kv = format!("net.ipv4.conf.{key}.rp_filter={v}");
                self.exec(Side::Server, &["sysctl", "-q", "-w", &kv])?;
            }
        }
        self.read_knobs().map(Some)
    }

    /// Reads the knobs back from the kernel.
    pub fn read_knobs(&self) -> LabResult<KnobState> {
        let gro = |side: Side| -> LabResult<bool> {
            let text = self.exec(side, &["ethtool", "-k", &self.dev(side)])?;
            feature(&text, "generic-receive-offload").ok_or_else(|| {
                LabError::Command(format!(
                    "ethtool -k {} printed no generic-receive-offload line",
                    self.dev(side)
                ))
            })
        };
        let per_queue = |side: Side, dir: &str, file: &str| -> LabResult<Vec<String>> {
            (0..self.queues)
                .map(|q| {
                    let p = format!("/sys/class/net/{}/queues/{dir}-{q}/{file}", self.dev(side));
                    self.read_sys(side, &p)
                })
                .collect()
        };
        let sysctl = |key: String| -> LabResult<u8> {
            let v = self.exec(Side::Server, &["sysctl", "-n", &key])?;
            v.trim()
                .parse()
                .map_err(|_| LabError::Command(format!("sysctl -n {key} printed {v:?}")))
        };
        let all = sysctl("net.ipv4.conf.all.rp_filter".into())?;
        let dev = sysctl(format!(
            "net.ipv4.conf.{}.rp_filter",
            self.dev(Side::Server)
        ))?;
        Ok(KnobState {
            queues: self.queues,
            server_gro: gro(Side::Server)?,
            client_gro: gro(Side::Client)?,
            server_rps_cpus: per_queue(Side::Server, "rx", "rps_cpus")?,
            server_xps_cpus: per_queue(Side::Server, "tx", "xps_cpus")?,
            client_xps_cpus: per_queue(Side::Client, "tx", "xps_cpus")?,
            server_rp_filter: all.max(dev),
        })
    }

    /// Deletes the namespaces (which deletes the veth pair). Idempotent.
    pub fn teardown(&mut self) -> LabResult<()> {
        let mut first_err = None;
        while let Some(ns) = self.created.pop() {
            if let Err(e) = delete_netns(&ns) {
                first_err.get_or_insert(e);
            }
        }
        first_err.map_or(Ok(()), Err)
    }
}

impl Drop for Topology {
    fn drop(&mut self) {
        // Errors here have no one to go to; `down` is the fallback for anything left.
        let _ = self.teardown();
    }
}

/// A run id for this process: its pid, plus a suffix when one process needs several.
pub fn run_id(suffix: Option<u32>) -> String {
    match suffix {
        None => std::process::id().to_string(),
        Some(n) => format!("{}-{n}", std::process::id()),
    }
}

/// Kills what still runs in a namespace, then deletes it.
fn delete_netns(ns: &str) -> LabResult<()> {
    if let Ok(pids) = run("ip", &["netns", "pids", ns]) {
        for pid in pids
            .split_whitespace()
            .filter_map(|p| p.parse::<u32>().ok())
        {
            cmd::signal(pid, "KILL")?;
        }
    }
    match run("ip", &["netns", "del", ns]) {
        Ok(_) => Ok(()),
        // `ip netns del` can fail once the namespace is already gone (its file was removed
        // between listing and deleting); the goal is reached. Otherwise try once more, after
        // the killed processes have had a moment to exit.
        Err(e) => {
            let listed = || {
                run("ip", &["netns", "list"])
                    .map(|t| parse_netns_list(&t).iter().any(|n| n == ns))
                    .unwrap_or(true)
            };
            if !listed() {
                return Ok(());
            }
            std::thread::sleep(std::time::Duration::from_millis(200));
            match run("ip", &["netns", "del", ns]) {
                Ok(_) => Ok(()),
                Err(_) if !listed() => Ok(()),
                Err(_) => Err(e),
            }
        }
    }
}

/// The owner pid encoded in a lab name (`fh-srv-123`, `fh-cli-123-4`, `fhv0-123`), if the
/// name is one of the lab's.
pub fn owner_of(name: &str) -> Option<u32> {
    let rest = ["fh-srv-", "fh-cli-", "fhv0-", "fhv1-"]
        .iter()
        .find_map(|p| name.strip_prefix(p))?;
    rest.split('-').next()?.parse().ok()
}

/// Namespace names from `ip netns list` output (`name (id: 3)` or just `name`).
pub fn parse_netns_list(text: &str) -> Vec<String> {
    text.lines()
        .filter_map(|l| l.split_whitespace().next())
        .map(str::to_string)
        .collect()
}

/// Link names from `ip -o link show` output (`5: fhv0-12@if4: <...>`).
pub fn parse_link_names(text: &str) -> Vec<String> {
    text.lines()
        .filter_map(|l| l.split(": ").nth(1))
        .map(|n| n.split('@').next().unwrap_or(n).to_string())
        .collect()
}

/// Removes the namespaces and host-side veths of lab runs whose process is gone (all of
/// them with `all`), killing anything still running inside. Returns what it removed.
pub fn down(all: bool) -> LabResult<Vec<String>> {
    let mut removed = Vec::new();
    let dead = |name: &str| owner_of(name).is_some_and(|pid| all || !cmd::process_alive(pid));
    for ns in parse_netns_list(&run("ip", &["netns", "list"])?) {
        if dead(&ns) {
            delete_netns(&ns)?;
            removed.push(format!("netns {ns}"));
        }
    }
    let links =
        || -> LabResult<Vec<String>> { Ok(parse_link_names(&run("ip", &["-o", "link", "show"])?)) };
    for link in links()? {
        if dead(&link) {
            // Deleting one end of a veth deletes its peer, which may be next in the list.
            if let Err(e) = run("ip", &["link", "del", &link]) {
                if links()?.contains(&link) {
                    return Err(e);
                }
                continue;
            }
            removed.push(format!("link {link}"));
        }
    }
    Ok(removed)
}

/// The state of a feature in `ethtool -k` output (`name: on [fixed]`).
pub fn feature(text: &str, name: &str) -> Option<bool> {
    text.lines().find_map(|l| {
        let (k, v) = l.trim().split_once(':')?;
        (k == name).then(|| v.trim().starts_with("on"))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ethtool_features() {
        let text = "Features for fhv0-1:\nrx-checksumming: on\ngeneric-receive-offload: off\n\
                    large-receive-offload: off [fixed]\nrx-gro-list: off\n";
        assert_eq!(feature(text, "generic-receive-offload"), Some(false));
        assert_eq!(feature(text, "rx-checksumming"), Some(true));
        assert_eq!(feature(text, "nope"), None);
    }

    #[test]
    fn owners_and_listings() {
        assert_eq!(owner_of("fh-srv-123"), Some(123));
        assert_eq!(owner_of("fh-cli-123-4"), Some(123));
        assert_eq!(owner_of("fhv1-77"), Some(77));
        assert_eq!(owner_of("fh-doctor-1"), None);
        assert_eq!(owner_of("eth0"), None);
        assert_eq!(
            parse_netns_list("fh-srv-1 (id: 0)\nother\n"),
            vec!["fh-srv-1".to_string(), "other".to_string()]
        );
        let links = "1: lo: <LOOPBACK,UP> mtu 65536\n7: fhv0-9@if6: <BROADCAST> mtu 1500\n";
        assert_eq!(
            parse_link_names(links),
            vec!["lo".to_string(), "fhv0-9".to_string()]
        );
    }

    #[test]
    fn topology_names_parse() {
        assert_eq!("veth".parse::<Kind>().unwrap(), Kind::Veth);
        let e = "tap".parse::<Kind>().unwrap_err();
        assert!(e.contains("loopback, veth"), "{e}");
    }
}
