//! `firehose load --proto ntp` against `firehose serve --proto ntp`: every response
//! validated, offset, delay and hold time reported in text and JSON; Kiss-o'-Death and
//! unsynchronised answers counted as invalid.

use crate::util::{json_of, run, stderr, tmp, Served};

fn load(srv: &Served, extra: &[&str], json: &std::path::Path) -> std::process::Output {
    let target = srv.addr.to_string();
    let mut args = vec![
        "load",
        "--proto",
        "ntp",
        "--target",
        &target,
        "--json-file",
        json.to_str().unwrap(),
    ];
    args.extend_from_slice(extra);
    run(&args)
}

#[test]
fn load_measures_offset_delay_and_hold_time() {
    let srv = Served::proto("ntp", &["--ntp-local-stratum", "10"]);
    let json = tmp("ntp-load.json");
    let out = load(&srv, &["--rate", "2k", "-t", "2", "--warmup", "0.5"], &json);
    assert!(out.status.success(), "{}", stderr(&out));
    let text = String::from_utf8_lossy(&out.stdout);
    for line in ["offset      us", "delay       us", "hold        us"] {
        assert!(text.contains(line), "{line}: {text}");
    }
    let j = json_of(&json);
    let _ = std::fs::remove_file(&json);
    assert_eq!(j["config"]["proto"], "ntp");
    assert!(j.get("invalid").is_none(), "{}", j["invalid"]);
    assert!(
        j["completed"].as_u64().unwrap() >= 3000,
        "{}",
        j["completed"]
    );
    let m = &j["measures"];
    // Both clocks are this host's: the offset is the path's asymmetry, microseconds (p50).
    let p50 = m["offset"]["p50"].as_f64().unwrap();
    assert!(p50.abs() < 100.0, "offset p50 {p50} µs: {m}");
    // The hold time is the server's transmit minus its receive: positive, within the delay's
    // order of magnitude, and the delay positive.
    assert!(m["hold"]["min"].as_f64().unwrap() > 0.0, "{m}");
    assert!(m["delay"]["p50"].as_f64().unwrap() > 0.0, "{m}");
    srv.stop();
}

/// In interleaved mode nearly every answer is interleaved (the first of each chain is
/// not); each is measured again from the kernel's transmit stamp, and the server counts
/// the same answers interleaved, from that stamp.
#[test]
fn load_in_interleaved_mode_measures_from_the_kernels_transmit_stamps() {
    for io in crate::ntp_interleaved::stamping_paths() {
        load_interleaved(&io);
    }
}

fn load_interleaved(io: &[&str]) {
    let json_srv = tmp("ntp-load-xleave-srv.json");
    let srv = Served::local_ntp_on(&json_srv, io);
    let json = tmp("ntp-load-xleave.json");
    let out = load(
        &srv,
        &[
            "--rate",
            "2k",
            "-t",
            "2",
            "--warmup",
            "0.5",
            "--ntp-interleaved",
        ],
        &json,
    );
    assert!(out.status.success(), "{}", stderr(&out));
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("interleaved_delay us"), "{text}");
    let j = json_of(&json);
    let _ = std::fs::remove_file(&json);
    assert!(j.get("invalid").is_none(), "{}", j["invalid"]);
    let m = &j["measures"];
    let p50 = m["interleaved_offset"]["p50"].as_f64().unwrap();
    assert!(p50.abs() < 100.0, "interleaved offset p50 {p50} µs: {m}");
    assert!(m["interleaved_hold"]["min"].as_f64().unwrap() > 0.0, "{m}");
    srv.stop();
    let s = json_of(&json_srv);
    let _ = std::fs::remove_file(&json_srv);
    let h = &s["handler"];
    let (client, interleaved) = (
        h["ntp_client"].as_u64().unwrap(),
        h["ntp_interleaved"].as_u64().unwrap(),
    );
    assert!(client >= 3000, "{io:?}: {h}");
    // All but the first few are interleaved, and every one from the kernel's stamp.
    assert!(interleaved * 10 >= client * 9, "{io:?}: {h}");
    assert_eq!(h["ntp_tx_kernel"], h["ntp_interleaved"], "{io:?}: {h}");
}

/// Overloaded (a 64 KiB receive buffer, requests far beyond what one worker answers), the
/// kernel drops transmit stamps: the error queue shares the receive buffer, full of
/// requests. The worker counts each stamp that never came (`tx_stamps_missing`), answers
/// those responses' follow-ups with its own clock reading (`ntp_tx_daemon`), and never
/// hands a response another's stamp: the generator checks every interleaved transmit time
/// against when the answer it names arrived.
#[test]
fn overloaded_lost_transmit_stamps_are_counted_and_never_paired_with_another_answer() {
    for io in crate::ntp_interleaved::stamping_paths() {
        overloaded_interleaved(&io);
    }
}

