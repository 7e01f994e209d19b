//! A hint that a cache line will be needed soon, so that two cold lines can be fetched at once
//! instead of one after the other.

/// Asks the CPU to bring the line holding `p` into its caches. A hint: no effect on what any
/// load or store sees, and nothing at all on targets without the instruction.
#[inline(always)]
pub(crate) fn line<T>(p: *const T) {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: a prefetch never faults and never reads memory on the program's behalf: any address
    // is allowed, valid or not.
    #[allow(unsafe_code)]
    unsafe {
        use std::arch::x86_64::{_MM_HINT_T0, _mm_prefetch};
        _mm_prefetch::<_MM_HINT_T0>(p.cast());
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = p;
}
