//! Token counting for workload construction.
//!
//! A [`TokenCounter`] turns text into token ids and back. Exact prompt lengths
//! and length filters are only as good as the counter, so every counter says
//! whether it is [`exact`](TokenCounter::exact): [`HfTokenizer`] wraps the
//! model's own `tokenizer.json`; [`ApproxCounter`] is a declared approximation
//! (about four bytes per token) for when no tokenizer is available.
//!
//! Counts never include special tokens a server adds on its own (BOS, chat
//! template); callers that send chat messages must add that overhead.

use std::path::{Path, PathBuf};

use super::WorkloadError;

/// Converts text to token ids and back for one model.
pub trait TokenCounter: Send + Sync {
    /// Token ids of `text`, without any special tokens added around it.
    fn encode(&self, text: &str) -> Result<Vec<u32>, WorkloadError>;
    /// Text of `ids`; special tokens are kept so that a round trip is lossless.
    fn decode(&self, ids: &[u32]) -> Result<String, WorkloadError>;
    /// True when counts match the model's tokenizer exactly.
    fn exact(&self) -> bool;
    /// Number of tokens in `text`.
    fn count(&self, text: &str) -> Result<usize, WorkloadError> {
        Ok(self.encode(text)?.len())
    }
}

/// The model's own tokenizer, loaded from a Hugging Face `tokenizer.json`.
pub struct HfTokenizer {
    inner: tokenizers::Tokenizer,
    path: PathBuf,
}

impl HfTokenizer {
    /// Loads a `tokenizer.json` file.
    pub fn from_file(path: &Path) -> Result<Self, WorkloadError> {
        let bytes = std::fs::read(path).map_err(|source| WorkloadError::Io {
            path: path.to_path_buf(),
            source,
        })?;
        let inner =
            tokenizers::Tokenizer::from_bytes(&bytes).map_err(|e| WorkloadError::Tokenizer {
                context: path.display().to_string(),
                message: e.to_string(),
            })?;
        Ok(Self {
            inner,
            path: path.to_path_buf(),
        })
    }

    /// The file this tokenizer was loaded from.
    pub fn path(&self) -> &Path {
        &self.path
    }

    fn error(&self, op: &str, e: tokenizers::Error) -> WorkloadError {
        WorkloadError::Tokenizer {
            context: format!("{} ({op})", self.path.display()),
            message: e.to_string(),
        }
    }
}

impl std::fmt::Debug for HfTokenizer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HfTokenizer")
            .field("path", &self.path)
            .finish_non_exhaustive()
    }
}

impl TokenCounter for HfTokenizer {
    fn encode(&self, text: &str) -> Result<Vec<u32>, WorkloadError> {
        // encode_fast skips character offsets, which we never use; special
        // tokens written in the text (e.g. `<|im_start|>`) are still matched,
        // as the llama.cpp server's /tokenize does.
        let enc = self
            .inner
            .encode_fast(text, false)
            .map_err(|e| self.error("encode", e))?;
        Ok(enc.get_ids().to_vec())
    }

    fn decode(&self, ids: &[u32]) -> Result<String, WorkloadError> {
        self.inner
            .decode(ids, false)
            .map_err(|e| self.error("decode", e))
    }

    fn exact(&self) -> bool {
        true
    }
}

/// Approximate counter: about four bytes per token, never exact.
///
/// Text is split the way byte-level BPE pre-tokenizers split it (a word keeps
/// one leading space; other whitespace runs stand alone) and each piece costs
/// `ceil(bytes / 4)` tokens. Splitting by piece keeps counts additive across
/// word and line boundaries, like real tokenizers, which is what lets
/// [`exact_len`](super::exact_len) converge quickly. For English prose it
/// over-counts real tokenizers by roughly a quarter, which errs on the safe
/// side of a context limit.
///
/// Ids are the piece's bytes packed four to a `u32` (padded with `0xFF`, a
/// byte that never occurs in UTF-8), so [`decode`](TokenCounter::decode)
/// round-trips; they mean nothing to any model.
#[derive(Debug, Clone, Copy, Default)]
pub struct ApproxCounter;

/// Bytes per token assumed by [`ApproxCounter`].
pub const APPROX_BYTES_PER_TOKEN: usize = 4;

const PAD: u8 = 0xFF;

impl ApproxCounter {
    /// Byte ranges of the pieces of `text` (see the type's documentation).
    fn pieces(text: &str) -> Vec<(usize, usize)> {
        let bytes = text.as_bytes();
        let mut out = Vec::new();
        let mut start = 0;
        let mut i = 0;
        while i < bytes.len() {
            let ws = is_ws(text, i);
            let mut j = i;
            while j < bytes.len() && is_ws(text, j) == ws {
                j += next_char_len(text, j);
            }
            if ws {
                // A single trailing space belongs to the following word.
                if j < bytes.len() && bytes[j - 1] == b' ' {
                    if j - 1 > start {
                        out.push((start, j - 1));
                    }
                    start = j - 1;
                } else {
                    out.push((start, j));
                    start = j;
                }
            } else {
                out.push((start, j));
                start = j;
            }
            i = j;
        }
        out
    }
}

