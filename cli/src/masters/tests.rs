//! `masters`' tests: the sources of the voters, credentials, and what is
//! never shown.

use super::*;
use std::collections::HashMap;

impl Masters {
    /// Every URL, voter after voter.
    fn urls(&self) -> Vec<&str> {
        self.voters
            .iter()
            .flat_map(Voter::urls)
            .map(String::as_str)
            .collect()
    }
}

/// The URLs of a list, voter after voter.
fn split(list: &str) -> Vec<&str> {
    list::parse(list)
        .unwrap()
        .iter()
        .flat_map(|entry| entry.urls().to_vec())
        .collect()
}

fn env(vars: &[(&str, &str)]) -> impl Fn(&str) -> Option<OsString> {
    let vars: HashMap<String, OsString> = vars
        .iter()
        .map(|(k, v)| (k.to_string(), OsString::from(v)))
        .collect();
    move |name| vars.get(name).cloned()
}

fn nodes(list: &str) -> MasterArgs {
    MasterArgs {
        nodes: Some(list.into()),
        ..MasterArgs::default()
    }
}

#[test]
fn takes_the_option_before_the_environment() {
    let from_env = env(&[(NODES_VARIABLE, "redis://e1, redis://e2\nredis://e3")]);
    let m = resolve(&MasterArgs::default(), &from_env).unwrap();
    assert_eq!(m.urls(), ["redis://e1", "redis://e2", "redis://e3"]);
    let m = resolve(&nodes("redis://a:1,redis://b:2"), &from_env).unwrap();
    assert_eq!(m.urls(), ["redis://a:1", "redis://b:2"]);
    assert!(m.warnings.is_empty());
}

#[test]
fn no_masters_is_a_configuration_error() {
    let e = resolve(&MasterArgs::default(), env(&[])).unwrap_err();
    assert!(e.contains("--nodes") && e.contains(NODES_VARIABLE), "{e}");
    assert!(resolve(&nodes(" , "), env(&[])).is_err());
}

#[test]
fn adds_the_password_from_the_environment_to_urls_without_one() {
    let vars = env(&[(PASSWORD_VARIABLE, "p@ss:w/rd"), (USER_VARIABLE, "alice")]);
    let m = resolve(&nodes("redis://h1:1,redis://:own@h2:2"), vars).unwrap();
    assert_eq!(
        m.urls(),
        ["redis://alice:p%40ss%3Aw%2Frd@h1:1", "redis://:own@h2:2"]
    );
}

#[test]
fn warns_about_a_password_on_the_command_line_without_showing_it() {
    let m = resolve(&nodes("redis://:hunter2@h:1"), env(&[])).unwrap();
    assert_eq!(m.warnings.len(), 1);
    assert!(!m.warnings[0].contains("hunter2"));
    assert!(!format!("{m:?}").contains("hunter2"));
    // Not for the same URL in the environment.
    let vars = env(&[(NODES_VARIABLE, "redis://:hunter2@h:1")]);
    assert!(resolve(&MasterArgs::default(), vars)
        .unwrap()
        .warnings
        .is_empty());
}

