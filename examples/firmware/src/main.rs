//! A burnc-compiled CNN on a Cortex-M4: no_std, no alloc, weights in flash (`model.bin` is
//! embedded with `include_bytes!`), one static arena of `ARENA_BYTES` in RAM. Runs the model on
//! a fixed input, prints the logits over semihosting and exits QEMU with status 0.
#![no_std]
#![no_main]

use cortex_m_rt::entry;
use cortex_m_semihosting::{debug, hprint, hprintln};
use panic_semihosting as _;

/// The generated module: `burnc model.onnx -o $OUT_DIR/model.rs` (see build.rs).
#[allow(dead_code, unused_labels, clippy::all)]
mod model {
    include!(concat!(env!("OUT_DIR"), "/model.rs"));
}

/// The fixed input (`input.npy`) as raw little-endian f32, in flash.
const INPUT_LE: &[u8] = include_bytes!(concat!(env!("OUT_DIR"), "/input.f32"));

/// The whole working memory of the model, zero-initialised (`.bss`).
static mut ARENA: model::Arena = model::Arena::new();

/// The input as the `[f32; N]` that `forward` takes; a size mismatch fails the build.
fn input<const N: usize>() -> [f32; N] {
    const { assert!(INPUT_LE.len() == 4 * N, "input.npy does not have the model's input size") };
    core::array::from_fn(|i| f32::from_le_bytes([INPUT_LE[4 * i], INPUT_LE[4 * i + 1], INPUT_LE[4 * i + 2], INPUT_LE[4 * i + 3]]))
}

#[entry]
fn main() -> ! {
    // SAFETY: the only reference to ARENA ever made: `main` runs once and never returns, and no
    // interrupt handler touches it.
    let arena = unsafe { &mut *core::ptr::addr_of_mut!(ARENA) };
    let model = model::Model::new();
    let out = model.forward(arena, &input());

    hprintln!("arena_bytes: {} weights_bytes: {}", model::ARENA_BYTES, model::WEIGHTS_BYTES);
    hprint!("logits:");
    for v in out.logits {
        // `{:e}` prints the shortest string that reads back as the same f32.
        hprint!(" {:e}", v);
    }
    hprintln!();
    debug::exit(debug::EXIT_SUCCESS);
    #[allow(clippy::empty_loop)]
    loop {}
}
