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

/// Something of the input that could not be used: a file that cannot be read, or an error in a
/// manifest. `text` is the whole message (`deploy.yaml:14:15: spec...: unknown field ...`);
/// `file`, `line` and `column` say where, when known (for SARIF).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InputError {
    pub text: String,
    pub file: Option<String>,
    pub line: Option<usize>,
    pub column: Option<usize>,
}

impl InputError {
    fn file(file: &str, text: String) -> InputError {
        InputError {
            text,
            file: Some(file.to_string()),
            line: None,
            column: None,
        }
    }

    /// An error of a manifest, placed at its file, line and column.
    pub fn manifest(e: &podgrace_core::manifest::ManifestError) -> InputError {
        InputError {
            text: e.to_string(),
            file: Some(e.span.file.clone()),
            line: Some(e.span.line),
            column: Some(e.span.column),
        }
    }

    /// An error about the input as a whole (no file).
    pub fn general(text: String) -> InputError {
        InputError {
            text,
            file: None,
            line: None,
            column: None,
        }
    }
}

fn read_path(path: &Path) -> Result<Document, InputError> {
    if path == Path::new("-") {
        let mut text = String::new();
        std::io::stdin().read_to_string(&mut text).map_err(|e| {
            InputError::file("<stdin>", format!("-: cannot read standard input: {e}"))
        })?;
        return Ok(Document {
            name: "<stdin>".into(),
            text,
        });
    }
    let name = path.display().to_string();
    let bytes = std::fs::read(path).map_err(|e| InputError::file(&name, format!("{name}: {e}")))?;
    let text = String::from_utf8(bytes).map_err(|e| not_utf8(&name, e))?;
    Ok(Document { name, text })
}

/// Says where a file stops being UTF-8 (line and column of the first bad byte), and whether it
/// looks like UTF-16, which some Windows editors write.
fn not_utf8(name: &str, e: std::string::FromUtf8Error) -> InputError {
    let bytes = e.as_bytes();
    if bytes.starts_with(&[0xFF, 0xFE]) || bytes.starts_with(&[0xFE, 0xFF]) {
        return InputError::file(name, format!(
            "{name}: the file is UTF-16 text; Kubernetes manifests are UTF-8 (convert it, e.g. with iconv -f UTF-16 -t UTF-8)"
        ));
    }
    let valid = &bytes[..e.utf8_error().valid_up_to()];
    let line = valid.iter().filter(|&&b| b == b'\n').count() + 1;
    let line_start = valid.iter().rposition(|&b| b == b'\n').map_or(0, |p| p + 1);
    let column = String::from_utf8_lossy(&valid[line_start..])
        .chars()
        .count()
        + 1;
    InputError {
        text: format!(
            "{name}:{line}:{column}: not UTF-8 text (byte 0x{:02X})",
            bytes.get(valid.len()).copied().unwrap_or(0)
        ),
        file: Some(name.to_string()),
        line: Some(line),
        column: Some(column),
    }
}

/// A hint for text that failed to load and looks like an unrendered Helm or Go template.
pub fn template_hint(doc: &Document) -> Option<String> {
    (doc.text.contains("{{") && doc.text.contains("}}")).then(|| {
        format!(
            "{}: this looks like a Helm template; render it first, e.g. `helm template . | podgrace explain -`",
            doc.name
        )
    })
}

/// At most this many file names in a message about the whole input.
const MAX_NAMED: usize = 5;

/// "no pod or pod template found in ..." for an input without any: the files read (`<stdin>`
/// for standard input; at most five, then how many more), or the paths given when no file was
/// read at all (a directory without manifest files).
pub fn no_pod_found(paths: &[PathBuf], docs: &[Document]) -> String {
    if docs.is_empty() {
        let given: Vec<String> = paths.iter().map(|p| p.display().to_string()).collect();
        return format!(
            "no pod or pod template found in {} (no *.yaml, *.yml or *.json file)",
            given.join(", ")
        );
    }
    let names: Vec<&str> = docs
        .iter()
        .take(MAX_NAMED)
        .map(|d| d.name.as_str())
        .collect();
    let more = docs.len().saturating_sub(MAX_NAMED);
    let more = match more {
        0 => String::new(),
        1 => " and 1 more file".to_string(),
        n => format!(" and {n} more files"),
    };
    let empty = docs.iter().all(|d| d.text.trim().is_empty());
    let what = match (docs.len(), empty) {
        (1, true) => " (it is empty)",
        (_, true) => " (they are empty)",
        _ => "",
    };
    format!(
        "no pod or pod template found in {}{more}{what}",
        names.join(", ")
    )
}

/// Reads exactly one file (or stdin).
pub fn read_one(path: &Path) -> Result<Document, BadInput> {
    if path.is_dir() {
        return Err(BadInput(format!(
            "{}: is a directory, expected a file",
            path.display()
        )));
    }
    read_path(path).map_err(|e| BadInput(e.text))
}

/// Reads every path: files as given, directories recursively (manifest extensions only, sorted).
/// What cannot be read (a missing file, an unreadable directory, text that is not UTF-8) is an
/// [`InputError`] and the rest is read all the same. Errors: `-` given twice (bad usage).
pub fn read_all(paths: &[PathBuf]) -> Result<(Vec<Document>, Vec<InputError>), BadInput> {
    let mut files = Vec::new();
    let mut errors = Vec::new();
    for p in paths {
        if p != Path::new("-") && p.is_dir() {
            collect_dir(p, &mut files, &mut errors);
        } else {
            files.push(p.clone());
        }
    }
    if paths.iter().filter(|p| *p == Path::new("-")).count() > 1 {
        return Err(BadInput(
            "`-` (standard input) may be given only once".into(),
        ));
    }
    // The same file named twice (directly or through a directory) is read once.
    let mut seen = std::collections::HashSet::new();
    files.retain(|f| {
        f == Path::new("-") || seen.insert(f.canonicalize().unwrap_or_else(|_| f.clone()))
    });
    let mut docs = Vec::with_capacity(files.len());
    for f in &files {
        match read_path(f) {
            Ok(d) => docs.push(d),
            Err(e) => errors.push(e),
        }
    }
    Ok((docs, errors))
}

/// Walks `dir` depth-first in name order. Symbolic links to directories are not followed (as
/// `kubectl -R` does not), so a link cycle cannot loop; links to files are read.
fn collect_dir(dir: &Path, out: &mut Vec<PathBuf>, errors: &mut Vec<InputError>) {
    let name = dir.display().to_string();
    let entries = match std::fs::read_dir(dir) {
        Ok(e) => e,
        Err(e) => {
            errors.push(InputError::file(&name, format!("{name}: {e}")));
            return;
        }
    };
    let mut paths: Vec<(PathBuf, bool)> = entries
        .filter_map(|e| e.ok())
        .map(|e| (e.path(), e.file_type().is_ok_and(|t| t.is_dir())))
        .collect();
    paths.sort();
    for (p, real_dir) in paths {
        if real_dir {
            collect_dir(&p, out, errors);
        } else if !p.is_dir()
            && matches!(
                p.extension().and_then(|e| e.to_str()),
                Some("yaml" | "yml" | "json")
            )
        {
            out.push(p);
        }
    }
}
