//! Audio server checks: JACK and PipeWire presence (installed, running, with what command
//! line), PipeWire's clock quantum and rate against the buffer asked for, and its real-time
//! module's settings and the limits that back them. Runs on the main thread.

use super::Ctx;
use crate::finding::{Area, Check, Finding};
use crate::roots::{conf_files, read_optional, shown};
use std::collections::BTreeMap;
use std::path::PathBuf;

const AREA: Area = Area::AudioServers;

/// Directories searched for server binaries, relative to the filesystem root.
const BIN_DIRS: [&str; 4] = ["usr/bin", "bin", "usr/local/bin", "usr/sbin"];

pub(super) fn check(ctx: &Ctx) -> Vec<Finding> {
    let conf = PipeWireConf::load(ctx);
    vec![
        jack(ctx),
        pipewire(ctx),
        pipewire_quantum(ctx, &conf),
        pipewire_rt(ctx, &conf),
    ]
}

fn installed(ctx: &Ctx, name: &str) -> Option<PathBuf> {
    BIN_DIRS
        .iter()
        .map(|d| ctx.roots.fs(&format!("{d}/{name}")))
        .find(|p| p.is_file())
}

fn bin_source(ctx: &Ctx, name: &str) -> String {
    format!(
        "{}/{name}, {}/*/comm",
        shown(&ctx.roots.fs("usr/bin")),
        shown(&ctx.roots.proc)
    )
}

/// A process's command line with its NUL separators turned into spaces.
fn cmdline_of(ctx: &Ctx, pid: u32) -> Option<String> {
    let raw = std::fs::read(ctx.roots.proc(&format!("{pid}/cmdline"))).ok()?;
    let words: Vec<String> = raw
        .split(|&b| b == 0)
        .filter(|w| !w.is_empty())
        .map(|w| String::from_utf8_lossy(w).into_owned())
        .collect();
    (!words.is_empty()).then(|| words.join(" "))
}

fn jack(ctx: &Ctx) -> Finding {
    let check = Check::new("audio.jack", AREA, "JACK");
    let source = bin_source(ctx, "jackd");
    let bin = installed(ctx, "jackd");
    match ctx.running(&["jackd", "jackdbus"]) {
        Some((pid, comm)) => {
            let cmd = cmdline_of(ctx, pid).unwrap_or_else(|| comm.to_owned());
            // jackd's own options come before "-d DRIVER"; "-r" there means no real time.
            let server_opts: Vec<&str> = cmd.split_whitespace().take_while(|w| *w != "-d").collect();
            if server_opts.iter().any(|w| *w == "-r" || *w == "--no-realtime") {
                check.warn(format!("{comm} runs (pid {pid}) without real-time scheduling: {cmd}"), source)
                .with_fix("restart jackd without -r/--no-realtime (and with -R -P 80)")
            } else {
                check.pass(format!("{comm} runs (pid {pid}): {cmd}"), source)
            }
        }
        None => check.pass(match bin {
                Some(p) => format!("installed ({}), not running: xrunlab --device jack needs a server started first", shown(&p)),
                None => "not installed (xrunlab's simulated device needs no server)".to_owned(),
            }, source),
    }
}

fn pipewire(ctx: &Ctx) -> Finding {
    let check = Check::new("audio.pipewire", AREA, "PipeWire");
    let source = bin_source(ctx, "pipewire");
    let bin = installed(ctx, "pipewire");
    let pw_jack = installed(ctx, "pw-jack")
        .map(|_| "; pw-jack is installed (JACK clients can run on PipeWire)")
        .unwrap_or("; pw-jack is not installed");
    let text = match (ctx.running(&["pipewire"]), bin) {
        (Some((pid, _)), _) => format!("runs (pid {pid}){pw_jack}"),
        (None, Some(p)) => format!("installed ({}), not running{pw_jack}", shown(&p)),
        (None, None) => "not installed".to_owned(),
    };
    check.pass(text, source)
}

