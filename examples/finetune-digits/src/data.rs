//! The scikit-learn digits (`data/digits.csv`: 64 pixel values 0..16 then the label, one image
//! a row), a seeded shuffle and the train/test split.

pub struct Sample {
    pub pixels: [f32; 64],
    pub label: u8,
}

pub fn load(path: &std::path::Path) -> Result<Vec<Sample>, String> {
    let text = std::fs::read_to_string(path).map_err(|e| format!("{}: {e} (run ./setup.sh first)", path.display()))?;
    let mut out = Vec::new();
    for (i, line) in text.lines().enumerate().filter(|(_, l)| !l.trim().is_empty()) {
        let vals: Vec<f32> = line
            .split(',')
            .map(|v| v.trim().parse::<f32>().map_err(|_| format!("{}:{}: `{v}` is not a number", path.display(), i + 1)))
            .collect::<Result<_, _>>()?;
        if vals.len() != 65 {
            return Err(format!("{}:{}: {} values, want 65", path.display(), i + 1, vals.len()));
        }
        let label = vals[64];
        if !(0.0..=9.0).contains(&label) || label.fract() != 0.0 {
            return Err(format!("{}:{}: label {label}", path.display(), i + 1));
        }
        let mut pixels = [0f32; 64];
        for (p, v) in pixels.iter_mut().zip(&vals[..64]) {
            *p = v / 16.0;
        }
        out.push(Sample { pixels, label: label as u8 });
    }
    Ok(out)
}

/// xorshift64*: a fixed seed gives the same split and batches on every machine.
pub struct Rng(pub u64);

impl Rng {
    pub fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    pub fn shuffle<T>(&mut self, v: &mut [T]) {
        for i in (1..v.len()).rev() {
            let j = (self.next() % (i as u64 + 1)) as usize;
            v.swap(i, j);
        }
    }
}
