//! Interrupt checks: sound and USB controller IRQs shared with other devices, the sound
//! card IRQ's CPU affinity, and (with threaded IRQs) its thread's priority against the audio
//! threads'. Runs on the main thread.

use super::Ctx;
use crate::finding::{Area, Check, Finding, Status};
use crate::roots::{read, read_optional, shown};

const AREA: Area = Area::Irqs;
const SHARED: Check = Check::new("irq.shared", AREA, "Sound and USB IRQ sharing");
const SOUND: Check = Check::new("irq.sound", AREA, "Sound card IRQ affinity and priority");

/// One numbered line of /proc/interrupts.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IrqLine {
    /// IRQ number.
    pub irq: u32,
    /// The devices on the line, e.g. ["snd_hda_intel:card0", "xhci_hcd"].
    pub devices: Vec<String>,
}

/// The numbered IRQ lines of /proc/interrupts text (NMI, LOC and the like are skipped).
/// The device list is the last column, after the chip and trigger columns, which the kernel
/// separates by at least two spaces; devices sharing a line are joined by ", ".
pub fn parse_interrupts(text: &str) -> Vec<IrqLine> {
    text.lines()
        .filter_map(|line| {
            let (label, rest) = line.split_once(':')?;
            let irq = label.trim().parse().ok()?;
            let rest = rest.trim_end();
            let devices = match rest.rfind("  ") {
                Some(i) => rest[i..].trim(),
                None => rest.split_whitespace().last().unwrap_or(""),
            };
            let devices = devices
                .split(", ")
                .map(str::trim)
                .filter(|d| !d.is_empty())
                .map(str::to_owned)
                .collect();
            Some(IrqLine { irq, devices })
        })
        .collect()
}

fn is_sound(device: &str) -> bool {
    let d = device.to_lowercase();
    d.starts_with("snd_") || d.starts_with("snd-") || d.contains("audiodsp")
}

fn is_usb(device: &str) -> bool {
    let d = device.to_lowercase();
    ["xhci_hcd", "ehci_hcd", "uhci_hcd", "ohci_hcd", "xhci-hcd"]
        .iter()
        .any(|u| d.contains(u))
}

pub(super) fn check(ctx: &Ctx) -> Vec<Finding> {
    let path = ctx.roots.proc("interrupts");
    let lines = match read(&path) {
        Ok(t) => parse_interrupts(&t),
        Err(e) => {
            return vec![
                SHARED.unknown(e.to_string(), shown(&path)),
                SOUND.unknown(e.to_string(), shown(&path)),
            ]
        }
    };
    vec![shared(ctx, &lines), sound(ctx, &lines)]
}

fn shared(ctx: &Ctx, lines: &[IrqLine]) -> Finding {
    let source = shown(&ctx.roots.proc("interrupts"));
    let relevant: Vec<&IrqLine> = lines
        .iter()
        .filter(|l| l.devices.iter().any(|d| is_sound(d) || is_usb(d)))
        .collect();
    if relevant.is_empty() {
        return SHARED.pass("no sound or USB controller IRQs on this machine", source);
    }
    let shared: Vec<String> = relevant
        .iter()
        .filter(|l| l.devices.len() > 1)
        .map(|l| format!("IRQ {}: {}", l.irq, l.devices.join(", ")))
        .collect();
    let alone: Vec<String> = relevant
        .iter()
        .filter(|l| l.devices.len() == 1)
        .map(|l| format!("IRQ {} {}", l.irq, l.devices[0]))
        .collect();
    if shared.is_empty() {
        return SHARED.pass(format!("none shared: {}", alone.join(", ")), source);
    }
    SHARED.warn(format!(
            "shared lines, where every interrupt of the other device also runs the sound/USB handler: {}",
            shared.join("; ")
        ), source)
    .with_fix(
        "move the audio interface to a USB port whose controller has an IRQ of its own, or unload \
         the other device's driver; with threadirqs, raise the sound IRQ thread's priority (see irq.sound)",
    )
}

