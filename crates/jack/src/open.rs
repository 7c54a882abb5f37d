//! Opening a JACK client on a named server without touching the process environment; runs on a
//! control thread.
//!
//! The `jack` crate's `Client::new` has no server-name parameter; the usual
//! workaround, setting `JACK_DEFAULT_SERVER` in our own environment, races
//! with every other thread that reads the environment (libc's `setenv` is
//! not thread-safe). libjack's own `jack_client_open` takes the server name
//! as its variadic argument when `JackServerName` is set, so we call it
//! directly and wrap the handle in a `jack::Client`.

use jack::jack_sys as j;
use jack::{Client, ClientOptions, ClientStatus, LoggerType};
use std::ffi::{c_char, CString};
use std::sync::Once;
use xrunlab_engine::{DeviceError, DeviceErrorKind};

/// `jack_client_open` as libjack declares it: the server name follows the
/// status pointer when the options contain `JackServerName`.
type ClientOpenFn = unsafe extern "C" fn(
    *const c_char,
    j::jack_options_t,
    *mut j::jack_status_t,
    ...
) -> *mut j::jack_client_t;

static LOGGER: Once = Once::new();

/// Why a client could not be opened.
pub(crate) enum OpenError {
    /// libjack is not installed (the crate loads it at run time).
    Library(String),
    /// The server refused or is not running; JACK's status bits say which.
    Status(ClientStatus),
    /// The name cannot be passed to C.
    BadName(String),
}

/// Opens client `name` on `server` (or on the default server, which honours
/// `JACK_DEFAULT_SERVER`) without starting a server.
pub(crate) fn open_client(
    name: &str,
    server: Option<&str>,
) -> Result<(Client, ClientStatus), OpenError> {
    let lib = j::library().map_err(|e| OpenError::Library(e.to_string()))?;
    // JACK's messages (connection failures and the like) go to the `log`
    // crate rather than straight to stderr: our errors say the same in words
    // that tell the user what to do.
    LOGGER.call_once(|| jack::set_logger(LoggerType::Log));
    let c_name = CString::new(name).map_err(|_| OpenError::BadName(name.to_owned()))?;
    let c_server = server
        .map(|s| CString::new(s).map_err(|_| OpenError::BadName(s.to_owned())))
        .transpose()?;
    // SAFETY: the symbol is libjack's jack_client_open, whose C prototype is
    // `jack_client_t *jack_client_open(const char *, jack_options_t, jack_status_t *, ...)`,
    // exactly `ClientOpenFn`.
    let open: ClientOpenFn = unsafe {
        *lib.get::<ClientOpenFn>(b"jack_client_open\0")
            .map_err(|e| OpenError::Library(format!("libjack has no jack_client_open: {e}")))?
    };
    let mut options = ClientOptions::NO_START_SERVER;
    if c_server.is_some() {
        options |= ClientOptions::SERVER_NAME;
    }
    let mut status: j::jack_status_t = 0;
    // SAFETY: both strings are NUL-terminated and outlive the call; `status`
    // is writable; the variadic server name is passed only with JackServerName,
    // as libjack expects.
    let raw = unsafe {
        match &c_server {
            Some(s) => open(c_name.as_ptr(), options.bits(), &mut status, s.as_ptr()),
            None => open(c_name.as_ptr(), options.bits(), &mut status),
        }
    };
    let status = ClientStatus::from_bits_truncate(status);
    if raw.is_null() {
        return Err(OpenError::Status(status));
    }
    // SAFETY: `raw` is a client libjack just opened and nobody else owns;
    // `Client` closes it when dropped.
    Ok((unsafe { Client::from_raw(raw) }, status))
}

impl OpenError {
    /// The error as a user should read it: what failed and what to do.
    pub(crate) fn into_device_error(self, server_label: &str, server: Option<&str>) -> DeviceError {
        match self {
            OpenError::Library(e) => DeviceError::new(DeviceErrorKind::Unavailable, format!(
                "could not load JACK's client library libjack ({e}): install it (Debian/Ubuntu: \
                 `apt-get install libjack-jackd2-0`), or run xrunlab through PipeWire's `pw-jack`"
            )),
            OpenError::BadName(n) => DeviceError::new(DeviceErrorKind::Refused, format!("JACK names cannot contain NUL bytes: {n:?}")),
            OpenError::Status(s) if s.intersects(ClientStatus::SERVER_FAILED | ClientStatus::SERVER_ERROR) => {
                let n = server.map(|n| format!(" -n {n}")).unwrap_or_default();
                DeviceError::new(DeviceErrorKind::Unavailable, format!(
                    "no JACK server is running ({server_label}): start one first, e.g. \
                     `jackd{n} -d dummy -r 48000 -p 128` (no sound card needed) or \
                     `jackd{n} -d alsa -d hw:0 -r 48000 -p 128`; with PipeWire, run xrunlab through \
                     `PIPEWIRE_QUANTUM=128/48000 pw-jack xrunlab ...`"
                ))
            }
            OpenError::Status(s) => DeviceError::new(DeviceErrorKind::Refused, format!(
                "the JACK server ({server_label}) refused the client (status {s:?}); check the client \
                 name and that libjack matches the server's version"
            )),
        }
    }
}
