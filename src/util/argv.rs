//! Reading a flag's value from a command line the way engines' own parsers
//! do: `--flag value` or `--flag=value`, the last occurrence winning.

/// The value of the last of `names` in `argv` (`None`: absent, or given
/// without a value).
pub fn value_of<'a>(argv: &'a [String], names: &[&str]) -> Option<&'a str> {
    let mut found = None;
    let mut i = 0;
    while i < argv.len() {
        let a = argv[i].as_str();
        i += 1;
        if let Some((flag, v)) = a.split_once('=') {
            if names.contains(&flag) {
                found = Some(v);
            }
        } else if names.contains(&a) {
            found = argv.get(i).map(String::as_str);
            i += 1;
        }
    }
    found
}

#[cfg(test)]
mod tests {
    use super::*;

    fn v(args: &[&str]) -> Vec<String> {
        args.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn both_spellings_and_the_last_occurrence_wins() {
        let a = v(&["serve", "-t", "2", "--block-size=32", "--threads", "4"]);
        assert_eq!(value_of(&a, &["--threads", "-t"]), Some("4"));
        assert_eq!(value_of(&a, &["--block-size"]), Some("32"));
        assert_eq!(value_of(&a, &["--page-size"]), None);
        // A flag at the end without its value has none.
        assert_eq!(value_of(&v(&["--page-size"]), &["--page-size"]), None);
        // A value that looks like the flag is not read as the flag.
        assert_eq!(
            value_of(&v(&["--name", "--page-size", "x"]), &["--page-size"]),
            Some("x")
        );
    }
}
