//! Records raw profiler pods from a running PipeWire server into files, for the parser's golden
//! fixtures (crates/pipewire/tests/fixtures), and prints each record's gist; runs on the main
//! thread (the profiler's loop on its own).
//!
//! `cargo run -p xrunlab-pipewire --example record_pods -- SOCKET COUNT OUT_DIR`

use std::time::{Duration, Instant};
use xrunlab_pipewire::{parse_profile, Event, Options, Profiler};

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let [socket, count, out] = &args[..] else {
        eprintln!("usage: record_pods SOCKET COUNT OUT_DIR");
        std::process::exit(2);
    };
    let count: usize = count.parse().expect("COUNT is a number");
    std::fs::create_dir_all(out).expect("OUT_DIR");
    let p = Profiler::connect(&Options {
        remote: Some(socket.clone()),
        keep_raw: true,
        read_every: None,
    })
    .unwrap_or_else(|e| panic!("{e}"));
    println!("server {}", p.server_version());
    let t0 = Instant::now();
    let mut n = 0;
    while n < count && t0.elapsed() < Duration::from_secs(60) {
        let Ok(e) = p.events().recv_timeout(Duration::from_millis(100)) else {
            continue;
        };
        match e {
            Event::RawPod(bytes) => {
                std::fs::write(format!("{out}/pod-{n:04}.bin"), &bytes).expect("write");
                for r in parse_profile(&bytes).unwrap_or_default() {
                    let d = &r.driver;
                    print!(
                        "#{} xruns {} q {} drv sig {} awk +{} fin +{} st {:?} |",
                        r.info.counter,
                        r.info.xrun_count,
                        r.clock.duration,
                        d.signal,
                        d.awake - d.signal,
                        d.finish - d.signal,
                        d.status
                    );
                    for f in &r.followers {
                        print!(
                            " {} sig +{} awk +{} fin +{} st {:?} x {:?}",
                            f.name,
                            f.signal - d.signal,
                            f.awake - d.signal,
                            f.finish - d.signal,
                            f.status,
                            f.xrun_count
                        );
                    }
                    println!();
                }
                n += 1;
            }
            Event::Node(info) => println!("node {info:?}"),
            other if !matches!(other, Event::Cycle(_)) => println!("{other:?}"),
            _ => {}
        }
    }
}
