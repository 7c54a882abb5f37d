//! Opens the audio device a command asked for (simulated, or JACK when built with it); runs on the
//! main thread.

use crate::cli::parse::DeviceKind;
use crate::cli::run::EngineArgs;
use crate::jack_support::{self, JackArgs};
use xrunlab_dash::{DeviceFactory, FactoryError};
use xrunlab_engine::device::sim::SimDevice;
use xrunlab_engine::{Device, DeviceError, EngineConfig};

pub fn jack_args(args: &EngineArgs) -> JackArgs {
    JackArgs {
        server: args.jack_server.clone(),
        client_name: args.jack_client.clone(),
        connect: args.jack_connect,
        buffer_request: args.buffer,
    }
}

/// The dashboard's device factory: opens the kinds this build has by their names ("sim",
/// "jack"), with the JACK settings of `args`; used by `dashboard` and `bench soak --dashboard`.
pub fn dashboard_factory(args: &EngineArgs) -> DeviceFactory {
    let jack = jack_args(args);
    Box::new(move |kind, config| {
        let kind = match kind {
            "sim" => DeviceKind::Sim,
            "jack" => DeviceKind::Jack,
            other => return Err(FactoryError::unknown_kind(other, &available())),
        };
        Ok(open_with(kind, &jack, &mut config.clone())?)
    })
}

/// Opens `kind` for `config`. A JACK device starts at the server's rate and
/// buffer size unless the user asked for a buffer size.
pub fn open(
    kind: DeviceKind,
    args: &EngineArgs,
    config: &mut EngineConfig,
) -> Result<Box<dyn Device>, DeviceError> {
    open_with(kind, &jack_args(args), config)
}

/// As [`open`], with the JACK settings already gathered.
pub fn open_with(
    kind: DeviceKind,
    jack: &JackArgs,
    config: &mut EngineConfig,
) -> Result<Box<dyn Device>, DeviceError> {
    match kind {
        DeviceKind::Sim => Ok(Box::new(SimDevice::new(
            config.sample_rate,
            config.buffer_frames,
            config.input,
        ))),
        DeviceKind::Jack => {
            let device = jack_support::open(jack, config)?;
            let info = device.info();
            config.sample_rate = info.sample_rate;
            if jack.buffer_request.is_none() {
                config.buffer_frames = info.buffer_frames;
            }
            Ok(device)
        }
    }
}

/// Device kinds this build can open.
pub fn available() -> Vec<String> {
    let mut v = vec!["sim".to_string()];
    if jack_support::AVAILABLE {
        v.push("jack".into());
    }
    v
}
