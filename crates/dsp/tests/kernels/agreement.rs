//! The fast kernel against the reference over 60 s of audio with fades, bursts, odd buffer sizes
//! and split views; runs on the test threads.

use crate::common::{db, MINUS_90_DBFS, SR};
use xrunlab_dsp::{render, smoothing_coeff, Chord, Kernel, PartialBank, RenderStats};

/// Buffer sizes cycled through: the usual 128, odd tails, one frame, and
/// buffers longer than one kernel pass.
const BUFFERS: [usize; 8] = [128, 128, 128, 37, 300, 128, 1, 1000];

/// Renders both banks through the same schedule of active counts
/// (`(frame, active)`, in frame order) for `frames` frames, each buffer split
/// into views at `splits`. Returns the worst sample difference.
fn run(
    reference: &mut PartialBank,
    fast: &mut PartialBank,
    schedule: &[(usize, usize)],
    frames: usize,
    splits: &[usize],
) -> f32 {
    let coeff = smoothing_coeff(SR);
    let mut out = [[0f32; 1000]; 4];
    let (mut active, mut next, mut frame, mut worst) = (0, 0, 0, 0f32);
    for &b in BUFFERS.iter().cycle() {
        if frame >= frames {
            break;
        }
        while next < schedule.len() && schedule[next].0 <= frame {
            reference.set_active(active, schedule[next].1);
            fast.set_active(active, schedule[next].1);
            active = schedule[next].1;
            next += 1;
        }
        let b = b.min(frames - frame);
        for o in out.iter_mut() {
            o[..b].fill(0.0);
        }
        let [rl, rr, fl, fr] = &mut out;
        for w in splits.windows(2) {
            let r = render(
                Kernel::Reference,
                reference.view_mut(w[0], w[1]),
                coeff,
                &mut rl[..b],
                &mut rr[..b],
            );
            let f = render(
                Kernel::Fast,
                fast.view_mut(w[0], w[1]),
                coeff,
                &mut fl[..b],
                &mut fr[..b],
            );
            assert_eq!(r, f, "computed counts differ at frame {frame}");
        }
        for (x, y) in rl[..b]
            .iter()
            .chain(&rr[..b])
            .zip(fl[..b].iter().chain(&fr[..b]))
        {
            worst = worst.max((x - y).abs());
        }
        frame += b;
    }
    // Amplitudes follow the reference's exact arithmetic, so silence is
    // decided identically and phases freeze and resume in step.
    assert_eq!(reference.phase, fast.phase, "phases diverged");
    assert_eq!(reference.amp, fast.amp, "amplitudes diverged");
    worst
}

#[test]
fn fast_matches_reference_within_minus_90_dbfs() {
    let s = |seconds: f64| (seconds * f64::from(SR)) as usize;

    // 60 s of the lowest 400 partials: fade in, partial fade out (the top ones go
    // silent and freeze), fade back in, short bursts, and everything off.
    let chord = Chord::single(SR, xrunlab_dsp::ChordNotes::Apl);
    let mut reference = PartialBank::new(&chord);
    let mut fast = reference.clone();
    let schedule = [
        (0, 300),
        (s(8.0), 120),
        (s(16.0), 300),
        (s(24.0), 400),
        (s(24.25), 300),
        (s(30.0), 400),
        (s(30.1), 300),
        (s(30.3), 400),
        (s(30.55), 300),
        (s(38.0), 0),
        (s(46.0), 250),
        (s(54.0), 400),
    ];
    let small = run(
        &mut reference,
        &mut fast,
        &schedule,
        s(60.0),
        &[0, 250, 400],
    );

    // 2 s of the whole chord, split into the engine's 256-partial chunks:
    // 0 -> 2058 -> 300 -> a 0.25 s burst back to 2058 -> 300.
    let n = chord.per_chord();
    let mut reference = PartialBank::new(&chord);
    let mut fast = reference.clone();
    let schedule = [(0, n), (s(0.7), 300), (s(1.5), n), (s(1.75), 300)];
    let splits: Vec<usize> = (0..n).step_by(256).chain([n]).collect();
    let full = run(&mut reference, &mut fast, &schedule, s(2.0), &splits);

    let worst = small.max(full);
    eprintln!(
        "worst |fast - reference|: {:.1} dBFS over 60 s x 400 partials, {:.1} dBFS over 2 s x {n} partials",
        db(f64::from(small)),
        db(f64::from(full))
    );
    assert!(
        worst < MINUS_90_DBFS,
        "worst |fast - reference| = {worst:e} ({:.1} dBFS), limit -90 dBFS",
        db(f64::from(worst))
    );
}

#[test]
fn both_kernels_count_the_same_partials() {
    let chord = Chord::single(SR, xrunlab_dsp::ChordNotes::Apl);
    let coeff = smoothing_coeff(SR);
    for kernel in [Kernel::Reference, Kernel::Fast] {
        let mut bank = PartialBank::new(&chord);
        let (mut l, mut r) = ([0f32; 128], [0f32; 128]);
        let n = bank.len();
        assert_eq!(
            render(kernel, bank.view_mut(0, n), coeff, &mut l, &mut r),
            RenderStats { computed: 0 }
        );
        bank.set_active(0, 100);
        assert_eq!(
            render(kernel, bank.view_mut(0, n), coeff, &mut l, &mut r).computed,
            100
        );
        assert_eq!(
            render(kernel, bank.view_mut(50, 90), coeff, &mut l, &mut r).computed,
            40
        );
        // Fading out: still computed until below the silence threshold.
        bank.set_active(100, 10);
        assert_eq!(
            render(kernel, bank.view_mut(0, n), coeff, &mut l, &mut r).computed,
            100
        );
    }
}
