//! One flow's receive loop, per mode. Every byte goes through the pattern checker (unless
//! checking is off) and the shared counter, whichever way it arrived.

use crate::pattern::Checker;
use crate::report::{MmapCounts, UringRecvCounts};
use crate::{RecvMode, StreamError};
use firehose_sys::socket::{is_would_block, MSG_DONTWAIT};
use firehose_sys::sockopt::{events, poll_one};
use firehose_sys::tcp::TcpSock;
use firehose_sys::tcp_mmap::ZcWindow;
use firehose_sys::uring::RecvRing;
use firehose_sys::SysError;
use std::os::fd::AsRawFd;

/// errno the kernel returns from TCP_ZEROCOPY_RECEIVE at end of stream.
const EIO: i32 = 5;
use std::sync::atomic::{AtomicU64, Ordering};

/// What a flow's receive loop needs.
pub(crate) struct FlowRecv<'a> {
    pub sock: &'a TcpSock,
    pub flow: u32,
    pub checker: Option<Checker>,
    pub got: &'a AtomicU64,
    /// Size of the copy buffer / mmap window.
    pub chunk: usize,
}

/// Counters a mode reports.
#[derive(Debug, Default)]
pub(crate) struct RecvCounts {
    pub mmap: Option<MmapCounts>,
    pub uring: Option<UringRecvCounts>,
}

fn transfer(f: &FlowRecv<'_>, source: SysError) -> StreamError {
    StreamError::Transfer {
        flow: f.flow,
        bytes: f.got.load(Ordering::Relaxed),
        source,
    }
}

impl FlowRecv<'_> {
    fn take(&mut self, data: &[u8]) -> Result<(), StreamError> {
        if let Some(c) = &mut self.checker {
            c.check(data).map_err(|m| StreamError::Corrupt {
                flow: self.flow,
                offset: m.offset,
                expected: m.expected,
                got: m.got,
            })?;
        }
        self.got.fetch_add(data.len() as u64, Ordering::Relaxed);
        Ok(())
    }
}

/// Receives until end of stream.
pub(crate) fn run(mode: RecvMode, f: &mut FlowRecv<'_>) -> Result<RecvCounts, StreamError> {
    match mode {
        RecvMode::Copy => copy(f).map(|_| RecvCounts::default()),
        RecvMode::Mmap => mmap(f).map(|m| RecvCounts {
            mmap: Some(m),
            uring: None,
        }),
        RecvMode::Uring => uring(f).map(|u| RecvCounts {
            mmap: None,
            uring: Some(u),
        }),
        RecvMode::UringZcrx => Err(StreamError::Config(
            "uring-zcrx has no receive path without a registered zcrx queue".into(),
        )),
    }
}

/// recv into `buf` until `want` bytes or end of stream; returns bytes read.
fn recv_some(f: &mut FlowRecv<'_>, buf: &mut [u8], want: usize) -> Result<usize, StreamError> {
    let mut got = 0;
    while got < want {
        let n = match f.sock.recv(&mut buf[..want - got], 0) {
            Ok(0) => return Ok(got),
            Ok(n) => n,
            Err(e) if is_would_block(&e) => continue,
            Err(e) => return Err(transfer(f, e)),
        };
        f.take(&buf[..n])?;
        got += n;
    }
    Ok(got)
}

fn copy(f: &mut FlowRecv<'_>) -> Result<(), StreamError> {
    let mut buf = vec![0u8; f.chunk];
    loop {
        match f.sock.recv(&mut buf, 0) {
            Ok(0) => return Ok(()),
            Ok(n) => f.take(&buf[..n])?,
            Err(e) if is_would_block(&e) => {}
            Err(e) => return Err(transfer(f, e)),
        }
    }
}

fn mmap(f: &mut FlowRecv<'_>) -> Result<MmapCounts, StreamError> {
    let fd = f.sock.as_raw_fd();
    let mut win = ZcWindow::new(fd, f.chunk).map_err(|e| transfer(f, e))?;
    // Wake only for a window's worth (at most half the buffer, or the sender could stall),
    // as the tcp_mmap selftest does: mapping a few pages per call costs more than copying.
    let rcvbuf = f.sock.rcvbuf().map_err(|e| transfer(f, e))?;
    let lowat = (win.len() as i32).min(rcvbuf / 2).max(1);
    f.sock.set_rcvlowat(lowat).map_err(|e| transfer(f, e))?;
    let mut copybuf = vec![0u8; f.chunk];
    let mut c = MmapCounts::default();
    loop {
        poll_one(fd, events::POLLIN, 1000).map_err(|e| transfer(f, e))?;
        // EIO means "nothing queued and the peer has closed": end of stream.
        let z = match win.receive(fd) {
            Ok(z) => z,
            Err(e) if e.errno() == Some(EIO) => return Ok(c),
            Err(e) => return Err(transfer(f, e)),
        };
        c.calls += 1;
        if z.mapped > 0 {
            c.mapped_bytes += z.mapped as u64;
            f.take(win.mapped(z.mapped))?;
        }
        if z.skip > 0 {
            c.fallbacks += 1;
            let mut left = z.skip;
            while left > 0 {
                let want = left.min(copybuf.len());
                let n = recv_some(f, &mut copybuf, want)?;
                if n == 0 {
                    return Ok(c);
                }
                c.copied_bytes += n as u64;
                left -= n;
            }
        } else if z.mapped == 0 {
            // Nothing mappable and no hint: either end of stream or data the kernel
            // would not describe yet; a plain recv settles it.
            let n = match f.sock.recv(&mut copybuf, MSG_DONTWAIT) {
                Ok(n) => n,
                Err(e) if is_would_block(&e) => continue,
                Err(e) => return Err(transfer(f, e)),
            };
            if n == 0 {
                return Ok(c);
            }
            f.take(&copybuf[..n])?;
            c.copied_bytes += n as u64;
            c.fallbacks += 1;
        }
    }
}

fn uring(f: &mut FlowRecv<'_>) -> Result<UringRecvCounts, StreamError> {
    let mut r = RecvRing::new(f.sock.as_raw_fd(), 16, f.chunk.min(256 << 10))
        .map_err(|e| transfer(f, e))?;
    loop {
        let chunk = r.recv().map_err(|e| transfer(f, e))?;
        if chunk.is_empty() {
            break;
        }
        f.take(chunk)?;
    }
    Ok(UringRecvCounts {
        multishot: r.multishot(),
        cqes: r.stats.cqes,
        arms: r.stats.arms,
    })
}
