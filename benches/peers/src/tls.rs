//! TLS for the `ours-tls` client: a CA and a certificate for 127.0.0.1
//! made once per run (nothing on disk outlives it), the server arguments
//! that serve it on a TLS port of its own, and the CA the client trusts.

use rcgen::{BasicConstraints, CertificateParams, ExtendedKeyUsagePurpose, IsCa, KeyPair};
use std::net::{Ipv4Addr, TcpListener};
use std::path::PathBuf;
use std::sync::OnceLock;

struct Files {
    ca_pem: String,
    cert: PathBuf,
    key: PathBuf,
    ca: PathBuf,
}

fn files() -> &'static Files {
    static FILES: OnceLock<Files> = OnceLock::new();
    FILES.get_or_init(|| {
        let mut ca = CertificateParams::new(Vec::<String>::new()).expect("CA params");
        ca.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        let ca_key = KeyPair::generate().expect("CA key");
        let ca = ca.self_signed(&ca_key).expect("CA");
        let mut leaf = CertificateParams::new(vec!["127.0.0.1".to_string()]).expect("params");
        leaf.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth];
        let key = KeyPair::generate().expect("key");
        let cert = leaf.signed_by(&key, &ca, &ca_key).expect("certificate");
        let dir = std::env::temp_dir().join(format!("redlock-peers-tls-{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("temp dir");
        let write = |name: &str, text: &str| {
            let path = dir.join(name);
            std::fs::write(&path, text).expect("write");
            path
        };
        Files {
            cert: write("server.crt", &cert.pem()),
            key: write("server.key", &key.serialize_pem()),
            ca: write("ca.crt", &ca.pem()),
            ca_pem: ca.pem(),
        }
    })
}

/// The CA certificate the servers' certificates chain to (PEM).
pub fn ca_pem() -> &'static str {
    &files().ca_pem
}

/// A free loopback port for a server's TLS port.
pub fn free_port() -> u16 {
    TcpListener::bind((Ipv4Addr::LOCALHOST, 0))
        .and_then(|l| l.local_addr())
        .expect("free port")
        .port()
}

/// redis-server arguments that serve TLS on `port` (no client
/// certificates asked for: the TLS cost measured is the channel's).
pub fn server_args(port: u16) -> Vec<String> {
    let f = files();
    let path = |p: &PathBuf| p.to_str().expect("UTF-8 temp path").to_string();
    vec![
        "--tls-port".into(),
        port.to_string(),
        "--tls-cert-file".into(),
        path(&f.cert),
        "--tls-key-file".into(),
        path(&f.key),
        "--tls-ca-cert-file".into(),
        path(&f.ca),
        "--tls-auth-clients".into(),
        "no".into(),
    ]
}
