//! The output tail: whatever chunks arrive, it is exactly the stream's
//! last `cap` bytes.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Some((&cap, rest)) = data.split_first() else {
        return;
    };
    let cap = usize::from(cap);
    let mut tail = cordon::process::output::Tail::new(cap);
    let mut stream = Vec::new();
    for chunk in rest.split(|b| *b == 0xff) {
        tail.push(chunk);
        stream.extend_from_slice(chunk);
    }
    assert_eq!(tail.to_vec(), &stream[stream.len().saturating_sub(cap)..]);
    assert_eq!(tail.truncated(), stream.len() > cap);
});
