//! `xrunlab man` and `xrunlab completions`: man pages (clap_mangen) and shell completion scripts
//! (clap_complete) made from the same clap definitions as the parser, so they never drift from it;
//! runs on the main thread.

use crate::cli::docs::{CompletionsArgs, ManArgs};
use crate::cli::Cli;
use crate::Failure;
use clap::CommandFactory;
use std::io::Write;
use std::path::{Path, PathBuf};

/// Without `--dir`, the top page to standard output (`xrunlab man | man -l -`); with it, one
/// page per visible command and subcommand, listed on standard output as they are written.
pub fn man(args: &ManArgs) -> Result<(), Failure> {
    let cmd = Cli::command();
    let Some(dir) = &args.dir else {
        let mut out = std::io::stdout().lock();
        return clap_mangen::Man::new(cmd)
            .render(&mut out)
            .and_then(|()| out.flush())
            .map_err(|e| Failure::Runtime(format!("writing the man page: {e}")));
    };
    std::fs::create_dir_all(dir).map_err(|e| {
        Failure::Usage(format!(
            "--dir {}: cannot create the directory: {e}",
            dir.display()
        ))
    })?;
    // As clap_mangen::generate_to, which does not say what it wrote: the help subcommand is
    // left out and the tree is built first, so each page names its full command.
    let mut cmd = cmd.disable_help_subcommand(true);
    cmd.build();
    let mut pages = Vec::new();
    write_pages(cmd, dir, &mut pages)
        .map_err(|e| Failure::Runtime(format!("--dir {}: {e}", dir.display())))?;
    for page in pages {
        println!("{}", page.display());
    }
    Ok(())
}

/// A page for `cmd` and, depth first, for each visible subcommand.
fn write_pages(cmd: clap::Command, dir: &Path, pages: &mut Vec<PathBuf>) -> std::io::Result<()> {
    for sub in cmd.get_subcommands().filter(|s| !s.is_hide_set()).cloned() {
        write_pages(sub, dir, pages)?;
    }
    pages.push(clap_mangen::Man::new(cmd).generate_to(dir)?);
    Ok(())
}

/// The script goes to standard output, as shells' completion installers expect.
pub fn completions(args: &CompletionsArgs) -> Result<(), Failure> {
    let mut cmd = Cli::command();
    let name = cmd.get_name().to_string();
    let mut out = std::io::stdout().lock();
    clap_complete::generate(args.shell, &mut cmd, name, &mut out);
    out.flush()
        .map_err(|e| Failure::Runtime(format!("writing the completion script: {e}")))
}
