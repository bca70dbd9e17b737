//! `rediss://` masters (cargo feature `tls`): real redis-server processes
//! with a TLS port that requires client certificates, and certificates
//! made here with rcgen (as the library's tests/tls.rs does).
#![cfg(feature = "tls")]

#[path = "../../tests/support/mod.rs"]
mod support;

mod harness;

use harness::{finish, redlock, Scratch};
use rcgen::{BasicConstraints, CertificateParams, ExtendedKeyUsagePurpose, IsCa, KeyPair, SanType};
use std::net::{Ipv4Addr, TcpListener};
use support::RedisServer;

/// A CA, a server certificate for 127.0.0.1 and a client certificate it
/// issued, written to `scratch` as ca.crt, server.{crt,key}, client.{crt,key}.
fn make_certificates(scratch: &Scratch) {
    let mut params = CertificateParams::new(Vec::<String>::new()).expect("CA params");
    params
        .distinguished_name
        .push(rcgen::DnType::CommonName, "redlock test CA");
    params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    let ca_key = KeyPair::generate().expect("CA key");
    let ca = params.self_signed(&ca_key).expect("CA certificate");
    std::fs::write(scratch.file("ca.crt"), ca.pem()).unwrap();
    for (name, purpose) in [
        ("server", ExtendedKeyUsagePurpose::ServerAuth),
        ("client", ExtendedKeyUsagePurpose::ClientAuth),
    ] {
        let mut params = CertificateParams::new(Vec::<String>::new()).expect("params");
        params
            .subject_alt_names
            .push(SanType::IpAddress([127, 0, 0, 1].into()));
        params
            .distinguished_name
            .push(rcgen::DnType::CommonName, name);
        params.extended_key_usages = vec![purpose];
        let key = KeyPair::generate().expect("key");
        let cert = params.signed_by(&key, &ca, &ca_key).expect("certificate");
        std::fs::write(scratch.file(&format!("{name}.crt")), cert.pem()).unwrap();
        std::fs::write(scratch.file(&format!("{name}.key")), key.serialize_pem()).unwrap();
    }
}

/// A server with a TLS port (requiring client certificates) besides its
/// plaintext one, and its `rediss://` URL.
fn tls_server(scratch: &Scratch) -> (RedisServer, String) {
    let port = TcpListener::bind((Ipv4Addr::LOCALHOST, 0))
        .and_then(|l| l.local_addr())
        .expect("a free port")
        .port();
    let args = [
        "--tls-port".to_string(),
        port.to_string(),
        "--tls-cert-file".into(),
        scratch.file("server.crt"),
        "--tls-key-file".into(),
        scratch.file("server.key"),
        "--tls-ca-cert-file".into(),
        scratch.file("ca.crt"),
        "--tls-auth-clients".into(),
        "yes".into(),
    ];
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    (
        RedisServer::start_with(&args),
        format!("rediss://127.0.0.1:{port}"),
    )
}

#[test]
fn locks_on_tls_masters_with_a_ca_and_a_client_certificate() {
    let scratch = Scratch::new();
    make_certificates(&scratch);
    let servers: Vec<_> = (0..3).map(|_| tls_server(&scratch)).collect();
    let nodes = servers
        .iter()
        .map(|(_, url)| url.as_str())
        .collect::<Vec<_>>()
        .join(",");
    let (ca, cert, key) = (
        scratch.file("ca.crt"),
        scratch.file("client.crt"),
        scratch.file("client.key"),
    );
    let run = |tls: &[&str]| {
        finish(
            redlock()
                .args(["run", "--nodes", &nodes])
                .args(tls)
                .args(["job", "-c", "exit 5"]),
        )
    };
    let done = run(&[
        "--tls-ca-file",
        &ca,
        "--tls-cert-file",
        &cert,
        "--tls-key-file",
        &key,
    ]);
    assert_eq!(done.status.code(), Some(5), "{done:?}");
    assert!(servers.iter().all(|(s, _)| s.dbsize() == 0), "released");

    // Without the CA, a configuration error, before any connection.
    let done = run(&[]);
    assert_eq!(done.status.code(), Some(78), "{done:?}");
    assert!(done.stderr.contains("--tls-ca-file"), "{}", done.stderr);
    // Without the client certificate the servers refuse it: credentials
    // refused (EX_NOPERM), not masters out of reach.
    let done = run(&["--tls-ca-file", &ca]);
    assert_eq!(done.status.code(), Some(77), "{done:?}");
}