/// What PipeWire's configuration files set (the keys the doctor needs).
#[derive(Debug, Default)]
struct PipeWireConf {
    /// Files read, in PipeWire's order.
    files: Vec<String>,
    /// `context.properties` keys, later files winning.
    properties: BTreeMap<String, String>,
    /// `context.properties.vm.overrides`: applied only when PipeWire detects a virtual machine.
    vm_overrides: BTreeMap<String, String>,
    /// The args of `libpipewire-module-rt`; `None` when no file loads the module.
    rt_args: Option<BTreeMap<String, String>>,
}

impl PipeWireConf {
    /// Reads pipewire.conf as PipeWire does: /etc/pipewire/pipewire.conf replaces the one in
    /// /usr/share/pipewire; drop-ins in pipewire.conf.d (both places) add to it. (A user's
    /// ~/.config/pipewire is not read.)
    fn load(ctx: &Ctx) -> PipeWireConf {
        let mut conf = PipeWireConf::default();
        let main = [
            ctx.roots.fs("etc/pipewire/pipewire.conf"),
            ctx.roots.fs("usr/share/pipewire/pipewire.conf"),
        ]
        .into_iter()
        .find(|p| p.is_file());
        let mut files: Vec<PathBuf> = main.into_iter().collect();
        for dir in [
            "usr/share/pipewire/pipewire.conf.d",
            "etc/pipewire/pipewire.conf.d",
        ] {
            files.extend(conf_files(&ctx.roots.fs(dir)));
        }
        for f in files {
            if let Ok(text) = std::fs::read_to_string(&f) {
                conf.files.push(shown(&f));
                conf.absorb(&text);
            }
        }
        conf
    }

    /// Adds one file's settings (SPA JSON: relaxed JSON with `#` comments and `=`).
    fn absorb(&mut self, text: &str) {
        // Frames of nested objects/arrays: (key that opened it, whether it is the object
        // that loads module-rt).
        let mut stack: Vec<(Option<String>, bool)> = Vec::new();
        let mut pending_key: Option<String> = None;
        let tokens = tokenize(text);
        let mut i = 0;
        while i < tokens.len() {
            let t = tokens[i].as_str();
            match t {
                "{" | "[" => {
                    stack.push((pending_key.take(), false));
                }
                "}" | "]" => {
                    stack.pop();
                    pending_key = None;
                }
                "=" | ":" => {}
                word => {
                    let is_key = matches!(tokens.get(i + 1).map(String::as_str), Some("=" | ":"));
                    if is_key {
                        pending_key = Some(word.to_owned());
                    } else if let Some(key) = pending_key.take() {
                        self.record(&mut stack, &key, word);
                    }
                }
            }
            i += 1;
        }
    }

    fn record(&mut self, stack: &mut [(Option<String>, bool)], key: &str, value: &str) {
        let path: Vec<&str> = stack.iter().filter_map(|(k, _)| k.as_deref()).collect();
        if key == "name" && value == "libpipewire-module-rt" {
            if let Some(frame) = stack.last_mut() {
                frame.1 = true;
            }
            self.rt_args.get_or_insert_with(BTreeMap::new);
            return;
        }
        let n = stack.len();
        let in_rt_args = n >= 2 && stack[n - 2].1 && stack[n - 1].0.as_deref() == Some("args");
        if in_rt_args {
            self.rt_args
                .get_or_insert_with(BTreeMap::new)
                .insert(key.to_owned(), value.to_owned());
        } else if path == ["context.properties"] {
            self.properties.insert(key.to_owned(), value.to_owned());
        } else if path == ["context.properties", "vm.overrides"] {
            self.vm_overrides.insert(key.to_owned(), value.to_owned());
        }
    }
}

