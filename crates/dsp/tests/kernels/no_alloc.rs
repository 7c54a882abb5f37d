//! Rendering never allocates (counted by the test binary's global allocator); runs on the test
//! threads.

use crate::allocations;
use crate::common::SR;
use xrunlab_dsp::{render, smoothing_coeff, Chord, Kernel, PartialBank};

#[test]
fn render_does_not_allocate() {
    let chord = Chord::new(
        SR,
        xrunlab_dsp::ChordLayout::single(xrunlab_dsp::ChordNotes::Apl),
        1,
    );
    let coeff = smoothing_coeff(SR);
    let mut bank = PartialBank::new(&chord);
    let n = bank.len();
    let mut l = vec![0f32; 1000];
    let mut r = vec![0f32; 1000];
    bank.amp[7] = f32::NAN;
    let before = allocations();
    for kernel in [Kernel::Reference, Kernel::Fast] {
        for (active, frames) in [(0, 128), (1717, 128), (300, 37), (2000, 1000), (5, 0)] {
            bank.set_active(0, active);
            for start in (0..n).step_by(256) {
                render(
                    kernel,
                    bank.view_mut(start, start + 256),
                    coeff,
                    &mut l[..frames],
                    &mut r[..frames],
                );
            }
            bank.set_active(active, 0);
        }
    }
    assert_eq!(allocations() - before, 0, "render allocated");
    // The counter does see allocations on this thread.
    let control = std::hint::black_box(vec![0u8; 16]);
    assert!(allocations() > before, "allocation counter is blind");
    drop(control);
}
