//! Hostile and malformed models through the `burnc` command line: names that try to inject code
//! into the generated module, shape arithmetic that wraps, invalid attributes and graphs, external
//! data that points outside the model folder or at a FIFO, inputs that never end.
//!
//! scripts/make_hostile_models.py writes the cases (one folder each, with `model.onnx` and
//! `expect.txt`; its docstring describes the keys). For each case this test runs burnc, under a
//! time limit and an address-space limit (so a runaway allocation fails instead of taking the
//! machine's memory), and checks:
//! - never a panic (exit code 101 or `panicked` on stderr), a signal or a timeout; at most
//!   `max_memory_mb=` (default 2048) of peak resident memory (polled from /proc);
//! - `expect=error`: exit code 1 and exactly one stderr line, `error: …`, holding every
//!   `contains=` substring (case-insensitive);
//! - `expect=compiles`: exit code 0; when the command writes `{out}/model.rs`, that module holds
//!   no identifier `INJECTED` (the marker of every injection payload) outside comments and string
//!   literals, and its brackets balance.
//!
//! Every failing case is listed in one assertion at the end.
use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};

const MARKER: &str = "INJECTED";
const DEFAULT_TIMEOUT_S: u64 = 120;
const DEFAULT_CMD: &str = "{model} -o {out}/model.rs";
/// Peak resident memory a case may use unless it says otherwise: none of these models needs
/// more than a few MiB.
const DEFAULT_MAX_MEMORY_MB: u64 = 2048;
/// Address-space limit for burnc, in KiB (`ulimit -v`): 8 GiB.
const MEMORY_LIMIT_KIB: u64 = 8 << 20;

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

#[derive(Debug)]
struct Expect {
    error: bool,
    contains: Vec<String>,
    cmd: String,
    stdout_contains: Vec<String>,
    timeout: Duration,
    no_control: bool,
    max_memory_mb: Option<u64>,
    note: Option<String>,
}

fn parse_expect(text: &str) -> Result<Expect, String> {
    let mut e = Expect {
        error: false,
        contains: vec![],
        cmd: DEFAULT_CMD.into(),
        stdout_contains: vec![],
        timeout: Duration::from_secs(DEFAULT_TIMEOUT_S),
        no_control: false,
        max_memory_mb: Some(DEFAULT_MAX_MEMORY_MB),
        note: None,
    };
    let mut expect = None;
    for line in text.lines().filter(|l| !l.trim().is_empty()) {
        let (k, v) = line.split_once('=').ok_or_else(|| format!("expect.txt: no `=` in {line:?}"))?;
        match k {
            "expect" => expect = Some(v.to_string()),
            "contains" => e.contains.push(v.into()),
            "cmd" => e.cmd = v.into(),
            "stdout_contains" => e.stdout_contains.push(v.into()),
            "timeout" => e.timeout = Duration::from_secs(v.parse().map_err(|_| format!("expect.txt: bad timeout {v:?}"))?),
            "stderr_no_control" => e.no_control = v == "1",
            "max_memory_mb" => e.max_memory_mb = Some(v.parse().map_err(|_| format!("expect.txt: bad max_memory_mb {v:?}"))?),
            "note" => e.note = Some(v.into()),
            _ => return Err(format!("expect.txt: unknown key {k:?}")),
        }
    }
    match expect.as_deref() {
        Some("error") => e.error = true,
        Some("compiles") => e.error = false,
        other => return Err(format!("expect.txt: expect must be error or compiles, got {other:?}")),
    }
    Ok(e)
}

