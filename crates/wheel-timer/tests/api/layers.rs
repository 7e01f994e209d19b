//! The source tree's promise (see `src/lib.rs`): `src/` is four folders, one per layer, and each
//! file imports only from its own layer and those below; every `unsafe` block is in the bottom
//! layer. Read from the sources, so a change that breaks the rule fails here, not in review.

use std::path::{Path, PathBuf};

/// The layers, bottom first: the folder, and the crate path it is reached by.
const LAYERS: [&str; 4] = ["slots", "shard", "service", "api"];

fn src() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("src")
}

fn files(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).expect("src/ is readable") {
        let path = entry.expect("a directory entry").path();
        if path.is_dir() {
            files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

/// The layer of a file (its index in `LAYERS`), or `None` for the crate root's own files
/// (`lib.rs`, which names every layer, and `loom.rs`, beneath them all).
fn layer_of(file: &Path) -> Option<usize> {
    let first = file.strip_prefix(src()).ok()?.components().next()?;
    let first = first.as_os_str().to_str()?;
    LAYERS.iter().position(|l| *l == first)
}

/// The code of a file without its comments (doc comments cite files of other layers freely).
fn code(text: &str) -> String {
    text.lines()
        .map(|line| match line.find("//") {
            Some(at) => &line[..at],
            None => line,
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// Every layer a file's code reaches through a `crate::` path.
fn layers_named(code: &str) -> Vec<usize> {
    code.match_indices("crate::")
        .filter_map(|(at, _)| {
            let rest = &code[at + "crate::".len()..];
            let name: String = rest
                .chars()
                .take_while(|c| c.is_alphanumeric() || *c == '_')
                .collect();
            LAYERS.iter().position(|l| *l == name)
        })
        .collect()
}

#[test]
fn no_file_imports_from_a_layer_above_its_own() {
    let mut all = Vec::new();
    files(&src(), &mut all);
    let mut checked = 0;
    let mut upward = Vec::new();
    for file in &all {
        let Some(own) = layer_of(file) else { continue };
        checked += 1;
        let text = std::fs::read_to_string(file).expect("a source file is readable");
        for named in layers_named(&code(&text)) {
            if named > own {
                upward.push(format!(
                    "{} ({}) uses crate::{}",
                    file.display(),
                    LAYERS[own],
                    LAYERS[named]
                ));
            }
        }
    }
    assert!(
        checked > 30,
        "the layers hold the crate's files ({checked} found)"
    );
    assert!(
        upward.is_empty(),
        "imports from a higher layer:\n{}",
        upward.join("\n")
    );
}

#[test]
fn unsafe_code_is_allowed_only_in_the_slot_layer() {
    let mut all = Vec::new();
    files(&src(), &mut all);
    let outside: Vec<_> = all
        .iter()
        .filter(|file| layer_of(file) != Some(0))
        .filter(|file| {
            let text = std::fs::read_to_string(file).expect("a source file is readable");
            code(&text).contains("unsafe")
        })
        .map(|file| file.display().to_string())
        .collect();
    assert!(outside.is_empty(), "unsafe outside src/slots/: {outside:?}");
}

#[test]
fn the_checks_see_an_upward_import_and_ignore_comments() {
    // The detectors themselves, on made-up code: a check that cannot fail proves nothing.
    assert_eq!(layers_named("use crate::service::core::Core;"), [2]);
    assert_eq!(
        layers_named("use crate::loom::Mutex; crate::Task"),
        Vec::<usize>::new()
    );
    assert!(layers_named(&code("let x = 1; // see crate::api::timer")).is_empty());
    assert_eq!(layer_of(&src().join("shard").join("mod.rs")), Some(1));
    assert_eq!(layer_of(&src().join("lib.rs")), None);
}
