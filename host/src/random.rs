//! Unguessable numbers from the kernel's CSPRNG: task ids, attach tokens,
//! the names of spill directories and files — whatever another client of
//! the host must not be able to predict.

/// `N` random bytes.
fn bytes<const N: usize>() -> [u8; N] {
    let mut bytes = [0u8; N];
    // Without the kernel's random source there is nothing unguessable to give.
    getrandom::fill(&mut bytes).expect("the kernel's random source is readable");
    bytes
}

/// 64 random bits.
pub(crate) fn u64() -> u64 {
    u64::from_le_bytes(bytes())
}

/// 128 random bits.
pub(crate) fn u128() -> u128 {
    u128::from_le_bytes(bytes())
}
