//! Per-NAPI busy-polling settings for a server that busy-polls (`serve --profile latency`):
//! defer-hard-irqs, gro-flush-timeout and irq-suspend-timeout on every NAPI instance of the
//! interface the server listens on, set through the doctor's journal (each old value is
//! written and synced before its change) and restored when the server ends, so the host is
//! left as it was; a server killed before it could restore leaves the journal, which
//! `firehose doctor --revert --journal PATH` replays.
//!
//! What the kernel accepted is read back (`napi-get`) and reported, and so is why nothing
//! was set: a wildcard address (no one interface), a device without NAPI (loopback; a veth
//! with GRO off and no XDP program), no CAP_NET_ADMIN, a kernel without per-NAPI settings.

use crate::doctor::apply::{self, Actuator, LiveActuator, Outcome};
use crate::doctor::journal::{Identity, Journal};
use crate::doctor::plan::{Phase, Step, Target};
use crate::fs::HostFs;
use crate::nic::LiveNic;
use firehose_sys::ethtool::Ethtool;
use firehose_sys::netdev::{Napi, NapiParam, Netdev};
use std::net::IpAddr;
use std::path::{Path, PathBuf};

/// What a latency server asks of each NAPI, from the kernel's NAPI documentation
/// (Documentation/networking/napi.rst, "IRQ suspension"): hold the interrupt off for two
/// empty polls with a 200 µs watchdog behind it, and keep it off 20 ms after a busy-polling
/// epoll_wait found events. With the socket's and the epoll's prefer-busy-poll, the
/// server's own polls then do the receive work while it is busy.
pub const LATENCY: [(NapiParam, u64); 3] = [
    (NapiParam::DeferHardIrqs, 2),
    (NapiParam::GroFlushTimeout, 200_000),
    (NapiParam::IrqSuspendTimeout, 20_000_000),
];

/// The check name the journal files these changes under (the doctor's busy-poll check).
const CHECK: &str = "busy-poll";

/// What was found and set on the listening interface.
#[derive(Debug, Clone, Default, PartialEq, serde::Serialize)]
pub struct NapiReport {
    /// The interface holding the listen address (absent for a wildcard address).
    pub iface: Option<String>,
    /// Its kind (`veth`, ...; absent for a device without one, such as a physical NIC).
    pub kind: Option<String>,
    /// GRO, as ETHTOOL_GGRO reads it (a veth has NAPI only with GRO on or XDP attached).
    pub gro: Option<bool>,
    /// The NAPI instances, as read back after the changes.
    pub napis: Vec<Napi>,
    /// One line per change (done, skipped as already set, or failed with the errno).
    pub outcomes: Vec<Outcome>,
    /// Why nothing was set, when nothing was.
    pub note: Option<String>,
    /// The journal holding the old values while the server runs.
    pub journal: Option<PathBuf>,
}

/// Restores the journaled values when dropped (or by [`NapiGuard::restore`]).
pub struct NapiGuard {
    journal: Journal,
    id: Identity,
    done: bool,
}

impl NapiGuard {
    /// Puts every value back (newest first), removes the journal once all are restored,
    /// and says what happened to each.
    pub fn restore(mut self) -> Vec<Outcome> {
        self.restore_now()
    }

    fn restore_now(&mut self) -> Vec<Outcome> {
        self.done = true;
        let fs = HostFs::live();
        let nic = LiveNic::new();
        let act = LiveActuator { fs: &fs, nic: &nic };
        match apply::revert(&act, &self.journal, &self.id) {
            Ok(out) => {
                if !out.iter().any(Outcome::failed) {
                    let mut retired = self.journal.path().as_os_str().to_owned();
                    retired.push(".reverted");
                    let _ = std::fs::remove_file(retired);
                }
                out
            }
            Err(e) => vec![Outcome {
                check: CHECK.into(),
                target: self.journal.path().display().to_string(),
                command: String::new(),
                old: None,
                new: String::new(),
                result: apply::StepResult::Failed(e.to_string()),
            }],
        }
    }
}

impl Drop for NapiGuard {
    fn drop(&mut self) {
        if !self.done {
            self.restore_now();
        }
    }
}

