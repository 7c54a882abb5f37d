//! Runs the dashboard on the simulated device without the CLI (for developing the page and for the
//! browser tests until `xrunlab` serves it); the main thread blocks in `serve`.
//!
//! `cargo run -p xrunlab-dash --example serve -- [--port N] [--sines N] [--stall-ms MS
//! --stall-every-ms MS] [--token TOKEN | --no-token]`

use std::time::Duration;
use xrunlab_dash::{serve, Access, DashOptions, DeviceFactory, FactoryError, Fault, Token};
use xrunlab_engine::device::sim::SimDevice;
use xrunlab_engine::{Device, Engine, EngineConfig};

fn main() {
    let mut opts = DashOptions::default();
    let mut config = EngineConfig {
        sines: 600,
        ..EngineConfig::default()
    };
    let (mut stall_ms, mut every_ms) = (0.0f64, 500.0f64);
    let mut args = std::env::args().skip(1);
    while let Some(flag) = args.next() {
        if flag == "--no-token" {
            opts.access = Access::Open;
            continue;
        }
        let value = args.next().unwrap_or_default();
        let bad = |what: &str| -> ! {
            eprintln!("serve: {flag} needs {what}, got {value:?}");
            std::process::exit(2)
        };
        match flag.as_str() {
            "--port" => opts.port = value.parse().unwrap_or_else(|_| bad("a port number")),
            "--listen" => opts.listen = value.parse().unwrap_or_else(|_| bad("an IP address")),
            "--sines" => config.sines = value.parse().unwrap_or_else(|_| bad("a sine count")),
            "--stall-ms" => stall_ms = value.parse().unwrap_or_else(|_| bad("milliseconds")),
            "--stall-every-ms" => every_ms = value.parse().unwrap_or_else(|_| bad("milliseconds")),
            "--token" => {
                opts.access = Access::Token(Token::new(&value).unwrap_or_else(|_| bad(xrunlab_dash::token::ALLOWED)));
            }
            _ => bad(
                "to be one of --port --listen --sines --stall-ms --stall-every-ms --token --no-token",
            ),
        }
    }
    if stall_ms > 0.0 {
        opts.fault = Some(Fault {
            stall: Duration::from_secs_f64(stall_ms / 1e3),
            every: Duration::from_secs_f64(every_ms / 1e3),
        });
    }
    let factory: DeviceFactory = Box::new(|kind: &str, c: &EngineConfig| match kind {
        "sim" => Ok(
            Box::new(SimDevice::new(c.sample_rate, c.buffer_frames, c.input)) as Box<dyn Device>,
        ),
        other => Err(FactoryError::unknown_kind(other, &["sim"])),
    });
    let device = match factory("sim", &config) {
        Ok(d) => d,
        Err(e) => {
            eprintln!("serve: {e}");
            std::process::exit(1)
        }
    };
    let engine = match Engine::start(config, device) {
        Ok(e) => e,
        Err(e) => {
            eprintln!("serve: could not start the engine: {e}");
            std::process::exit(1)
        }
    };
    // This program owns its signals (the library takes a stop future): SIGINT or SIGTERM end it
    // cleanly. The block runs on the dashboard's runtime, where tokio's handlers can be made.
    let stop = async {
        use tokio::signal::unix::{signal, SignalKind};
        let (Ok(mut int), Ok(mut term)) = (
            signal(SignalKind::interrupt()),
            signal(SignalKind::terminate()),
        ) else {
            eprintln!("serve: cannot handle SIGINT and SIGTERM; they end the process at once");
            return std::future::pending().await;
        };
        tokio::select! {
            _ = int.recv() => {}
            _ = term.recv() => {}
        }
    };
    if let Err(e) = serve(opts, engine, factory, vec!["sim".into()], stop) {
        eprintln!("serve: {e}");
        std::process::exit(1);
    }
}
