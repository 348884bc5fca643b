//! Bad input: one line naming what was wrong, exit code 2, never a panic.

use crate::util::{bin, run};
use firehose_sys::socket::UdpSock;
use std::net::SocketAddr;
use std::process::{Command, Output};

pub fn assert_usage_error(args: &[&str], must_mention: &str) {
    check_usage_error(&run(args), args, must_mention);
}

/// One line on stderr naming `must_mention`, exit code 2, no panic.
fn check_usage_error(out: &Output, args: &[&str], must_mention: &str) {
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(
        out.status.code(),
        Some(2),
        "{args:?}: exit code; stderr: {err}"
    );
    assert_eq!(
        err.trim_end().lines().count(),
        1,
        "{args:?}: one line, got: {err}"
    );
    assert!(
        !err.contains("panicked") && !err.contains("RUST_BACKTRACE"),
        "{err}"
    );
    assert!(
        err.contains(must_mention),
        "{args:?}: '{err}' should mention '{must_mention}'"
    );
}

#[test]
fn serve_rejects_bad_input() {
    assert_usage_error(&["serve", "--listen", "not-an-address"], "--listen");
    assert_usage_error(&["serve", "--listen", "127.0.0.1:99999"], "--listen");
    assert_usage_error(&["serve", "--workers", "0"], "--workers");
    assert_usage_error(&["serve", "--workers", "-2"], "--workers");
    assert_usage_error(&["serve", "--cpus", "4096"], "CPU 4096");
    assert_usage_error(&["serve", "--cpus", "0-x"], "--cpus");
    assert_usage_error(&["serve", "--profile", "warp"], "unknown profile");
    assert_usage_error(
        &["serve", "--sockets", "shared", "--steer", "cpu"],
        "reuseport",
    );
    assert_usage_error(&["serve", "--duration", "0"], "--duration");
}

#[test]
fn serve_reports_port_in_use() {
    // A SO_REUSEPORT holder of our own uid: the kernel would let `--profile tuned` join its
    // group, so only the server's own check refuses the port. `--duration` bounds the run
    // should that check ever be missing.
    let any: SocketAddr = "127.0.0.1:0".parse().unwrap();
    let holder = UdpSock::new_for(&any).unwrap();
    holder.set_reuseport(true).unwrap();
    holder.bind(&any).unwrap();
    let addr = holder.local_addr().unwrap().to_string();
    assert_usage_error(
        &["serve", "--listen", &addr, "--duration", "2"],
        "EADDRINUSE",
    );
    assert_usage_error(
        &[
            "serve",
            "--listen",
            &addr,
            "--profile",
            "tuned",
            "--duration",
            "2",
        ],
        "EADDRINUSE",
    );
}

#[test]
fn load_rejects_bad_input() {
    let t = "127.0.0.1:9";
    assert_usage_error(&["load", "--target", "nowhere"], "--target");
    assert_usage_error(&["load", "--target", t, "--duration", "0"], "--duration");
    assert_usage_error(&["load", "--target", t, "--duration", "-5"], "--duration");
    assert_usage_error(&["load", "--target", t, "--rate", "0"], "--rate");
    assert_usage_error(&["load", "--target", t, "--rate", "-100"], "--rate");
    assert_usage_error(&["load", "--target", t, "--cpus", "4096"], "CPU 4096");
    assert_usage_error(&["load", "--target", t, "--size", "10"], "--size");
    assert_usage_error(
        &["load", "--target", t, "--flows", "1", "--threads", "2"],
        "--flows",
    );
    assert_usage_error(&["load", "--target", "127.0.0.1:0"], "port 0");
    assert_usage_error(&["load", "--target", t, "--per-wake", "8"], "--rate");
    let fast = ["load", "--target", t, "--rate", "1000"];
    assert_usage_error(&[&fast[..], &["--per-wake", "2000"]].concat(), "--per-wake");
    assert_usage_error(&[&fast[..], &["--per-wake", "0"]].concat(), "--per-wake");
    assert_usage_error(&["load", "--target", t, "--batch", "2000"], "--batch 2000");
    assert_usage_error(&["load", "--target", t, "--arrivals", "poisson"], "--rate");
    assert_usage_error(&[&fast[..], &["--arrivals", "burst:0"]].concat(), "burst:N");
    assert_usage_error(
        &[&fast[..], &["--arrivals", "even"]].concat(),
        "uniform, poisson",
    );
    assert_usage_error(
        &[&fast[..], &["--arrivals", "burst:8", "--per-wake", "8"]].concat(),
        "drop --per-wake",
    );
    assert_usage_error(&["load"], "--target");
}

#[test]
fn serve_reports_a_socket_option_the_kernel_refuses() {
    // As uid 0 of a new user namespace firehose asks for SO_RCVBUFFORCE, as it does for
    // root, and the kernel refuses it: the namespace has no CAP_NET_ADMIN over the host's
    // network namespace.
    let args = [
        "serve",
        "--listen",
        "127.0.0.1:0",
        "--rcvbuf",
        "1M",
        "--duration",
        "2",
    ];
    let out = match Command::new("unshare")
        .args(["-U", "-r", bin()])
        .args(args)
        .output()
    {
        Ok(o) if !String::from_utf8_lossy(&o.stderr).starts_with("unshare:") => o,
        Ok(o) => {
            let e = String::from_utf8_lossy(&o.stderr);
            eprintln!("skipping: no user namespace here ({})", e.trim());
            return;
        }
        Err(e) => {
            eprintln!("skipping: unshare (util-linux) cannot run: {e}");
            return;
        }
    };
    check_usage_error(&out, &args, "setsockopt(SO_RCVBUFFORCE=1048576)");
    check_usage_error(&out, &args, "(EPERM)");
}
