//! The Internet checksum (RFC 1071): one's-complement sum of 16-bit big-endian words.

/// Adds `data` to a running sum; an odd last byte counts as its high half.
pub fn add(mut sum: u64, data: &[u8]) -> u64 {
    let mut chunks = data.chunks_exact(8);
    for c in &mut chunks {
        // Four 16-bit words at a time; the carries collect in the high bits of u64.
        let w = u64::from_be_bytes([c[0], c[1], c[2], c[3], c[4], c[5], c[6], c[7]]);
        sum += (w >> 48) + ((w >> 32) & 0xffff) + ((w >> 16) & 0xffff) + (w & 0xffff);
    }
    let mut words = chunks.remainder().chunks_exact(2);
    for w in &mut words {
        sum += u16::from_be_bytes([w[0], w[1]]) as u64;
    }
    if let [last] = words.remainder() {
        sum += (*last as u64) << 8;
    }
    sum
}

/// Folds a running sum to 16 bits and complements it: the value to store in a header.
pub fn finish(mut sum: u64) -> u16 {
    while sum >> 16 != 0 {
        sum = (sum & 0xffff) + (sum >> 16);
    }
    !(sum as u16)
}

/// The checksum of `data` alone (an IPv4 header with its checksum field zeroed).
pub fn of(data: &[u8]) -> u16 {
    finish(add(0, data))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rfc1071_example() {
        // The worked example of RFC 1071 section 3: sum 0xddf2, checksum 0x220d.
        let data = [0x00, 0x01, 0xf2, 0x03, 0xf4, 0xf5, 0xf6, 0xf7];
        assert_eq!(finish(add(0, &data)), !0xddf2);
    }

    #[test]
    fn odd_lengths_pad_with_zero() {
        assert_eq!(of(&[0x12, 0x34, 0x56]), of(&[0x12, 0x34, 0x56, 0x00]));
        let long: Vec<u8> = (0..=255u8).cycle().take(1001).collect();
        let mut padded = long.clone();
        padded.push(0);
        assert_eq!(of(&long), of(&padded));
    }

    #[test]
    fn a_header_with_its_checksum_sums_to_zero() {
        // IPv4 header from a capture, checksum 0xb861 in place.
        let h = [
            0x45, 0x00, 0x00, 0x73, 0x00, 0x00, 0x40, 0x00, 0x40, 0x11, 0xb8, 0x61, 0xc0, 0xa8,
            0x00, 0x01, 0xc0, 0xa8, 0x00, 0xc7,
        ];
        assert_eq!(of(&h), 0);
    }
}
