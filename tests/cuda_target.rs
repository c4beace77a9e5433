//! The CUDA target without a GPU: every kernel NVRTC accepts, the generated module builds
//! against burnc-runtime's `cuda` feature, links no CUDA library, and without a driver starts
//! with an error instead of a panic. (On a GPU, scripts/gpu_check.sh runs the modules.)
mod common;

use burnc::build::{compile_to, CompileOptions, Target};
use std::path::Path;
use std::process::Command;

fn setup_python() {
    let status = Command::new("bash").arg(common::root().join("scripts/setup_python.sh")).status().expect("run setup_python.sh");
    assert!(status.success(), "scripts/setup_python.sh failed");
}

fn compile(model: &Path, out: &Path, pins: &[(String, Vec<usize>)]) -> burnc::Report {
    let opts = CompileOptions { target: Target::Cuda, ..Default::default() };
    compile_to(model, out, pins, &[], None, &opts).unwrap_or_else(|e| panic!("{}: {e}", model.display()))
}

#[test]
fn models_compile_to_ptx_and_the_module_builds() {
    setup_python();
    let dir = common::root().join("target/cuda-target-test");
    std::fs::create_dir_all(dir.join("src")).unwrap();
    let mnist = common::root().join("examples/mnist/mnist_cnn.onnx");
    let report = compile(&mnist, &dir.join("src/model.rs"), &[]);
    assert_eq!(report.inputs[0].shape, vec![1, 1, 28, 28]);
    let ptx = std::fs::read_to_string(dir.join("src/model.ptx")).unwrap();
    let cu = std::fs::read_to_string(dir.join("src/model.cu")).unwrap();
    let kernels = cu.matches("__global__ void ").count();
    assert!(kernels >= 6, "{kernels} kernels for the MNIST CNN");
    // Every kernel of the CUDA C is an entry of the PTX, for the architecture burnc targets.
    assert_eq!(ptx.matches(".entry ").count(), kernels);
    assert!(ptx.contains(".target sm_90"), "PTX target: {}", ptx.lines().find(|l| l.starts_with(".target")).unwrap_or("none"));

    // The module builds in a crate with the runtime's `cuda` feature, and without a GPU says so.
    let main = r#"mod model;
fn main() {
    match model::Model::new() {
        Ok(mut m) => {
            let x = [0.5f32; 784];
            let out = m.forward(&x).expect("forward");
            println!("ran on a GPU: {} outputs", out.logits.len());
        }
        Err(e) => println!("no GPU: {e}"),
    }
}
"#;
    std::fs::write(dir.join("src/main.rs"), main).unwrap();
    let manifest = format!(
        "[package]\nname = \"cuda-target-test\"\nversion = \"0.0.0\"\nedition = \"2021\"\npublish = false\n\n[dependencies]\nburnc-runtime = {{ path = {:?}, features = [\"cuda\"] }}\n\n[workspace]\n",
        common::root().join("runtime").display().to_string()
    );
    std::fs::write(dir.join("Cargo.toml"), manifest).unwrap();
    let target = common::root().join("target/cuda-target-test-build");
    let out = Command::new(std::env::var("CARGO").unwrap_or_else(|_| "cargo".into()))
        .args(["build", "--release", "--quiet", "--manifest-path"])
        .arg(dir.join("Cargo.toml"))
        .arg("--target-dir")
        .arg(&target)
        .output()
        .expect("run cargo");
    assert!(out.status.success(), "the CUDA module does not build:\n{}", String::from_utf8_lossy(&out.stderr));
    let bin = target.join("release/cuda-target-test");
    let run = Command::new(&bin).output().expect("run the binary");
    let stdout = String::from_utf8_lossy(&run.stdout);
    assert!(run.status.success(), "the binary failed: {stdout}{}", String::from_utf8_lossy(&run.stderr));
    assert!(stdout.starts_with("no GPU: ") || stdout.starts_with("ran on a GPU: 10 outputs"), "{stdout}");
    // No CUDA library is linked: the driver is loaded when a session starts.
    if let Ok(ldd) = Command::new("ldd").arg(&bin).output() {
        let libs = String::from_utf8_lossy(&ldd.stdout);
        assert!(!libs.contains("libcuda") && !libs.contains("nvrtc"), "{libs}");
    }
}

