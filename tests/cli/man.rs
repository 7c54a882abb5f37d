//! `xrunlab man` and `xrunlab completions`: the man pages name every command and flag that `--help`
//! shows, the completion scripts are generated for bash, zsh and fish, and bash's parses and
//! completes.

use crate::{run_ok, scratch, usage_error};
use std::collections::BTreeSet;
use std::process::Command;

/// The visible commands below `path`, as `xrunlab PATH --help` lists them (help left out).
fn subcommands(path: &[String]) -> Vec<String> {
    let help = help(path);
    let mut names = Vec::new();
    let mut in_commands = false;
    for line in help.lines() {
        if line == "Commands:" {
            in_commands = true;
        } else if in_commands && line.starts_with("  ") && !line.starts_with("   ") {
            let name = line.split_whitespace().next().unwrap().to_string();
            if name != "help" {
                names.push(name);
            }
        } else if in_commands && !line.starts_with(' ') {
            in_commands = false;
        }
    }
    names
}

/// Every long flag in the options of `xrunlab PATH --help`.
fn flags(path: &[String]) -> BTreeSet<String> {
    help(path)
        .lines()
        .filter(|l| l.trim_start().starts_with('-'))
        .flat_map(|l| l.split(|c: char| !(c.is_ascii_alphanumeric() || c == '-')))
        .filter(|w| w.starts_with("--") && w.len() > 2)
        .map(str::to_string)
        .collect()
}

fn help(path: &[String]) -> String {
    let mut args: Vec<&str> = path.iter().map(String::as_str).collect();
    args.push("--help");
    String::from_utf8(run_ok(&args).stdout).unwrap()
}

/// Every command path (`[]`, `["run"]`, `["probe", "wakeup"]`, ...), depth first.
fn command_paths(path: Vec<String>, all: &mut Vec<Vec<String>>) {
    for sub in subcommands(&path) {
        let mut p = path.clone();
        p.push(sub);
        command_paths(p, all);
    }
    all.push(path);
}

/// A man page's text with roff's escaped hyphens made plain (`\-\-port` is `--port`).
fn page_text(path: &std::path::Path) -> String {
    std::fs::read_to_string(path)
        .unwrap_or_else(|e| panic!("{}: {e}", path.display()))
        .replace("\\-", "-")
}

#[test]
fn the_man_pages_name_every_command_and_every_flag_that_help_shows() {
    let dir = scratch("man-pages").join("man1");
    let out = run_ok(&["man", "--dir", dir.to_str().unwrap()]);
    let listed: BTreeSet<String> = String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .map(str::to_string)
        .collect();
    let mut paths = Vec::new();
    command_paths(Vec::new(), &mut paths);
    assert!(paths.len() > 15, "commands found in --help: {paths:?}");
    for path in &paths {
        let name = std::iter::once("xrunlab".to_string())
            .chain(path.iter().cloned())
            .collect::<Vec<_>>()
            .join("-");
        let file = dir.join(format!("{name}.1"));
        assert!(
            listed.contains(file.to_str().unwrap()),
            "{} is not in what `man --dir` listed: {listed:?}",
            file.display()
        );
        let text = page_text(&file);
        assert!(
            text.contains(&format!(".TH {name} 1")),
            "{name}: no title line"
        );
        for flag in flags(path) {
            assert!(text.contains(&flag), "{name}.1 does not name {flag}");
        }
        for sub in subcommands(path) {
            assert!(
                text.contains(&format!("{name}-{sub}(1)")),
                "{name}.1 does not name its command {sub}"
            );
        }
    }
    assert_eq!(
        listed.len(),
        paths.len(),
        "one page per command: {listed:?}"
    );
}

#[test]
fn man_without_dir_writes_the_top_page_to_standard_output() {
    let out = run_ok(&["man"]);
    let text = String::from_utf8(out.stdout).unwrap().replace("\\-", "-");
    assert!(text.contains(".TH xrunlab 1"), "{text}");
    for word in [
        "dashboard",
        "run",
        "watch",
        "doctor",
        "--port",
        "--no-token",
    ] {
        assert!(text.contains(word), "the top page does not name {word}");
    }
}

#[test]
fn completions_are_made_for_bash_zsh_and_fish_and_bash_parses_and_uses_them() {
    let dir = scratch("completions");
    for shell in ["bash", "zsh", "fish"] {
        let script = String::from_utf8(run_ok(&["completions", shell]).stdout).unwrap();
        for word in ["watch", "doctor", "capacity", "jack-server", "explain-all"] {
            assert!(
                script.contains(word),
                "{shell}'s script does not name {word}"
            );
        }
        std::fs::write(dir.join(shell), &script).unwrap();
    }
    let bash = dir.join("bash");
    let check = Command::new("bash").arg("-n").arg(&bash).output().unwrap();
    assert!(
        check.status.success(),
        "bash -n: {}",
        String::from_utf8_lossy(&check.stderr)
    );
    // The function bash calls on Tab, called as bash would for `xrunlab wat<Tab>` and
    // `xrunlab watch --ser<Tab>`.
    let complete = |words: &str, current: usize| {
        let script = format!(
            "source {}; COMP_WORDS=({words}); COMP_CWORD={current}; COMP_LINE='{words}'; \
             COMP_POINT=${{#COMP_LINE}}; _xrunlab xrunlab \"${{COMP_WORDS[$COMP_CWORD]}}\" \
             \"${{COMP_WORDS[$COMP_CWORD-1]}}\"; printf '%s\\n' \"${{COMPREPLY[@]}}\"",
            bash.display()
        );
        let out = Command::new("bash")
            .arg("-c")
            .arg(&script)
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{words}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8(out.stdout).unwrap()
    };
    let words = complete("xrunlab wat", 1);
    assert_eq!(words.trim(), "watch", "xrunlab wat<Tab>: {words:?}");
    let words = complete("xrunlab watch --ser", 2);
    assert_eq!(
        words.trim(),
        "--server",
        "xrunlab watch --ser<Tab>: {words:?}"
    );
}

#[test]
fn completions_for_an_unknown_shell_is_a_usage_error_naming_the_shells() {
    usage_error(&["completions", "tcsh"], &["tcsh", "bash", "zsh", "fish"]);
}

#[test]
fn version_names_the_package_version() {
    let out = run_ok(&["--version"]);
    assert_eq!(
        String::from_utf8(out.stdout).unwrap().trim(),
        format!("xrunlab {}", env!("CARGO_PKG_VERSION"))
    );
}
