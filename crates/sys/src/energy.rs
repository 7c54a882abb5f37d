//! Package energy and power: RAPL counters from powercap when the machine has them, otherwise
//! an estimate from this process's CPU time. Read by the dashboard's non-real-time sampler.

use crate::procfs::{clock_ticks_per_second, process_cpu_ticks};
use crate::read_parsed;
use serde::{Deserialize, Serialize};
use std::io;
use std::path::{Path, PathBuf};
use std::time::Instant;

/// Power assumed per fully busy core when there is no RAPL: a rough figure for a modern
/// desktop/laptop x86 core at moderate clocks. It only makes relative comparisons between runs
/// on the same machine meaningful; change it with [`PowerMeter::with_watts_per_busy_core`].
pub const DEFAULT_WATTS_PER_BUSY_CORE: f64 = 5.0;

#[derive(Debug)]
struct RaplZone {
    energy_path: PathBuf,
    max_range_uj: u64,
    last_uj: u64,
}

/// Why RAPL energy cannot be read: the machine has none, or its counters cannot be read.
#[derive(Debug, thiserror::Error)]
pub enum RaplError {
    /// No top-level RAPL zone (a VM, an ARM machine, no powercap driver).
    #[error("not available on this machine (no {} RAPL zones)", dir.display())]
    NotAvailable {
        /// The powercap directory looked in.
        dir: PathBuf,
    },
    /// The energy counter is root-only (kernels patched against power side channels).
    #[error(
        "permission denied reading {} (RAPL energy is root-only on this kernel; \
         run as root or make it readable)",
        path.display()
    )]
    Permission {
        /// The counter's file.
        path: PathBuf,
        /// The refusal.
        #[source]
        source: io::Error,
    },
    /// The energy counter could not be read or parsed.
    #[error("cannot read {}: {source}", path.display())]
    Read {
        /// The counter's file.
        path: PathBuf,
        /// What failed.
        #[source]
        source: io::Error,
    },
    /// The zone's counter range is missing or not a number.
    #[error("cannot read {}", path.display())]
    Range {
        /// The `max_energy_range_uj` file.
        path: PathBuf,
    },
}

/// Sums the energy counters of all top-level RAPL zones (`intel-rapl:N`, one per package; AMD
/// uses the same names), correcting each counter's wrap at its `max_energy_range_uj`.
#[derive(Debug)]
pub struct RaplMeter {
    zones: Vec<RaplZone>,
    total_uj: u64,
}

impl RaplMeter {
    /// Finds the package zones under `sys_root` (normally "/sys") and takes a first reading.
    /// Errors: [`RaplError::NotAvailable`] when there are no zones, or why the counters cannot
    /// be read (they are root-only on kernels patched against power side channels).
    pub fn open(sys_root: &Path) -> Result<RaplMeter, RaplError> {
        let dir = sys_root.join("class/powercap");
        let not_available = || RaplError::NotAvailable { dir: dir.clone() };
        let mut names: Vec<String> = std::fs::read_dir(&dir)
            .map_err(|_| not_available())?
            .flatten()
            .filter_map(|e| e.file_name().into_string().ok())
            // Sub-zones (core, uncore, dram) are "intel-rapl:N:M" and are inside the package.
            .filter(|n| {
                n.strip_prefix("intel-rapl:")
                    .is_some_and(|i| !i.is_empty() && i.bytes().all(|b| b.is_ascii_digit()))
            })
            .collect();
        names.sort();
        if names.is_empty() {
            return Err(not_available());
        }
        let mut zones = Vec::with_capacity(names.len());
        for name in names {
            let zone_dir = dir.join(name);
            let energy_path = zone_dir.join("energy_uj");
            let last_uj = read_uj_file(&energy_path).map_err(|source| match source.kind() {
                io::ErrorKind::PermissionDenied => RaplError::Permission {
                    path: energy_path.clone(),
                    source,
                },
                _ => RaplError::Read {
                    path: energy_path.clone(),
                    source,
                },
            })?;
            let range_path = zone_dir.join("max_energy_range_uj");
            let max_range_uj =
                read_parsed(&range_path).ok_or(RaplError::Range { path: range_path })?;
            zones.push(RaplZone {
                energy_path,
                max_range_uj,
                last_uj,
            });
        }
        Ok(RaplMeter { zones, total_uj: 0 })
    }

    /// Energy used by all packages since [`RaplMeter::open`], in microjoules. Monotonic: a
    /// counter that went backwards wrapped at its range, which is added back. Assumes reads
    /// come more often than one wrap period (minutes at full load).
    pub fn read_uj(&mut self) -> io::Result<u64> {
        for zone in &mut self.zones {
            let now = read_uj_file(&zone.energy_path)?;
            let delta = if now >= zone.last_uj {
                now - zone.last_uj
            } else {
                zone.max_range_uj.saturating_sub(zone.last_uj) + now
            };
            zone.last_uj = now;
            self.total_uj = self.total_uj.saturating_add(delta);
        }
        Ok(self.total_uj)
    }
}

