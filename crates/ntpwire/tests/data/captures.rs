//! The captured packets of this directory (see README.md), as hex text, and their bytes.
//! Shared by the tests that compare with them: `#[path = ".../captures.rs"] mod captures;`.
#![allow(dead_code)]

/// The bytes of a hex line.
pub fn bytes(hex: &str) -> Vec<u8> {
    let hex = hex.trim();
    (0..hex.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&hex[i..i + 2], 16).expect("hex"))
        .collect()
}

/// `ntpdig 127.0.0.1`: leap 3, version 4, mode 3, its clock in the transmit timestamp.
pub const NTPDIG: &str = include_str!("ntpdig-request.hex");
/// `chronyd -Q 'server 127.0.0.1 port P iburst'`: poll 6, precision 32 (none revealed), a
/// random transmit timestamp.
pub const CHRONY_CLIENT: &str = include_str!("chrony-client-request.hex");
/// chronyd 4.3 with no source (`chronyd -x 'port P' allow`) answering CHRONY_CLIENT:
/// unsynchronised, stratum 0 (chrony sends its stratum 16 as 0), root delay and dispersion
/// 1 s, no reference.
pub const CHRONY_UNSYNC: &str = include_str!("chrony-unsync-response.hex");
/// chronyd 4.3 with `local stratum 10` answering CHRONY_CLIENT.
pub const CHRONY_LOCAL: &str = include_str!("chrony-local-response.hex");
/// The same server answering a version 3 request (0x1b...): version 3 back.
pub const CHRONY_LOCAL_V3: &str = include_str!("chrony-local-v3-response.hex");
/// The same server answering symmetric active (mode 1): symmetric passive (mode 2).
pub const CHRONY_LOCAL_PASSIVE: &str = include_str!("chrony-local-passive-response.hex");
