//! `xrunlab` / `xrunlab dashboard`: starts the engine on the chosen device and serves the live
//! dashboard until SIGINT, SIGTERM or SIGHUP (whose handlers the binary installs, see `signals`);
//! runs on the main thread (the dashboard starts its own threads).

use crate::cli::DashboardArgs;
use crate::devices;
use crate::Failure;
use xrunlab_dash::{Access, DashOptions, Fault};
use xrunlab_engine::{Engine, EngineConfig};

/// Sines the dashboard starts with: about a quarter of a 2-core machine's
/// budget at 128 frames with the reference kernel, so the load graph moves
/// visibly without dropouts, and a burst doubles it.
pub const DASHBOARD_SINES: usize = 1000;

fn defaults() -> EngineConfig {
    EngineConfig {
        sines: DASHBOARD_SINES,
        ..EngineConfig::default()
    }
}

pub fn dashboard(args: &DashboardArgs) -> Result<(), Failure> {
    let mut config = args
        .engine
        .to_config(defaults())
        .map_err(|e| Failure::Usage(e.0))?;
    let device = devices::open(args.engine.device, &args.engine, &mut config)?;
    let engine = Engine::start(config, device)?;
    let factory = devices::dashboard_factory(&args.engine);
    let fault = args
        .stall
        .zip(args.stall_every)
        .map(|(stall, every)| Fault { stall, every });
    let access = match (&args.token, args.no_token) {
        (_, true) => Access::Open,
        (Some(token), false) => Access::Token(token.clone()),
        (None, false) => Access::GeneratedToken,
    };
    let opts = DashOptions {
        listen: args.listen,
        port: args.port,
        fault,
        access,
        explain: args.explain,
        explain_all: args.explain_all,
        history: args.history.clone().or_else(xrunlab_history::default_path),
    };
    // Before the dashboard starts, so that a signal sent right after its URL is printed is caught.
    let stop = crate::signals::dashboard_stop().map_err(Failure::Runtime)?;
    Ok(xrunlab_dash::serve(
        opts,
        engine,
        factory,
        devices::available(),
        stop,
    )?)
}