/// Where a server with process id `pid` journals its NAPI changes.
pub fn journal_path(pid: u32) -> PathBuf {
    PathBuf::from(format!("/run/firehose/serve-napi-{pid}.journal"))
}

/// Sets `want` on every NAPI of the interface holding `ip`, journaled in `journal`. The
/// guard is `Some` when something was changed (it restores on drop).
pub fn apply_for(
    ip: IpAddr,
    want: &[(NapiParam, u64)],
    journal: &Path,
) -> (NapiReport, Option<NapiGuard>) {
    let mut r = NapiReport::default();
    if ip.is_unspecified() {
        r.note = Some(
            "listening on a wildcard address: per-NAPI settings need one interface (listen on its address); none set".into(),
        );
        return (r, None);
    }
    let (ifindex, iface) = match firehose_sys::ifaddr::interface_of(ip) {
        Ok(Some(i)) => i,
        Ok(None) => {
            r.note = Some(format!("no interface holds {ip}; none set"));
            return (r, None);
        }
        Err(e) => {
            r.note = Some(format!("cannot find the interface of {ip}: {e}"));
            return (r, None);
        }
    };
    r.iface = Some(iface.clone());
    r.kind = firehose_sys::route::link(ifindex).ok().and_then(|l| l.kind);
    r.gro = Ethtool::new().and_then(|e| e.gro(&iface)).ok();
    let mut nd = match Netdev::open() {
        Ok(n) => n,
        Err(e) => {
            r.note = Some(format!(
                "no netdev netlink family (kernel 6.5+ has it): {e}; none set"
            ));
            return (r, None);
        }
    };
    let napis = match nd.napis(ifindex) {
        Ok(v) => v,
        Err(e) => {
            r.note = Some(format!("napi-get (kernel 6.9+) refused: {e}; none set"));
            return (r, None);
        }
    };
    if napis.is_empty() {
        r.note = Some(match (r.kind.as_deref(), r.gro) {
            (Some("veth"), Some(false)) => format!(
                "{iface} has no NAPI instance: a veth has one only with GRO on or an XDP program attached (GRO is off: ethtool -K {iface} gro on); none set"
            ),
            _ => format!("{iface} has no NAPI instance (napi-get lists none); none set"),
        });
        return (r, None);
    }
    if !firehose_sys::cpu::is_root() {
        r.napis = napis;
        r.note = Some(
            "napi-set needs CAP_NET_ADMIN (run as root); none set, the values above are the host's"
                .into(),
        );
        return (r, None);
    }
    let steps: Vec<Step> = napis
        .iter()
        .flat_map(|n| {
            want.iter().map(|&(param, v)| {
                Step::set(
                    CHECK,
                    Phase::Sysctl,
                    Target::Napi {
                        iface: iface.clone(),
                        napi: n.id,
                        param,
                    },
                    v.to_string(),
                )
                .on(&iface)
            })
        })
        .collect();
    let fs = HostFs::live();
    let id = Identity::read(&fs);
    let j = Journal::new(journal);
    let nic = LiveNic::new();
    let act = LiveActuator { fs: &fs, nic: &nic };
    r.journal = Some(journal.to_path_buf());
    match apply::apply(&steps, &act, &j, &id, now()) {
        Ok(out) => r.outcomes = out,
        Err(e) => r.note = Some(format!("not set: {e}")),
    }
    r.napis = napis
        .iter()
        .map(|n| nd.napi(n.id).unwrap_or_else(|_| n.clone()))
        .collect();
    let changed = j.entries().map(|e| !e.is_empty()).unwrap_or(true);
    let guard = changed.then(|| NapiGuard {
        journal: j,
        id,
        done: false,
    });
    if guard.is_none() {
        r.journal = None;
    }
    (r, guard)
}

fn now() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

/// Reads one NAPI setting the way the journal records it (for tests and reports).
pub fn read_setting(iface: &str, napi: u32, param: NapiParam) -> Result<String, String> {
    let fs = HostFs::live();
    let nic = LiveNic::new();
    LiveActuator { fs: &fs, nic: &nic }
        .read(&Target::Napi {
            iface: iface.into(),
            napi,
            param,
        })
        .map_err(|e| e.to_string())
}
