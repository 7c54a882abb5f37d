//! How an experiment opens the device of each run: a closure from the caller (the binary knows
//! the user's `--device` and server), called on the experiment's thread before every run with
//! the configuration the run asks for, which the device may adjust (JACK decides the rate).

use xrunlab_engine::{Device, DeviceError, EngineConfig};

/// Opens the device for one run, given the run's configuration (see the module).
pub type OpenDevice<'a> = dyn FnMut(&mut EngineConfig) -> Result<Box<dyn Device>, DeviceError> + 'a;
