//! Reading user input: files, directories (recursively, `*.yaml`, `*.yml`, `*.json`) and `-` for
//! standard input. All reading happens before anything is evaluated.

use crate::BadInput;
use std::io::Read;
use std::path::{Path, PathBuf};

/// One input document: its display name and its text.
pub struct Document {
    pub name: String,
    pub text: String,
}

fn read_path(path: &Path) -> Result<Document, BadInput> {
    if path == Path::new("-") {
        let mut text = String::new();
        std::io::stdin()
            .read_to_string(&mut text)
            .map_err(|e| BadInput(format!("-: cannot read standard input: {e}")))?;
        return Ok(Document {
            name: "-".into(),
            text,
        });
    }
    let bytes = std::fs::read(path).map_err(|e| BadInput(format!("{}: {e}", path.display())))?;
    let text = String::from_utf8(bytes).map_err(|e| {
        BadInput(format!(
            "{}: not UTF-8 text (byte {})",
            path.display(),
            e.utf8_error().valid_up_to()
        ))
    })?;
    Ok(Document {
        name: path.display().to_string(),
        text,
    })
}

/// Reads exactly one file (or stdin).
pub fn read_one(path: &Path) -> Result<Document, BadInput> {
    if path.is_dir() {
        return Err(BadInput(format!(
            "{}: is a directory, expected a file",
            path.display()
        )));
    }
    read_path(path)
}

/// Reads every path: files as given, directories recursively (manifest extensions only, sorted).
pub fn read_all(paths: &[PathBuf]) -> Result<Vec<Document>, BadInput> {
    let mut files = Vec::new();
    for p in paths {
        if p != Path::new("-") && p.is_dir() {
            collect_dir(p, &mut files)?;
        } else {
            files.push(p.clone());
        }
    }
    if paths.iter().filter(|p| *p == Path::new("-")).count() > 1 {
        return Err(BadInput(
            "`-` (standard input) may be given only once".into(),
        ));
    }
    files.iter().map(|f| read_path(f)).collect()
}

fn collect_dir(dir: &Path, out: &mut Vec<PathBuf>) -> Result<(), BadInput> {
    let entries =
        std::fs::read_dir(dir).map_err(|e| BadInput(format!("{}: {e}", dir.display())))?;
    let mut paths: Vec<PathBuf> = entries.filter_map(|e| e.ok().map(|e| e.path())).collect();
    paths.sort();
    for p in paths {
        if p.is_dir() {
            collect_dir(&p, out)?;
        } else if matches!(
            p.extension().and_then(|e| e.to_str()),
            Some("yaml" | "yml" | "json")
        ) {
            out.push(p);
        }
    }
    Ok(())
}
