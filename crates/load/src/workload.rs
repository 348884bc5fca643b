//! What the generator sends and how it recognises answers, per protocol.
//!
//! The generator owns timing, flows, windows and the table of outstanding requests; a
//! [`Workload`] only writes a request for an id and reads the id back from a response.

use firehose_sys::{Setting, SetupError};

/// A protocol's requests and responses, as seen by the generator. One instance per
/// generator thread.
pub trait Workload: Send {
    /// How many low bits of the request id travel on the wire (64 for echo, 16 for a
    /// DNS message id). The generator keeps fewer than `2^id_bits` requests outstanding
    /// per thread, so an id on the wire names exactly one request.
    fn id_bits(&self) -> u32;

    /// Writes request `id`, intended to be sent at `sent_ns` (ns since the run began),
    /// into `buf` and returns its length. `id` fits in `id_bits`; the generator reuses an
    /// id only after its previous request was answered or declared lost, so a workload
    /// may remember per id what it sent (e.g. which question) for [`Workload::matches`].
    fn write_request(&mut self, id: u64, sent_ns: u64, buf: &mut [u8]) -> usize;

    /// Reads the (wire) id a response carries and its result code (0 when the protocol
    /// has none); `None` if the datagram is not a response of this workload.
    fn response_id(&mut self, resp: &[u8]) -> Option<(u64, u16)>;

    /// Checks that `resp` really answers request `id` (same question, same size...).
    fn matches(&mut self, id: u64, resp: &[u8]) -> bool;

    /// [`Self::matches`], told when the kernel received `resp` (CLOCK_REALTIME ns since
    /// the Unix epoch) where the socket stamps arrivals, for a workload that measures with
    /// it (NTP's destination timestamp). Most workloads ignore it.
    fn matches_at(&mut self, id: u64, resp: &[u8], _arrived_unix_ns: Option<u64>) -> bool {
        self.matches(id, resp)
    }

    /// Responses that carried a request's id but failed this workload's checks (a bad
    /// authenticator, an unexpected verdict), by reason, counted since the start; such a
    /// response does not complete its request. Empty for workloads without such checks.
    fn invalid(&self) -> Vec<(&'static str, u64)> {
        Vec::new()
    }

    /// Measurements of the answers beyond latency, by name (NTP: offset, delay and hold
    /// time, ns), over the exchanges sent after the warm-up. Empty for most workloads.
    fn measures(&self) -> Vec<(&'static str, crate::measure::SignedHistogram)> {
        Vec::new()
    }

    /// Name of a result code for reports (e.g. "NOERROR"); echo has only "ok".
    fn code_name(&self, code: u16) -> String {
        if code == 0 {
            "ok".into()
        } else {
            code.to_string()
        }
    }
}

/// Magic at the start of every echo request, so foreign datagrams count as stray.
pub const ECHO_MAGIC: [u8; 4] = *b"FHL1";
/// Bytes of the echo header: magic, id (u64 LE), intended send time (u64 LE, ns).
pub const ECHO_HEADER: usize = 20;

/// Requests of a fixed size carrying magic, id and send timestamp; the answer must be
/// the same bytes.
#[derive(Debug, Clone)]
pub struct EchoWorkload {
    size: usize,
}

impl EchoWorkload {
    /// Requests of `size` bytes (at least [`ECHO_HEADER`]).
    pub fn new(size: usize) -> Result<Self, SetupError> {
        let sz = Setting::Size.r();
        if size < ECHO_HEADER {
            return Err(SetupError::usage(
                Setting::Size,
                format!(
                    "{sz} {size} is too small: a request carries a {ECHO_HEADER}-byte header (magic, id, timestamp); use {sz} {ECHO_HEADER} or more"
                ),
            ));
        }
        if size > 65507 {
            return Err(SetupError::usage(
                Setting::Size,
                format!("{sz} {size} exceeds the largest UDP payload over IPv4 (65507)"),
            ));
        }
        Ok(EchoWorkload { size })
    }
}

impl Workload for EchoWorkload {
    fn id_bits(&self) -> u32 {
        64
    }

    fn write_request(&mut self, id: u64, sent_ns: u64, buf: &mut [u8]) -> usize {
        buf[..4].copy_from_slice(&ECHO_MAGIC);
        buf[4..12].copy_from_slice(&id.to_le_bytes());
        buf[12..20].copy_from_slice(&sent_ns.to_le_bytes());
        // The padding keeps whatever the slot held: only the size matters on the wire.
        self.size
    }

    fn response_id(&mut self, resp: &[u8]) -> Option<(u64, u16)> {
        if resp.len() < ECHO_HEADER || resp[..4] != ECHO_MAGIC {
            return None;
        }
        let id = u64::from_le_bytes(resp[4..12].try_into().ok()?);
        Some((id, 0))
    }

    fn matches(&mut self, id: u64, resp: &[u8]) -> bool {
        resp.len() == self.size && resp[4..12] == id.to_le_bytes()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn echo_round_trip_of_an_id() {
        let mut w = EchoWorkload::new(100).unwrap();
        let mut buf = [0u8; 200];
        let n = w.write_request(42, 7, &mut buf);
        assert_eq!(n, 100);
        assert_eq!(w.response_id(&buf[..n]), Some((42, 0)));
        assert!(w.matches(42, &buf[..n]));
        assert!(!w.matches(43, &buf[..n]));
        assert!(!w.matches(42, &buf[..99]));
        assert_eq!(w.response_id(b"garbage that is long enough"), None);
        assert!(EchoWorkload::new(19).is_err());
    }
}
