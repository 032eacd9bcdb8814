//! "Did you mean": the closest of the accepted names to a misspelt one, so
//! an error names the fix instead of listing every name allowed.

/// The candidate closest to `input`, when one is close enough to be what
/// was meant (Jaro-Winkler similarity at least 0.8, as clap's own
/// suggestions use; case and `-`/`_` ignored).
pub fn did_you_mean<'a>(
    input: &str,
    candidates: impl IntoIterator<Item = &'a str>,
) -> Option<&'a str> {
    let fold = |s: &str| s.to_ascii_lowercase().replace('-', "_");
    let wanted = fold(input);
    candidates
        .into_iter()
        .map(|c| (strsim::jaro_winkler(&wanted, &fold(c)), c))
        .filter(|(score, _)| *score >= 0.8)
        .max_by(|a, b| a.0.total_cmp(&b.0))
        .map(|(_, c)| c)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_closest_close_name_is_suggested_and_a_far_one_is_not() {
        let keys = ["num_requests", "concurrency", "output_len", "input_len"];
        assert_eq!(did_you_mean("num_request", keys), Some("num_requests"));
        assert_eq!(did_you_mean("concurency", keys), Some("concurrency"));
        assert_eq!(did_you_mean("output-len", keys), Some("output_len"));
        assert_eq!(did_you_mean("temperature", keys), None);
    }
}