/// One lexed fact about a Rust source: where an identifier equal to MARKER sits outside comments
/// and literals. Errors: unterminated comment or literal, unbalanced brackets.
///
/// A small Rust lexer: `//` comments (ended by `\n` only, as in rustc), nested `/* */` comments,
/// string literals with escapes (`"…"`, `b"…"`, `c"…"`), raw strings (`r#"…"#`, `br`, `cr`), char
/// and byte literals told apart from lifetimes, raw identifiers (`r#name` is the identifier
/// `name`), numbers.
fn marker_outside_literals(src: &str) -> Result<Vec<usize>, String> {
    let c: Vec<char> = src.chars().collect();
    let n = c.len();
    let mut i = 0;
    let mut line = 1;
    let mut hits = vec![];
    let mut stack: Vec<(char, usize)> = vec![];
    let count_lines = |from: usize, to: usize| c[from..to].iter().filter(|&&ch| ch == '\n').count();
    let is_ident_start = |ch: char| ch == '_' || ch.is_alphabetic();
    let is_ident_continue = |ch: char| ch == '_' || ch.is_alphanumeric();
    // Index just past a quoted literal whose opening quote is at `start`.
    let quoted = |start: usize, q: char| -> Result<usize, String> {
        let mut j = start + 1;
        while j < n {
            match c[j] {
                '\\' => j += 2,
                ch if ch == q => return Ok(j + 1),
                _ => j += 1,
            }
        }
        Err(format!("unterminated {q} literal starting on line {}", 1 + count_lines(0, start)))
    };
    // Index just past a raw string whose `#`s or `"` start at `start`.
    let raw = |start: usize| -> Result<usize, String> {
        let mut j = start;
        let mut hashes = 0;
        while j < n && c[j] == '#' {
            hashes += 1;
            j += 1;
        }
        if j >= n || c[j] != '"' {
            return Err(format!("malformed raw string on line {}", 1 + count_lines(0, start)));
        }
        j += 1;
        while j < n {
            if c[j] == '"' && c.get(j + 1..j + 1 + hashes).is_some_and(|s| s.iter().all(|&h| h == '#')) {
                return Ok(j + 1 + hashes);
            }
            j += 1;
        }
        Err(format!("unterminated raw string starting on line {}", 1 + count_lines(0, start)))
    };
    while i < n {
        let ch = c[i];
        let next = c.get(i + 1).copied();
        let start = i;
        if ch == '/' && next == Some('/') {
            while i < n && c[i] != '\n' {
                i += 1;
            }
        } else if ch == '/' && next == Some('*') {
            let mut depth = 0;
            loop {
                if i + 1 >= n {
                    return Err(format!("unterminated block comment starting on line {line}"));
                }
                if c[i] == '/' && c[i + 1] == '*' {
                    depth += 1;
                    i += 2;
                } else if c[i] == '*' && c[i + 1] == '/' {
                    depth -= 1;
                    i += 2;
                    if depth == 0 {
                        break;
                    }
                } else {
                    i += 1;
                }
            }
        } else if ch == '"' {
            i = quoted(i, '"')?;
        } else if ch == '\'' {
            // A char literal ('x', '\n', '\u{..}') or a lifetime / label ('a).
            if next == Some('\\') {
                i = quoted(i, '\'')?;
            } else if c.get(i + 2) == Some(&'\'') {
                i += 3;
            } else {
                i += 1;
            }
        } else if is_ident_start(ch) {
            let mut j = i;
            while j < n && is_ident_continue(c[j]) {
                j += 1;
            }
            let word: String = c[i..j].iter().collect();
            let after = c.get(j).copied();
            match (word.as_str(), after) {
                ("b" | "c", Some('"')) => i = quoted(j, '"')?,
                ("b", Some('\'')) => i = quoted(j, '\'')?,
                ("r" | "br" | "cr", Some('"')) => i = raw(j)?,
                ("r" | "br" | "cr", Some('#')) if matches!(c.get(j + 1), Some('#') | Some('"')) => i = raw(j)?,
                ("r", Some('#')) if c.get(j + 1).is_some_and(|&x| is_ident_start(x)) => {
                    // Raw identifier r#name.
                    let mut k = j + 1;
                    while k < n && is_ident_continue(c[k]) {
                        k += 1;
                    }
                    if c[j + 1..k].iter().collect::<String>() == MARKER {
                        hits.push(line);
                    }
                    i = k;
                }
                _ => {
                    if word == MARKER {
                        hits.push(line);
                    }
                    i = j;
                }
            }
        } else if ch.is_ascii_digit() {
            while i < n && (c[i] == '_' || c[i].is_alphanumeric()) {
                i += 1;
            }
        } else {
            match ch {
                '(' | '[' | '{' => stack.push((ch, line)),
                ')' | ']' | '}' => {
                    let want = match ch {
                        ')' => '(',
                        ']' => '[',
                        _ => '{',
                    };
                    match stack.pop() {
                        Some((open, _)) if open == want => {}
                        Some((open, l)) => return Err(format!("`{ch}` on line {line} closes `{open}` from line {l}")),
                        None => return Err(format!("unmatched `{ch}` on line {line}")),
                    }
                }
                _ => {}
            }
            i += 1;
        }
        line += count_lines(start, i.min(n));
    }
    if let Some((open, l)) = stack.pop() {
        return Err(format!("`{open}` on line {l} is never closed"));
    }
    Ok(hits)
}

