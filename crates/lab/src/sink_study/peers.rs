//! The other tools the study runs where installed: udp_sink (the Red Hat article's own
//! receiver, netoptimizer/network-testing, not packaged), `sockperf sr` (the receiving side
//! of sockperf's throughput mode), trafgen (netsniff-ng's AF_PACKET sender) and `iperf3 -u`.
//! Here: their configuration and the parsing of what they print.

use std::net::Ipv4Addr;

/// How to get udp_sink when it is not on PATH.
pub const UDP_SINK_HINT: &str = "udp_sink is not packaged: build it from \
     github.com/netoptimizer/network-testing (`make` in src/) and put it on PATH; firehose \
     sink --io recvmsg is the baseline meanwhile";

/// The packets per second of each of udp_sink's result lines. Its columns changed between
/// versions (`recvmsg   \trun:  0\t 1000000\t1064.36\t939531.73\t...`), so the rate is
/// found as the number that follows the nanoseconds per packet: the pair whose product is 1e9.
pub fn udp_sink_rates(output: &str) -> Vec<f64> {
    output
        .lines()
        .filter(|l| l.contains("run:"))
        .filter_map(|l| {
            let (_, after) = l.split_once("run:")?;
            let nums: Vec<f64> = after
                .split_whitespace()
                .filter_map(|w| w.parse().ok())
                .collect();
            nums.windows(2)
                .find(|w| w[0] > 0.0 && (w[0] * w[1] / 1e9 - 1.0).abs() < 0.02)
                .map(|w| w[1])
        })
        .collect()
}

/// A trafgen configuration for one IPv4/UDP frame of `frame` bytes on the wire (FCS
/// included, as RFC 2544 counts it) from `src` to `dst`; trafgen fills in the IPv4 checksum
/// (csumip), the UDP checksum is left zero (allowed over IPv4).
pub fn trafgen_conf(
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn udp_sink_result_lines_of_both_layouts() {
        // Newer layout (captured from udp_sink built from network-testing's src/): name,
        // run, count, ns/pkt, pps, cycles, payload, demux.
        let new = "          \trun      count   \tns/pkt\tpps\t\tcycles\tpayload\n\
                   recvmsg   \trun:  0\t   20000\t7994.64\t125083.87\t20754\t18\t demux:1\n\
                   recvmsg   \trun:  1\t   20000\t10149.47\t98527.28\t26349\t18\t demux:1\n";
        assert_eq!(udp_sink_rates(new), [125083.87, 98527.28]);
        // Older layout: name, run, ns/pkt, pps, cycles, tsc interval; two rounds.
        let old = "recvmsg   \trun:  0\t1250.00\t800000.00\t3000\t3000000000\n\
                   recvmsg   \trun:  1\t1000.00\t1000000.00\t2400\t2400000000\n";
        assert_eq!(udp_sink_rates(old), [800000.0, 1000000.0]);
        assert!(udp_sink_rates(" - Waiting on first packet\n").is_empty());
        assert!(udp_sink_rates("recvmsg run: 0 12 34 56\n").is_empty());
    }

    #[test]
    fn trafgen_frames_add_up_to_the_frame_size() {
        let c = trafgen_conf(
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
        assert!(trafgen_conf(
            40,
            [0; 6],
            [0; 6],
            (Ipv4Addr::LOCALHOST, 1),
            (Ipv4Addr::LOCALHOST, 2)
        )
        .is_none());
    }
}