/// Splits SPA JSON into brackets, separators and words; `#` starts a comment to the end of
/// the line (outside quotes), quoted strings are one word without their quotes.
fn tokenize(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    for line in text.lines() {
        let mut chars = line.chars().peekable();
        let mut word = String::new();
        let flush = |word: &mut String, out: &mut Vec<String>| {
            if !word.is_empty() {
                out.push(std::mem::take(word));
            }
        };
        while let Some(c) = chars.next() {
            match c {
                '#' => break,
                '"' => {
                    flush(&mut word, &mut out);
                    let s: String = chars.by_ref().take_while(|&c| c != '"').collect();
                    out.push(s);
                }
                '{' | '}' | '[' | ']' | '=' => {
                    flush(&mut word, &mut out);
                    out.push(c.to_string());
                }
                ':' if word.is_empty() || chars.peek().is_some_and(|n| n.is_whitespace()) => {
                    flush(&mut word, &mut out);
                    out.push(":".to_owned());
                }
                c if c.is_whitespace() || c == ',' => flush(&mut word, &mut out),
                c => word.push(c),
            }
        }
        flush(&mut word, &mut out);
    }
    out
}

/// PipeWire's own test for a virtual machine: known vendors in the DMI strings.
fn pipewire_sees_vm(ctx: &Ctx) -> Option<String> {
    const VENDORS: [&str; 11] = [
        "QEMU",
        "KVM",
        "VMware",
        "VMW",
        "innotek GmbH",
        "Oracle Corporation",
        "Xen",
        "Bochs",
        "Parallels",
        "BHYVE",
        "Amazon EC2",
    ];
    for file in ["sys_vendor", "product_name", "board_vendor"] {
        let v = read_optional(&ctx.roots.sys(&format!("class/dmi/id/{file}")))
            .ok()
            .flatten()?;
        if VENDORS.iter().any(|vendor| v.starts_with(vendor)) {
            return Some(v);
        }
    }
    None
}

/// A PipeWire check's finding on a machine without PipeWire configuration.
fn pipewire_not_installed(ctx: &Ctx, check: &Check) -> Finding {
    check.pass(
        "no PipeWire configuration: PipeWire is not installed",
        shown(&ctx.roots.fs("usr/share/pipewire/pipewire.conf")),
    )
}

fn pipewire_quantum(ctx: &Ctx, conf: &PipeWireConf) -> Finding {
    let check = Check::new("audio.pipewire_quantum", AREA, "PipeWire quantum and rate");
    if conf.files.is_empty() {
        return pipewire_not_installed(ctx, &check);
    }
    let source = conf.files.join(", ");
    let vm = pipewire_sees_vm(ctx);
    let get = |key: &str, default: u32| -> (u32, &'static str) {
        if vm.is_some() {
            if let Some(v) = conf.vm_overrides.get(key).and_then(|v| v.parse().ok()) {
                return (v, " (VM override)");
            }
        }
        match conf.properties.get(key).and_then(|v| v.parse().ok()) {
            Some(v) => (v, ""),
            None => (default, " (PipeWire's default)"),
        }
    };
    // PipeWire's built-in defaults when the configuration leaves them commented out.
    let (rate, rate_note) = get("default.clock.rate", 48_000);
    let (quantum, q_note) = get("default.clock.quantum", 1024);
    let (min_q, min_note) = get("default.clock.min-quantum", 32);
    let (max_q, max_note) = get("default.clock.max-quantum", 2048);
    let vm_note = match (&vm, conf.vm_overrides.is_empty()) {
        (Some(v), false) => {
            format!("; PipeWire sees a virtual machine ({v}) and applies vm.overrides")
        }
        (None, false) => "; vm.overrides are not applied (no VM vendor in DMI)".to_owned(),
        _ => String::new(),
    };
    let reason = format!(
        "rate {rate} Hz{rate_note}, quantum {quantum}{q_note} ({:.1} ms), min-quantum {min_q}{min_note}, max-quantum {max_q}{max_note}{vm_note}",
        f64::from(quantum) * 1e3 / f64::from(rate.max(1))
    );
    let want = ctx.opts.buffer_frames;
    if min_q > want {
        check.warn(format!("{reason}: clients cannot get {want} frames, the smallest quantum is {min_q}"), source)
        .with_fix(format!(
            "printf 'context.properties = {{\\n  default.clock.min-quantum = {want}\\n}}\\n' | sudo tee /etc/pipewire/pipewire.conf.d/90-xrunlab-latency.conf, then restart PipeWire"
        ))
    } else if quantum > want {
        check.pass(format!(
                "{reason}: the graph runs at {quantum} frames unless a client asks for less; ask for {want} with PIPEWIRE_QUANTUM={want}/{rate} (or pw-metadata -n settings 0 clock.force-quantum {want})"
            ), source)
    } else {
        check.pass(reason, source)
    }
}

