//! Kubeconfig generation for clients of the local server.

use std::io::Write;
use std::path::Path;

/// Name used for the cluster, user and context entries.
pub const CONTEXT: &str = "ksched-local";

/// Quotes a string for YAML (JSON strings are valid YAML scalars).
fn q(s: &str) -> String {
    serde_json::Value::from(s).to_string()
}

/// Standard base64 (RFC 4648, padded), as kubeconfig `*-data` fields expect.
fn base64(data: &[u8]) -> String {
    const ALPHABET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut out = String::with_capacity(data.len().div_ceil(3) * 4);
    for chunk in data.chunks(3) {
        let b = [chunk[0], *chunk.get(1).unwrap_or(&0), *chunk.get(2).unwrap_or(&0)];
        let n = (u32::from(b[0]) << 16) | (u32::from(b[1]) << 8) | u32::from(b[2]);
        for i in 0..4 {
            if i <= chunk.len() {
                out.push(ALPHABET[((n >> (18 - 6 * i)) & 63) as usize] as char);
            } else {
                out.push('=');
            }
        }
    }
    out
}

/// A kubeconfig pointing at `server`, trusting `ca_pem`, with a bearer `token`.
pub fn render(server: &str, ca_pem: &str, token: &str) -> String {
    format!(
        "apiVersion: v1
kind: Config
clusters:
- name: {CONTEXT}
  cluster:
    server: {server}
    certificate-authority-data: {ca}
contexts:
- name: {CONTEXT}
  context:
    cluster: {CONTEXT}
    user: {CONTEXT}
    namespace: default
current-context: {CONTEXT}
users:
- name: {CONTEXT}
  user:
    token: {token}
preferences: {{}}
",
        server = q(server),
        token = q(token),
        ca = base64(ca_pem.as_bytes()),
    )
}

/// Writes a kubeconfig readable only by the owner (it holds the token).
pub fn write(path: &Path, contents: &str) -> anyhow::Result<()> {
    let mut opts = std::fs::OpenOptions::new();
    opts.write(true).create(true).truncate(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        opts.mode(0o600);
    }
    let mut f = opts.open(path).map_err(|e| anyhow::anyhow!("cannot write kubeconfig {}: {e}", path.display()))?;
    #[cfg(unix)]
    {
        // `mode` only applies to new files; tighten an existing one too.
        use std::os::unix::fs::PermissionsExt;
        f.set_permissions(std::fs::Permissions::from_mode(0o600))?;
    }
    f.write_all(contents.as_bytes())?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn renders_parseable_yaml() {
        let y = render("http://127.0.0.1:1234", "PEM", "tok");
        let v: serde_json::Value = serde_saphyr::from_str(&y).unwrap();
        assert_eq!(v["clusters"][0]["cluster"]["server"], "http://127.0.0.1:1234");
        assert_eq!(v["users"][0]["user"]["token"], "tok");
        assert_eq!(v["current-context"], CONTEXT);
        assert_eq!(v["clusters"][0]["cluster"]["certificate-authority-data"], "UEVN");
        assert_eq!(base64(b"ab"), "YWI=");
        assert_eq!(base64(b"abcd"), "YWJjZA==");
    }
}