fn is_ws(text: &str, i: usize) -> bool {
    text[i..].chars().next().is_some_and(char::is_whitespace)
}

fn next_char_len(text: &str, i: usize) -> usize {
    text[i..].chars().next().map_or(1, char::len_utf8)
}

impl TokenCounter for ApproxCounter {
    fn encode(&self, text: &str) -> Result<Vec<u32>, WorkloadError> {
        let bytes = text.as_bytes();
        let mut ids = Vec::with_capacity(bytes.len() / APPROX_BYTES_PER_TOKEN + 1);
        for (a, b) in Self::pieces(text) {
            for chunk in bytes[a..b].chunks(APPROX_BYTES_PER_TOKEN) {
                let mut word = [PAD; 4];
                word[..chunk.len()].copy_from_slice(chunk);
                ids.push(u32::from_le_bytes(word));
            }
        }
        Ok(ids)
    }

    fn decode(&self, ids: &[u32]) -> Result<String, WorkloadError> {
        let mut bytes = Vec::with_capacity(ids.len() * APPROX_BYTES_PER_TOKEN);
        for id in ids {
            bytes.extend(id.to_le_bytes().iter().filter(|&&b| b != PAD));
        }
        String::from_utf8(bytes).map_err(|e| WorkloadError::Tokenizer {
            context: "approximate counter (decode)".to_string(),
            message: format!("ids do not form UTF-8 text: {e}"),
        })
    }

    fn exact(&self) -> bool {
        false
    }

    fn count(&self, text: &str) -> Result<usize, WorkloadError> {
        Ok(Self::pieces(text)
            .iter()
            .map(|(a, b)| (b - a).div_ceil(APPROX_BYTES_PER_TOKEN))
            .sum())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn approx_pieces_follow_word_boundaries() {
        let text = "Hello  world\n\n  x = 1;";
        let pieces: Vec<&str> = ApproxCounter::pieces(text)
            .into_iter()
            .map(|(a, b)| &text[a..b])
            .collect();
        assert_eq!(pieces, ["Hello", " ", " world", "\n\n ", " x", " =", " 1;"]);
    }

    #[test]
    fn approx_counts_four_bytes_per_token_per_piece() {
        let c = ApproxCounter;
        assert_eq!(c.count("").unwrap(), 0);
        assert_eq!(c.count(" the").unwrap(), 1);
        assert_eq!(c.count(" quick").unwrap(), 2);
        assert_eq!(c.count("abcdefgh").unwrap(), 2);
        assert!(!c.exact());
        for text in [
            "a b",
            "  lead",
            "tail  ",
            "日本語のテキスト 🚀 ok",
            "x\ny\n\n",
        ] {
            assert_eq!(
                c.encode(text).unwrap().len(),
                c.count(text).unwrap(),
                "{text:?}"
            );
        }
    }

    #[test]
    fn approx_round_trips_any_text() {
        let c = ApproxCounter;
        for text in [
            "",
            "a",
            "Hello, world!",
            "東京 🚀\t\n x\u{0}y",
            "  spaced  out  ",
        ] {
            let ids = c.encode(text).unwrap();
            assert_eq!(c.decode(&ids).unwrap(), text);
        }
    }

    #[test]
    fn approx_is_additive_at_line_starts() {
        let c = ApproxCounter;
        let a = "first line ends here.";
        let b = "\n    indented code();";
        let joined = format!("{a}{b}");
        assert_eq!(
            c.count(&joined).unwrap(),
            c.count(a).unwrap() + c.count(b).unwrap()
        );
    }

    #[test]
    fn hf_tokenizer_encodes_without_added_specials_and_round_trips() {
        let path = concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/tests/fixtures/workload/tiny_tokenizer.json"
        );
        let tok = HfTokenizer::from_file(Path::new(path)).unwrap();
        assert!(tok.exact());
        assert_eq!(tok.encode("ab ab a").unwrap(), [3, 5, 4]);
        // Special tokens written in the text are matched, as llama.cpp's /tokenize does.
        assert_eq!(tok.encode("<|im_start|>ab").unwrap(), [6, 3]);
        assert_eq!(tok.count("ab ab").unwrap(), 2);
        assert_eq!(tok.decode(&[6, 3, 5]).unwrap(), "<|im_start|>ab ab");
        assert!(format!("{tok:?}").contains("tiny_tokenizer"));
    }

    #[test]
    fn missing_tokenizer_file_is_an_io_error() {
        let err = HfTokenizer::from_file(Path::new("/nonexistent/tokenizer.json")).unwrap_err();
        assert!(matches!(err, WorkloadError::Io { .. }), "{err}");
    }

    #[test]
    fn malformed_tokenizer_file_names_the_file() {
        let path = std::env::temp_dir().join(format!("bad-tokenizer-{}.json", std::process::id()));
        std::fs::write(&path, "{\"not\": \"a tokenizer\"}").unwrap();
        let err = HfTokenizer::from_file(&path).unwrap_err();
        std::fs::remove_file(&path).ok();
        assert!(matches!(err, WorkloadError::Tokenizer { .. }));
        assert!(err.to_string().contains("bad-tokenizer"), "{err}");
    }
}
