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

/// The `server:` URL for a listener bound to `addr`: `https://HOST:PORT`, with an IPv6 host in
/// brackets and an unspecified address (`0.0.0.0`, `::`) given as `127.0.0.1`, the address this
/// machine's clients reach it at.
pub fn server_url(addr: std::net::SocketAddr) -> String {
    let host = if addr.ip().is_unspecified() {
        "127.0.0.1".to_string()
    } else {
        addr.ip().to_string()
    };
    if host.contains(':') {
        format!("https://[{host}]:{}", addr.port())
    } else {
        format!("https://{host}:{}", addr.port())
    }
}

#[cfg(test)]
mod tests {
    use super::server_url;

    #[test]
    fn the_server_url_brackets_ipv6_and_names_loopback_for_any_address() {
        let url = |s: &str| server_url(s.parse().unwrap());
        assert_eq!(url("127.0.0.1:6443"), "https://127.0.0.1:6443");
        assert_eq!(url("0.0.0.0:6443"), "https://127.0.0.1:6443");
        assert_eq!(url("[::1]:8443"), "https://[::1]:8443");
        assert_eq!(url("[fd00::5]:443"), "https://[fd00::5]:443");
        assert_eq!(url("[::]:6443"), "https://127.0.0.1:6443");
    }
}
