//! The byte pattern every flow carries, so the receiver can tell corruption, reordering
//! or a buffer rewritten before the kernel released it.
//!
//! Message `m` of flow `f` is a run of little-endian 64-bit words; word `j` encodes
//! (f, tag, j) where `tag = m % cycle`. With a fixed cycle (the sender's ring of buffers,
//! filled once) the sender writes nothing per message; with cycle 0 every message is
//! distinct and the sender rewrites each buffer as soon as the kernel releases it, which
//! makes an early release visible at the receiver as a wrong tag.

/// Bytes of the stream header that opens every flow.
pub const HEADER_LEN: usize = 40;
const MAGIC: &[u8; 8] = b"FHSTRM01";

/// The first bytes of every flow: who it is and how to check it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Header {
    /// Identifies one sender run, so a receiver groups its flows.
    pub run_id: u64,
    pub flow: u32,
    pub flows: u32,
    pub msg_size: u32,
    /// Tag period; 0 means every message is distinct.
    pub cycle: u32,
}

impl Header {
    /// Serialises the header.
    pub fn encode(&self) -> [u8; HEADER_LEN] {
        let mut b = [0u8; HEADER_LEN];
        b[..8].copy_from_slice(MAGIC);
        b[8..16].copy_from_slice(&self.run_id.to_le_bytes());
        b[16..20].copy_from_slice(&self.flow.to_le_bytes());
        b[20..24].copy_from_slice(&self.flows.to_le_bytes());
        b[24..28].copy_from_slice(&self.msg_size.to_le_bytes());
        b[28..32].copy_from_slice(&self.cycle.to_le_bytes());
        b
    }

    /// Parses a header; `None` if the magic is wrong or a field is impossible.
    pub fn decode(b: &[u8; HEADER_LEN]) -> Option<Header> {
        if &b[..8] != MAGIC {
            return None;
        }
        let u32_at = |o: usize| u32::from_le_bytes(b[o..o + 4].try_into().expect("4 bytes"));
        let h = Header {
            run_id: u64::from_le_bytes(b[8..16].try_into().expect("8 bytes")),
            flow: u32_at(16),
            flows: u32_at(20),
            msg_size: u32_at(24),
            cycle: u32_at(28),
        };
        (h.flows > 0 && h.flow < h.flows && h.msg_size > 0).then_some(h)
    }
}

fn word(flow: u32, tag: u64, j: usize) -> u64 {
    ((flow as u64 & 0xff) << 56)
        ^ ((tag & 0xffff_ffff) << 24)
        ^ (j as u64 & 0xff_ffff)
        ^ 0xa5a5_0f0f_5a5a_f0f0
}

/// Writes message `tag` of `flow` into `buf` (its length is the message size).
pub fn fill(buf: &mut [u8], flow: u32, tag: u64) {
    let words = buf.len() / 8;
    let mut chunks = buf.chunks_exact_mut(8);
    for (j, c) in (&mut chunks).enumerate() {
        c.copy_from_slice(&word(flow, tag, j).to_le_bytes());
    }
    let rem = chunks.into_remainder();
    if !rem.is_empty() {
        let w = word(flow, tag, words).to_le_bytes();
        let n = rem.len();
        rem.copy_from_slice(&w[..n]);
    }
}

/// Where a flow's bytes first differed from the pattern.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Mismatch {
    /// Offset in the flow's stream (after the header).
    pub offset: u64,
    pub expected: u8,
    pub got: u8,
}

/// Checks a flow's bytes as they arrive, in any chunking.
pub struct Checker {
    flow: u32,
    msg_size: usize,
    cycle: u64,
    pos: u64,
    /// Precomputed messages for a fixed cycle, or one scratch message for cycle 0.
    expected: Vec<Vec<u8>>,
    scratch_tag: Option<u64>,
}

impl Checker {
    /// A checker for the flow a header describes.
    pub fn new(h: &Header) -> Checker {
        let msg_size = h.msg_size as usize;
        let expected = if h.cycle > 0 {
            (0..h.cycle as u64)
                .map(|t| {
                    let mut m = vec![0u8; msg_size];
                    fill(&mut m, h.flow, t);
                    m
                })
                .collect()
        } else {
            vec![vec![0u8; msg_size]]
        };
        Checker {
            flow: h.flow,
            msg_size,
            cycle: h.cycle as u64,
            pos: 0,
            expected,
            scratch_tag: None,
        }
    }

    /// Bytes checked so far.
    pub fn position(&self) -> u64 {
        self.pos
    }

    fn message(&mut self, m: u64) -> &[u8] {
        if self.cycle > 0 {
            return &self.expected[(m % self.cycle) as usize];
        }
        if self.scratch_tag != Some(m) {
            fill(&mut self.expected[0], self.flow, m);
            self.scratch_tag = Some(m);
        }
        &self.expected[0]
    }

    /// Checks the next bytes of the stream.
    pub fn check(&mut self, mut data: &[u8]) -> Result<(), Mismatch> {
        while !data.is_empty() {
            let m = self.pos / self.msg_size as u64;
            let o = (self.pos % self.msg_size as u64) as usize;
            let n = data.len().min(self.msg_size - o);
            let pos = self.pos;
            let want = &self.message(m)[o..o + n];
            if want != &data[..n] {
                let i = want.iter().zip(data).position(|(a, b)| a != b).unwrap_or(0);
                return Err(Mismatch {
                    offset: pos + i as u64,
                    expected: want[i],
                    got: data[i],
                });
            }
            self.pos += n as u64;
            data = &data[n..];
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn header(cycle: u32) -> Header {
        Header {
            run_id: 9,
            flow: 3,
            flows: 4,
            msg_size: 1003,
            cycle,
        }
    }

    #[test]
    fn header_round_trips_and_rejects_garbage() {
        let h = header(8);
        assert_eq!(Header::decode(&h.encode()), Some(h));
        let mut bad = h.encode();
        bad[0] = b'X';
        assert_eq!(Header::decode(&bad), None);
        let mut bad = header(8);
        bad.flow = 4;
        assert_eq!(Header::decode(&bad.encode()), None);
    }

    #[test]
    fn any_chunking_passes_and_a_flipped_byte_is_found() {
        for cycle in [0, 3] {
            let h = header(cycle);
            let mut stream = Vec::new();
            for m in 0..7u64 {
                let mut msg = vec![0u8; 1003];
                fill(&mut msg, 3, if cycle > 0 { m % cycle as u64 } else { m });
                stream.extend_from_slice(&msg);
            }
            let mut c = Checker::new(&h);
            for chunk in stream.chunks(377) {
                c.check(chunk).unwrap();
            }
            assert_eq!(c.position(), stream.len() as u64);
            stream[4321] ^= 1;
            let mut c = Checker::new(&h);
            let e = c.check(&stream).unwrap_err();
            assert_eq!(e.offset, 4321);
        }
    }

    #[test]
    fn an_old_message_in_a_new_slot_is_caught() {
        let h = header(0);
        let mut a = vec![0u8; 1003];
        let mut b = vec![0u8; 1003];
        fill(&mut a, 3, 0);
        fill(&mut b, 3, 2);
        let mut c = Checker::new(&h);
        c.check(&a).unwrap();
        assert!(
            c.check(&b).is_err(),
            "message 2's content where message 1 belongs"
        );
    }
}
