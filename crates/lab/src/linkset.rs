//! Link settings of the Bloomberg talk's matrix on the veth pair: MTU, GRO, TSO/GSO and
//! BIG TCP (gso_max_size / gro_max_size), set on both ends inside the lab's namespaces and
//! read back from the kernel. [`Applied`] remembers what the links were before and puts it
//! back when the cell ends, when it is dropped (Ctrl-C, failure) or when setting failed
//! half-way; the namespaces going away on exit is the last line of defence.

use crate::cmd;
use crate::topology::{feature, Side, Topology};
use crate::{LabError, LabResult};
use serde::Serialize;

/// gso_max_size / gro_max_size without BIG TCP: the 64 KiB limit of a classic TSO packet.
pub const NO_BIG_TCP: u32 = 65536;

/// What one cell asks of both veth ends.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct LinkSettings {
    pub mtu: u32,
    /// Software GRO (`ethtool -K DEV gro`).
    pub gro: bool,
    /// TSO and GSO together (`ethtool -K DEV tso X gso X`): the sender's segmentation.
    pub tso: bool,
    /// gso_max_size and gro_max_size; above 65536 this is BIG TCP.
    pub max_size: u32,
}

/// One veth end as the kernel reports it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct LinkState {
    pub dev: String,
    pub mtu: u32,
    pub gro: bool,
    pub tso: bool,
    pub gso: bool,
    pub gso_max_size: u32,
    pub gro_max_size: u32,
}

impl LinkState {
    /// True when this end is as `s` asks.
    pub fn matches(&self, s: &LinkSettings) -> bool {
        LinkState {
            dev: self.dev.clone(),
            ..s.target()
        } == *self
    }
}

/// A number field of `ip -d -j link show` output.
pub fn json_field(text: &str, key: &str) -> Option<u32> {
    let v: serde_json::Value = serde_json::from_str(text).ok()?;
    let n = v.get(0)?.get(key)?.as_u64()?;
    u32::try_from(n).ok()
}

fn on(b: bool) -> &'static str {
    if b {
        "on"
    } else {
        "off"
    }
}

/// Reads one end back: `ip -d -j link show` and `ethtool -k` inside its namespace.
pub fn read(topo: &Topology, side: Side) -> LabResult<LinkState> {
    let dev = topo.dev(side);
    let link = topo.exec(side, &["ip", "-d", "-j", "link", "show", "dev", &dev])?;
    let num = |key: &str| {
        json_field(&link, key).ok_or_else(|| {
            LabError::Command(format!("ip -d -j link show dev {dev} printed no {key}"))
        })
    };
    let feats = topo.exec(side, &["ethtool", "-k", &dev])?;
    let feat = |name: &str| {
        feature(&feats, name)
            .ok_or_else(|| LabError::Command(format!("ethtool -k {dev} printed no {name} line")))
    };
    Ok(LinkState {
        mtu: num("mtu")?,
        gso_max_size: num("gso_max_size")?,
        gro_max_size: num("gro_max_size")?,
        gro: feat("generic-receive-offload")?,
        tso: feat("tcp-segmentation-offload")?,
        gso: feat("generic-segmentation-offload")?,
        dev,
    })
}

impl LinkSettings {
    /// The state both ends should read back as.
    fn target(&self) -> LinkState {
        LinkState {
            dev: String::new(),
            mtu: self.mtu,
            gro: self.gro,
            tso: self.tso,
            gso: self.tso,
            gso_max_size: self.max_size,
            gro_max_size: self.max_size,
        }
    }
}

/// Sets one end's MTU, max sizes and offloads to `st` (each command's error names it).
fn write(topo: &Topology, side: Side, st: &LinkState) -> LabResult<()> {
    let dev = topo.dev(side);
    let (m, gs, gr) = (
        st.mtu.to_string(),
        st.gso_max_size.to_string(),
        st.gro_max_size.to_string(),
    );
    topo.exec(side, &["ip", "link", "set", "dev", &dev, "mtu", &m])?;
    topo.exec(
        side,
        &[
            "ip",
            "link",
            "set",
            "dev",
            &dev,
            "gso_max_size",
            &gs,
            "gro_max_size",
            &gr,
        ],
    )?;
    let (gro, tso, gso) = (on(st.gro), on(st.tso), on(st.gso));
    topo.exec(
        side,
        &["ethtool", "-K", &dev, "gro", gro, "tso", tso, "gso", gso],
    )?;
    Ok(())
}