fn read_uj_file(path: &Path) -> io::Result<u64> {
    std::fs::read_to_string(path)?.trim().parse().map_err(|_| {
        io::Error::new(
            io::ErrorKind::InvalidData,
            format!("{}: not a number", path.display()),
        )
    })
}

/// Average power over the interval since the previous sample.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct PowerSample {
    /// Watts.
    pub watts: f64,
    /// True when derived from CPU time instead of measured by RAPL.
    pub estimated: bool,
}

#[derive(Debug)]
enum Source {
    Rapl(RaplMeter),
    Estimate {
        stat_path: PathBuf,
        watts_per_busy_core: f64,
        why: String,
    },
}

/// The dashboard's power source: measured RAPL package energy when the machine has it,
/// otherwise an estimate of this process's power from its CPU time.
#[derive(Debug)]
pub struct PowerMeter {
    source: Source,
    /// Previous (time, reading): microjoules for RAPL, CPU seconds for the estimate.
    last: Option<(Instant, f64)>,
}

impl PowerMeter {
    /// Uses RAPL under `sys_root` if it can be read, else the CPU-time estimate from
    /// `proc_root`/self/stat (roots normally "/sys" and "/proc").
    pub fn new(sys_root: &Path, proc_root: &Path) -> PowerMeter {
        let source = match RaplMeter::open(sys_root) {
            Ok(meter) => Source::Rapl(meter),
            Err(e) => Source::Estimate {
                stat_path: proc_root.join("self/stat"),
                watts_per_busy_core: DEFAULT_WATTS_PER_BUSY_CORE,
                why: if matches!(e, RaplError::NotAvailable { .. }) {
                    "no RAPL on this machine".to_owned()
                } else {
                    format!("RAPL unusable: {e}")
                },
            },
        };
        PowerMeter { source, last: None }
    }

    /// Changes the per-core power the estimate assumes; no effect when RAPL is the source.
    pub fn with_watts_per_busy_core(mut self, watts: f64) -> PowerMeter {
        if let Source::Estimate {
            watts_per_busy_core,
            ..
        } = &mut self.source
        {
            *watts_per_busy_core = watts;
        }
        self
    }

    /// Where the numbers come from, for labels and result files.
    pub fn source(&self) -> String {
        match &self.source {
            Source::Rapl(_) => "RAPL package energy".to_owned(),
            Source::Estimate {
                watts_per_busy_core,
                why,
                ..
            } => format!(
                "estimate: process CPU time x {watts_per_busy_core:.1} W per busy core ({why})"
            ),
        }
    }

    /// Average watts since the previous call; `None` on the first call, when no time passed,
    /// or when the counters cannot be read.
    pub fn sample(&mut self) -> Option<PowerSample> {
        self.sample_at(Instant::now())
    }

