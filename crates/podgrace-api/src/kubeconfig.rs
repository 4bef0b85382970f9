//! The kubeconfig `serve` writes: the server's address, its CA, the bearer token; file mode
//! 0600, since the token gives the right to start processes on this machine.

use std::io::Write;
use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
use std::path::Path;

use base64::Engine;

/// The kubeconfig YAML for `server` (`https://127.0.0.1:6443`), the CA PEM and the token.
pub fn render(server: &str, ca_pem: &str, token: &str) -> String {
    let ca = base64::engine::general_purpose::STANDARD.encode(ca_pem);
    format!(
        "apiVersion: v1\nkind: Config\nclusters:\n- name: podgrace\n  cluster:\n    server: {server}\n    certificate-authority-data: {ca}\nusers:\n- name: podgrace\n  user:\n    token: {token}\ncontexts:\n- name: podgrace\n  context:\n    cluster: podgrace\n    user: podgrace\n    namespace: default\ncurrent-context: podgrace\npreferences: {{}}\n"
    )
}

/// Writes `text` to `path` with mode 0600 (also when the file existed with another mode).
///
/// # Errors
/// The I/O error, for the caller to report with the path.
pub fn write(path: &Path, text: &str) -> std::io::Result<()> {
    let mut f = std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(0o600)
        .open(path)?;
    f.set_permissions(std::fs::Permissions::from_mode(0o600))?;
    f.write_all(text.as_bytes())?;
    f.sync_all()
}
