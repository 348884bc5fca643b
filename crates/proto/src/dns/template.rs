//! A pre-rendered answer: its sections as wire bytes compressed against a model
//! question, and the pointers to move when the real question is longer.

/// Pre-rendered response sections for one kind of answer (a view into
/// [`super::arena::Templates`], where they are stored).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Template<'a> {
    pub rcode: u8,
    /// Authoritative answer (clear for referrals).
    pub aa: bool,
    /// Answer, authority and additional record counts (without OPT).
    pub counts: [u16; 3],
    /// Wire length of the model question name the bytes were compressed against.
    pub model_len: u16,
    /// Offset in `bytes` where the additional section starts.
    pub additional_at: u16,
    /// The sections, as they follow a question of `model_len`.
    pub bytes: &'a [u8],
    /// Offsets in `bytes` of compression pointers to shift by (qname length - model).
    pub fixups: &'a [u16],
}

impl Template<'_> {
    /// A referral: no answer, not authoritative, NS in the authority section.
    pub fn is_referral(&self) -> bool {
        !self.aa && self.counts[0] == 0 && self.counts[1] > 0
    }

    /// How many bytes and additional records to keep so the sections fit in `room`
    /// (the caller checked that the answer and authority sections fit).
    pub fn additional_fitting(&self, room: usize) -> (usize, u16) {
        let mut at = self.additional_at as usize;
        let mut kept = 0;
        while kept < self.counts[2] {
            let end = rr_end(self.bytes, at);
            if end > room {
                break;
            }
            at = end;
            kept += 1;
        }
        (at, kept)
    }
}

/// The end of the resource record starting at `at` in rendered section bytes.
pub(super) fn rr_end(b: &[u8], mut at: usize) -> usize {
    while b[at] != 0 && b[at] & 0xC0 != 0xC0 {
        at += 1 + b[at] as usize;
    }
    at += if b[at] == 0 { 1 } else { 2 };
    at + 10 + u16::from_be_bytes([b[at + 8], b[at + 9]]) as usize
}

/// Index of a template in [`super::db::ZoneSet::templates`].
pub type Tid = u32;
