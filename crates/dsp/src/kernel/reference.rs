//! The reference kernel: one scalar `sinf` per sample per partial, as AudioPerfLab computes it;
//! runs on audio threads.

use super::{is_silent, sanitize, RenderStats, RAD_PER_PHASE_UNIT};
use crate::PartialsMut;

pub(super) fn render(
    p: &mut PartialsMut<'_>,
    coeff: f32,
    out_l: &mut [f32],
    out_r: &mut [f32],
) -> RenderStats {
    let n = p.len();
    let mut computed = 0;
    for i in 0..n {
        let (gl, gr, inc) = (p.gain_l[i], p.gain_r[i], p.inc[i]);
        let target = sanitize(p.target[i]);
        let mut amp = sanitize(p.amp[i]);
        if is_silent(amp, target) {
            continue;
        }
        computed += 1;
        let mut phase = p.phase[i];
        for (l, r) in out_l.iter_mut().zip(out_r.iter_mut()) {
            amp += (target - amp) * coeff;
            let v = ((phase as i32) as f32 * RAD_PER_PHASE_UNIT).sin() * amp;
            *l += v * gl;
            *r += v * gr;
            phase = phase.wrapping_add(inc);
        }
        p.phase[i] = phase;
        p.amp[i] = amp;
    }
    RenderStats { computed }
}