#[test]
fn marker_check_sees_through_names() {
    let ok = |s: &str| assert_eq!(marker_outside_literals(s), Ok(vec![]), "{s}");
    let hit = |s: &str, lines: Vec<usize>| assert_eq!(marker_outside_literals(s), Ok(lines), "{s}");
    let bad = |s: &str| assert!(marker_outside_literals(s).is_err(), "{s}");
    // A name with a newline, printed into a `//` comment, puts the item on its own line.
    let name = "x\nfn INJECTED() {}\n//";
    hit(&format!("// input `{name}`\npub fn forward() {{}}\n"), vec![2]);
    hit("fn f() {\n    let INJECTED = 1;\n}\n", vec![2]);
    // Comments and literals keep it inert.
    ok("// fn INJECTED() {}\n/// INJECTED\n//! INJECTED\nfn f() {}\n");
    ok("/* a /* nested INJECTED */ still comment INJECTED */ fn f() {}");
    ok("fn f() -> &'static str { \"x\\\" INJECTED\" }");
    ok("const S: &str = r#\"x\" INJECTED \"#;\nconst B: &[u8] = b\"INJECTED\";\nconst C: char = '\"';");
    ok("fn f<'a>(x: &'a str) -> char { let _ = '\\''; let _ = '\\u{7f}'; 'y' }");
    ok("const X_INJECTED: u32 = 1; const INJECTED_Y: u32 = 2;");
    // An escaped backslash ends the string; so does a closing quote in the name.
    hit("const S: &str = \"x\\\\\"; fn INJECTED() {}", vec![1]);
    hit("fn f() {}\nfn r#INJECTED() {}\n", vec![2]);
    hit("fn f<'a>() { INJECTED }", vec![1]);
    hit("const C: char = '\"'; fn INJECTED() {}", vec![1]);
    hit("/* a */ INJECTED /* b */", vec![1]);
    hit("const S: &str = r#\"x\"#; fn INJECTED() {} // \"#", vec![1]);
    // A broken-out literal or comment is an error of its own.
    bad("const S: &str = \"x");
    bad("/* a /* b */ fn f() {}");
    bad("fn f() { ");
    bad("fn f() { ) }");
}

struct Outcome {
    code: Option<i32>,
    signal: Option<i32>,
    timed_out: bool,
    stdout: String,
    stderr: String,
    elapsed: Duration,
    /// The highest peak resident size (VmHWM, KiB) seen while polling; None without /proc.
    peak_kib: Option<u64>,
}

/// Peak resident set size of a running process in KiB, from /proc (Linux).
fn peak_rss_kib(pid: u32) -> Option<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let line = status.lines().find(|l| l.starts_with("VmHWM:"))?;
    line.split_whitespace().nth(1)?.parse().ok()
}

