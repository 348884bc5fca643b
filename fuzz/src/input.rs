//! Taking small control values off the front of a fuzz input: how much, which mode, where
//! to split. An exhausted input yields zeros, so every input is usable.

/// A cursor over the input.
pub struct Input<'a> {
    data: &'a [u8],
}

impl<'a> Input<'a> {
    pub fn new(data: &'a [u8]) -> Self {
        Input { data }
    }

    /// The next byte, 0 when none is left.
    pub fn byte(&mut self) -> u8 {
        match self.data.split_first() {
            Some((b, rest)) => {
                self.data = rest;
                *b
            }
            None => 0,
        }
    }

    /// The next two bytes, big-endian.
    pub fn u16(&mut self) -> u16 {
        u16::from_be_bytes([self.byte(), self.byte()])
    }

    /// The next `n` bytes (fewer when the input ends).
    pub fn take(&mut self, n: usize) -> &'a [u8] {
        let (a, b) = self.data.split_at(n.min(self.data.len()));
        self.data = b;
        a
    }

    /// Whatever is left.
    pub fn rest(self) -> &'a [u8] {
        self.data
    }

    /// True when nothing is left.
    pub fn is_empty(&self) -> bool {
        self.data.is_empty()
    }
}

/// `data` split into pieces whose sizes come from `sizes` (cycled; a zero means one
/// byte), as a stream arrives in reads of any length.
pub fn pieces<'a>(data: &'a [u8], sizes: &[u8]) -> Vec<&'a [u8]> {
    let mut out = Vec::new();
    let mut at = 0;
    let mut i = 0;
    while at < data.len() {
        let n = match sizes.get(i % sizes.len().max(1)) {
            Some(&s) => (s as usize).max(1),
            None => data.len(),
        };
        let end = (at + n).min(data.len());
        out.push(&data[at..end]);
        at = end;
        i += 1;
    }
    out
}
