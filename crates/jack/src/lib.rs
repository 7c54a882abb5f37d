//! xrunlab-jack: the engine's [`Device`](xrunlab_engine::Device) on a JACK server; [`JackDevice`]
//! is driven from control threads, its handlers run on JACK's threads (see each module).
//!
//! JACK's process thread becomes the engine's driver thread: every process
//! callback builds one [`Cycle`](xrunlab_engine::Cycle) from the server's
//! cycle times and port buffers and hands it to the engine's renderer. The
//! server's notifications (xruns, buffer-size changes, shutdown) arrive on
//! JACK's notification thread and are forwarded to the engine's
//! [`DeviceSignals`](xrunlab_engine::DeviceSignals).
//!
//! The `jack` crate loads libjack at run time (`dynamic_loading`), so a
//! binary built with this crate starts on machines without JACK and says
//! what is missing; building it still needs `jack.pc` (libjack-jackd2-dev).
#![deny(missing_docs)]
#![deny(unsafe_op_in_unsafe_fn)]

mod clock;
mod device;
mod notify;
mod open;
mod process;
pub mod procs;
mod shm;
mod watch;
pub mod watch_source;
mod watchdog;

pub use device::{JackDevice, JackOptions};
pub use watch::{JackEvent, JackWatch};
pub use watch_source::JackSource;