#[test]
fn light_models_compile_for_cuda() {
    setup_python();
    let data = common::data_dir().join("light");
    let dir = common::root().join("target/cuda-target-light");
    std::fs::create_dir_all(&dir).unwrap();
    // The CNN families of the light models: concatenations, channel shuffles (Reshape and
    // Transpose), LRN, average and global pooling, sums; kept to the small ones (the blobs are
    // written out).
    for name in ["light_squeezenet", "light_shufflenet", "light_inception_v1"] {
        let d = data.join(name);
        let model = std::fs::read_dir(&d).unwrap().flatten().map(|e| e.path()).find(|p| p.extension().is_some_and(|x| x == "onnx")).expect("model");
        let report = compile(&model, &dir.join(format!("{name}.rs")), &[]);
        let ptx = std::fs::read_to_string(dir.join(format!("{name}.ptx"))).unwrap();
        assert!(ptx.matches(".entry ").count() > 10, "{name}: {} kernels", ptx.matches(".entry ").count());
        assert!(report.weights_bytes > 0);
        for ext in ["bin", "ptx", "cu", "rs"] {
            let _ = std::fs::remove_file(dir.join(format!("{name}.{ext}")));
        }
    }
}

#[test]
fn bf16_modules_store_half_the_weights_and_nvrtc_accepts_them() {
    setup_python();
    let model = common::data_dir().join("light/light_squeezenet");
    let model = std::fs::read_dir(&model).unwrap().flatten().map(|e| e.path()).find(|p| p.extension().is_some_and(|x| x == "onnx")).expect("model");
    let dir = common::root().join("target/cuda-target-bf16");
    std::fs::create_dir_all(&dir).unwrap();
    let f32_report = compile(&model, &dir.join("f32.rs"), &[]);
    let opts = CompileOptions { target: Target::Cuda, floats: burnc_compiler::ir::DType::BF16, ..Default::default() };
    let bf16_report = compile_to(&model, &dir.join("bf16.rs"), &[], &[], None, &opts).unwrap_or_else(|e| panic!("bf16: {e}"));
    // Every f32 weight is stored in 16 bits (offsets keep their alignment, so at most half plus
    // the padding of each tensor).
    assert!(bf16_report.weights_bytes * 2 <= f32_report.weights_bytes + 64 * 64, "{} vs {}", bf16_report.weights_bytes, f32_report.weights_bytes);
    assert!(bf16_report.weights_bytes * 2 >= f32_report.weights_bytes - 64 * 64);
    // The API stays f32; kernels store bf16 and the PTX converts with round-to-nearest.
    let src = std::fs::read_to_string(dir.join("bf16.rs")).unwrap();
    assert!(src.contains(": &[f32; "), "inputs stay f32");
    let cu = std::fs::read_to_string(dir.join("bf16.cu")).unwrap();
    assert!(cu.contains("(bf16_t*)"), "activations in bf16");
    let ptx = std::fs::read_to_string(dir.join("bf16.ptx")).unwrap();
    assert!(ptx.contains("cvt.rn.bf16.f32"), "no bf16 rounding in the PTX");
    // The CPU target refuses it, naming the flag.
    let cpu = CompileOptions { floats: burnc_compiler::ir::DType::BF16, ..Default::default() };
    let err = compile_to(&model, &dir.join("cpu.rs"), &[], &[], None, &cpu).err().expect("the CPU target refuses bf16").to_string();
    assert!(err.contains("--dtype bf16"), "{err}");
}

#[test]
fn bf16_attention_is_one_kernel_that_nvrtc_accepts() {
    setup_python();
    let dir = common::root().join("target/cuda-target-attention");
    std::fs::create_dir_all(&dir).unwrap();
    let model = dir.join("encoder.onnx");
    let status = Command::new("python3").arg(common::root().join("scripts/gpu_bench_models.py")).arg("--small-encoder").arg(&model).status().expect("run gpu_bench_models.py");
    assert!(status.success(), "gpu_bench_models.py --small-encoder failed");
    let pins = [("input_ids".to_string(), vec![3, 80])];
    let opts = CompileOptions { target: Target::Cuda, floats: burnc_compiler::ir::DType::BF16, ..Default::default() };
    compile_to(&model, &dir.join("bf16.rs"), &pins, &[], None, &opts).unwrap_or_else(|e| panic!("bf16: {e}"));
    let cu = std::fs::read_to_string(dir.join("bf16.cu")).unwrap();
    // Each layer's Q·Kᵀ, scale, softmax, ·V and the four transposes around them: one kernel.
    assert_eq!(cu.matches("// node `attention ending at").count(), 2, "one fused attention per layer");
    assert!(!cu.contains("// node `softmax"), "no separate softmax kernel");
    assert!(!cu.contains("// node `transpose"), "transposes are read and written through strides");
    let ptx = std::fs::read_to_string(dir.join("bf16.ptx")).unwrap();
    assert_eq!(ptx.matches(".entry ").count(), cu.matches("__global__ void ").count());
    // f32 keeps the unfused kernels (no tensor cores there).
    compile_to(&model, &dir.join("f32.rs"), &pins, &[], None, &CompileOptions { target: Target::Cuda, ..Default::default() }).unwrap_or_else(|e| panic!("f32: {e}"));
    let cu = std::fs::read_to_string(dir.join("f32.cu")).unwrap();
    assert!(cu.contains("// node `softmax") && !cu.contains("attention ending at"));
}

