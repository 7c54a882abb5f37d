//! Criterion benches of both kernels at the full chord (1717 sines x 128 frames at 48 kHz); runs on
//! the bench harness's thread.

use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use xrunlab_dsp::{render, smoothing_coeff, Chord, Kernel, PartialBank};

const SAMPLE_RATE: u32 = 48_000;
const FRAMES: usize = 128;

fn kernels(c: &mut Criterion) {
    let chord = Chord::single(SAMPLE_RATE, xrunlab_dsp::ChordNotes::Apl);
    let sines = chord.per_chord();
    let coeff = smoothing_coeff(SAMPLE_RATE);
    let mut group = c.benchmark_group(format!("kernel_{sines}x{FRAMES}"));
    group.throughput(Throughput::Elements((sines * FRAMES) as u64));
    for kernel in [Kernel::Reference, Kernel::Fast] {
        let mut bank = PartialBank::new(&chord);
        bank.amp[..sines].copy_from_slice(&bank.full_amp[..sines]);
        bank.set_active(0, sines);
        let mut out_l = vec![0f32; FRAMES];
        let mut out_r = vec![0f32; FRAMES];
        group.bench_function(kernel.name(), |b| {
            b.iter(|| {
                out_l.fill(0.0);
                out_r.fill(0.0);
                render(
                    kernel,
                    bank.view_mut(0, sines),
                    coeff,
                    &mut out_l,
                    &mut out_r,
                )
            })
        });
    }
    group.finish();
}

criterion_group!(benches, kernels);
criterion_main!(benches);
