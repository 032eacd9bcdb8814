//! Stable hashing: short hex SHA-256 digests for cell identities, the
//! model config, answer texts and trace files.

use sha2::{Digest, Sha256};

/// Lower-case hex of `bytes`.
pub fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// The first `hex_digits` hex digits of the SHA-256 of `bytes`.
pub fn sha256_hex(bytes: &[u8], hex_digits: usize) -> String {
    let mut h = hex(&Sha256::digest(bytes));
    h.truncate(hex_digits);
    h
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn digests_are_the_known_sha256_prefixes() {
        assert_eq!(sha256_hex(b"abc", 16), "ba7816bf8f01cfea");
        assert_eq!(hex(&[0, 15, 255]), "000fff");
    }
}