fn run_burnc(args: &[String], timeout: Duration) -> Result<Outcome, String> {
    // `sh` sets the memory limit, then becomes burnc (exec): the pid is burnc's, for kill().
    let script = format!("ulimit -v {MEMORY_LIMIT_KIB} 2>/dev/null; exec \"$0\" \"$@\"");
    let mut child = Command::new("sh")
        .arg("-c")
        .arg(script)
        .arg(env!("CARGO_BIN_EXE_burnc"))
        .args(args)
        // The panic message, not a backtrace, in the last lines of stderr.
        .env("RUST_BACKTRACE", "0")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| format!("spawn burnc: {e}"))?;
    let drain = |mut r: Box<dyn Read + Send>| {
        std::thread::spawn(move || {
            let mut buf = vec![];
            let _ = r.read_to_end(&mut buf);
            String::from_utf8_lossy(&buf).into_owned()
        })
    };
    let out = drain(Box::new(child.stdout.take().unwrap()));
    let err = drain(Box::new(child.stderr.take().unwrap()));
    let start = Instant::now();
    let mut timed_out = false;
    let mut peak_kib = None;
    let status = loop {
        if let Some(kib) = peak_rss_kib(child.id()) {
            peak_kib = peak_kib.max(Some(kib));
        }
        if let Some(s) = child.try_wait().map_err(|e| format!("wait: {e}"))? {
            break s;
        }
        if start.elapsed() > timeout {
            timed_out = true;
            let _ = child.kill();
            break child.wait().map_err(|e| format!("wait: {e}"))?;
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    let elapsed = start.elapsed();
    use std::os::unix::process::ExitStatusExt;
    Ok(Outcome {
        code: status.code(),
        signal: status.signal(),
        timed_out,
        stdout: out.join().unwrap_or_default(),
        stderr: err.join().unwrap_or_default(),
        elapsed,
        peak_kib,
    })
}

/// The last `k` lines of `s`, each escaped so control characters show.
fn tail(s: &str, k: usize) -> String {
    let lines: Vec<&str> = s.lines().collect();
    lines[lines.len().saturating_sub(k)..].iter().map(|l| format!("{l:?}")).collect::<Vec<_>>().join(" | ")
}

/// Every problem with one case, empty when it passed.
fn check_case(dir: &Path) -> Vec<String> {
    let mut problems = vec![];
    let e = match std::fs::read_to_string(dir.join("expect.txt")).map_err(|e| e.to_string()).and_then(|t| parse_expect(&t)) {
        Ok(e) => e,
        Err(m) => return vec![m],
    };
    let out_dir = dir.join("out");
    if let Err(err) = std::fs::create_dir_all(&out_dir) {
        return vec![format!("create {}: {err}", out_dir.display())];
    }
    let subst = |s: &str| {
        s.replace("{model}", &dir.join("model.onnx").to_string_lossy())
            .replace("{out}", &out_dir.to_string_lossy())
            .replace("{dir}", &dir.to_string_lossy())
    };
    let args: Vec<String> = e.cmd.split(' ').filter(|a| !a.is_empty()).map(subst).collect();
    let o = match run_burnc(&args, e.timeout) {
        Ok(o) => o,
        Err(m) => return vec![m],
    };
    let what = format!("exit {:?}, signal {:?}, {:.1} s, stderr: {}", o.code, o.signal, o.elapsed.as_secs_f64(), tail(&o.stderr, 3));
    if let (Some(limit), Some(kib)) = (e.max_memory_mb, o.peak_kib) {
        if kib > limit * 1024 {
            problems.push(format!("used at least {} MiB of memory (at most {limit} MiB expected)", kib / 1024));
        }
    }
    if o.timed_out {
        problems.push(format!("timed out after {} s (killed); {what}", e.timeout.as_secs()));
        return problems;
    }
    if o.code == Some(101) || o.stderr.contains("panicked") {
        let at = o.stderr.lines().position(|l| l.contains("panicked")).unwrap_or(0);
        let msg: Vec<String> = o.stderr.lines().skip(at).take(2).map(|l| format!("{l:?}")).collect();
        problems.push(format!("panicked: {}; exit {:?}, last stderr line {}", msg.join(" "), o.code, tail(&o.stderr, 1)));
        return problems;
    }
    if o.signal.is_some() {
        problems.push(format!("killed by a signal (abort, stack overflow or out of memory?): {what}"));
        return problems;
    }
    if e.error {
        let err = o.stderr.strip_suffix('\n').unwrap_or(&o.stderr);
        if o.code != Some(1) {
            problems.push(format!("expected an error (exit 1), got {what}"));
        } else if err.contains('\n') || !err.starts_with("error: ") {
            problems.push(format!("stderr is not one `error: ` line: {:?}", o.stderr));
        } else {
            let lower = err.to_lowercase();
            let missing: Vec<&String> = e.contains.iter().filter(|s| !lower.contains(&s.to_lowercase())).collect();
            if !missing.is_empty() {
                problems.push(format!("the error does not name {missing:?}: {err:?}"));
            }
        }
    } else if o.code != Some(0) {
        problems.push(format!("expected success, got {what}"));
    } else if e.cmd.contains("{out}/model.rs") {
        let module = out_dir.join("model.rs");
        match std::fs::read_to_string(&module) {
            Err(err) => problems.push(format!("no module at {}: {err}", module.display())),
            Ok(src) => match marker_outside_literals(&src) {
                Ok(lines) if lines.is_empty() => {}
                Ok(lines) => {
                    let text: Vec<String> = lines.iter().map(|&l| format!("{l}: {:?}", src.lines().nth(l - 1).unwrap_or(""))).collect();
                    problems.push(format!("`{MARKER}` injected into the module as code, lines {}", text.join("; ")));
                }
                Err(m) => problems.push(format!("the module does not lex as Rust ({m})")),
            },
        }
    }
    for s in &e.stdout_contains {
        if !o.stdout.contains(s.as_str()) {
            problems.push(format!("stdout lacks {s:?}: {}", tail(&o.stdout, 3)));
        }
    }
    if e.no_control {
        let body = o.stderr.strip_suffix('\n').unwrap_or(&o.stderr);
        if body.chars().any(|ch| ch.is_control()) {
            problems.push(format!("stderr holds control characters: {:?}", o.stderr));
        }
    }
    if !problems.is_empty() {
        if let Some(note) = &e.note {
            problems.push(format!("(case note: {note})"));
        }
    }
    problems
}

#[test]
fn hostile_models() {
    let cases_dir = root().join("target/hostile-models");
    let gen = Command::new("python3")
        .arg(root().join("scripts/make_hostile_models.py"))
        .arg(&cases_dir)
        .output()
        .expect("spawn python3 (scripts/setup_python.sh installs onnx and numpy)");
    assert!(
        gen.status.success(),
        "scripts/make_hostile_models.py failed ({}):\n{}",
        gen.status,
        String::from_utf8_lossy(&gen.stderr)
    );
    let mut cases: Vec<PathBuf> = std::fs::read_dir(&cases_dir)
        .expect("read the cases folder")
        .filter_map(|d| d.ok().map(|d| d.path()))
        .filter(|p| p.join("expect.txt").is_file())
        .collect();
    cases.sort();
    assert!(cases.len() >= 100, "only {} cases in {}", cases.len(), cases_dir.display());

    // A few workers: most cases take milliseconds, a few wait for their time limit.
    let workers = std::thread::available_parallelism().map_or(2, |n| n.get()).clamp(2, 4);
    let next = AtomicUsize::new(0);
    let failures: Mutex<Vec<(String, Vec<String>)>> = Mutex::new(vec![]);
    std::thread::scope(|s| {
        for _ in 0..workers {
            s.spawn(|| loop {
                let i = next.fetch_add(1, Ordering::Relaxed);
                let Some(dir) = cases.get(i) else { break };
                let problems = check_case(dir);
                if !problems.is_empty() {
                    let name = dir.file_name().unwrap().to_string_lossy().into_owned();
                    failures.lock().unwrap().push((name, problems));
                }
            });
        }
    });
    let mut failures = failures.into_inner().unwrap();
    failures.sort();
    let report: Vec<String> = failures.iter().map(|(name, p)| format!("{name}:\n    {}", p.join("\n    "))).collect();
    assert!(
        failures.is_empty(),
        "{} of {} hostile models failed (cases in {}):\n{}",
        failures.len(),
        cases.len(),
        cases_dir.display(),
        report.join("\n")
    );
}
