//! Prints both kernels' single-core throughput and their ratio; runs on the main thread (`cargo run
//! --release -p xrunlab-dsp --example kernel_throughput [sines] [frames] [seconds]`).

use std::time::Duration;

use xrunlab_dsp::measure::kernel_throughput;
use xrunlab_dsp::Kernel;

fn main() {
    let mut args = std::env::args().skip(1);
    let sines = args.next().and_then(|s| s.parse().ok()).unwrap_or(1717);
    let frames = args.next().and_then(|s| s.parse().ok()).unwrap_or(128);
    let secs: f64 = args.next().and_then(|s| s.parse().ok()).unwrap_or(2.0);
    let dur = Duration::from_secs_f64(secs);
    let reference = kernel_throughput(Kernel::Reference, sines, frames, dur);
    let fast = kernel_throughput(Kernel::Fast, sines, frames, dur);
    for f in [&reference, &fast] {
        println!(
            "{:<10} {:>6} sines x {:>4} frames: {:>8.4} ns/partial-sample, {:>10.3e} partial-samples/s, {:>9.0} sines at 48 kHz",
            f.kernel, f.sines, f.frames, f.ns_per_partial_sample, f.partial_samples_per_sec, f.max_sines_at_48k_128
        );
    }
    println!(
        "fast / reference throughput: {:.1}x",
        fast.partial_samples_per_sec / reference.partial_samples_per_sec
    );
}
