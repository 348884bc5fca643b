//! Running the real `firehose` binary from tests.

#![allow(dead_code)]

use std::io::{BufRead, BufReader};
use std::net::SocketAddr;
use std::process::{Child, Command, Output, Stdio};

/// Path of the binary under test.
pub fn bin() -> &'static str {
    env!("CARGO_BIN_EXE_firehose")
}

/// Runs firehose with arguments to completion.
pub fn run(args: &[&str]) -> Output {
    Command::new(bin())
        .args(args)
        .output()
        .expect("spawn firehose")
}

/// A `firehose serve` child, stopped with SIGTERM when dropped.
pub struct Served {
    pub child: Child,
    pub addr: SocketAddr,
    pub stdout: BufReader<std::process::ChildStdout>,
}

impl Served {
    /// Starts `firehose serve ARGS` and waits for its "listening on" line.
    pub fn start(args: &[&str]) -> Served {
        let mut child = Command::new(bin())
            .arg("serve")
            .args(args)
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("spawn firehose serve");
        let mut stdout = BufReader::new(child.stdout.take().unwrap());
        let mut line = String::new();
        stdout.read_line(&mut line).unwrap();
        let addr = line
            .trim()
            .strip_prefix("firehose serve: listening on ")
            .unwrap_or_else(|| panic!("unexpected first line: {line:?}"))
            .parse()
            .unwrap();
        Served {
            child,
            addr,
            stdout,
        }
    }

    /// Starts one `tuned` worker on a free loopback port, plus `extra` flags.
    pub fn tuned(extra: &[&str]) -> Served {
        let mut args = vec![
            "--listen",
            "127.0.0.1:0",
            "--profile",
            "tuned",
            "--workers",
            "1",
        ];
        args.extend_from_slice(extra);
        Served::start(&args)
    }

    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Sends SIGTERM and returns the rest of stdout.
    pub fn stop(mut self) -> String {
        terminate(&self.child);
        let mut rest = String::new();
        let _ = std::io::Read::read_to_string(&mut self.stdout, &mut rest);
        let status = self.child.wait().unwrap();
        assert!(status.success(), "serve exited with {status}");
        rest
    }
}

impl Drop for Served {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn terminate(child: &Child) {
    let _ = Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status();
}
