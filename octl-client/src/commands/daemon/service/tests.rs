//! Rendering and escaping of the service units, and where they go.

use super::*;

#[test]
fn systemd_units_name_the_program_and_the_home_socket() {
    let files = ServiceManager::Systemd
        .render(
            Path::new("/opt/octl/bin/octld"),
            Path::new("/home/u/.orchestratectl"),
            Path::new("/home/u/.config/systemd/user"),
        )
        .unwrap();
    assert_eq!(
        files[0].path,
        Path::new("/home/u/.config/systemd/user/octld.socket")
    );
    assert!(files[0]
        .text
        .contains("\nListenStream=/home/u/.orchestratectl/octld.sock\n"));
    assert!(files[0].text.contains("\nSocketMode=0600\n"));
    assert_eq!(
        files[1].path,
        Path::new("/home/u/.config/systemd/user/octld.service")
    );
    assert!(files[1]
        .text
        .contains("\nExecStart=/opt/octl/bin/octld --foreground --home /home/u/.orchestratectl\n"));
    assert!(files[1].text.contains("\nType=notify\n"));
    for f in &files {
        assert!(
            !f.text.contains('@'),
            "every placeholder filled: {}",
            f.text
        );
    }
}

#[test]
fn odd_paths_are_escaped_for_systemd_and_xml() {
    assert_eq!(systemd_arg("/a/b-c_d.e"), "/a/b-c_d.e");
    assert_eq!(systemd_arg("/a b/100%"), "\"/a b/100%%\"");
    assert_eq!(systemd_arg("/x/$HOME\\\""), "\"/x/$$HOME\\\\\\\"\"");
    assert_eq!(systemd_value("/h/50%/x"), "/h/50%%/x");
    assert_eq!(xml_text("/a&b/<c>"), "/a&amp;b/&lt;c&gt;");
    assert_eq!(sh_quote("/plain/path"), "/plain/path");
    assert_eq!(sh_quote("/it's here"), "'/it'\\''s here'");
    let err = ServiceManager::Systemd
        .render(
            Path::new("/bin/octld"),
            Path::new("/h/a\nb"),
            Path::new("/d"),
        )
        .unwrap_err();
    assert_eq!(err.kind, ErrorKind::InvalidParams);
    assert!(ServiceManager::Systemd
        .render(Path::new("octld"), Path::new("/h"), Path::new("/d"))
        .is_err());
}

#[test]
fn the_launch_agent_has_the_socket_and_the_program() {
    let files = ServiceManager::Launchd
        .render(
            Path::new("/usr/local/bin/octld"),
            Path::new("/Users/u/my & home"),
            Path::new("/Users/u/Library/LaunchAgents"),
        )
        .unwrap();
    assert_eq!(files.len(), 1);
    assert_eq!(
        files[0].path,
        Path::new("/Users/u/Library/LaunchAgents/dev.orchestratectl.octld.plist")
    );
    let text = &files[0].text;
    assert!(
        text.contains("<string>/usr/local/bin/octld</string>"),
        "{text}"
    );
    assert!(
        text.contains("<string>/Users/u/my &amp; home/octld.sock</string>"),
        "{text}"
    );
    assert!(
        text.contains("<key>SockPathMode</key>\n      <integer>384</integer>"),
        "{text}"
    );
    assert!(!text.contains('@'), "{text}");
}

#[test]
fn unit_directories() {
    let home = Some(Path::new("/home/u"));
    assert_eq!(
        ServiceManager::Systemd.unit_dir(home, None).unwrap(),
        Path::new("/home/u/.config/systemd/user")
    );
    assert_eq!(
        ServiceManager::Systemd
            .unit_dir(home, Some(Path::new("/xdg")))
            .unwrap(),
        Path::new("/xdg/systemd/user")
    );
    assert_eq!(
        ServiceManager::Systemd
            .unit_dir(home, Some(Path::new("relative")))
            .unwrap(),
        Path::new("/home/u/.config/systemd/user")
    );
    assert_eq!(
        ServiceManager::Launchd.unit_dir(home, None).unwrap(),
        Path::new("/home/u/Library/LaunchAgents")
    );
    assert!(ServiceManager::Launchd.unit_dir(None, None).is_err());
}