#[test]
fn hopper_products_run_on_wgmma_and_thin_inputs_are_packed() {
    setup_python();
    let dir = common::root().join("target/cuda-target-wgmma");
    std::fs::create_dir_all(&dir).unwrap();
    let model = dir.join("small_cnn.onnx");
    let status = Command::new("python3").arg(common::root().join("scripts/gpu_bench_models.py")).arg("--small-cnn").arg(&model).status().expect("run gpu_bench_models.py");
    assert!(status.success(), "gpu_bench_models.py --small-cnn failed");
    let bf16 = |arch| CompileOptions { target: Target::Cuda, floats: burnc_compiler::ir::DType::BF16, gpu_arch: arch, ..Default::default() };
    compile_to(&model, &dir.join("sm90a.rs"), &[], &[], None, &bf16(burnc::build::GpuArch::Sm90a)).unwrap_or_else(|e| panic!("sm90a: {e}"));
    let cu = std::fs::read_to_string(dir.join("sm90a.cu")).unwrap();
    let ptx = std::fs::read_to_string(dir.join("sm90a.ptx")).unwrap();
    // The 3-channel image is copied NHWC with a zero channel, one 8-byte store per pixel, and
    // the first convolution reads it in 8-byte vectors; the deeper ones run on wgmma.
    assert!(cu.contains("its 3 channels and 1 zeros, one 8-byte store"), "no packed input");
    assert!(cu.contains("cp_async8("), "the packed input is not read in vectors");
    assert!(cu.contains("73728×128×576 (1 of them) on tensor cores by wgmma"), "no wgmma product");
    assert!(cu.contains("73728×64×1152 (1 of them) on tensor cores by wgmma"), "no wgmma product with a residual");
    assert!(ptx.contains(".target sm_90a") && ptx.contains("wgmma.mma_async"));
    assert_eq!(ptx.matches(".entry ").count(), cu.matches("__global__ void ").count());
    // For Hopper and later GPUs: mma.sync only, PTX any sm_90+ driver compiles.
    compile_to(&model, &dir.join("sm90.rs"), &[], &[], None, &bf16(burnc::build::GpuArch::Sm90)).unwrap_or_else(|e| panic!("sm90: {e}"));
    let ptx = std::fs::read_to_string(dir.join("sm90.ptx")).unwrap();
    assert!(!ptx.contains("wgmma") && !ptx.contains("sm_90a") && ptx.contains(".target sm_90"));
}

#[test]
fn tf32_runs_f32_products_on_tensor_cores() {
    setup_python();
    let dir = common::root().join("target/cuda-target-tf32");
    std::fs::create_dir_all(&dir).unwrap();
    let tf32 = CompileOptions { target: Target::Cuda, tf32: true, ..Default::default() };
    // Convolutions (weights · im2col of NCHW input) and an encoder's MatMuls ([k][n] weights).
    for (script, flag, pins) in [("gpu_bench_models.py", "--small-cnn", vec![]), ("gpu_bench_models.py", "--small-encoder", vec![("input_ids".to_string(), vec![3, 80])])] {
        let model = dir.join(format!("{}.onnx", &flag[2..]));
        let status = Command::new("python3").arg(common::root().join("scripts").join(script)).arg(flag).arg(&model).status().expect("run gpu_bench_models.py");
        assert!(status.success(), "gpu_bench_models.py {flag} failed");
        let out = dir.join(format!("{}.rs", &flag[2..]));
        compile_to(&model, &out, &pins, &[], None, &tf32).unwrap_or_else(|e| panic!("{flag}: {e}"));
        let cu = std::fs::read_to_string(out.with_extension("cu")).unwrap();
        let ptx = std::fs::read_to_string(out.with_extension("ptx")).unwrap();
        assert!(cu.contains("mma_tf32(accs") && cu.contains("to_tf32("), "{flag}: no TF32 products");
        assert!(ptx.contains("mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32") && ptx.contains("cvt.rna.tf32.f32"));
        assert_eq!(ptx.matches(".entry ").count(), cu.matches("__global__ void ").count());
    }
    // The CPU target refuses it, naming the flag.
    let cpu = CompileOptions { tf32: true, ..Default::default() };
    let err = compile_to(&dir.join("small-cnn.onnx"), &dir.join("cpu.rs"), &[], &[], None, &cpu).err().expect("the CPU target refuses tf32").to_string();
    assert!(err.contains("--tf32"), "{err}");
}