fn overloaded_interleaved(io: &[&str]) {
    let json_srv = tmp("ntp-load-xleave-over-srv.json");
    let srv = Served::local_ntp_on(&json_srv, &[&["--rcvbuf", "64K"][..], io].concat());
    let json = tmp("ntp-load-xleave-over.json");
    let out = load(
        &srv,
        &[
            "--rate",
            "400k",
            "--flows",
            "16",
            "-t",
            "2",
            "--timeout",
            "0.5",
            "--ntp-interleaved",
        ],
        &json,
    );
    assert!(out.status.code().is_some(), "{}", stderr(&out));
    let j = json_of(&json);
    let _ = std::fs::remove_file(&json);
    // Every answer valid, interleaved ones included; many requests lost to the buffer.
    assert!(j.get("invalid").is_none(), "{io:?}: {}", j["invalid"]);
    assert!(
        j["lost"].as_u64().unwrap() > 0,
        "{io:?}: not overloaded: {j}"
    );
    assert!(j["measures"]["interleaved_delay"]["min"].as_f64().unwrap() > 0.0);
    srv.stop();
    let s = json_of(&json_srv);
    let _ = std::fs::remove_file(&json_srv);
    let w = &s["workers"][0]["backend"];
    assert!(
        w["tx_stamps_missing"].as_u64().unwrap() > 0,
        "{io:?}: no stamp lost: {w}"
    );
    let h = &s["handler"];
    let (interleaved, kernel) = (
        h["ntp_interleaved"].as_u64().unwrap(),
        h["ntp_tx_kernel"].as_u64().unwrap(),
    );
    assert!(
        kernel > 0 && interleaved > kernel,
        "{io:?}: some interleaved answers from the server's clock: {h}"
    );
}

#[test]
fn kiss_of_death_and_unsynchronised_answers_are_invalid() {
    let srv = Served::proto(
        "ntp",
        &[
            "--ntp-local-stratum",
            "10",
            "--ntp-ratelimit",
            "interval=3,burst=4,leak=4,kod=1",
        ],
    );
    let json = tmp("ntp-load-kod.json");
    // One source at 1000/s against 1 every 8 s: nearly everything is limited.
    let out = load(
        &srv,
        &["--rate", "1k", "-t", "1", "--timeout", "0.2"],
        &json,
    );
    let j = json_of(&json);
    let _ = std::fs::remove_file(&json);
    assert!(out.status.code().is_some(), "{}", stderr(&out));
    let (lost, done) = (
        j["lost"].as_u64().unwrap(),
        j["completed"].as_u64().unwrap(),
    );
    assert!(lost > done, "mostly lost: {lost} lost, {done} completed");
    assert!(
        j["invalid"]["kod_rate"].as_u64().unwrap() > 100,
        "{}",
        j["invalid"]
    );
    assert!(String::from_utf8_lossy(&out.stdout).contains("invalid     kod_rate"));
    srv.stop();

    if firehose_sys::clock::KernelClock::read()
        .unwrap()
        .synchronised()
    {
        eprintln!("this host's clock is synchronised: the unsynchronised answer is not checked");
        return;
    }
    let srv = Served::proto("ntp", &["--allow-unsynchronised"]);
    let json = tmp("ntp-load-unsync.json");
    let out = load(
        &srv,
        &["--rate", "500", "-t", "1", "--timeout", "0.2"],
        &json,
    );
    let j = json_of(&json);
    let _ = std::fs::remove_file(&json);
    assert_eq!(out.status.code(), Some(1));
    // Every answer is unsynchronised: none completes, and at least half the requests sent
    // (500 on an unloaded host; a busy one answers some after the timeout) get one.
    let (unsynchronised, sent) = (
        j["invalid"]["unsynchronised"].as_u64().unwrap(),
        j["sent"].as_u64().unwrap(),
    );
    assert!(
        sent >= 100 && unsynchronised * 2 >= sent,
        "{unsynchronised} unsynchronised answers to {sent} requests: {}",
        j["invalid"]
    );
    assert_eq!(j["completed"], 0);
    srv.stop();
}

#[test]
fn ntp_load_flags_are_checked() {
    let out = run(&["load", "--target", "127.0.0.1:9", "--ntp-version", "3"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(stderr(&out).contains("--ntp-version applies only to --proto ntp"));
    for (extra, want) in [
        (&["--ntp-version", "5"][..], "--ntp-version"),
        (
            &["--ntp-version", "3", "--ntp-interleaved"][..],
            "--ntp-interleaved is NTP version 4's",
        ),
    ] {
        let mut a = vec!["load", "--target", "127.0.0.1:9", "--proto", "ntp"];
        a.extend_from_slice(extra);
        let out = run(&a);
        assert_eq!(out.status.code(), Some(2), "{a:?}: {}", stderr(&out));
        assert!(stderr(&out).contains(want), "{a:?}: {}", stderr(&out));
    }
}