#[test]
fn reads_the_password_file_without_its_line_break() {
    let dir = std::env::temp_dir().join(format!("redlock-cli-masters-{}", std::process::id()));
    fs::create_dir_all(&dir).unwrap();
    let file = dir.join("password");
    fs::write(&file, "s3cret\r\n").unwrap();
    let args = MasterArgs {
        password_file: Some(file.clone()),
        ..nodes("redis://h:1")
    };
    let m = resolve(&args, env(&[(PASSWORD_VARIABLE, "ignored")])).unwrap();
    assert_eq!(m.urls(), ["redis://:s3cret@h:1"]);
    fs::write(&file, "\n").unwrap();
    assert!(resolve(&args, env(&[])).is_err());
    let missing = MasterArgs {
        password_file: Some(dir.join("missing")),
        ..nodes("redis://h:1")
    };
    assert!(resolve(&missing, env(&[])).unwrap_err().contains("missing"));
    fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn a_user_without_a_password_is_refused() {
    let args = MasterArgs {
        user: Some("alice".into()),
        ..nodes("redis://h:1")
    };
    assert!(resolve(&args, env(&[])).is_err());
}

/// Passwords written in URLs, with what the old split cut them at.
const PASSWORD_URLS: &str = "redis://:hun,ter2@h1:1, redis://u:hun ter2@h2:2 \
                             REDIS://:p@ss,w%25rd@h3:3\nredis://:a,@h4";

#[test]
fn splits_between_urls_never_inside_credentials() {
    assert_eq!(
        split(PASSWORD_URLS),
        [
            "redis://:hun,ter2@h1:1",
            "redis://u:hun ter2@h2:2",
            "REDIS://:p@ss,w%25rd@h3:3",
            "redis://:a,@h4"
        ]
    );
    assert_eq!(
        split(" redis://a,,redis://b\tredis://c \n"),
        ["redis://a", "redis://b", "redis://c"]
    );
    // After the host, a comma or blank separates, scheme or not.
    assert_eq!(
        split("redis://:p,w@a:1,b:2 c"),
        ["redis://:p,w@a:1", "b:2", "c"]
    );
    assert_eq!(split("a,b rediss://:x,y@c"), ["a", "b", "rediss://:x,y@c"]);
    assert!(split(" , \n").is_empty());
}

/// The list from each source, with passwords holding a `,`, a blank, an
/// `@` and a `%`: the URLs reach the library whole (issue 31, item 5:
/// they were cut at every comma and blank, and the library's error
/// showed a piece holding the password).
#[test]
fn takes_passwords_with_commas_blanks_ats_and_percents_from_every_source() {
    let expected = split(PASSWORD_URLS);
    assert_eq!(expected.len(), 4);
    let from_env = resolve(
        &MasterArgs::default(),
        env(&[(NODES_VARIABLE, PASSWORD_URLS)]),
    )
    .unwrap();
    assert_eq!(from_env.urls(), expected);
    let from_option = resolve(&nodes(PASSWORD_URLS), env(&[])).unwrap();
    assert_eq!(from_option.urls(), expected);
    for secret in ["hun", "ter2", "p@ss", "w%25rd"] {
        assert!(!from_option.warnings[0].contains(secret));
        assert!(!format!("{from_option:?}").contains(secret));
    }
    let dir = std::env::temp_dir().join(format!("redlock-cli-split-{}", std::process::id()));
    fs::create_dir_all(&dir).unwrap();
    let file = dir.join("nodes");
    fs::write(
        &file,
        format!("# masters\n{}\n", PASSWORD_URLS.replace(", ", "\n")),
    )
    .unwrap();
    let args = MasterArgs {
        nodes_file: Some(file),
        ..MasterArgs::default()
    };
    assert_eq!(resolve(&args, env(&[])).unwrap().urls(), expected);
    fs::remove_dir_all(&dir).unwrap();
    assert!(nodes_variable_has_credentials(&PASSWORD_URLS.into()));
}

#[test]
fn a_password_from_the_environment_with_commas_blanks_ats_and_percents_is_encoded() {
    let vars = env(&[(PASSWORD_VARIABLE, "hun,ter2 p@ss%")]);
    let m = resolve(&nodes("redis://h1:1 redis://h2:2"), vars).unwrap();
    assert_eq!(
        m.urls(),
        [
            "redis://:hun%2Cter2%20p%40ss%25@h1:1",
            "redis://:hun%2Cter2%20p%40ss%25@h2:2"
        ]
    );
}

/// `redis://h1,:pw@h2` (a scheme forgotten) would be one master whose
/// user name is `h1,`, and `cluster(redis://a)cluster(redis://:pw@b:1)`
/// (a blank forgotten) one cluster whose seed's user name is
/// `a)cluster(redis`: refused, without showing the password.
#[test]
fn a_user_name_with_a_comma_blank_or_parenthesis_is_refused() {
    for list in [
        "redis://h1,:hunter2@h2",
        "redis://a redis://h1 u:hunter2@h2",
        "cluster(redis://a)cluster(redis://:hunter2@b:1)",
    ] {
        let e = resolve(&nodes(list), env(&[])).unwrap_err();
        assert!(e.contains("user name") && !e.contains("hunter2"), "{e}");
    }
    // Encoded, they are the user's.
    let m = resolve(&nodes("redis://a%2Cb:pw@h"), env(&[])).unwrap();
    assert_eq!(m.urls(), ["redis://a%2Cb:pw@h"]);
}

fn cluster(seeds: &[&str]) -> Voter {
    Voter::Cluster(seeds.iter().map(|s| s.to_string()).collect())
}

fn master(url: &str) -> Voter {
    Voter::Master(url.into())
}

#[test]
fn takes_clusters_from_every_source_mixed_with_masters() {
    let list = "cluster(redis://a:1,redis://b:1) redis://m:1\ncluster(redis://c:1)";
    let expected = [
        cluster(&["redis://a:1", "redis://b:1"]),
        master("redis://m:1"),
        cluster(&["redis://c:1"]),
    ];
    let from_env = resolve(&MasterArgs::default(), env(&[(NODES_VARIABLE, list)])).unwrap();
    assert!(from_env.voters == expected);
    assert!(resolve(&nodes(list), env(&[])).unwrap().voters == expected);
    // --cluster: one voter each, after --nodes's; the command line
    // replaces the environment.
    let args = MasterArgs {
        clusters: vec!["redis://a:1 redis://b:1".into(), "redis://c:1".into()],
        ..nodes("redis://m:1")
    };
    let m = resolve(&args, env(&[(NODES_VARIABLE, "redis://e:1")])).unwrap();
    assert!(
        m.voters
            == [
                master("redis://m:1"),
                cluster(&["redis://a:1", "redis://b:1"]),
                cluster(&["redis://c:1"])
            ]
    );
    let dir = std::env::temp_dir().join(format!("redlock-cli-groups-{}", std::process::id()));
    fs::create_dir_all(&dir).unwrap();
    let file = dir.join("nodes");
    fs::write(
        &file,
        "# two clusters and a master\ncluster(\n  redis://a:1\n  redis://b:1\n)\n\
         redis://m:1\ncluster(redis://c:1)\n",
    )
    .unwrap();
    let args = MasterArgs {
        nodes_file: Some(file),
        ..MasterArgs::default()
    };
    assert!(resolve(&args, env(&[])).unwrap().voters == expected);
    fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn gives_a_clusters_seeds_the_password_and_warns_of_one_in_cluster() {
    let vars = env(&[(PASSWORD_VARIABLE, "p,w d"), (USER_VARIABLE, "alice")]);
    let list = "cluster(redis://a:1, redis://:own@b:1) redis://m:1";
    let m = resolve(&nodes(list), vars).unwrap();
    assert!(
        m.voters
            == [
                cluster(&["redis://alice:p%2Cw%20d@a:1", "redis://:own@b:1"]),
                master("redis://alice:p%2Cw%20d@m:1"),
            ]
    );
    // The password in --nodes draws the warning, which does not show it.
    assert_eq!(m.warnings.len(), 1);
    assert!(!m.warnings[0].contains("own"));
    let args = MasterArgs {
        clusters: vec!["redis://:hun,ter2@a:1".into()],
        ..MasterArgs::default()
    };
    let m = resolve(&args, env(&[])).unwrap();
    assert!(m.voters == [cluster(&["redis://:hun,ter2@a:1"])]);
    assert!(m.warnings[0].contains("--cluster") && !m.warnings[0].contains("hun"));
    assert!(!format!("{m:?}").contains("hun"));
    assert!(nodes_variable_has_credentials(
        &"redis://m cluster(redis://a, redis://:p@b)".into()
    ));
    assert!(!nodes_variable_has_credentials(
        &"redis://m cluster(redis://a, redis://b)".into()
    ));
    // A list that cannot be read is not handed on either.
    assert!(nodes_variable_has_credentials(&"cluster(redis://a".into()));
}

#[test]
fn a_malformed_cluster_is_refused_by_its_source_without_showing_it() {
    let secret = "cluster(redis://:hunter2@a:1";
    let e = resolve(&nodes(secret), env(&[])).unwrap_err();
    assert!(
        e.starts_with("--nodes: ") && e.contains("no closing"),
        "{e}"
    );
    let e = resolve(&MasterArgs::default(), env(&[(NODES_VARIABLE, secret)])).unwrap_err();
    assert!(e.starts_with("REDLOCK_NODES: "), "{e}");
    for clusters in [
        vec!["cluster(redis://:hunter2@a:1)".to_string()],
        vec![" , ".into()],
        vec!["redis://a:1".into(), "redis://:hunter2@b:1)".into()],
    ] {
        let args = MasterArgs {
            clusters,
            ..MasterArgs::default()
        };
        let e = resolve(&args, env(&[])).unwrap_err();
        assert!(e.starts_with("--cluster"), "{e}");
        assert!(!e.contains("hunter2"), "{e}");
    }
    assert_eq!(ordinal(2), "2nd");
    assert_eq!(ordinal(13), "13th");
}

#[test]
fn tells_which_nodes_variables_carry_a_password() {
    assert!(nodes_variable_has_credentials(
        &"redis://h1,redis://:p@h2".into()
    ));
    assert!(!nodes_variable_has_credentials(
        &"redis://h1,redis://h2".into()
    ));
}
