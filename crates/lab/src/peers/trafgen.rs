//! trafgen (netsniff-ng), the AF_PACKET sender beside `firehose flood --io packet`: its
//! frame configuration and command line (it changes no host setting).

use std::net::Ipv4Addr;

/// A trafgen configuration for one IPv4/UDP frame of `frame` bytes on the wire (FCS
/// included, as RFC 2544 counts it) from `src` to `dst`; trafgen fills in the IPv4 checksum
/// (csumip), the UDP checksum is left zero (allowed over IPv4).
pub fn conf(
    frame: usize,
    src_mac: [u8; 6],
    dst_mac: [u8; 6],
    src: (Ipv4Addr, u16),
    dst: (Ipv4Addr, u16),
) -> Option<String> {
    // Ethernet 14 + IPv4 20 + UDP 8 + payload + FCS 4.
    let payload = frame.checked_sub(14 + 20 + 8 + 4)?;
    let hex = |b: &[u8]| {
        b.iter()
            .map(|x| format!("0x{x:02x}"))
            .collect::<Vec<_>>()
            .join(", ")
    };
    let ip_len = 20 + 8 + payload;
    Some(format!(
        "/* firehose lab flood: {frame}-byte IPv4/UDP frame */\n{{\n  \
         {dmac},\n  {smac},\n  c16(0x0800),\n  \
         0x45, 0x00, c16({ip_len}), c16(0), 0x40, 0x00, 64, 17, csumip(14, 33),\n  \
         {sip},\n  {dip},\n  \
         c16({sport}), c16({dport}), c16({udp_len}), c16(0),\n  \
         fill(0x00, {payload}),\n}}\n",
        dmac = hex(&dst_mac),
        smac = hex(&src_mac),
        sip = hex(&src.0.octets()),
        dip = hex(&dst.0.octets()),
        sport = src.1,
        dport = dst.1,
        udp_len = 8 + payload,
    ))
}

/// trafgen on `dev` with the frame configuration `conf`: one process (`--cpus 1`), the host's
/// socket memory sysctls and IRQ affinities left alone (`--no-sock-mem --notouch-irq`: it
/// tunes both by default), no CPU table. It sends until stopped with SIGINT.
pub fn argv(dev: &str, conf: &std::path::Path) -> Vec<String> {
    [
        "trafgen",
        "--dev",
        dev,
        "--conf",
        &conf.display().to_string(),
        "--cpus",
        "1",
        "--no-sock-mem",
        "--notouch-irq",
        "--no-cpu-stats",
    ]
    .map(String::from)
    .to_vec()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn trafgen_frames_add_up_to_the_frame_size() {
        let c = conf(
            64,
            [2, 0, 0, 0, 0, 1],
            [2, 0, 0, 0, 0, 2],
            (Ipv4Addr::new(10, 0, 0, 2), 4000),
            (Ipv4Addr::new(10, 0, 0, 1), 9),
        )
        .unwrap();
        // 64 - 4 (FCS) = 60 bytes written: 14 + 20 + 8 + 18 of payload.
        assert!(c.contains("c16(46)"), "{c}"); // IPv4 total length
        assert!(c.contains("c16(26)"), "{c}"); // UDP length
        assert!(c.contains("fill(0x00, 18)"), "{c}");
        assert!(
            c.contains("0x02, 0x00, 0x00, 0x00, 0x00, 0x02,\n  0x02"),
            "{c}"
        );
        assert!(
            c.contains("0x0a, 0x00, 0x00, 0x02,\n  0x0a, 0x00, 0x00, 0x01"),
            "{c}"
        );
        assert!(conf(
            40,
            [0; 6],
            [0; 6],
            (Ipv4Addr::LOCALHOST, 1),
            (Ipv4Addr::LOCALHOST, 2)
        )
        .is_none());
    }
}