fn pipewire_rt(ctx: &Ctx, conf: &PipeWireConf) -> Finding {
    let check = Check::new("audio.pipewire_rt", AREA, "PipeWire real-time module");
    if conf.files.is_empty() {
        return pipewire_not_installed(ctx, &check);
    }
    let source = conf.files.join(", ");
    let Some(args) = &conf.rt_args else {
        return check.warn("no configuration file loads libpipewire-module-rt: PipeWire's data threads stay SCHED_OTHER", source)
        .with_fix("add { name = libpipewire-module-rt args = { rt.prio = 88 } flags = [ ifexists nofail ] } to context.modules in /etc/pipewire/pipewire.conf");
    };
    let arg = |k: &str| args.get(k).cloned().unwrap_or_else(|| "default".to_owned());
    // Which limits file grants the pipewire group its priority (what the module asks for).
    let limits_dir = ctx.roots.fs("etc/security/limits.d");
    let grants: Vec<String> = std::fs::read_dir(&limits_dir)
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|e| {
            let text = std::fs::read_to_string(e.path()).ok()?;
            let lines: Vec<String> = text
                .lines()
                .map(|l| l.split('#').next().unwrap_or("").trim().to_owned())
                .filter(|l| l.starts_with("@pipewire") && l.contains("rtprio"))
                .collect();
            (!lines.is_empty()).then(|| format!("{} ({})", lines.join("; "), shown(&e.path())))
        })
        .collect();
    let grants = if grants.is_empty() {
        "no limits file grants @pipewire a real-time priority (then PipeWire asks rtkit)".to_owned()
    } else {
        format!("limits: {}", grants.join(", "))
    };
    check.pass(format!(
            "module-rt loaded: rt.prio {}, nice.level {}, rt.time.soft {}, rt.time.hard {}; {grants}",
            arg("rt.prio"),
            arg("nice.level"),
            arg("rt.time.soft"),
            arg("rt.time.hard")
        ), format!("{source}, {}", shown(&limits_dir)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_properties_overrides_and_rt_args_from_spa_json() {
        let text = r#"
context.properties = {
    #default.clock.rate          = 48000
    default.clock.quantum       = 256   # comment
    default.clock.min-quantum   = 16
    vm.overrides = {
        default.clock.min-quantum = 1024
    }
}
context.modules = [
    { name = libpipewire-module-protocol-native }
    { name = libpipewire-module-rt
        args = {
            nice.level    = -11
            rt.prio      = 88
            #rt.time.soft = -1
        }
        flags = [ ifexists nofail ]
    }
]
"#;
        let mut conf = PipeWireConf::default();
        conf.absorb(text);
        assert_eq!(
            conf.properties
                .get("default.clock.quantum")
                .map(String::as_str),
            Some("256")
        );
        assert_eq!(
            conf.properties
                .get("default.clock.min-quantum")
                .map(String::as_str),
            Some("16")
        );
        assert_eq!(
            conf.properties.get("default.clock.rate"),
            None,
            "commented out"
        );
        assert_eq!(
            conf.vm_overrides
                .get("default.clock.min-quantum")
                .map(String::as_str),
            Some("1024")
        );
        let rt = conf.rt_args.unwrap();
        assert_eq!(rt.get("rt.prio").map(String::as_str), Some("88"));
        assert_eq!(rt.get("nice.level").map(String::as_str), Some("-11"));
        assert_eq!(rt.get("rt.time.soft"), None);
    }
}
