//! GPT-2's pre-tokenization: the split BPE runs on, without a regex engine.
//!
//! GPT-2 splits text with
//! `'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+`.
//! The look-ahead is outside the `regex` crate, so the alternatives are followed by hand:
//! contractions; an optional single space then a run of letters, digits or other symbols; a
//! run of whitespace, less its last character when that one starts the next piece.
//! Letters and digits use `char::is_alphabetic` / `char::is_numeric`, which match `\p{L}` /
//! `\p{N}` except for rare combining marks.

/// Contractions GPT-2 splits off (case-sensitive, as in GPT-2).
const CONTRACTIONS: [&str; 7] = ["s", "t", "re", "ve", "m", "ll", "d"];

#[derive(Clone, Copy, PartialEq, Eq)]
enum Class {
    Letter,
    Number,
    Space,
    Other,
}

fn class(c: char) -> Class {
    if c.is_whitespace() {
        Class::Space
    } else if c.is_numeric() {
        Class::Number
    } else if c.is_alphabetic() {
        Class::Letter
    } else {
        Class::Other
    }
}

/// Splits `text` into the pieces GPT-2 encodes independently; they concatenate back to `text`.
pub(crate) fn split(text: &str) -> Vec<&str> {
    let chars: Vec<(usize, char)> = text.char_indices().collect();
    let offset = |i: usize| chars.get(i).map_or(text.len(), |&(at, _)| at);
    let mut pieces = Vec::new();
    let mut start = 0;
    while start < chars.len() {
        let end = piece_end(&chars, start);
        pieces.push(&text[offset(start)..offset(end)]);
        start = end;
    }
    pieces
}

/// End (exclusive, in chars) of the piece starting at `start`.
fn piece_end(chars: &[(usize, char)], start: usize) -> usize {
    let at = |i: usize| chars.get(i).map(|&(_, c)| c);
    let run_end = |from: usize, kind: Class| {
        (from..chars.len())
            .find(|&i| class(chars[i].1) != kind)
            .unwrap_or(chars.len())
    };
    let first = chars[start].1;
    if first == '\'' {
        for suffix in CONTRACTIONS {
            let matches = suffix
                .chars()
                .enumerate()
                .all(|(k, c)| at(start + 1 + k) == Some(c));
            if matches {
                return start + 1 + suffix.len();
            }
        }
    }
    let next_class = at(start + 1).map(class);
    if first == ' ' && next_class.is_some_and(|c| c != Class::Space) {
        return run_end(start + 1, next_class.unwrap_or(Class::Other));
    }
    let kind = class(first);
    if kind != Class::Space {
        return run_end(start, kind);
    }
    let end = run_end(start, Class::Space);
    if end == chars.len() || end - start == 1 {
        end
    } else {
        end - 1 // leave the last whitespace character to the next piece
    }
}

#[cfg(test)]
mod tests {
    use super::split;

    #[test]
    fn splits_like_the_gpt2_pattern() {
        let text = "Hello, world! It's  42 cats\n\nok don't?'s  ";
        let expected = [
            "Hello", ",", " world", "!", " It", "'s", " ", " 42", " cats", "\n", "\n", "ok",
            " don", "'t", "?'", "s", "  ",
        ];
        assert_eq!(split(text), expected);
        assert_eq!(split(text).concat(), text);
    }

    #[test]
    fn handles_edges_and_non_ascii() {
        assert!(split("").is_empty());
        assert_eq!(split(" "), [" "]);
        assert_eq!(split("\tx"), ["\t", "x"]);
        assert_eq!(split("a\t\t b"), ["a", "\t\t", " b"]);
        assert_eq!(split("naïve café 3½"), ["naïve", " café", " 3½"]);
        assert_eq!(split("'S'll"), ["'", "S", "'ll"]);
    }
}
