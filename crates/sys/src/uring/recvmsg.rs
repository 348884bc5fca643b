//! The layout the kernel writes into a provided buffer for each datagram of a multishot
//! IORING_OP_RECVMSG: a 16-byte `struct io_uring_recvmsg_out` (the sender's address length,
//! the control bytes written, the datagram's length, the receive flags), then the room the
//! request's `msghdr` reserved for the name (`msg_namelen`), then the room for control
//! messages (`msg_controllen`), then the payload. [`parse`] reads it from plain bytes, so
//! what the kernel hands over is checked in one place (and fuzzed: `fuzz/` target
//! `uring_recvmsg`).

use crate::cmsg;

/// Size of `struct io_uring_recvmsg_out`.
pub const OUT_HDR: usize = 16;

/// One filled buffer, read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RecvmsgOut<'a> {
    /// The sender's address as stored (at most the room reserved for it).
    pub name: &'a [u8],
    /// The control messages the kernel wrote (at most the room reserved for them).
    pub control: &'a [u8],
    /// Bytes of payload in the buffer: the datagram, cut at the end of the buffer.
    pub len: usize,
    /// The datagram's length as the kernel reported it (MSG_TRUNC).
    pub full_len: usize,
    /// The receive flags (MSG_TRUNC, MSG_CTRUNC when the control room was too small).
    pub flags: u32,
}

impl RecvmsgOut<'_> {
    /// Where the payload starts for these rooms.
    pub fn payload_at(name_room: usize, control_room: usize) -> usize {
        OUT_HDR + name_room + control_room
    }

    /// The kernel's receive stamp among the control messages (SO_TIMESTAMPNS, or
    /// SO_TIMESTAMPING's software stamp), in ns since the Unix epoch.
    pub fn rx_stamp(&self) -> Option<u64> {
        crate::timestamping::rx_stamp(cmsg::walk(self.control))
    }
}

/// Reads a buffer the kernel filled under a `msghdr` reserving `name_room` bytes for the
/// name and `control_room` for control messages. Every length the header claims is clamped
/// to its room and to the buffer, so no claim can point outside `buf`; a buffer shorter
/// than the header reads as empty.
pub fn parse(buf: &[u8], name_room: usize, control_room: usize) -> RecvmsgOut<'_> {
    let word = |i: usize| -> usize {
        buf.get(i..i + 4).map_or(0, |w| {
            u32::from_ne_bytes(w.try_into().expect("4 bytes")) as usize
        })
    };
    let (name_len, control_len, full_len, flags) = (word(0), word(4), word(8), word(12));
    let region = |at: usize, room: usize, len: usize| -> &[u8] {
        let start = at.min(buf.len());
        let end = at.saturating_add(len.min(room)).min(buf.len());
        &buf[start..end]
    };
    let payload_at = RecvmsgOut::payload_at(name_room, control_room);
    RecvmsgOut {
        name: region(OUT_HDR, name_room, name_len),
        control: region(OUT_HDR + name_room, control_room, control_len),
        len: full_len.min(buf.len().saturating_sub(payload_at)),
        full_len,
        flags: flags as u32,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A buffer laid out as the kernel fills it for a 5-byte datagram from 127.0.0.1:4242
    /// on a socket with SO_TIMESTAMPNS, under a 28-byte name room and a 64-byte control
    /// room (x86_64); `uring::tests` checks the same reading against the kernel itself.
    fn captured() -> Vec<u8> {
        let mut b = Vec::new();
        for w in [16u32, 32, 5, 0] {
            b.extend_from_slice(&w.to_ne_bytes());
        }
        // sockaddr_in: AF_INET, port 4242 (0x1092), 127.0.0.1, padding.
        let mut name = vec![2, 0, 0x10, 0x92, 127, 0, 0, 1];
        name.resize(28, 0);
        b.extend_from_slice(&name);
        // cmsghdr { len 32, SOL_SOCKET, SCM_TIMESTAMPNS } + timespec.
        b.extend_from_slice(&32u64.to_ne_bytes());
        b.extend_from_slice(&1i32.to_ne_bytes());
        b.extend_from_slice(&35i32.to_ne_bytes());
        b.extend_from_slice(&1_764_122_400i64.to_ne_bytes());
        b.extend_from_slice(&123_456_789i64.to_ne_bytes());
        b.resize(16 + 28 + 64, 0);
        b.extend_from_slice(b"hello");
        b.resize(2048, 0);
        b
    }

    #[test]
    fn a_captured_buffer_gives_name_stamp_and_payload() {
        let b = captured();
        let r = parse(&b, 28, 64);
        assert_eq!(r.name.len(), 16);
        assert_eq!(
            crate::sockaddr::from_bytes(r.name),
            Some("127.0.0.1:4242".parse().unwrap())
        );
        assert_eq!(r.control.len(), 32);
        assert_eq!(r.rx_stamp(), Some(1_764_122_400_123_456_789));
        let at = RecvmsgOut::payload_at(28, 64);
        assert_eq!((r.len, r.full_len, r.flags), (5, 5, 0));
        assert_eq!(&b[at..at + r.len], b"hello");
    }

    #[test]
    fn claims_past_their_room_or_the_buffer_are_clamped() {
        let mut b = captured();
        b[0..4].copy_from_slice(&1000u32.to_ne_bytes()); // name longer than its room
        b[4..8].copy_from_slice(&u32::MAX.to_ne_bytes());
        b[8..12].copy_from_slice(&70_000u32.to_ne_bytes()); // datagram cut (MSG_TRUNC)
        let r = parse(&b, 28, 64);
        assert_eq!((r.name.len(), r.control.len()), (28, 64));
        assert_eq!((r.len, r.full_len), (2048 - 108, 70_000));
        // Rooms larger than the buffer, and a buffer shorter than the header.
        let r = parse(&b[..40], 28, 64);
        assert_eq!((r.name.len(), r.control.len(), r.len), (24, 0, 0));
        let r = parse(&b[..7], 28, 64);
        assert_eq!(
            (r.name, r.control, r.len, r.full_len),
            (&[][..], &[][..], 0, 0)
        );
    }

    #[test]
    fn no_control_room_means_no_stamp() {
        let mut b = captured();
        b[4..8].copy_from_slice(&0u32.to_ne_bytes());
        assert_eq!(parse(&b, 28, 64).rx_stamp(), None);
        assert_eq!(parse(&b, 28, 0).control, &[] as &[u8]);
    }
}
