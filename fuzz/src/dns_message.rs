//! DNS message parsing (crate `dnswire`): the responder's allocation-free query parser,
//! the header, the question's end, and names as text.
//!
//! A query that parses has its question inside the message, its name lower-cased in the
//! scratch buffer with offsets that walk the labels, and `question_end` agreeing; the
//! header decodes and encodes back; a name renders as text that reads back to the same
//! wire bytes.

use firehose_dnswire::{
    label_offsets, name_from_text, name_to_text, parse_query, question_end, read_name, Header,
    NameBuf, Parsed, HEADER, MAX_LABELS, MAX_NAME,
};

pub fn check(data: &[u8]) {
    let mut nb = NameBuf::default();
    match parse_query(data, &mut nb) {
        Parsed::Query(q) => {
            assert_eq!(q.question_end, HEADER + q.name_len + 4);
            assert!(q.question_end <= data.len());
            assert!(q.name_len <= MAX_NAME && q.labels < MAX_LABELS);
            let wire = &data[HEADER..HEADER + q.name_len];
            assert_eq!(&nb.bytes[..q.name_len], &wire.to_ascii_lowercase()[..]);
            assert_eq!(label_offsets(wire).len(), q.labels + 1);
            for i in 0..=q.labels {
                let s = nb.suffix(i, q.name_len);
                assert_eq!(s.last(), Some(&0), "suffix {i} ends at the root");
            }
            assert_eq!(question_end(data), Some(q.question_end));
            let mut back = Vec::new();
            name_from_text(&name_to_text(wire), &mut back).expect("rendered names read back");
            assert_eq!(back, wire);
        }
        Parsed::NotImp(Some(end)) => assert!(end <= data.len()),
        Parsed::NotImp(None) | Parsed::Drop(_) | Parsed::FormErr(_) => {}
    }
    if let Some(h) = Header::parse(data) {
        // Z, AD and CD are not modelled; everything else survives a round trip.
        let mut want = [0u8; HEADER];
        want.copy_from_slice(&data[..HEADER]);
        want[3] &= 0x8F;
        assert_eq!(h.to_bytes(), want);
    }
    if let Some(end) = question_end(data) {
        assert!(end <= data.len());
    }
    // Any name anywhere in the message.
    for at in [HEADER, data.len() / 2] {
        if let Ok((end, labels)) = read_name(data, at, &mut nb) {
            assert!(end <= data.len() && end - at <= MAX_NAME && labels < MAX_LABELS);
        }
    }
    // The input as presentation text: a name that converts is a well-formed wire name.
    if let Ok(text) = std::str::from_utf8(data) {
        let mut w = vec![0xAA];
        match name_from_text(text, &mut w) {
            Ok(()) => {
                let w = &w[1..];
                assert!(w.len() <= MAX_NAME && w.last() == Some(&0));
                assert_eq!(label_offsets(w).last().copied(), Some(w.len() - 1));
                let mut again = Vec::new();
                name_from_text(&name_to_text(w), &mut again).expect("reads back");
                assert_eq!(again, w);
            }
            Err(_) => assert_eq!(w, [0xAA], "unchanged on error"),
        }
    }
}

/// Queries of the test zones' names, with and without EDNS, and a few names as text.
pub fn seeds() -> Vec<Vec<u8>> {
    let mut out = crate::dns_handler::queries();
    for t in [
        "www.example.com.",
        r"a\.b.\065\\.",
        ".",
        "x.y.wild.example.com",
    ] {
        out.push(t.as_bytes().to_vec());
    }
    out
}

/// Walks a DNS message's sections: each record inside the message, each name ending at
/// the root within 255 bytes, each compression pointer pointing back to an earlier name,
/// and the last record ending exactly at the message's end.
pub fn walk(msg: &[u8]) -> Result<(), String> {
    let h = Header::parse(msg).ok_or("shorter than a header")?;
    let mut at = HEADER;
    for _ in 0..h.qdcount {
        at = skip_name(msg, at)? + 4;
        if at > msg.len() {
            return Err(format!("question past the end ({at} > {})", msg.len()));
        }
    }
    let records = u32::from(h.ancount) + u32::from(h.nscount) + u32::from(h.arcount);
    for r in 0..records {
        at = skip_name(msg, at)?;
        let fixed = msg
            .get(at..at + 10)
            .ok_or_else(|| format!("record {r} cut short at {at}"))?;
        let rdlen = u16::from_be_bytes([fixed[8], fixed[9]]) as usize;
        at += 10 + rdlen;
        if at > msg.len() {
            return Err(format!(
                "record {r}'s data past the end ({at} > {})",
                msg.len()
            ));
        }
    }
    if at != msg.len() {
        return Err(format!("{} bytes after the last record", msg.len() - at));
    }
    Ok(())
}

/// The offset just past the name at `at`, after checking where its pointers lead.
fn skip_name(msg: &[u8], at: usize) -> Result<usize, String> {
    let mut i = at;
    let mut end = None;
    let mut wire_len = 0;
    loop {
        let len = *msg
            .get(i)
            .ok_or_else(|| format!("name at {at} cut short"))? as usize;
        match len & 0xC0 {
            0 => {
                wire_len += 1 + len;
                if wire_len > MAX_NAME {
                    return Err(format!("name at {at} longer than 255 bytes"));
                }
                if len == 0 {
                    return Ok(end.unwrap_or(i + 1));
                }
                i += 1 + len;
            }
            0xC0 => {
                let lo = *msg
                    .get(i + 1)
                    .ok_or_else(|| format!("pointer at {i} cut short"))?;
                let to = (len & 0x3F) << 8 | lo as usize;
                if to >= i {
                    return Err(format!("pointer at {i} to {to} does not point back"));
                }
                end.get_or_insert(i + 2);
                i = to;
            }
            _ => return Err(format!("label type {len:#x} at {i}")),
        }
    }
}
