//! The doctor's journal parser (`host::doctor::journal`): `--revert` replays what the
//! journal file says, as root.
//!
//! Input: journal text. Whatever it holds, reading it never panics; every entry read
//! names a target doctor changes (so revert never writes elsewhere) and writes back to a
//! line that reads as the same entry; a torn line is only ever the last one.

use firehose_host::doctor::journal::{parse, Entry};

pub fn check(data: &[u8]) {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let Ok(c) = parse(text) else {
        return;
    };
    let lines = text.lines().count();
    if let Some(t) = c.torn {
        assert_eq!(t, lines, "only the last line may be torn");
        assert!(!text.ends_with('\n'));
    }
    for e in &c.entries {
        e.validate().expect("parse returns valid entries only");
        let line = serde_json::to_string(e).expect("an entry serializes");
        let back: Entry = serde_json::from_str(&line).expect("and reads back");
        assert_eq!(&back, e);
        // Appended after any torn tail, the journal reads with one more entry.
        let keep = match c.torn {
            Some(_) => &text[..text.rfind('\n').map_or(0, |i| i + 1)],
            None => text,
        };
        let sep = if keep.is_empty() || keep.ends_with('\n') {
            ""
        } else {
            "\n"
        };
        let more = parse(&format!("{keep}{sep}{line}\n")).expect("appending keeps it readable");
        assert_eq!(more.entries.len(), c.entries.len() + 1);
        assert_eq!(more.torn, None);
    }
}

/// A journal as `--apply --persist` writes it (every kind of target), one with a torn
/// last line, and one with a foreign path.
pub fn seeds() -> Vec<Vec<u8>> {
    let id = r#""boot_id":"8a1b","netns":"net:[4026531840]","time":1700000000"#;
    let lines = [
        format!(
            r#"{{"seq":1,"check":"irqbalance","target":{{"type":"service","name":"irqbalance"}},"old":"active","new":"inactive",{id}}}"#
        ),
        format!(
            r#"{{"seq":2,"check":"irq-affinity","target":{{"type":"file","path":"/proc/irq/42/smp_affinity_list","kind":"cpulist"}},"old":"0-3\n","new":"1",{id}}}"#
        ),
        format!(
            r#"{{"seq":3,"check":"rss-table","target":{{"type":"rss","iface":"eth0"}},"old":"0 1 0 1","new":"0 1 2 3",{id}}}"#
        ),
        format!(
            r#"{{"seq":4,"check":"gro","target":{{"type":"feature","iface":"eth0","feature":"gro"}},"old":"off","new":"on",{id}}}"#
        ),
        format!(
            r#"{{"seq":5,"check":"xps","target":{{"type":"file","path":"/sys/class/net/eth0/queues/tx-0/xps_cpus","kind":"mask"}},"old":"00000000\n","new":"1",{id}}}"#
        ),
        format!(
            r#"{{"seq":6,"check":"udp-mem","target":{{"type":"file","path":"/proc/sys/net/ipv4/udp_mem","kind":"words"}},"old":"1\t2\t3\n","new":"4 5 6",{id}}}"#
        ),
        format!(
            r#"{{"seq":7,"check":"persist","target":{{"type":"config","path":"/etc/sysctl.d/90-firehose.conf"}},"old":"(absent)","new":"net.ipv4.udp_mem = 4 5 6\n",{id}}}"#
        ),
    ];
    let all = lines.join("\n") + "\n";
    let torn = format!("{all}{}", &lines[3][..40]);
    let foreign = all.replace("/proc/irq/42/smp_affinity_list", "/etc/shadow");
    vec![all.into_bytes(), torn.into_bytes(), foreign.into_bytes()]
}