    fn sample_at(&mut self, now: Instant) -> Option<PowerSample> {
        let (reading, estimated, scale) = match &mut self.source {
            Source::Rapl(meter) => (meter.read_uj().ok()? as f64, false, 1e-6),
            Source::Estimate {
                stat_path,
                watts_per_busy_core,
                ..
            } => {
                let ticks = process_cpu_ticks(stat_path).ok()?;
                let cpu_seconds = ticks as f64 / clock_ticks_per_second() as f64;
                (cpu_seconds, true, *watts_per_busy_core)
            }
        };
        let previous = self.last.replace((now, reading));
        let (then, before) = previous?;
        let seconds = now.checked_duration_since(then)?.as_secs_f64();
        if seconds <= 0.0 {
            return None;
        }
        // RAPL: joules per second. Estimate: busy cores (CPU seconds per second) x W per core.
        let watts = (reading - before).max(0.0) * scale / seconds;
        Some(PowerSample { watts, estimated })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::procfs::tests::stat_line;
    use crate::testutil::Fixture;
    use std::time::Duration;

    fn rapl_fixture() -> Fixture {
        let f = Fixture::new("rapl");
        let zone = |name: &str, energy: u64| {
            f.write(
                &format!("class/powercap/{name}/energy_uj"),
                &format!("{energy}\n"),
            )
            .write(
                &format!("class/powercap/{name}/max_energy_range_uj"),
                "262143328850\n",
            );
        };
        zone("intel-rapl:0", 262_143_000_000);
        zone("intel-rapl:1", 1_000);
        // A sub-zone that must not be counted twice.
        zone("intel-rapl:0:0", 5);
        f
    }

    fn set_energy(f: &Fixture, zone: &str, uj: u64) {
        f.write(
            &format!("class/powercap/{zone}/energy_uj"),
            &format!("{uj}\n"),
        );
    }

    #[test]
    fn rapl_sums_packages_and_corrects_wrap() {
        let f = rapl_fixture();
        let mut meter = RaplMeter::open(f.path()).unwrap();
        assert_eq!(meter.zones.len(), 2);
        assert_eq!(meter.read_uj().unwrap(), 0);
        // Package 0 wraps: 328850 uj to the top of its range, then 1000 past zero.
        set_energy(&f, "intel-rapl:0", 1_000);
        set_energy(&f, "intel-rapl:1", 3_000);
        set_energy(&f, "intel-rapl:0:0", 999_999);
        assert_eq!(meter.read_uj().unwrap(), 328_850 + 1_000 + 2_000);
        set_energy(&f, "intel-rapl:0", 6_000);
        assert_eq!(meter.read_uj().unwrap(), 331_850 + 5_000);
        set_energy(&f, "intel-rapl:1", 0);
        set_energy(&f, "intel-rapl:1", 4_000);
        assert_eq!(meter.read_uj().unwrap(), 336_850 + 1_000);
    }

    #[test]
    fn rapl_power_from_fixture() {
        let f = rapl_fixture();
        let mut meter = PowerMeter::new(f.path(), f.path());
        assert_eq!(meter.source(), "RAPL package energy");
        let t0 = Instant::now();
        assert_eq!(meter.sample_at(t0), None);
        // 10 J over 0.5 s on package 1 = 20 W.
        set_energy(&f, "intel-rapl:1", 10_001_000);
        let s = meter.sample_at(t0 + Duration::from_millis(500)).unwrap();
        assert!(!s.estimated);
        assert!((s.watts - 20.0).abs() < 1e-9, "{s:?}");
    }

    #[test]
    fn an_unreadable_counter_names_its_file_and_keeps_the_io_error_as_source() {
        use std::error::Error;
        let f = Fixture::new("rapl-garbage");
        f.write("class/powercap/intel-rapl:0/energy_uj", "garbage\n");
        let err = RaplMeter::open(f.path()).unwrap_err();
        let path = f.path().join("class/powercap/intel-rapl:0/energy_uj");
        assert!(
            matches!(&err, RaplError::Read { path: p, .. } if *p == path),
            "{err:?}"
        );
        assert!(
            err.to_string().contains(&path.display().to_string()),
            "{err}"
        );
        let io = err
            .source()
            .and_then(|s| s.downcast_ref::<io::Error>())
            .expect("the source is the io::Error");
        assert_eq!(io.kind(), io::ErrorKind::InvalidData);
    }

    #[test]
    fn missing_rapl_is_not_available_and_power_is_estimated() {
        let f = Fixture::new("no-rapl");
        let err = RaplMeter::open(f.path()).unwrap_err();
        assert!(matches!(err, RaplError::NotAvailable { .. }), "{err:?}");
        assert!(
            err.to_string().starts_with("not available on this machine"),
            "{err}"
        );
        f.write("class/powercap/dtpm/uevent", "");
        let err = RaplMeter::open(f.path()).unwrap_err();
        assert!(
            err.to_string().starts_with("not available on this machine"),
            "{err}"
        );

        let tck = clock_ticks_per_second();
        f.write("self/stat", &stat_line(tck, 0, 0));
        let mut meter = PowerMeter::new(f.path(), f.path());
        assert_eq!(
            meter.source(),
            "estimate: process CPU time x 5.0 W per busy core (no RAPL on this machine)"
        );
        let t0 = Instant::now();
        assert_eq!(meter.sample_at(t0), None);
        // 1.5 CPU seconds more in 1 s: 1.5 busy cores x 5 W.
        f.write("self/stat", &stat_line(2 * tck, tck / 2, 0));
        let s = meter.sample_at(t0 + Duration::from_secs(1)).unwrap();
        assert!(s.estimated);
        assert!((s.watts - 7.5).abs() < 1e-9, "{s:?}");

        let mut meter = PowerMeter::new(f.path(), f.path()).with_watts_per_busy_core(2.0);
        assert!(meter.source().contains("x 2.0 W"));
        meter.sample_at(t0);
        f.write("self/stat", &stat_line(3 * tck, tck / 2, 0));
        let s = meter.sample_at(t0 + Duration::from_secs(2)).unwrap();
        assert!((s.watts - 1.0).abs() < 1e-9, "{s:?}");
    }

    #[test]
    fn live_machine_estimate_or_rapl() {
        let sys = Path::new(crate::DEFAULT_SYS_ROOT);
        let mut meter = PowerMeter::new(sys, Path::new(crate::DEFAULT_PROC_ROOT));
        let has_rapl = RaplMeter::open(sys).is_ok();
        assert_eq!(meter.source() == "RAPL package energy", has_rapl);
        assert_eq!(meter.sample(), None);
        let start = Instant::now();
        let mut x = 0u64;
        while start.elapsed() < Duration::from_millis(100) {
            x = std::hint::black_box(x.wrapping_add(1));
        }
        let s = meter.sample().unwrap();
        assert_eq!(s.estimated, !has_rapl);
        assert!(s.watts >= 0.0 && s.watts.is_finite());
    }
}
