//! Text corpora from local files, the byte tokenizer and GPT-2 BPE on a hand-written vocabulary.

use std::path::PathBuf;

use burn::data::dataset::Dataset;
use firemesh_datasets::{ByteTokenizer, DatasetError, Gpt2Bpe, TextCorpus, Tokenizer};

fn temp_dir(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("firemesh-text-{name}-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// `Ġ` is GPT-2's stand-in for the space byte.
const ENCODER: &str = r#"{"h": 0, "e": 1, "l": 2, "o": 3, "Ġ": 4, "w": 5, "r": 6, "d": 7, "!": 8,
    "he": 9, "ll": 10, "hell": 11, "hello": 12, "Ġw": 13, "or": 14, "Ġwor": 15, "Ġworl": 16,
    "Ġworld": 17}"#;
const MERGES: &str = "#version: 0.2\nh e\nl l\nhe ll\nhell o\nĠ w\no r\nĠw or\nĠwor l\nĠworl d\n";

fn tiny_bpe(dir: &std::path::Path) -> Gpt2Bpe {
    std::fs::write(dir.join("encoder.json"), ENCODER).unwrap();
    std::fs::write(dir.join("vocab.bpe"), MERGES).unwrap();
    Gpt2Bpe::from_files(dir.join("encoder.json"), dir.join("vocab.bpe")).unwrap()
}

#[test]
fn bpe_applies_merges_by_rank_and_roundtrips() {
    let dir = temp_dir("bpe");
    let bpe = tiny_bpe(&dir);
    assert_eq!(bpe.vocab_size(), 18);
    assert_eq!(bpe.encode("hello world!").unwrap(), [12, 17, 8]);
    // "he" (rank 0) before "ll" (rank 1), then "he"+"ll", then "hell"+"o" is absent.
    assert_eq!(bpe.encode("hell").unwrap(), [11]);
    // No merge applies across pieces or to unlisted pairs.
    assert_eq!(bpe.encode("hole").unwrap(), [0, 3, 2, 1]);
    assert_eq!(bpe.encode("world").unwrap(), [5, 14, 2, 7]);
    assert_eq!(bpe.encode(" world world").unwrap(), [17, 17]);
    assert_eq!(bpe.decode(&[12, 17, 8, 4]).unwrap(), "hello world! ");
    let err = bpe.encode("hex").unwrap_err();
    assert!(
        matches!(&err, DatasetError::UnknownSymbol { symbol, .. } if symbol == "x"),
        "{err}"
    );
    assert!(err.to_string().contains("encoder.json"));
    assert!(matches!(
        bpe.decode(&[18]),
        Err(DatasetError::UnknownToken {
            id: 18,
            vocab_size: 18
        })
    ));
    std::fs::remove_dir_all(dir).unwrap();
}

#[test]
fn bpe_file_errors_name_the_file_and_line() {
    let dir = temp_dir("bpe-bad");
    let (encoder, merges) = (dir.join("encoder.json"), dir.join("vocab.bpe"));
    std::fs::write(&merges, MERGES).unwrap();
    let err = Gpt2Bpe::from_files(&encoder, &merges).unwrap_err();
    assert!(
        matches!(&err, DatasetError::Io { path, .. } if path == &encoder),
        "{err}"
    );

    std::fs::write(&encoder, "[1, 2]").unwrap();
    let err = Gpt2Bpe::from_files(&encoder, &merges)
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("encoder.json") && err.contains("JSON"),
        "{err}"
    );

    std::fs::write(&encoder, ENCODER).unwrap();
    std::fs::write(&merges, "#version: 0.2\nh e\nl l x\n").unwrap();
    let err = Gpt2Bpe::from_files(&encoder, &merges)
        .unwrap_err()
        .to_string();
    assert!(err.contains("vocab.bpe") && err.contains("line 3"), "{err}");

    std::fs::write(&merges, "h e\ne h\n").unwrap();
    let err = Gpt2Bpe::from_files(&encoder, &merges)
        .unwrap_err()
        .to_string();
    assert!(err.contains("line 2") && err.contains("\"eh\""), "{err}");
    std::fs::remove_dir_all(dir).unwrap();
}

#[test]
fn corpus_from_files_cuts_overlapping_windows_of_seq_len_plus_one() {
    let dir = temp_dir("corpus");
    std::fs::write(dir.join("a.txt"), "abcdefg").unwrap();
    std::fs::write(dir.join("b.txt"), "hij").unwrap();
    let files = [dir.join("a.txt"), dir.join("b.txt")];
    let corpus = TextCorpus::from_files(&files, &ByteTokenizer, 3).unwrap();
    assert_eq!(corpus.tokens().len(), 10);
    assert_eq!(corpus.len(), 3);
    let text = |i| ByteTokenizer.decode(&corpus.get(i).unwrap()).unwrap();
    assert_eq!([text(0), text(1), text(2)], ["abcd", "defg", "ghij"]);
    assert!(corpus.get(3).is_none());

    let bpe_corpus = TextCorpus::from_files(&[dir.join("hello.txt")], &ByteTokenizer, 3);
    let err = bpe_corpus.unwrap_err();
    assert!(
        matches!(&err, DatasetError::Io { path, .. } if path.ends_with("hello.txt")),
        "{err}"
    );

    std::fs::write(dir.join("latin1.txt"), [0x63, 0x61, 0x66, 0xE9]).unwrap();
    let err = TextCorpus::from_files(&[dir.join("latin1.txt")], &ByteTokenizer, 1)
        .unwrap_err()
        .to_string();
    assert!(err.contains("latin1.txt") && err.contains("UTF-8"), "{err}");

    let err = TextCorpus::from_files(&[dir.join("b.txt")], &ByteTokenizer, 3)
        .unwrap_err()
        .to_string();
    assert!(err.contains("seq_len"), "{err}");
    std::fs::remove_dir_all(dir).unwrap();
}

#[test]
fn corpus_works_with_the_bpe_tokenizer() {
    let dir = temp_dir("corpus-bpe");
    let bpe = tiny_bpe(&dir);
    std::fs::write(dir.join("text.txt"), "hello world hello world!").unwrap();
    let corpus = TextCorpus::from_files(&[dir.join("text.txt")], &bpe, 2).unwrap();
    assert_eq!(corpus.tokens(), [12, 17, 4, 12, 17, 8]);
    assert_eq!(corpus.get(1).unwrap(), [4, 12, 17]);
    std::fs::remove_dir_all(dir).unwrap();
}
