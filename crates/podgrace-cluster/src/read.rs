//! Reading objects from the API as JSON, as kubectl's `get` does: one object by name, or a
//! whole collection in pages of [`PAGE_SIZE`] (kubectl's `--chunk-size` default), in one
//! namespace or across all of them; the server's version; a node's kubelet configuration through
//! the API server's node proxy.
//!
//! Objects stay `serde_json::Value`s: the manifest loader reads them as it reads files (every
//! field checked, positions by field path), so nothing is decoded twice into typed structs.

use kube::api::{GetParams, ListParams};
use serde_json::Value;

use crate::resources::ResourceType;
use crate::{api_error, Cluster, ClusterError};

/// Objects asked for per list request (kubectl's `--chunk-size` default).
pub const PAGE_SIZE: u32 = 500;

impl Cluster {
    /// The object `r`/`name` in `namespace`, with its `apiVersion` and `kind`.
    ///
    /// # Errors
    /// The API's answer as kubectl prints it ([`api_error`]): `Error from server (NotFound):
    /// deployments.apps "web" not found`, a 403 naming the verb and the resource, a refused
    /// connection.
    pub async fn get_object(
        &self,
        r: &ResourceType,
        namespace: &str,
        name: &str,
    ) -> Result<Value, ClusterError> {
        let req = kube::core::Request::new(r.collection_path(Some(namespace)))
            .get(&crate::resources::path_segment(name), &GetParams::default())
            .map_err(|e| ClusterError::Configuration(e.to_string()))?;
        let mut obj: Value = self
            .client
            .request(req)
            .await
            .map_err(|e| api_error(&self.server, e))?;
        set_type(&mut obj, r);
        Ok(obj)
    }

    /// Every object of `r` in `namespace` (all namespaces when `None`) that `label_selector`
    /// selects (every one when `None`), read in pages of [`PAGE_SIZE`]; each gets its
    /// `apiVersion` and `kind` (list items carry neither).
    ///
    /// # Errors
    /// As [`Cluster::get_object`]; a 403 names the `list` verb.
    pub async fn list_objects(
        &self,
        r: &ResourceType,
        namespace: Option<&str>,
        label_selector: Option<&str>,
    ) -> Result<Vec<Value>, ClusterError> {
        let base = kube::core::Request::new(r.collection_path(namespace));
        let mut lp = ListParams::default().limit(PAGE_SIZE);
        if let Some(s) = label_selector {
            lp = lp.labels(s);
        }
        let mut out = Vec::new();
        loop {
            let req = base
                .list(&lp)
                .map_err(|e| ClusterError::Configuration(e.to_string()))?;
            let mut page: Value = self
                .client
                .request(req)
                .await
                .map_err(|e| api_error(&self.server, e))?;
            if let Some(items) = page.get_mut("items").and_then(Value::as_array_mut) {
                for mut item in std::mem::take(items) {
                    set_type(&mut item, r);
                    out.push(item);
                }
            }
            match page
                .pointer("/metadata/continue")
                .and_then(Value::as_str)
                .filter(|t| !t.is_empty())
            {
                Some(t) => lp = lp.continue_token(t),
                None => break,
            }
        }
        Ok(out)
    }

    /// The server's version (`GET /version`): `major.minor` from its `gitVersion`
    /// (`v1.32.3-eks-...` is 1.32), or from `major` and `minor` (`32+` is 32).
    ///
    /// # Errors
    /// As [`Cluster::get_object`]; [`ClusterError::Configuration`] when the answer holds no
    /// version.
    pub async fn server_version(&self) -> Result<(u32, u32), ClusterError> {
        let info = self
            .client
            .apiserver_version()
            .await
            .map_err(|e| api_error(&self.server, e))?;
        parse_version(&info.git_version, &info.major, &info.minor).ok_or_else(|| {
            ClusterError::Configuration(format!(
                "the server's version {:?} is not MAJOR.MINOR",
                info.git_version
            ))
        })
    }

    /// `GET /api/v1/nodes/NODE/proxy/PATH` as JSON: what the kubelet of `node` serves at
    /// `PATH` (`configz`), through the API server (RBAC: `get` on `nodes/proxy`).
    ///
    /// # Errors
    /// As [`Cluster::get_object`]: 403 when RBAC refuses `nodes/proxy`, 404 for a node that is
    /// not there, 503 when the API server cannot reach the kubelet.
    pub async fn node_proxy_get(&self, node: &str, path: &str) -> Result<Value, ClusterError> {
        let uri = format!("/api/v1/nodes/{node}/proxy/{path}");
        let req = http::Request::get(uri)
            .body(Vec::new())
            .map_err(|e| ClusterError::Configuration(e.to_string()))?;
        self.client
            .request(req)
            .await
            .map_err(|e| api_error(&self.server, e))
    }
}

/// Sets `apiVersion` and `kind`, which list items and some answers leave out.
fn set_type(obj: &mut Value, r: &ResourceType) {
    if let Some(m) = obj.as_object_mut() {
        m.insert("apiVersion".into(), Value::String(r.api_version()));
        m.insert("kind".into(), Value::String(r.kind.to_string()));
    }
}

/// `(major, minor)` of a server version: from `gitVersion` first, else `major` and `minor`
/// with any trailing `+` dropped.
fn parse_version(git: &str, major: &str, minor: &str) -> Option<(u32, u32)> {
    let digits = |s: &str| -> Option<u32> {
        let d: String = s.chars().take_while(char::is_ascii_digit).collect();
        d.parse().ok()
    };
    let from_git = git.strip_prefix('v').and_then(|rest| {
        let mut parts = rest.split('.');
        Some((digits(parts.next()?)?, digits(parts.next()?)?))
    });
    from_git.or_else(|| Some((digits(major)?, digits(minor)?)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn server_versions_as_providers_write_them() {
        assert_eq!(parse_version("v1.32.3", "1", "32"), Some((1, 32)));
        assert_eq!(
            parse_version("v1.29.10-eks-7f9249a", "1", "29+"),
            Some((1, 29))
        );
        assert_eq!(parse_version("", "1", "30+"), Some((1, 30)));
        assert_eq!(parse_version("garbage", "", ""), None);
    }
}
