//! Artifact fingerprints: hex BLAKE2b-256 of a canonical byte encoding (design §5).
//!
//! Same digest as Python's `hashlib.blake2b(data, digest_size=32).hexdigest()`, so the
//! Python and Rust sides can fingerprint the same canonical bytes interchangeably.

use blake2::digest::consts::U32;
use blake2::{Blake2b, Digest};

type Blake2b256 = Blake2b<U32>;

/// Incremental fingerprint builder; feed canonical bytes, then take the hex digest.
#[derive(Clone, Default)]
pub struct Fingerprinter {
    hasher: Blake2b256,
}

impl Fingerprinter {
    pub fn new() -> Self {
        Self::default()
    }

    pub fn update(&mut self, data: &[u8]) -> &mut Self {
        self.hasher.update(data);
        self
    }

    /// Length-prefixed field: keeps concatenations of variable-length fields unambiguous.
    pub fn update_field(&mut self, data: &[u8]) -> &mut Self {
        self.hasher.update((data.len() as u64).to_le_bytes());
        self.hasher.update(data);
        self
    }

    pub fn update_u64(&mut self, v: u64) -> &mut Self {
        self.hasher.update(v.to_le_bytes());
        self
    }

    pub fn hex(self) -> String {
        to_hex(&self.hasher.finalize())
    }
}

/// Hex BLAKE2b-256 of `data`.
pub fn blake2b256_hex(data: &[u8]) -> String {
    let mut f = Fingerprinter::new();
    f.update(data);
    f.hex()
}

fn to_hex(bytes: &[u8]) -> String {
    const HEX: &[u8; 16] = b"0123456789abcdef";
    let mut s = String::with_capacity(bytes.len() * 2);
    for &b in bytes {
        s.push(HEX[(b >> 4) as usize] as char);
        s.push(HEX[(b & 15) as usize] as char);
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn empty_input_known_vector() {
        // Python: hashlib.blake2b(b"", digest_size=32).hexdigest()
        assert_eq!(
            blake2b256_hex(b""),
            "0e5751c026e543b2e8ab2eb06099daa1d1e5df47778f7787faab45cdf12fe3a8"
        );
    }

    #[test]
    fn abc_known_vector() {
        // Python: hashlib.blake2b(b"abc", digest_size=32).hexdigest()
        assert_eq!(
            blake2b256_hex(b"abc"),
            "bddd813c634239723171ef3fee98579b94964e3bb1cb3e427262c8c068d52319"
        );
    }
}