/// Settings in force on both ends until [`Applied::restore`] (the study's `leave`, which
/// the framework calls however a repetition ends; the namespaces are deleted at the end of
/// the run in any case).
#[derive(Debug, Clone)]
pub struct Applied {
    /// Server end, then client end, as they were before.
    saved: [LinkState; 2],
    /// As read back after setting.
    pub state: [LinkState; 2],
}

const SIDES: [Side; 2] = [Side::Server, Side::Client];

impl Applied {
    /// Saves both ends, sets `s` on both and reads them back; an end that reads back other
    /// than asked is an error (the kernel clamped or ignored a value). On any error what
    /// was changed is put back.
    pub fn apply(topo: &Topology, s: &LinkSettings) -> LabResult<Applied> {
        let saved = [read(topo, Side::Server)?, read(topo, Side::Client)?];
        let set = || -> LabResult<[LinkState; 2]> {
            for side in SIDES {
                write(topo, side, &s.target())?;
            }
            let state = [read(topo, Side::Server)?, read(topo, Side::Client)?];
            if let Some(bad) = state.iter().find(|st| !st.matches(s)) {
                return Err(LabError::Command(format!(
                    "{} reads back as {bad:?} after setting {s:?}",
                    bad.dev
                )));
            }
            Ok(state)
        };
        match set() {
            Ok(state) => Ok(Applied { saved, state }),
            Err(e) => {
                let _ = put_back(topo, &saved);
                Err(e)
            }
        }
    }

    /// Both ends as they were before.
    pub fn saved(&self) -> &[LinkState; 2] {
        &self.saved
    }

    /// Puts both ends back as they were and reads them back; returns what they read as,
    /// or an error naming the end that differs.
    pub fn restore(self, topo: &Topology) -> LabResult<[LinkState; 2]> {
        put_back(topo, &self.saved)?;
        let now = [read(topo, Side::Server)?, read(topo, Side::Client)?];
        for (n, s) in now.iter().zip(&self.saved) {
            if n != s {
                return Err(LabError::Command(format!(
                    "{} reads back as {n:?} after restoring {s:?}",
                    n.dev
                )));
            }
        }
        Ok(now)
    }
}

fn put_back(topo: &Topology, saved: &[LinkState; 2]) -> LabResult<()> {
    let mut first = None;
    for (side, s) in SIDES.into_iter().zip(saved) {
        if let Err(e) = write(topo, side, s) {
            first.get_or_insert(e);
        }
    }
    first.map_or(Ok(()), Err)
}

/// True when ethtool and ip are there (the matrix cannot set anything without them).
pub fn tools_missing() -> Option<String> {
    ["ip", "ethtool"]
        .into_iter()
        .find(|p| !cmd::installed(p))
        .map(|p| format!("{p} is not installed: {}", cmd::install_hint(p)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn link_json_fields() {
        let t = r#"[{"ifname":"fhv0-1","mtu":9000,"gso_max_size":185000,"gro_max_size":65536}]"#;
        assert_eq!(json_field(t, "mtu"), Some(9000));
        assert_eq!(json_field(t, "gso_max_size"), Some(185000));
        assert_eq!(json_field(t, "nope"), None);
        assert_eq!(json_field("not json", "mtu"), None);
    }

    #[test]
    fn a_state_matches_only_what_was_asked() {
        let s = LinkSettings {
            mtu: 1500,
            gro: true,
            tso: true,
            max_size: NO_BIG_TCP,
        };
        let mut st = LinkState {
            dev: "x".into(),
            mtu: 1500,
            gro: true,
            tso: true,
            gso: true,
            gso_max_size: NO_BIG_TCP,
            gro_max_size: NO_BIG_TCP,
        };
        assert!(st.matches(&s));
        st.gro_max_size = 131072;
        assert!(!st.matches(&s));
    }
}
