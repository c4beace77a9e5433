//! On-device training on a Cortex-M4: no_std, no alloc. The frozen starting weights are in
//! flash (`model.bin`, `include_bytes!`); the trainable parameters and Adam's moments live in
//! one static `State` of `STATE_BYTES`, the train step's working memory in one static
//! `TrainArena` of `TRAIN_ARENA_BYTES` — every size fixed by the compiler. Trains on a fixed
//! batch in flash for `STEPS` steps, printing each loss over semihosting, then classifies the
//! batch with the trained parameters, writes them as safetensors into a static buffer, prints
//! the sizes and exits QEMU with status 0.
#![no_std]
#![no_main]

use cortex_m_rt::entry;
use cortex_m_semihosting::{debug, hprint, hprintln};
use panic_semihosting as _;

/// The generated module: `burnc model.onnx -o $OUT_DIR/model.rs --train …` (see build.rs).
#[allow(dead_code, unused_labels, clippy::all)]
mod model {
    include!(concat!(env!("OUT_DIR"), "/model.rs"));
}

const STEPS: u64 = 20;

/// The batch (`x.npy`, `target.npy`) as raw little-endian bytes, in flash.
const X_LE: &[u8] = include_bytes!(concat!(env!("OUT_DIR"), "/x.f32"));
const TARGET_LE: &[u8] = include_bytes!(concat!(env!("OUT_DIR"), "/target.i64"));

/// Trainable parameters and optimizer moments (`.bss`; `Model::new` fills in the parameters).
static mut STATE: model::State = model::State::new();
/// The train step's working memory.
static mut TRAIN_ARENA: model::TrainArena = model::TrainArena::new();
/// `forward`'s working memory (inference after training).
static mut ARENA: model::Arena = model::Arena::new();
/// Room for a checkpoint of every parameter, as a safetensors file.
static mut CHECKPOINT: [u8; model::SAFETENSORS_BYTES] = [0; model::SAFETENSORS_BYTES];

/// The inputs as the arrays `train_step` takes; a size mismatch fails the build.
fn x<const N: usize>() -> [f32; N] {
    const { assert!(X_LE.len() == 4 * N, "x.npy does not have the model's input size") };
    core::array::from_fn(|i| f32::from_le_bytes(X_LE[4 * i..4 * i + 4].try_into().unwrap()))
}

fn target<const N: usize>() -> [i64; N] {
    const { assert!(TARGET_LE.len() == 8 * N, "target.npy does not have the target's size") };
    core::array::from_fn(|i| i64::from_le_bytes(TARGET_LE[8 * i..8 * i + 8].try_into().unwrap()))
}

#[entry]
fn main() -> ! {
    // SAFETY: the only references to these statics ever made: `main` runs once and never
    // returns, and no interrupt handler touches them.
    let (state, train_arena, arena, checkpoint) = unsafe {
        (
            &mut *core::ptr::addr_of_mut!(STATE),
            &mut *core::ptr::addr_of_mut!(TRAIN_ARENA),
            &mut *core::ptr::addr_of_mut!(ARENA),
            &mut *core::ptr::addr_of_mut!(CHECKPOINT),
        )
    };
    let (x, target) = (x(), target());
    let mut model = model::Model::new(state);
    for _ in 0..STEPS {
        let loss = model.train_step(train_arena, &x, &target);
        // `{:e}` prints the shortest string that reads back as the same f32.
        hprintln!("step={} loss={:e}", model.step(), loss);
    }

    // The trained model on its own batch: the class with the largest logit, per sample.
    let out = model.forward(arena, &x);
    let classes = out.logits.len() / target.len();
    hprint!("predicted:");
    for row in out.logits.chunks_exact(classes) {
        let best = (0..classes).fold(0, |b, c| if row[c] > row[b] { c } else { b });
        hprint!(" {}", best);
    }
    hprintln!();
    let checkpoint_bytes = model.write_safetensors(checkpoint).unwrap_or(0);

    hprintln!(
        "train_arena_bytes: {} state_bytes: {} arena_bytes: {} weights_bytes: {} checkpoint_bytes: {}",
        model::TRAIN_ARENA_BYTES,
        model::STATE_BYTES,
        model::ARENA_BYTES,
        model::WEIGHTS_BYTES,
        checkpoint_bytes
    );
    debug::exit(debug::EXIT_SUCCESS);
    #[allow(clippy::empty_loop)]
    loop {}
}
