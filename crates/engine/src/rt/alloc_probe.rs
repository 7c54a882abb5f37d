//! Marks the sections of audio threads that must not allocate, so a test's global allocator can
//! check them; runs on audio threads.

use std::cell::Cell;

thread_local! {
    // const-initialised and without a destructor: reading it never allocates.
    static IN_RT_SECTION: Cell<bool> = const { Cell::new(false) };
}

/// True while the calling thread is inside a real-time section (one render
/// cycle of a driver or worker). A test's global allocator calls this to count
/// allocations that happen on the real-time path.
pub fn in_rt_section() -> bool {
    IN_RT_SECTION.with(Cell::get)
}

/// Marks a real-time section for as long as the guard lives.
pub(crate) struct RtSection(());

impl RtSection {
    #[inline]
    pub(crate) fn enter() -> Self {
        IN_RT_SECTION.with(|c| c.set(true));
        RtSection(())
    }
}

impl Drop for RtSection {
    #[inline]
    fn drop(&mut self) {
        IN_RT_SECTION.with(|c| c.set(false));
    }
}

/// Runs `f` inside a real-time section on the calling thread. For tests that
/// check the probe itself; the engine marks its own sections.
pub fn with_rt_section_for_tests<R>(f: impl FnOnce() -> R) -> R {
    let _section = RtSection::enter();
    f()
}