/// The kernel thread serving `irq` ("irq/N-name"), with its SCHED_FIFO priority from stat.
fn irq_thread(ctx: &Ctx, irq: u32) -> Option<(u32, String, u32)> {
    let prefix = format!("irq/{irq}-");
    let (pid, comm) = ctx.processes.iter().find(|(_, c)| c.starts_with(&prefix))?;
    let stat = read(&ctx.roots.proc(&format!("{pid}/stat"))).ok()?;
    // Fields after the ")" that closes comm: field 40 (rt_priority) is index 37 there.
    let after = stat.rsplit_once(')')?.1;
    let rt_priority = after.split_whitespace().nth(37)?.parse().ok()?;
    Some((*pid, comm.clone(), rt_priority))
}

fn sound(ctx: &Ctx, lines: &[IrqLine]) -> Finding {
    let sound: Vec<&IrqLine> = lines
        .iter()
        .filter(|l| l.devices.iter().any(|d| is_sound(d)))
        .collect();
    if sound.is_empty() {
        return SOUND.unknown("no sound card IRQ in /proc/interrupts (no sound card, or a USB one behind its controller's IRQ)", shown(&ctx.roots.proc("interrupts")));
    }
    let want = u32::from(ctx.opts.audio_priority);
    let mut notes = Vec::new();
    let mut fixes = Vec::new();
    let mut sources = vec![shown(&ctx.roots.proc("interrupts"))];
    let mut status = Status::Pass;
    for l in &sound {
        let aff_path = ctx.roots.proc(&format!("irq/{}/smp_affinity_list", l.irq));
        sources.push(shown(&aff_path));
        let affinity = match read_optional(&aff_path) {
            Ok(Some(a)) => format!("CPUs {a}"),
            Ok(None) => "affinity unknown (file missing)".to_owned(),
            Err(e) => format!("affinity unknown ({e})"),
        };
        let name = l
            .devices
            .iter()
            .find(|d| is_sound(d))
            .cloned()
            .unwrap_or_default();
        match irq_thread(ctx, l.irq) {
            Some((pid, comm, prio)) if prio <= want => {
                status = Status::Warn;
                notes.push(format!(
                    "IRQ {} ({name}) on {affinity}; its thread {comm} (pid {pid}) runs at FIFO {prio}, not above the audio threads' {want}, so audio can delay the card's own interrupt",
                    l.irq
                ));
                fixes.push(format!("sudo chrt -f -p {} {pid}", (want + 10).min(99)));
            }
            Some((pid, comm, prio)) => notes.push(format!(
                "IRQ {} ({name}) on {affinity}; its thread {comm} (pid {pid}) runs at FIFO {prio}, above the audio threads' {want}",
                l.irq
            )),
            None => notes.push(format!("IRQ {} ({name}) on {affinity}; no IRQ thread (no threadirqs)", l.irq)),
        }
    }
    let mut f = SOUND.finding(status, notes.join("; "), sources.join(", "));
    if !fixes.is_empty() {
        f.fix = Some(format!(
            "{} (until reboot; the rtirq-init package does it at every boot)",
            fixes.join(" && ")
        ));
    }
    f
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_device_lists_of_numbered_lines() {
        let text = "           CPU0       CPU1\n\
          24:          1          0  IO-APIC   5-edge      ACPI:Ged\n\
         131:       9765          0  IR-PCI-MSI 327680-edge      xhci_hcd\n\
          16:         77          3  IO-APIC  16-fasteoi   snd_hda_intel:card0, i801_smbus\n\
         NMI:          0          0   Non-maskable interrupts\n";
        let lines = parse_interrupts(text);
        assert_eq!(lines.len(), 3);
        assert_eq!(lines[1].devices, vec!["xhci_hcd"]);
        assert_eq!(lines[2].irq, 16);
        assert_eq!(lines[2].devices, vec!["snd_hda_intel:card0", "i801_smbus"]);
        assert!(is_sound("snd_hda_intel:card0") && is_usb("xhci_hcd") && !is_sound("ACPI:Ged"));
    }
}
