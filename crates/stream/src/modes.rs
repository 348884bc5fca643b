//! The send and receive modes, by the names the command line uses.

use std::fmt;
use std::str::FromStr;

/// How the sender moves bytes into the socket.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum SendMode {
    /// send(2) from a user buffer: one copy into the kernel.
    Copy,
    /// send(MSG_ZEROCOPY): pages pinned, completions on the error queue.
    Zerocopy,
    /// sendfile(2) from a memfd: page references, no user buffer.
    Sendfile,
    /// vmsplice(2) into a pipe, splice(2) into the socket.
    Splice,
    /// io_uring IORING_OP_SEND.
    Uring,
    /// io_uring IORING_OP_SEND_ZC, with notification CQEs.
    UringZc,
}

/// How the receiver takes bytes out of the socket.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum RecvMode {
    /// recv(2) into a user buffer.
    Copy,
    /// TCP_ZEROCOPY_RECEIVE into an mmap()ed window, recv for what cannot be mapped.
    Mmap,
    /// io_uring multishot IORING_OP_RECV with a provided-buffer ring.
    Uring,
    /// io_uring zero-copy receive (needs a NIC with header split; probed, never emulated).
    UringZcrx,
}

impl SendMode {
    pub const ALL: [SendMode; 6] = [
        SendMode::Copy,
        SendMode::Zerocopy,
        SendMode::Sendfile,
        SendMode::Splice,
        SendMode::Uring,
        SendMode::UringZc,
    ];

    /// The command-line name.
    pub fn name(self) -> &'static str {
        match self {
            SendMode::Copy => "copy",
            SendMode::Zerocopy => "zerocopy",
            SendMode::Sendfile => "sendfile",
            SendMode::Splice => "splice",
            SendMode::Uring => "uring",
            SendMode::UringZc => "uring-zc",
        }
    }

    /// True for modes whose buffers are rewritten only after the kernel releases them, so
    /// the receiver can check that release (sendfile and splice send fixed pages).
    pub fn can_rewrite(self) -> bool {
        matches!(
            self,
            SendMode::Copy | SendMode::Zerocopy | SendMode::Uring | SendMode::UringZc
        )
    }
}

impl RecvMode {
    pub const ALL: [RecvMode; 4] = [
        RecvMode::Copy,
        RecvMode::Mmap,
        RecvMode::Uring,
        RecvMode::UringZcrx,
    ];

    /// The command-line name.
    pub fn name(self) -> &'static str {
        match self {
            RecvMode::Copy => "copy",
            RecvMode::Mmap => "mmap",
            RecvMode::Uring => "uring",
            RecvMode::UringZcrx => "uring-zcrx",
        }
    }
}

fn parse<T: Copy>(
    s: &str,
    all: &[T],
    name: fn(T) -> &'static str,
    what: &str,
) -> Result<T, String> {
    all.iter().copied().find(|m| name(*m) == s).ok_or_else(|| {
        let names: Vec<&str> = all.iter().map(|m| name(*m)).collect();
        format!("unknown {what} mode '{s}' (one of: {})", names.join(", "))
    })
}

impl FromStr for SendMode {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        parse(s, &SendMode::ALL, SendMode::name, "send")
    }
}

impl FromStr for RecvMode {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        parse(s, &RecvMode::ALL, RecvMode::name, "receive")
    }
}

impl fmt::Display for SendMode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl fmt::Display for RecvMode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip_and_unknown_lists_choices() {
        for m in SendMode::ALL {
            assert_eq!(m.name().parse::<SendMode>().unwrap(), m);
        }
        for m in RecvMode::ALL {
            assert_eq!(m.name().parse::<RecvMode>().unwrap(), m);
        }
        let e = "zc".parse::<SendMode>().unwrap_err();
        assert!(e.contains("uring-zc"), "{e}");
    }
}
