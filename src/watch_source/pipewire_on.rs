//! `watch` on PipeWire: the profiler's records become watch's cycles, the registry's nodes its
//! node list; runs on the main thread (the profiler's loop runs on its own).

use super::{Source, SourceEvent};
use std::sync::mpsc::RecvTimeoutError;
use std::time::Duration;
use xrunlab_pipewire::{Block, Event, Options, Profiler, ProfilerRecord, Status};
use xrunlab_watch::{Cycle, NodeInfo, NodeStatus, NodeTiming};

struct PipeWire {
    profiler: Profiler,
}

/// Connects to the server the environment names and binds its profiler.
pub fn open() -> Result<Box<dyn Source>, String> {
    let profiler = Profiler::connect(&Options::default()).map_err(|e| e.to_string())?;
    Ok(Box::new(PipeWire { profiler }))
}

fn ns(t: i64) -> u64 {
    u64::try_from(t).unwrap_or(0)
}

fn timing(b: &Block) -> NodeTiming {
    NodeTiming {
        id: u32::try_from(b.id).unwrap_or(u32::MAX),
        name: b.name.clone(),
        signal_ns: ns(b.signal),
        awake_ns: ns(b.awake),
        finish_ns: ns(b.finish),
        status: match b.status {
            Status::NotTriggered => NodeStatus::NotTriggered,
            Status::Triggered => NodeStatus::Triggered,
            Status::Awake => NodeStatus::Awake,
            Status::Finished => NodeStatus::Finished,
            Status::Inactive => NodeStatus::Inactive,
            Status::Other(v) => NodeStatus::Unknown(v),
        },
        xruns: b.xrun_count.and_then(|n| u32::try_from(n).ok()),
    }
}

/// A profiler record as watch's server-neutral cycle.
pub fn cycle(r: &ProfilerRecord) -> Cycle {
    let (num, denom) = r.clock.rate;
    Cycle {
        seq: ns(r.info.counter),
        rate: denom / num.max(1),
        quantum: u32::try_from(r.clock.duration).unwrap_or(0),
        driver: timing(&r.driver),
        followers: r.followers.iter().map(timing).collect(),
        driver_xruns: u32::try_from(r.info.xrun_count).ok(),
    }
}

impl Source for PipeWire {
    fn next(&mut self, timeout: Duration) -> Option<SourceEvent> {
        match self.profiler.events().recv_timeout(timeout) {
            Ok(Event::Cycle(r)) => Some(SourceEvent::Cycle(cycle(&r))),
            Ok(Event::Node(n)) => Some(SourceEvent::Node(NodeInfo {
                id: n.id,
                name: n.name,
                app_name: n.app_name,
                pid: n.pid,
            })),
            Ok(Event::NodeRemoved(id)) => Some(SourceEvent::NodeRemoved(id)),
            Ok(Event::Gap { missed }) => Some(SourceEvent::Gap(missed)),
            Ok(Event::BadPod(e)) => Some(SourceEvent::Note(format!(
                "a profiler record was skipped: {e}"
            ))),
            Ok(Event::RawPod(_)) => None,
            Ok(Event::Disconnected(why)) => Some(SourceEvent::Ended(why)),
            Err(RecvTimeoutError::Timeout) => None,
            Err(RecvTimeoutError::Disconnected) => Some(SourceEvent::Ended(
                "the PipeWire connection's thread ended".into(),
            )),
        }
    }

    fn describe(&self) -> String {
        format!("PipeWire {} (profiler)", self.profiler.server_version())
    }
}
