//! The benchmark baseline: read every manifest under a directory and parse it with the same YAML
//! library and tree as `explain`, nothing more. Prints the number of documents parsed.
//!
//! `cargo run --release -p podgrace-core --example parse_only -- DIR`

use std::path::Path;

fn main() {
    let Some(dir) = std::env::args().nth(1) else {
        eprintln!("usage: parse_only DIR");
        std::process::exit(2);
    };
    let mut files: Vec<_> = std::fs::read_dir(Path::new(&dir))
        .expect("read dir")
        .filter_map(|e| e.ok().map(|e| e.path()))
        .collect();
    files.sort();
    let mut docs = 0;
    for f in files {
        let text = std::fs::read_to_string(&f).expect("read file");
        match podgrace_core::manifest::parse_only(&text) {
            Ok(n) => docs += n,
            Err(e) => {
                eprintln!("{e}");
                std::process::exit(2);
            }
        }
    }
    println!("{docs}");
}
