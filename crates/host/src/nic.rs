//! What the doctor asks a NIC through ethtool, behind a trait so checks run against a fake NIC
//! in tests. The live implementation issues SIOCETHTOOL ioctls (crates/sys/src/ethtool.rs).

pub use firehose_sys::ethtool::Channels;
use firehose_sys::ethtool::{self, Ethtool};
pub use firehose_sys::netdev::Napi;

/// A refused ethtool command: which one and the errno, e.g. EOPNOTSUPP on a virtio NIC.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("{what}: {message}")]
pub struct NicError {
    pub what: String,
    pub errno: Option<i32>,
    pub message: String,
}

impl NicError {
    /// True when the driver does not implement the command (so the check is not applicable).
    pub fn unsupported(&self) -> bool {
        self.errno == Some(95)
    }
}

impl From<firehose_sys::SysError> for NicError {
    fn from(e: firehose_sys::SysError) -> Self {
        let errno = e.errno();
        let name = errno.map(crate::fs::errno_name).unwrap_or("?");
        let text = e.source.to_string();
        let text = text.split(" (os error").next().unwrap_or(&text).to_string();
        NicError {
            what: e.what,
            errno,
            message: format!("{text} ({name})"),
        }
    }
}

/// An offload switch the doctor reads and sets.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Feature {
    Gro,
    Gso,
}

impl Feature {
    /// The name `ethtool -K` uses.
    pub fn name(self) -> &'static str {
        match self {
            Feature::Gro => "gro",
            Feature::Gso => "gso",
        }
    }
}

/// The ethtool queries and settings the doctor uses.
pub trait Nic {
    /// Queue counts (`ethtool -l`).
    fn channels(&self, iface: &str) -> Result<Channels, NicError>;
    /// RSS indirection table (`ethtool -x`).
    fn rss_table(&self, iface: &str) -> Result<Vec<u32>, NicError>;
    /// Sets the RSS indirection table (`ethtool -X`).
    fn set_rss_table(&self, iface: &str, table: &[u32]) -> Result<(), NicError>;
    /// RXH_* bits hashed for UDP over IPv4 (`ethtool -n IFACE rx-flow-hash udp4`).
    fn udp4_hash(&self, iface: &str) -> Result<u64, NicError>;
    /// An offload switch (`ethtool -k`).
    fn feature(&self, iface: &str, f: Feature) -> Result<bool, NicError>;
    /// Sets an offload switch (`ethtool -K`).
    fn set_feature(&self, iface: &str, f: Feature, on: bool) -> Result<(), NicError>;
    /// The interface's NAPI instances with their busy-polling settings (netdev netlink
    /// `napi-get`; not ethtool, but asked of the same device): empty without NAPI.
    fn napis(&self, iface: &str) -> Result<Vec<Napi>, NicError>;
}

/// The NICs of the running host, in the caller's network namespace.
pub struct LiveNic {
    eth: Result<Ethtool, NicError>,
}

impl LiveNic {
    /// Opens the ethtool control socket; a failure is reported by each later call.
    pub fn new() -> Self {
        LiveNic {
            eth: Ethtool::new().map_err(NicError::from),
        }
    }

    fn eth(&self) -> Result<&Ethtool, NicError> {
        self.eth.as_ref().map_err(Clone::clone)
    }
}

impl Default for LiveNic {
    fn default() -> Self {
        Self::new()
    }
}

impl Nic for LiveNic {
    fn channels(&self, iface: &str) -> Result<Channels, NicError> {
        Ok(self.eth()?.channels(iface)?)
    }
    fn rss_table(&self, iface: &str) -> Result<Vec<u32>, NicError> {
        Ok(self.eth()?.rss_table(iface)?)
    }
    fn set_rss_table(&self, iface: &str, table: &[u32]) -> Result<(), NicError> {
        Ok(self.eth()?.set_rss_table(iface, table)?)
    }
    fn udp4_hash(&self, iface: &str) -> Result<u64, NicError> {
        Ok(self.eth()?.rx_flow_hash(iface, ethtool::UDP_V4_FLOW)?)
    }
    fn feature(&self, iface: &str, f: Feature) -> Result<bool, NicError> {
        let e = self.eth()?;
        Ok(match f {
            Feature::Gro => e.gro(iface)?,
            Feature::Gso => e.gso(iface)?,
        })
    }
    fn set_feature(&self, iface: &str, f: Feature, on: bool) -> Result<(), NicError> {
        let e = self.eth()?;
        match f {
            Feature::Gro => e.set_gro(iface, on)?,
            Feature::Gso => e.set_gso(iface, on)?,
        }
        Ok(())
    }
    fn napis(&self, iface: &str) -> Result<Vec<Napi>, NicError> {
        let index = firehose_sys::ifaddr::ifindex(iface)?;
        Ok(firehose_sys::netdev::Netdev::open()?.napis(index)?)
    }
}
