//! `--device jack` in a build with JACK support: connects to the running server; runs on the main
//! thread.

use super::JackArgs;
use xrunlab_engine::{Device, DeviceError, EngineConfig};
use xrunlab_jack::{JackDevice, JackOptions};

/// This build can run on JACK.
pub const AVAILABLE: bool = true;

/// Opens a client on the running JACK server; fails at once, saying how to
/// start a server, when none runs. Sample rate and buffer size come from the
/// server (a `buffer_request` is sent to it when the engine configures the device).
pub fn open(args: &JackArgs, config: &EngineConfig) -> Result<Box<dyn Device>, DeviceError> {
    let opts = JackOptions {
        server: args.server.clone(),
        client_name: args.client_name.clone(),
        connect_ports: args.connect,
        input: config.input,
        buffer_request: args.buffer_request,
    };
    JackDevice::connect(opts).map(|d| Box::new(d) as Box<dyn Device>)
}
